"""Pairwise verdicts against gold labels, and between judges (pure).

Gold labels follow the Auto-J convention (``autoj_pairwise.json``): 0 the first response
is better, 1 the second, 2 a tie. A :class:`Label` names the models of its two responses
(``first`` = the file's "response 1"), so each judged order's verdict is read in the
same terms.

**Accuracy is counted as Auto-J's own script counts it** (``pairwise_eval.py`` of
GAIR-NLP/auto-j, also in prometheus-eval's ``eval/benchmark/autoj_utils``), order by
order, never on the combined verdict:

- *both orders* (the headline, Auto-J's "agreement"): a comparison is right when the
  verdict of each order, read in the label's terms, equals the label. A judge that
  contradicts itself across the swap is wrong whatever the label (a tie label included:
  a flip is not a tie), so position bias can only cost accuracy. Counted over the
  labelled comparisons judged in both orders;
- *one order* (Auto-J's single-order figure): the verdict of the order as listed (the
  label's ``first`` shown first) equals the label, over the comparisons judged in that
  order.

Each is also given *without ties* (Prometheus 2's ``skip_tie``): the comparisons labelled
a tie are left out first. On Auto-J-13B's example predictions these give Auto-J's
published 54.96 (both orders) and 59.99 (one order). A comparison judged in one order
only (the other failed or is unfinished) is in no both-orders figure; it is counted
(``n_one_order``). Accuracy is given over all labelled comparisons (group ``all``) and per
group of instances (HHH Alignment's sources helpful, harmless, honest, other; Auto-J's
scenarios) when ``groups`` are given.

Agreement between two judges: on the comparisons both judged, the share of equal
combined verdicts (A, tie, B) and Cohen's kappa.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.pairwise import ALL_CRITERIA, Comparison, Game, criteria_of

LABEL_FIRST, LABEL_SECOND, LABEL_TIE = 0, 1, 2
#: the group of every labelled comparison
ALL_GROUPS = "all"


@dataclass(frozen=True)
class Label:
    """A gold label of one comparison: 0 ``first`` better, 1 ``second``, 2 a tie."""

    instance_id: str
    first: str
    second: str
    label: int
    criterion: str | None = None  # None: whatever criterion the judge used


@dataclass(frozen=True)
class Tally:
    """Right answers out of ``n`` (``accuracy`` None when ``n`` is 0)."""

    n: int = 0
    correct: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n else None

    def add(self, hit: bool) -> Tally:
        return Tally(self.n + 1, self.correct + hit)


@dataclass(frozen=True)
class LabelAccuracy:
    """One judge's accuracy against the labels, over one group of comparisons."""

    judge: str
    group: str  # ALL_GROUPS, or a group of instances (an HHH source)
    both: Tally  # right in both orders (Auto-J's rule): the headline
    listed: Tally  # right in the order as listed
    both_no_tie: Tally  # the same, comparisons labelled a tie left out
    listed_no_tie: Tally
    n_one_order: int  # labelled comparisons judged in one order only (not in ``both``)
    n_missing: int  # labelled comparisons the judge has no verdict for

    @property
    def accuracy(self) -> float | None:
        """The headline: right in both orders."""
        return self.both.accuracy

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": self.judge, "group": self.group}
        for name in ("both", "listed", "both_no_tie", "listed_no_tie"):
            tally: Tally = getattr(self, name)
            out |= {
                f"n_{name}": tally.n,
                f"correct_{name}": tally.correct,
                f"accuracy_{name}": tally.accuracy,
            }
        return out | {"n_one_order": self.n_one_order, "n_missing": self.n_missing}


@dataclass(frozen=True)
class JudgeAgreement:
    judge_a: str
    judge_b: str
    criterion: str
    n: int
    agreement: float | None
    kappa: float | None


def _as_label(record: Comparison, label: Label) -> int:
    """The verdict of one judged order in the label's terms."""
    if record.verdict == VERDICT_TIE:
        return LABEL_TIE
    if record.verdict not in (VERDICT_FIRST, VERDICT_SECOND):
        raise ValueError(f"unknown verdict {record.verdict!r}")
    winner = record.first if record.verdict == VERDICT_FIRST else record.second
    return LABEL_FIRST if winner == label.first else LABEL_SECOND


@dataclass
class _Counts:
    both: Tally = Tally()
    listed: Tally = Tally()
    both_no_tie: Tally = Tally()
    listed_no_tie: Tally = Tally()
    one_order: int = 0
    missing: int = 0


def _count(counts: _Counts, label: Label, orders: Mapping[str, Comparison]) -> None:
    """Add one labelled comparison (its judged orders, keyed by the model shown first)."""
    if not orders:
        counts.missing += 1
        return
    tie_label = label.label == LABEL_TIE
    listed = orders.get(label.first)
    exchanged = orders.get(label.second)
    if listed is not None:
        hit = _as_label(listed, label) == label.label
        counts.listed = counts.listed.add(hit)
        if not tie_label:
            counts.listed_no_tie = counts.listed_no_tie.add(hit)
    if listed is None or exchanged is None:
        counts.one_order += 1
        return
    hit = _as_label(listed, label) == label.label == _as_label(exchanged, label)
    counts.both = counts.both.add(hit)
    if not tie_label:
        counts.both_no_tie = counts.both_no_tie.add(hit)


def label_accuracy(
    pairs: Iterable[Comparison],
    labels: Sequence[Label],
    groups: Mapping[str, str] | None = None,
) -> list[LabelAccuracy]:
    """Accuracy of each judge of ``pairs`` against ``labels`` (see the module docstring),
    over all labels and, when ``groups`` maps instance ids to groups, per group (in the
    groups' order of first appearance among the labels)."""
    for lab in labels:
        if lab.label not in (LABEL_FIRST, LABEL_SECOND, LABEL_TIE):
            raise ValueError(f"label of {lab.instance_id!r} is {lab.label!r}, not 0, 1 or 2")
    orders: dict[tuple[str, str, frozenset[str]], dict[str, dict[str, Comparison]]] = {}
    judges: dict[str, None] = {}
    for c in pairs:
        judges[c.judge] = None
        key = (c.judge, c.instance_id, frozenset((c.first, c.second)))
        by_first = orders.setdefault(key, {}).setdefault(c.criterion, {})
        if c.first in by_first:
            raise ValueError(f"two judgments of {c.first} vs {c.second} on {c.instance_id!r}")
        by_first[c.first] = c
    group_of = groups or {}
    named = (group_of.get(x.instance_id, ALL_GROUPS) for x in labels)
    names = [ALL_GROUPS, *dict.fromkeys(g for g in named if g != ALL_GROUPS)]
    out = []
    for judge in judges:
        counts = {name: _Counts() for name in names}
        for lab in labels:
            found = orders.get((judge, lab.instance_id, frozenset((lab.first, lab.second))), {})
            judged = [o for c, o in found.items() if lab.criterion in (None, c)] or [{}]
            for one in judged:
                for name in dict.fromkeys((ALL_GROUPS, group_of.get(lab.instance_id))):
                    if name is not None:
                        _count(counts[name], lab, one)
        for name in names:
            n = counts[name]
            out.append(
                LabelAccuracy(
                    judge,
                    name,
                    n.both,
                    n.listed,
                    n.both_no_tie,
                    n.listed_no_tie,
                    n.one_order,
                    n.missing,
                )
            )
    return out


def cohen_kappa(a: Sequence[int], b: Sequence[int], k: int = 3) -> float | None:
    """Cohen's kappa of two raters' categories ``0..k-1`` (None: fewer than 1 pair, or
    chance agreement 1)."""
    if len(a) != len(b) or not a:
        return None
    table = np.zeros((k, k))
    np.add.at(table, (np.asarray(a), np.asarray(b)), 1.0)
    table /= table.sum()
    observed = float(np.trace(table))
    chance = float(table.sum(axis=1) @ table.sum(axis=0))
    return None if chance >= 1.0 else (observed - chance) / (1.0 - chance)


def judge_agreement(games: Sequence[Game]) -> list[JudgeAgreement]:
    """Every pair of judges, per criterion and all pooled: equal combined verdicts and
    Cohen's kappa on the comparisons (instance, pair, criterion) both judged."""
    verdicts: dict[str, dict[tuple[str, str, str, str], int]] = {}
    for g in games:
        verdicts.setdefault(g.judge, {})[(g.instance_id, g.model_a, g.model_b, g.criterion)] = (
            g.outcome
        )
    judges = list(verdicts)
    criteria = criteria_of(games)
    out = []
    for i, ja in enumerate(judges):
        for jb in judges[i + 1 :]:
            for crit in criteria:
                common = [
                    key
                    for key in verdicts[ja]
                    if key in verdicts[jb] and crit in (ALL_CRITERIA, key[3])
                ]
                a = [verdicts[ja][k] for k in common]
                b = [verdicts[jb][k] for k in common]
                same = sum(x == y for x, y in zip(a, b, strict=True))
                out.append(
                    JudgeAgreement(
                        ja,
                        jb,
                        crit,
                        len(common),
                        same / len(common) if common else None,
                        cohen_kappa(a, b),
                    )
                )
    return out
