"""The People section of an absolute run: means, alpha among raters, each judge against
the people, disagreements (pure; :mod:`report.people` says what each figure is)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from flask_eval.report.agreement import MAX_CATEGORIES, pair_statistics
from flask_eval.report.people_data import (
    ABSOLUTE,
    ALL,
    Disagreement,
    Interval,
    Item,
    JudgeVersusPeople,
    PeopleMean,
    PeopleReport,
    RaterAgreement,
)
from flask_eval.report.people_items import (
    BoolArray,
    FloatArray,
    IntArray,
    Items,
    PeopleSettings,
    finite,
    ordered,
)
from flask_eval.report.people_stats import (
    INTERVAL,
    ORDINAL,
    alpha_replicates,
    kendall_tau_b,
    pearson,
    replicate_tables,
    spearman,
    unit_draws,
    within,
)

#: the metrics of alpha among raters on scores
SCORE_METRICS = (ORDINAL, INTERVAL)


def _mean(values: Iterable[float | None]) -> float:
    """The mean of the scores (N/A left out), summed in sorted order; NaN for none."""
    scored = sorted(v for v in values if v is not None)
    return sum(scored) / len(scored) if scored else float("nan")


def build(
    rated: Mapping[Item, Mapping[str, float | None]],
    judges: Mapping[str, Mapping[Item, Sequence[float | None]]],
    settings: PeopleSettings,
) -> PeopleReport:
    items = Items.of(rated, settings)
    raters = sorted({r for ratings in rated.values() for r in ratings})
    people = np.array([_mean(list(rated[k].values())) for k in items.keys])
    counts = np.array(
        [sum(v is not None for v in rated[k].values()) for k in items.keys], dtype=np.int64
    )
    groups = items.groups()
    report = PeopleReport(
        kind=ABSOLUTE,
        raters=raters,
        items=len(items),
        items_multi=int(np.count_nonzero(counts >= 2)),
        ratings=int(counts.sum()),
        means=[
            PeopleMean(
                dim,
                key,
                finite(float(people[sel].mean())),
                items.ratio_interval(people, sel),
                int(sel.sum()),
                int(counts[sel].sum()),
            )
            for dim, key, sel in groups
        ],
        agreement=rater_agreement(items, rated, raters, SCORE_METRICS),
    )
    for judge in ordered(judges, settings.judge_order):
        scores = judges[judge]
        mine = np.array([_mean(scores.get(k, ())) for k in items.keys])
        both = ~np.isnan(mine)
        if not both.any():
            continue
        report.versus += versus_rows(judge, items, mine, people, groups)
        report.disagreements += _disagreements(judge, items, mine, people, counts)
    return report


def rater_agreement(
    items: Items,
    rated: Mapping[Item, Mapping[str, float | None]],
    raters: Sequence[str],
    metrics: Sequence[str],
) -> list[RaterAgreement]:
    """Alpha among ``raters`` per metric, over every item and per criterion (items with
    two ratings or more; intervals resample those items)."""
    values = np.unique([v for r in rated.values() for v in r.values() if v is not None])
    position = {float(v): n for n, v in enumerate(values.tolist())}
    counts = np.zeros((len(items), len(values)))
    for n, key in enumerate(items.keys):
        for v in rated[key].values():
            if v is not None:
                counts[n, position[float(v)]] += 1
    pairable = counts.sum(axis=1) >= 2
    out = []
    criteria = ordered({k.criterion for k in items.keys}, items.settings.skill_order)
    of = np.array([k.criterion for k in items.keys], dtype=object)
    for criterion in [ALL, *(criteria if len(criteria) > 1 else ())]:
        sel = pairable & (of == criterion) if criterion != ALL else pairable
        units = counts[sel]
        s = items.settings
        drawn = unit_draws(units, s.replicates, s.seed) if s.replicates > 0 and len(units) else None
        for metric in metrics:
            point = alpha_replicates(units, values, metric)[0] if len(units) else np.nan
            ci = None
            if drawn is not None:
                ci = items.interval(alpha_replicates(drawn[0], values, metric, drawn[1]))[0]
            out.append(
                RaterAgreement(
                    criterion,
                    metric,
                    finite(point),
                    ci,
                    len(units),
                    int(units.sum()),
                    len(raters),
                )
            )
    return out


def versus_rows(
    judge: str,
    items: Items,
    mine: FloatArray,
    people: FloatArray,
    groups: Sequence[tuple[str, str, BoolArray]],
) -> list[JudgeVersusPeople]:
    """``judge`` against the people's mean, per group (items both scored)."""
    both = ~np.isnan(mine) & ~np.isnan(people)
    out = []
    for dimension, key, group in groups:
        sel = group & both
        n = int(sel.sum())
        if n == 0:
            continue
        st = pair_statistics(mine[sel], people[sel])
        cis = _intervals(items, sel, (mine, people))
        out.append(
            JudgeVersusPeople(
                judge=judge,
                dimension=dimension,
                key=key,
                n=n,
                pearson=st["pearson"],
                pearson_ci=cis[0],
                spearman=st["spearman"],
                spearman_ci=cis[1],
                kendall_tau_b=st["kendall_tau_b"],
                kendall_ci=cis[2],
                within1=st["within1"],
                within1_ci=cis[3],
            )
        )
    return out


def _intervals(
    items: Items, sel: BoolArray, scores: tuple[FloatArray, FloatArray]
) -> list[Interval]:
    """Intervals of (Pearson, Spearman, Kendall, within 1) over the selected items: each
    replicate a contingency table of the values that occur in them."""
    weights = items.weights
    if weights is None:
        return [None] * 4
    n = int(sel.sum())
    values, codes = np.unique(np.concatenate([scores[0][sel], scores[1][sel]]), return_inverse=True)
    k = len(values)
    if k <= MAX_CATEGORIES:
        pairs = codes[:n] * k + codes[n:]
        tables = replicate_tables(pairs, items.instance[sel], weights, k)
        replicates = np.stack(
            [
                pearson(values, values, tables),
                spearman(tables),
                kendall_tau_b(tables),
                within(values, tables),
            ]
        )
        return items.interval(replicates)
    # many distinct values (means of many samples or raters): each replicate directly
    a, b, inst = scores[0][sel], scores[1][sel], items.instance[sel]
    drawn = weights[inst].astype(np.int64)
    stats = np.full((4, weights.shape[1]), np.nan)
    for rep in range(weights.shape[1]):
        take = np.repeat(np.arange(len(a)), drawn[:, rep])
        if len(take):
            st = pair_statistics(a[take], b[take])
            names = ("pearson", "spearman", "kendall_tau_b", "within1")
            stats[:, rep] = [np.nan if st[n] is None else st[n] for n in names]
    return items.interval(stats)


def _disagreements(
    judge: str, items: Items, mine: FloatArray, people: FloatArray, counts: IntArray
) -> list[Disagreement]:
    """The items where ``judge`` is more than 1 point from the people, largest gap first
    (ties: in item order), at most ``top``."""
    gap = mine - people
    far = np.flatnonzero(~np.isnan(gap) & (np.abs(gap) > 1.0))
    chosen = sorted(far.tolist(), key=lambda n: (-abs(float(gap[n])), n))[: items.settings.top]
    return [
        Disagreement(
            judge,
            items.keys[n],
            float(mine[n]),
            float(people[n]),
            int(counts[n]),
            float(gap[n]),
        )
        for n in chosen
    ]
