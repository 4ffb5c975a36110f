"""The People section of a pairwise run: each judge's agreement with the people's majority
verdict, with ties and without, nominal alpha among raters, disagreements (pure;
:mod:`report.people` says what each figure is)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from flask_eval.core.types import VERDICT_TIE
from flask_eval.report.people_absolute import rater_agreement
from flask_eval.report.people_data import (
    PAIRWISE,
    Disagreement,
    Item,
    PeopleReport,
    VerdictAgreement,
)
from flask_eval.report.people_items import (
    BoolArray,
    FloatArray,
    IntArray,
    Items,
    PeopleSettings,
    ordered,
)
from flask_eval.report.people_stats import NOMINAL


def majority(verdicts: Iterable[float | None]) -> float:
    """The verdict given more often than any other (NaN: none given, or an even split)."""
    counted = Counter(int(v) for v in verdicts if v is not None).most_common()
    if not counted or (len(counted) > 1 and counted[0][1] == counted[1][1]):
        return float("nan")
    return float(counted[0][0])


def build(
    rated: Mapping[Item, Mapping[str, float | None]],
    judges: Mapping[str, Mapping[Item, Sequence[float | None]]],
    settings: PeopleSettings,
) -> PeopleReport:
    items = Items.of(rated, settings)
    raters = sorted({r for ratings in rated.values() for r in ratings})
    people = np.array([majority(rated[k].values()) for k in items.keys])
    counts = np.array(
        [sum(v is not None for v in rated[k].values()) for k in items.keys], dtype=np.int64
    )
    share = np.array(
        [
            sum(v is not None and v == people[n] for v in rated[k].values()) / max(counts[n], 1)
            for n, k in enumerate(items.keys)
        ]
    )
    groups = items.groups(pairwise=True)
    report = PeopleReport(
        kind=PAIRWISE,
        raters=raters,
        items=len(items),
        items_multi=int(np.count_nonzero(counts >= 2)),
        ratings=int(counts.sum()),
        agreement=rater_agreement(items, rated, raters, (NOMINAL,)),
    )
    split = int(np.count_nonzero(np.isnan(people)))
    if split:
        report.notes.append(
            f"{split} of {len(items)} items have no majority verdict among their raters (an "
            "even split) and are left out of the judges' agreement"
        )
    for judge in ordered(judges, settings.judge_order):
        verdicts = judges[judge]
        mine = np.array([majority(verdicts.get(k, ())) for k in items.keys])
        both = ~np.isnan(mine) & ~np.isnan(people)
        if not both.any():
            continue
        report.verdicts += _agreement_rows(judge, items, mine, people, groups)
        report.disagreements += _disagreements(judge, items, (mine, people), counts, share)
    return report


def _agreement_rows(
    judge: str,
    items: Items,
    mine: FloatArray,
    people: FloatArray,
    groups: Sequence[tuple[str, str, BoolArray]],
) -> list[VerdictAgreement]:
    both = ~np.isnan(mine) & ~np.isnan(people)
    same = (mine == people).astype(np.float64)
    decisive = both & (mine != VERDICT_TIE) & (people != VERDICT_TIE)
    out = []
    for dimension, key, group in groups:
        sel, clear = group & both, group & decisive
        if not sel.any():
            continue
        out.append(
            VerdictAgreement(
                judge=judge,
                dimension=dimension,
                key=key,
                n=int(sel.sum()),
                agreement=float(same[sel].mean()),
                agreement_ci=items.ratio_interval(same, sel),
                n_decisive=int(clear.sum()),
                agreement_decisive=float(same[clear].mean()) if clear.any() else None,
                decisive_ci=items.ratio_interval(same, clear),
            )
        )
    return out


def _disagreements(
    judge: str,
    items: Items,
    verdicts: tuple[FloatArray, FloatArray],
    counts: IntArray,
    share: FloatArray,
) -> list[Disagreement]:
    """Items where ``judge``'s verdict is not the people's: opposite verdicts first, then
    a tie against a win; the people's most unanimous first within each (then item order)."""
    mine, people = verdicts
    differ = np.flatnonzero(~np.isnan(mine) & ~np.isnan(people) & (mine != people))
    gap = np.where((mine == VERDICT_TIE) | (people == VERDICT_TIE), 1.0, 2.0)
    chosen = sorted(differ.tolist(), key=lambda n: (-gap[n], -share[n], n))
    return [
        Disagreement(
            judge,
            items.keys[n],
            float(mine[n]),
            float(people[n]),
            int(counts[n]),
            float(gap[n]),
        )
        for n in chosen[: items.settings.top]
    ]
