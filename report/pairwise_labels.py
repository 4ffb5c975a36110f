"""Pairwise verdicts against gold labels, and between judges (pure).

Gold labels follow the Auto-J convention (``autoj_pairwise.json``): 0 the first response
is better, 1 the second, 2 a tie. A :class:`Label` names the models of its two responses
(``first`` = the file's "response 1"), so the judge's verdict, combined over the orders it
was judged in (:func:`report.pairwise.combine`: a flip or a tie plus a win is a tie), is
read in the same terms.

Accuracy is reported as the Prometheus 2 paper does (its ``evaluate_autoj_performance``):
*with ties*, over every labelled comparison the judge decided, ties a class of their own
(a tie label is matched only by a tie); *without ties*, the comparisons labelled a tie are
dropped first (a predicted tie then counts as wrong).

Agreement between two judges: on the comparisons both judged, the share of equal
combined verdicts (A, tie, B) and Cohen's kappa.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.report.pairwise import TIE, WIN, Comparison, Game, combine

LABEL_FIRST, LABEL_SECOND, LABEL_TIE = 0, 1, 2


@dataclass(frozen=True)
class Label:
    """A gold label of one comparison: 0 ``first`` better, 1 ``second``, 2 a tie."""

    instance_id: str
    first: str
    second: str
    label: int
    criterion: str | None = None  # None: whatever criterion the judge used


@dataclass(frozen=True)
class LabelAccuracy:
    """One judge's accuracy against the labels (None: nothing to count)."""

    judge: str
    n: int  # labelled comparisons the judge decided
    correct: int
    accuracy: float | None
    n_no_tie: int  # of which not labelled a tie
    correct_no_tie: int
    accuracy_no_tie: float | None
    n_missing: int  # labelled comparisons the judge has no verdict for


@dataclass(frozen=True)
class JudgeAgreement:
    judge_a: str
    judge_b: str
    criterion: str
    n: int
    agreement: float | None
    kappa: float | None


def _predicted(game: Game, label: Label) -> int:
    """The game's outcome as a label of ``label``'s orientation."""
    if game.outcome == TIE:
        return LABEL_TIE
    winner = game.model_a if game.outcome == WIN else game.model_b
    return LABEL_FIRST if winner == label.first else LABEL_SECOND


def label_accuracy(
    pairs: Iterable[Comparison], labels: Sequence[Label], models: Sequence[str] = ()
) -> list[LabelAccuracy]:
    """Accuracy of each judge of ``pairs`` against ``labels``, with and without ties."""
    for lab in labels:
        if lab.label not in (LABEL_FIRST, LABEL_SECOND, LABEL_TIE):
            raise ValueError(f"label of {lab.instance_id!r} is {lab.label!r}, not 0, 1 or 2")
    games = combine(pairs, models)
    by_key: dict[tuple[str, frozenset[str], str], list[Game]] = {}
    for g in games:
        by_key.setdefault((g.judge, frozenset((g.model_a, g.model_b)), g.instance_id), []).append(g)
    out = []
    for judge in dict.fromkeys(g.judge for g in games):
        n = correct = n_nt = correct_nt = missing = 0
        for lab in labels:
            found = [
                g
                for g in by_key.get(
                    (judge, frozenset((lab.first, lab.second)), lab.instance_id), []
                )
                if lab.criterion is None or g.criterion == lab.criterion
            ]
            if not found:
                missing += 1
                continue
            for g in found:
                hit = _predicted(g, lab) == lab.label
                n, correct = n + 1, correct + hit
                if lab.label != LABEL_TIE:
                    n_nt, correct_nt = n_nt + 1, correct_nt + hit
        out.append(
            LabelAccuracy(
                judge=judge,
                n=n,
                correct=correct,
                accuracy=correct / n if n else None,
                n_no_tie=n_nt,
                correct_no_tie=correct_nt,
                accuracy_no_tie=correct_nt / n_nt if n_nt else None,
                n_missing=missing,
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
    criteria = [*dict.fromkeys(g.criterion for g in games), None]
    out = []
    for i, ja in enumerate(judges):
        for jb in judges[i + 1 :]:
            for crit in criteria:
                common = [
                    key
                    for key in verdicts[ja]
                    if key in verdicts[jb] and (crit is None or key[3] == crit)
                ]
                a = [verdicts[ja][k] for k in common]
                b = [verdicts[jb][k] for k in common]
                same = sum(x == y for x, y in zip(a, b, strict=True))
                out.append(
                    JudgeAgreement(
                        ja,
                        jb,
                        crit or "all",
                        len(common),
                        same / len(common) if common else None,
                        cohen_kappa(a, b),
                    )
                )
    return out
