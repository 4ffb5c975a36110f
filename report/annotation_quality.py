"""How well annotated FLASK metadata agrees with given labels (FLASK's own), pure.

:func:`compare` pairs the predicted and the given (gold) :class:`Labels` of the instances
present in both, and measures each facet on the instances where *both* sides know it: an
instance whose gold facet is unknown (FLASK's ``-1``, an empty tuple, None) has nothing to
be measured against, and one whose predicted facet is unknown (every annotator failed on
it) has no prediction to score; both are left out of that facet and counted
(``gold_unknown``, ``predicted_unknown``), so a rate never hides how much it covers.

- skills (ordered): exact match (same skills, same order), set match (same skills, any
  order), mean overlap ``|P & G| / |G|`` (the share of the gold skills found), top-1 match;
- domains (a set): exact set match, any overlap, mean Jaccard ``|P & G| / |P | G|``;
- difficulty (levels 1-5): exact and within-1 accuracy, Cohen's kappa unweighted and with
  linear and quadratic weights, and the confusion matrix (rows gold, columns predicted).

Kappa is ``1 - observed / expected`` weighted disagreement, the expected one from the
margins of the confusion matrix over the fixed levels 1-5 (weights ``|i - j|``,
``(i - j)^2``, or 1 off the diagonal): what ``sklearn.metrics.cohen_kappa_score`` computes
with ``labels=[1..5]``. When the expected disagreement is 0 (both sides gave one and the
same level throughout) kappa is undefined: :func:`weighted_kappa` returns nan, as sklearn
does; :class:`Agreement` holds None for it, as every undefined statistic of the report
(nan is not JSON), and the table prints ``-``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from flask_eval.report.annotation_combine import LEVELS, Labels
from flask_eval.report.textgrid import NONE_TEXT, fmt, grid

KAPPA_WEIGHTS: tuple[str | None, ...] = (None, "linear", "quadratic")


@dataclass(frozen=True)
class FacetAgreement:
    """One facet's statistics (name -> value, None when undefined) over ``n`` instances,
    with the instances left out because the gold or the predicted facet was unknown."""

    facet: str
    n: int
    gold_unknown: int
    predicted_unknown: int
    values: Mapping[str, float | None] = field(hash=False)


@dataclass(frozen=True)
class Agreement:
    """Predicted labels against gold labels on the ``instances`` present in both."""

    instances: int
    predicted_only: int
    gold_only: int
    skills: FacetAgreement
    domains: FacetAgreement
    difficulty: FacetAgreement
    #: difficulty counts, ``confusion[g - 1][p - 1]``: gold level g, predicted level p
    confusion: tuple[tuple[int, ...], ...]

    @property
    def facets(self) -> tuple[FacetAgreement, ...]:
        return (self.skills, self.domains, self.difficulty)


#: per facet, its statistics in order: (name, label in the table)
STATISTICS: dict[str, tuple[tuple[str, str], ...]] = {
    "skills": (
        ("exact", "exact match (same order)"),
        ("set", "same skills, any order"),
        ("overlap", "mean overlap |P&G|/|G|"),
        ("top1", "top-1 match"),
    ),
    "domains": (
        ("exact", "exact set match"),
        ("any", "any overlap"),
        ("jaccard", "mean Jaccard"),
    ),
    "difficulty": (
        ("exact", "exact"),
        ("within1", "within 1"),
        ("kappa", "Cohen's kappa"),
        ("kappa_linear", "kappa, linear weights"),
        ("kappa_quadratic", "kappa, quadratic weights"),
    ),
}


# -- kappa ----------------------------------------------------------------------------------


def weighted_kappa(confusion: npt.ArrayLike, weights: str | None = None) -> float:
    """Cohen's kappa of a square confusion matrix of ordered categories: ``weights`` None
    (unweighted), "linear" or "quadratic". nan when it is undefined (no pairs, or no
    expected disagreement), as sklearn's ``cohen_kappa_score``."""
    table = np.asarray(confusion, dtype=np.float64)
    k = table.shape[0]
    if table.ndim != 2 or table.shape[1] != k:
        raise ValueError(f"a confusion matrix must be square, got shape {table.shape}")
    n = table.sum()
    if n == 0:
        return float("nan")
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / n
    distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(np.float64)
    if weights is None:
        w = (distance > 0).astype(np.float64)
    elif weights == "linear":
        w = distance
    elif weights == "quadratic":
        w = distance**2
    else:
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    disagreement = float((w * expected).sum())
    # exact: a sum of non-negative terms is 0 only when each is
    if disagreement == 0:
        return float("nan")
    return 1.0 - float((w * table).sum()) / disagreement


def _defined(x: float) -> float | None:
    return x if np.isfinite(x) else None


# -- per facet ------------------------------------------------------------------------------

Pairs = list[tuple[Labels, Labels]]


def _facet(
    name: str,
    pairs: Pairs,
    known: Callable[[Labels], bool],
    stats: Callable[[Pairs], dict[str, float | None]],
) -> FacetAgreement:
    with_gold = [(p, g) for p, g in pairs if known(g)]
    both = [(p, g) for p, g in with_gold if known(p)]
    values = stats(both) if both else dict.fromkeys((s for s, _ in STATISTICS[name]), None)
    return FacetAgreement(
        name, len(both), len(pairs) - len(with_gold), len(with_gold) - len(both), values
    )


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs))


def _skills(pairs: Pairs) -> dict[str, float | None]:
    return {
        "exact": _mean([p.skills == g.skills for p, g in pairs]),
        "set": _mean([set(p.skills) == set(g.skills) for p, g in pairs]),
        "overlap": _mean(
            [len(set(p.skills) & set(g.skills)) / len(set(g.skills)) for p, g in pairs]
        ),
        "top1": _mean([p.skills[0] == g.skills[0] for p, g in pairs]),
    }


def _domains(pairs: Pairs) -> dict[str, float | None]:
    sets = [(set(p.domains), set(g.domains)) for p, g in pairs]
    return {
        "exact": _mean([p == g for p, g in sets]),
        "any": _mean([bool(p & g) for p, g in sets]),
        "jaccard": _mean([len(p & g) / len(p | g) for p, g in sets]),
    }


def confusion_matrix(pairs: Sequence[tuple[int, int]]) -> npt.NDArray[np.int64]:
    """Counts of (gold, predicted) levels 1-5: ``[g - 1, p - 1]``."""
    table = np.zeros((len(LEVELS), len(LEVELS)), dtype=np.int64)
    for g, p in pairs:
        table[g - 1, p - 1] += 1
    return table


def _levels(pairs: Pairs) -> list[tuple[int, int]]:
    return [
        (g.difficulty, p.difficulty)
        for p, g in pairs
        if g.difficulty is not None and p.difficulty is not None
    ]


def _difficulty(pairs: Pairs) -> dict[str, float | None]:
    levels = _levels(pairs)
    table = confusion_matrix(levels)
    kappas = [_defined(weighted_kappa(table, w)) for w in KAPPA_WEIGHTS]
    return {
        "exact": _mean([g == p for g, p in levels]),
        "within1": _mean([abs(g - p) <= 1 for g, p in levels]),
        "kappa": kappas[0],
        "kappa_linear": kappas[1],
        "kappa_quadratic": kappas[2],
    }


def compare(predicted: Mapping[str, Labels], gold: Mapping[str, Labels]) -> Agreement:
    """Predicted against gold labels on the instance ids in both (see the module)."""
    ids = [i for i in gold if i in predicted]
    pairs = [(predicted[i], gold[i]) for i in ids]
    table = confusion_matrix(_levels(pairs))  # the pairs where both know the level
    return Agreement(
        instances=len(ids),
        predicted_only=len(predicted) - len(ids),
        gold_only=len(gold) - len(ids),
        skills=_facet("skills", pairs, lambda x: bool(x.skills), _skills),
        domains=_facet("domains", pairs, lambda x: bool(x.domains), _domains),
        difficulty=_facet("difficulty", pairs, lambda x: x.difficulty is not None, _difficulty),
        confusion=tuple(tuple(int(c) for c in row) for row in table),
    )


# -- rendering ------------------------------------------------------------------------------


def agreement_rows(agreement: Agreement) -> list[dict[str, object]]:
    """One row per statistic (JSON, CSV): facet, statistic, value (None: undefined), n,
    and the instances of that facet left out for an unknown gold or predicted label."""
    return [
        {
            "facet": f.facet,
            "statistic": name,
            "value": f.values[name],
            "n": f.n,
            "gold_unknown": f.gold_unknown,
            "predicted_unknown": f.predicted_unknown,
        }
        for f in agreement.facets
        for name, _ in STATISTICS[f.facet]
    ]


_COLUMNS = (["value"], ["n"], ["gold", "unknown"], ["predicted", "unknown"])


def agreement_table(agreement: Agreement) -> str:
    """The statistics as a plain-text table (3 decimals, as the judge agreement table),
    then the difficulty confusion matrix."""
    facets = {f.facet: f for f in agreement.facets}

    def cell(column: int, facet: str, key: str) -> str:
        f = facets[facet]
        if column == 0:
            value = f.values[key]
            return NONE_TEXT if value is None else fmt(value, 3)
        return str((f.n, f.gold_unknown, f.predicted_unknown)[column - 1])

    lines = [
        f"Annotation agreement with the given labels: {agreement.instances} instances in both "
        f"({agreement.predicted_only} only annotated, {agreement.gold_only} only given)",
        *grid([(f, f, STATISTICS[f]) for f in facets], _COLUMNS, cell),
    ]
    if any(any(row) for row in agreement.confusion):
        counts = agreement.confusion
        lines += [
            "",
            "Difficulty confusion (rows: given level, columns: annotated level)",
            *grid(
                [("", "", [(str(g), f"given {g}") for g in LEVELS])],
                [[str(p)] for p in LEVELS],
                lambda c, _, g: str(counts[int(g) - 1][c]),
                least=5,
            ),
        ]
    return "\n".join(lines) + "\n"
