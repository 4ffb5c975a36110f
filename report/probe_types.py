"""A judge card's data (pure, no I/O): what a probe run's ledger gives the card
(:class:`CardInputs`, read by ``app.probe_card``) and what the card says (:class:`Card`,
computed by ``report.probe_card``, drawn by its renderers). docs/design/probes.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TwinScore:
    """One absolute item (model, instance, criterion) one judge scored both as the
    original response and as one of its twins."""

    judge: str
    variant: str  # core.probes.VARIANTS
    model: str  # the original model (the twin is core.probes.twin_name(model, variant))
    instance: str
    criterion: str
    original: float
    twin: float
    words_original: int
    words_twin: int


@dataclass(frozen=True)
class OrderedVerdicts:
    """One pairwise comparison (instance, criterion, models a and b) one judge judged in
    both orders: a's result shown first and shown second (1 a won, 0.5 a tie, 0 b won;
    None: that order has no verdict, failed or not judged)."""

    judge: str
    variant: str  # '' the original responses; else model a is that twin of model_a
    instance: str
    criterion: str
    model_a: str  # the original model (of the twin when ``variant``)
    model_b: str
    a_first: float | None
    a_second: float | None


@dataclass(frozen=True)
class OwnScore:
    """One original absolute item's scores by every judge that scored it (for
    self-preference: judges compared on the same responses)."""

    model: str
    instance: str
    criterion: str
    scores: Mapping[str, float]  # judge -> score


@dataclass(frozen=True)
class JudgeOps:
    """How one judge worked in the run: its finished rows, the answers that could not be
    read or were refused, other failures, the mean latency of its calls and its cost per
    judgment (None: unknown)."""

    judge: str
    judgments: int
    unparseable: int
    refused: int
    failed: int
    latency_ms: float | None
    cost_per_judgment: float | None


@dataclass(frozen=True)
class PeopleAgreement:
    """One judge against the people's mean on the items people rated (the report's
    People section)."""

    judge: str
    items: int
    pearson: float | None
    spearman: float | None
    within_one: float | None


@dataclass(frozen=True)
class CardInputs:
    """Everything a probe run's card is computed from."""

    run: str
    judges: tuple[str, ...]
    twins: tuple[TwinScore, ...] = ()
    verdicts: tuple[OrderedVerdicts, ...] = ()
    own: tuple[OwnScore, ...] = ()
    #: declared families: model -> family and judge -> family
    families: Mapping[str, str] = field(default_factory=dict)
    ops: tuple[JudgeOps, ...] = ()
    people: tuple[PeopleAgreement, ...] = ()
    #: the scale's top score (what an injection claims)
    top: float = 5.0


@dataclass(frozen=True)
class Effect:
    """One probe's effect on one judge: an estimate with its interval, over ``clusters``
    independent units (instances) and ``items`` pairs; ``significant`` after the card's
    multiplicity correction across that judge's effects; ``gate`` the threshold it was
    checked against (None: none) and ``fails`` whether it failed it."""

    judge: str
    probe: str  # a variant, "swap", "self", "length per doubling", "inject-score obeyed", ...
    measure: str  # what the number is, in words ("score change", "first-shown advantage")
    estimate: float
    low: float
    high: float
    p_value: float | None
    significant: bool
    items: int
    clusters: int
    #: the key of the pairs behind it, for links: (judge, variant or probe)
    pairs_key: tuple[str, str] = ("", "")
    gate: float | None = None
    fails: bool = False
    #: ``p_value`` adjusted across every tested effect of the card (the card's correction);
    #: ``significant`` is this below the card's alpha (None: not tested)
    p_adjusted: float | None = None


@dataclass(frozen=True)
class JudgeCard:
    judge: str
    effects: tuple[Effect, ...]
    #: pairwise: the share of comparisons whose verdict held when the order swapped
    consistency: float | None = None
    ops: JudgeOps | None = None
    people: PeopleAgreement | None = None
    #: what could not be measured and why ("self: no model of another family")
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Card:
    run: str
    cards: tuple[JudgeCard, ...]
    confidence: float = 0.95
    alpha: float = 0.05
    correction: str = "holm"
    gate: Mapping[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> tuple[Effect, ...]:
        """The effects that failed the gate."""
        return tuple(e for c in self.cards for e in c.effects if e.fails)
