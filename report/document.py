"""What a report holds, whatever it is rendered as (pure data; ``report.render`` and
``report.html`` draw it).

Also the presentation rules every format shares: models are shown best first
(:func:`ranked_models`, by the headline overall: FLASK's pooled overall, or BiGGen's
overall when the instances carry capabilities), difficulty levels carry FLASK's names
(:func:`level_label`) and BiGGen's overall reads "overall (BiGGen)" (:func:`key_label`)
wherever people read them, while JSON and CSV keep the keys (``"1"``..``"5"``,
``"biggen"``). A report whose instances carry capabilities says what BiGGen's overall is
(:func:`definitions`: "overall = mean of capability means, as BiGGen Bench's report
computes it"), in every format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flask_eval.core.types import DIFFICULTY_LABELS
from flask_eval.report.agreement import Agreement
from flask_eval.report.consistency import SelfConsistency
from flask_eval.report.intervals import Comparison, Intervals
from flask_eval.report.metrics import (
    BIGGEN_KEY,
    BIGGEN_LABEL,
    BIGGEN_RULE,
    DIFFICULTY,
    OVERALL,
    OVERALL_KEY,
    Row,
)
from flask_eval.report.row_fields import FIELDS as FIELDS  # re-exported
from flask_eval.report.row_fields import ROW_FIELDS as ROW_FIELDS  # re-exported
from flask_eval.report.scores import ScoreTable
from flask_eval.rubrics.scale import FIVE_POINT, Scale

if TYPE_CHECKING:
    from flask_eval.report.calibration import Calibration
    from flask_eval.report.calibration_suggest import Suggestion
    from flask_eval.report.mtbench import MTBench
    from flask_eval.report.pairwise_report import PairwiseReport
    from flask_eval.report.people_data import PeopleReport

#: What a judge's completion budget is when its config leaves it unset.
DEFAULT_MAX_TOKENS = 1024
#: What its temperature is when unset, for providers whose SDK call takes one.
DEFAULT_TEMPERATURE = 0.0
PROVIDER_DEFAULT = "provider default"


@dataclass(frozen=True)
class ReportRow(Row):
    """A report row (see :class:`report.metrics.Row`) with its bootstrap interval."""

    ci_low: float | None = None
    ci_high: float | None = None

    @classmethod
    def of(cls, row: Row, interval: tuple[float, float] | None) -> ReportRow:
        lo, hi = interval if interval is not None and row.mean is not None else (None, None)
        return cls(**vars(row), ci_low=lo, ci_high=hi)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


def with_intervals(rows: Sequence[Row], intervals: Intervals) -> list[ReportRow]:
    return [ReportRow.of(r, intervals.get((r.model, r.judge, r.dimension, r.key))) for r in rows]


@dataclass(frozen=True)
class JudgeSettings:
    """How one judge of the run was sampled, as its run config records it.

    ``temperature`` None means the provider's own default (the Anthropic SDK call takes
    no temperature). Built by ``flask_eval.cli.report`` with secrets redacted.
    """

    name: str
    spec: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = DEFAULT_TEMPERATURE

    @property
    def temperature_text(self) -> str:
        return PROVIDER_DEFAULT if self.temperature is None else str(float(self.temperature))

    def describe(self) -> str:
        """``spec, max_tokens N, temperature T`` (one line of a report header)."""
        return f"{self.spec}, max_tokens {self.max_tokens}, temperature {self.temperature_text}"

    def as_dict(self) -> dict[str, Any]:
        temperature = PROVIDER_DEFAULT if self.temperature is None else self.temperature
        return {
            "name": self.name,
            "spec": self.spec,
            "max_tokens": self.max_tokens,
            "temperature": temperature,
        }


def cost_text(cost: float, unknown: Mapping[str, str] | None = None, digits: int = 4) -> str:
    """A cost as every screen prints it: ``$1.2345``, or, when some judge has no price
    (``unknown``: judge -> why), "unknown" with the reasons and the priced part, if any:
    an unpriced judge's calls are metered at $0, never shown as a cost of 0."""
    if not unknown:
        return f"${cost:.{digits}f}"
    why = "; ".join(f"{name}: {reason}" for name, reason in unknown.items())
    priced = f">= ${cost:.{digits}f} priced, " if cost else ""
    return f"unknown ({priced}{why})"


@dataclass(frozen=True)
class JudgeCost:
    """What one judge's paid calls of the run cost, as the workers metered them: the
    prompt tokens read from the provider's prompt cache (``cached_tokens``) and written
    to it (``cache_write_tokens``) are parts of ``prompt_tokens``, billed at the judge's
    cache prices; ``batch_calls`` went through a batch API (at its batch price)."""

    judge: str
    calls: int = 0
    batch_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    #: calls whose usage was not trusted: counted and costed at a safe estimate
    untrusted: int = 0
    #: why the judge's cost is unknown ("": it has a price)
    unpriced: str = ""

    def as_dict(self) -> dict[str, Any]:
        """``cost`` is None when unknown (``unpriced`` says why)."""
        return {**vars(self), "cost": None if self.unpriced else round(self.cost, 6)}

    def describe(self) -> str:
        """One line of a report header."""
        batched = f", {self.batch_calls:,} through a batch API" if self.batch_calls else ""
        untrusted = (
            f"; {self.untrusted:,} with a usage not trusted (impossible token counts: "
            "counted at a safe estimate)"
            if self.untrusted
            else ""
        )
        cost = f"cost unknown ({self.unpriced})" if self.unpriced else f"${self.cost:.4f}"
        return (
            f"{self.calls:,} calls{batched}, {cost}; {self.prompt_tokens:,} prompt "
            f"tokens ({self.cached_tokens:,} read from the prompt cache, "
            f"{self.cache_write_tokens:,} written to it), {self.completion_tokens:,} completion"
            f"{untrusted}"
        )


@dataclass(frozen=True)
class Progress:
    """How far the run's judgments were when the report read them. A run in progress
    (judgments pending or being judged) has a partial report: every format says so."""

    total: int
    done: int
    failed: int
    pending: int  # pending or running: not finished yet

    @property
    def in_progress(self) -> bool:
        return self.pending > 0

    def describe(self) -> str:
        """The line every format of a report in progress shows."""
        return (
            f"IN PROGRESS: {self.pending:,} of {self.total:,} judgments pending "
            f"({self.done:,} done, {self.failed:,} failed); this report is partial, its "
            "figures will change as the run goes on"
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON document's fields: ``in_progress``, ``pending`` and ``judgments``."""
        return {
            "in_progress": self.in_progress,
            "pending": self.pending,
            "judgments": {
                "total": self.total,
                "done": self.done,
                "failed": self.failed,
                "pending": self.pending,
            },
        }


@dataclass(frozen=True)
class ReferenceMean:
    """A reference rater's mean score of one model, on the run's cells it rated."""

    name: str
    model: str
    mean: float | None
    n: int


@dataclass
class Report:
    """Everything a report shows, for one run."""

    run: str
    rows: list[ReportRow]
    comparisons: list[Comparison] = field(default_factory=list)
    agreement: list[Agreement] = field(default_factory=list)
    bootstrap: dict[str, Any] = field(default_factory=dict)
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    judges: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    abilities: list[str] = field(default_factory=list)
    ability_of: Mapping[str, str] = field(default_factory=dict)
    domains: list[str] = field(default_factory=list)
    #: BiGGen Bench's groups the instances carry (empty: none)
    capabilities: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    #: what rows that are not plain means of their cells are (see :func:`definitions`)
    definitions: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: how each judge of the run was sampled (ensembles and references are not judges)
    judge_settings: list[JudgeSettings] = field(default_factory=list)
    #: the pairwise part of a pairwise run (``report.pairwise_report``), else None
    pairwise: PairwiseReport | None = None
    #: each task's capability (BiGGen Bench), for showing tasks under their capability
    task_capability: Mapping[str, str] = field(default_factory=dict)
    #: reference raters' (``--reference``) mean per model, beside the judges'
    reference_means: list[ReferenceMean] = field(default_factory=list)
    #: judges whose scores follow the criterion's position in the prompt (``report.patterns``)
    position_patterns: list[dict[str, Any]] = field(default_factory=list)
    #: the score scale of the run's protocols (``rubrics.scale``): the figures' axes
    scale: Scale = FIVE_POINT
    #: what each judge's paid calls cost (the ledger's ``call`` rows of the run)
    costs: list[JudgeCost] = field(default_factory=list)
    #: how each judge's repeated judgments agree (``run --samples`` > 1; empty otherwise)
    self_consistency: list[SelfConsistency] = field(default_factory=list)
    #: how far the run's judgments were when read (None: a report of rows alone)
    progress: Progress | None = None
    #: the run's raters beside its judges (``report.people``; None: no person rated)
    people: PeopleReport | None = None
    #: the judges calibrated to people (``report.calibration``; None: not asked)
    calibration: Calibration | None = None
    #: cells for people to label next (``report.calibration_suggest``; empty: not asked)
    suggestions: list[Suggestion] = field(default_factory=list)
    #: MT-Bench's scores as FastChat computes them (``report.mtbench``), for a run whose
    #: instances are turns of conversations (None: they are not)
    mtbench: MTBench | None = None

    @property
    def in_progress(self) -> bool:
        """Judgments of the run were pending or being judged: the report is partial."""
        return self.progress is not None and self.progress.in_progress

    def as_dict(self) -> dict[str, Any]:
        """The JSON document; ``definitions`` only when there are any (BiGGen runs),
        ``self_consistency`` only for a run of repeated judgments, ``people`` only when
        people rated items of the run, ``mtbench`` only for a run of conversations
        (:meth:`report.mtbench.MTBench.as_dict`); a report of a run has its progress
        (:meth:`Progress.as_dict`) after ``run``."""
        data: dict[str, Any] = {
            "run": self.run,
            **(self.progress.as_dict() if self.progress is not None else {}),
            "judges": [j.as_dict() for j in self.judge_settings],
            "rows": [r.as_dict() for r in self.rows],
            "comparisons": [c.as_dict() for c in self.comparisons],
            "agreement": [a.as_dict() for a in self.agreement],
            "bootstrap": self.bootstrap,
            "notes": list(self.notes),
            "position_patterns": list(self.position_patterns),
            "cost": [c.as_dict() for c in self.costs],
        }
        if self.reference_means:
            data["reference_means"] = [vars(r) for r in self.reference_means]
        if self.definitions:
            data["definitions"] = list(self.definitions)
        if self.self_consistency:
            data["self_consistency"] = [c.as_dict() for c in self.self_consistency]
        if self.pairwise is not None:
            data["rows"] += self.pairwise.rows()
            data["pairwise"] = self.pairwise.summary()
        if self.people is not None:
            data["people"] = self.people.as_dict()
        if self.calibration is not None:
            data["calibration"] = self.calibration.as_dict()
        if self.suggestions:
            data["suggested_labels"] = [vars(s) for s in self.suggestions]
        if self.mtbench is not None:
            data["mtbench"] = self.mtbench.as_dict()
        return data


def definitions(table: ScoreTable) -> list[dict[str, str]]:
    """The rows of a report on ``table`` that need saying what they are: BiGGen's overall
    when instances carry capabilities (and are not turns of conversations, whose
    capabilities are MT-Bench's categories: no BiGGen overall)."""
    if not table.capabilities or table.conversations:
        return []
    return [
        {"dimension": OVERALL, "key": BIGGEN_KEY, "label": BIGGEN_LABEL, "definition": BIGGEN_RULE}
    ]


def as_report(rows: Report | Sequence[Row], run: str = "") -> Report:
    """A report of plain rows (no intervals, no header), or ``rows`` if it is one."""
    if isinstance(rows, Report):
        return rows
    report_rows = [r if isinstance(r, ReportRow) else ReportRow.of(r, None) for r in rows]
    return Report(
        run=run,
        rows=report_rows,
        models=list(dict.fromkeys(r.model for r in rows)),
        judges=list(dict.fromkeys(r.judge for r in rows)),
    )


def headline_key(rows: Sequence[Row]) -> str:
    """The ``overall`` key a report leads with: BiGGen's overall (the mean of capability
    means) when the rows have it, else the pooled overall."""
    biggen = any(r.dimension == OVERALL and r.key == BIGGEN_KEY for r in rows)
    return BIGGEN_KEY if biggen else OVERALL_KEY


def ranked_models(rows: Sequence[Row], models: Sequence[str] = ()) -> list[str]:
    """Models best first: by the mean, over judges, of their headline overall means
    (:func:`headline_key`).

    ``models`` (default: those of ``rows``, in order) fixes the set and breaks ties;
    models without an overall mean come last.
    """
    names = list(models) or list(dict.fromkeys(r.model for r in rows))
    key = headline_key(rows)
    means: dict[str, list[float]] = {}
    for r in rows:
        if r.dimension == OVERALL and r.key == key and r.mean is not None:
            means.setdefault(r.model, []).append(r.mean)
    score = {m: sum(v) / len(v) for m, v in means.items()}
    position = {m: i for i, m in enumerate(names)}
    return sorted(names, key=lambda m: (m not in score, -score.get(m, 0.0), position[m]))


def level_label(key: str) -> str:
    """A difficulty key as people read it: ``"1"`` -> ``"1 simple lifestyle knowledge"``.

    Levels outside FLASK's 1..5 (and non-numeric keys) stay as they are.
    """
    if key.isdigit() and 1 <= int(key) <= len(DIFFICULTY_LABELS):
        return f"{key} {DIFFICULTY_LABELS[int(key) - 1]}"
    return key


def key_label(dimension: str, key: str) -> str:
    """A row's key as people read it: difficulty levels with FLASK's names, BiGGen's
    overall as "overall (BiGGen)"; other keys as they are."""
    if dimension == DIFFICULTY:
        return level_label(key)
    if dimension == OVERALL and key == BIGGEN_KEY:
        return BIGGEN_LABEL
    return key
