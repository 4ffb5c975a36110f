"""What the People section of a report holds (pure data; ``report.people`` computes it,
``report.people_render`` draws it).

People are the run's raters (ledger judges ``human/RATER``, :func:`core.people.is_person`).
An *item* is one (model, model_b, instance, criterion) people rated (``model_b`` is ""
in absolute grading). Every figure with an interval carries it as ``(low, high)``, or
None when the bootstrap is off or the statistic is undefined in too many replicates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.metrics import ABILITY, OVERALL, OVERALL_KEY, SKILL

#: the dimensions of the section's tables: every item, a criterion, an ability, a model
DIMENSIONS = (OVERALL, SKILL, ABILITY, "model")
MODEL = DIMENSIONS[3]
ALL = OVERALL_KEY
#: the grading the people's ratings are: scores, or pairwise verdicts
ABSOLUTE, PAIRWISE = "absolute", "pairwise"

Interval = tuple[float, float] | None


class Item(NamedTuple):
    """One thing people rated, as the ledger keys it."""

    model: str
    model_b: str
    instance: str
    criterion: str

    def params(self) -> dict[str, str]:
        """The judgments filter of the item (the viewer's ``judgments`` page parameters)."""
        out = {"model": self.model, "instance": self.instance, "criterion": self.criterion}
        if self.model_b:
            out["model_b"] = self.model_b
        return out


@dataclass(frozen=True)
class ScoreRow:
    """A finished judgment as the People section reads it: ``score`` None is N/A (a
    pairwise verdict is a ``core.types.VERDICT_*``)."""

    judge: str
    model: str
    model_b: str
    instance: str
    criterion: str
    score: float | None

    @property
    def item(self) -> Item:
        return Item(self.model, self.model_b, self.instance, self.criterion)


@dataclass(frozen=True)
class PeopleMean:
    """The people's mean score over ``items`` of (dimension, key): each item's score is the
    mean of its raters' scores; ``ratings`` counts the scores behind them."""

    dimension: str
    key: str
    mean: float | None
    ci: Interval
    items: int
    ratings: int


@dataclass(frozen=True)
class RaterAgreement:
    """Krippendorff's alpha among the raters on one criterion (``all``: every item), over
    the ``items`` at least two raters rated (``ratings`` of them in all)."""

    criterion: str
    metric: str
    alpha: float | None
    ci: Interval
    items: int
    ratings: int
    raters: int


@dataclass(frozen=True)
class JudgeVersusPeople:
    """A judge's scores against the people's mean on the ``n`` items both scored."""

    judge: str
    dimension: str
    key: str
    n: int
    pearson: float | None
    pearson_ci: Interval
    spearman: float | None
    spearman_ci: Interval
    kendall_tau_b: float | None
    kendall_ci: Interval
    within1: float | None
    within1_ci: Interval


@dataclass(frozen=True)
class VerdictAgreement:
    """How often a judge's pairwise verdict is the people's majority verdict: on the ``n``
    items with both, and on the ``n_decisive`` of them where neither is a tie."""

    judge: str
    dimension: str
    key: str
    n: int
    agreement: float | None
    agreement_ci: Interval
    n_decisive: int
    agreement_decisive: float | None
    decisive_ci: Interval


@dataclass(frozen=True)
class Disagreement:
    """An item where a judge and the people differ most: ``judge_value`` and
    ``people_value`` are scores (the people's mean) or verdicts (the people's majority);
    ``gap`` is judge minus people for scores, 2 (opposite verdicts) or 1 (a tie against a
    win) for verdicts."""

    judge: str
    item: Item
    judge_value: float
    people_value: float
    ratings: int
    gap: float

    def as_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, **self.item._asdict(), **_without(asdict(self), "item")}


def _without(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in names and k != "judge"}


def verdict_text(item: Item, verdict: float) -> str:
    """A pairwise verdict as people read it: the model preferred, or "tie"."""
    v = int(verdict)
    if v == VERDICT_FIRST:
        return item.model
    if v == VERDICT_SECOND:
        return item.model_b
    return "tie" if v == VERDICT_TIE else str(v)


@dataclass
class PeopleReport:
    """The People section: the raters, their means, their agreement with each other, each
    judge against them, and the items where a judge differs from them most."""

    kind: str
    raters: list[str]
    items: int
    #: items at least two raters rated (with a score or a verdict)
    items_multi: int
    ratings: int
    means: list[PeopleMean] = field(default_factory=list)
    agreement: list[RaterAgreement] = field(default_factory=list)
    versus: list[JudgeVersusPeople] = field(default_factory=list)
    verdicts: list[VerdictAgreement] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    #: the bootstrap: replicates, seed, confidence and what it resamples
    bootstrap: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON document's ``people``."""
        return {
            "kind": self.kind,
            "raters": list(self.raters),
            "items": self.items,
            "items_multi": self.items_multi,
            "ratings": self.ratings,
            "means": [asdict(m) for m in self.means],
            "agreement": [asdict(a) for a in self.agreement],
            "versus": [asdict(v) for v in self.versus],
            "verdicts": [asdict(v) for v in self.verdicts],
            "disagreements": [d.as_dict() for d in self.disagreements],
            "bootstrap": dict(self.bootstrap),
            "notes": list(self.notes),
        }
