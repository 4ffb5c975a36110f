"""The read side the viewer shows (docs/design/viewer.md): runs, a run's overview and its
report (cached as a snapshot keyed by the ledger's fingerprint), pages of the judgments
behind a cell, one judgment in full with the exact prompt its judge was sent
(app/prompts.py), two models side by side on one instance. Plain data; every filter runs
in SQL (storage/browse.py, storage/judgment_pages.py, storage/snapshots.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flask_eval.app.progress import cost_unknown
from flask_eval.app.prompts import Prompt, render_prompt
from flask_eval.app.report import build_report
from flask_eval.app.score_tables import config_judges, config_models, judge_of
from flask_eval.core.errors import InputError, Status
from flask_eval.core.limits import MAX_INTEGER
from flask_eval.core.redact import redact
from flask_eval.core.text import clip, text_problem
from flask_eval.report.document import Progress, Report
from flask_eval.rubrics import codec, kinds
from flask_eval.storage import browse, judgment_pages, snapshots
from flask_eval.storage.browse import Disagreement, RunLine
from flask_eval.storage.judgment_pages import JudgmentLine, JudgmentQuery, Page
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

__all__ = ["Disagreement", "JudgmentLine", "JudgmentQuery", "Page", "RunLine"]

#: judgments per page
PAGE = 50
#: the snapshot's name in ``report_snapshot``
SNAPSHOT = "viewer"


class NotFound(InputError):
    """A run, judgment or instance the store does not hold."""


def list_runs(store: Store) -> list[RunLine]:
    """The store's runs, newest first, with their judgments by status."""
    return browse.runs(store)


def find_run(store: Store, name: str) -> RunInfo:
    run = store.find_run(name)
    if run is None:
        raise NotFound(f"no run named {name!r} in this store")
    return run


@dataclass(frozen=True)
class Overview:
    """What a run is, and how far its ledger is."""

    name: str
    id: int
    created_at: str
    kind: str  # judgment, generation or annotation
    mode: str
    pairwise: bool
    judges: list[str]
    models: list[str]
    counts: dict[str, int]
    last_call: int

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def progress(self) -> Progress:
        """How far its judgments are (pending counts those being judged too)."""
        done, failed = self.counts.get(Status.DONE, 0), self.counts.get(Status.FAILED, 0)
        return Progress(self.total, done, failed, self.total - done - failed)


def overview(store: Store, run: RunInfo) -> Overview:
    fp = snapshots.fingerprint(store, run.id)
    return Overview(
        name=run.name,
        id=run.id,
        created_at=fp.created_at.isoformat(timespec="seconds") if fp.created_at else "",
        kind=run.config.kind,
        mode=run.mode,
        pairwise=run.config.pairwise is not None,
        judges=[redact(j) for j in config_judges(run.config)],
        models=config_models(run.config),
        counts=fp.counts,
        last_call=fp.last_call,
    )


def token(run: RunInfo, view: Overview, version: str) -> str:
    """The ledger-state fingerprint a snapshot is valid for: the run's identity (a run
    deleted and made again under the same id differs by its creation time), its
    judgments by status, its newest paid answer and the viewer's version."""
    key = [
        version,
        run.id,
        run.name,
        run.fingerprint,
        view.created_at,
        sorted(view.counts.items()),
        view.last_call,
    ]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()


@dataclass
class RunPage:
    overview: Overview
    #: what ``render`` made of the report (JSON data); None while a large run's first
    #: snapshot is being computed (``refresh``)
    body: dict[str, Any] | None
    part: Any  # the part asked for (None: none, or no such part)
    cached: bool  # served from the snapshot
    #: the snapshot served is of an earlier state of the ledger (or there is none yet):
    #: the caller should have ``refresh`` compute the current one
    stale: bool = False
    #: when the snapshot served was made (ISO, UTC), '' when none
    made_at: str = ""


#: a run of more judgments than this is never computed while a page waits: its page shows
#: the last snapshot (or says it is being computed) and ``refresh`` runs beside it. The
#: full report of 100,000 judgments takes ~0.2 s; of 1,000,000, ~2 s (docs/benchmarks.md)
INLINE_LIMIT = 100_000


#: what a run page's renderer makes of a report: its body and its parts by key (each
#: stored and read on its own: a page reads the body and the one part it shows)
Render = Callable[[Report], tuple[dict[str, Any], dict[str, Any]]]


def part_name(key: str) -> str:
    """The snapshot name of a run page's part (``report_snapshot.name`` is short)."""
    return f"{SNAPSHOT}:{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def run_page(
    store: Store,
    run: RunInfo,
    render: Render,
    version: str,
    part: Callable[[dict[str, Any]], str | None] | None = None,
    *,
    replicates: int = 1000,
    inline_limit: int | None = None,
) -> RunPage:
    """The run's report as ``render`` shows it, with the part ``part(body)`` names.

    From the snapshot when the ledger has not changed since it was made. Else a run of at
    most ``inline_limit`` judgments is computed (the full report) and stored now; a larger
    one is served from its last snapshot, marked ``stale`` (body None when it has none
    yet), for the caller to :func:`refresh` beside the page: no page waits seconds."""
    view = overview(store, run)
    if not kinds.of(view.kind).scores:
        return RunPage(view, {"kind": view.kind}, None, cached=False)
    key = token(run, view, version)
    found = snapshots.snapshot(store, run.id, SNAPSHOT)
    large = view.total > (INLINE_LIMIT if inline_limit is None else inline_limit)
    if found is not None and (found.token == key or large):
        name = part(found.body) if part is not None else None
        got = snapshots.snapshot(store, run.id, part_name(name)) if name is not None else None
        if name is None or (got is not None and got.token == found.token):
            return RunPage(
                view,
                found.body,
                got.body if got else None,
                cached=True,
                stale=found.token != key,
                made_at=found.made_at,
            )
    if large:
        return RunPage(view, None, None, cached=False, stale=True)
    body, parts = _compute(store, run, render, key, replicates)
    name = part(body) if part is not None else None
    return RunPage(view, body, parts.get(name) if name is not None else None, cached=False)


def refresh(
    store: Store, run: RunInfo, render: Render, version: str, *, replicates: int = 1000
) -> bool:
    """Compute and store the run page's snapshot of the ledger as it is now, unless the
    stored one already is; whether it computed one."""
    view = overview(store, run)
    if not kinds.of(view.kind).scores:
        return False
    key = token(run, view, version)
    found = snapshots.snapshot(store, run.id, SNAPSHOT)
    if found is not None and found.token == key:
        return False
    _compute(store, run, render, key, replicates)
    return True


def _compute(
    store: Store, run: RunInfo, render: Render, key: str, replicates: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    report = build_report(store, run, replicates=replicates, progress=False)
    body, parts = render(report)
    snapshots.put_snapshots(
        store, run.id, key, {SNAPSHOT: body, **{part_name(k): v for k, v in parts.items()}}
    )
    return body, parts


def judgments(
    store: Store, run: RunInfo, query: JudgmentQuery, after: int = 0, limit: int = PAGE
) -> Page:
    """A page of the run's judgments matching ``query`` (keyset: ``id > after``) and
    where the next one starts."""
    return judgment_pages.judgment_page(store, run.id, query, after, limit)


@dataclass
class JudgmentDetail:
    row: dict[str, Any]
    instance: dict[str, Any]
    domains: list[str]
    responses: list[tuple[str, str]]  # (model, text), in the order the judge saw them
    prompt: Prompt | None
    call: dict[str, Any] | None
    siblings: list[tuple[int, str]] = field(default_factory=list)  # rows of the same call
    #: who did the row's work, in the kind's words; its value as the kind shows it
    worker: str = "judge"
    value: str | None = None


def judgment_detail(store: Store, run: RunInfo, judgment_id: int) -> JudgmentDetail:
    record = browse.judgment(store, run.id, judgment_id)
    if record is None:
        raise NotFound(f"run {run.name} has no judgment {judgment_id}")
    row, kind = record.row, kinds.of(run.config.kind)
    order = [m for m in (row["model"], row["model_b"]) if m]
    prompt = None
    if run.config.judge_names:
        try:
            prompt = render_prompt(store, run, record)
        except (
            KeyError,
            IndexError,
            ValueError,
            TypeError,
            AttributeError,
        ) as exc:  # an old config
            prompt = Prompt([], [], None, f"the prompt cannot be rendered: {redact(str(exc))}")
    return JudgmentDetail(
        row=row,
        instance=record.instance,
        domains=record.domains,
        responses=[(m, record.responses.get(m, "")) for m in order],
        prompt=prompt,
        call=_priced(record.call, run, str(row["judge"])),
        siblings=[(i, c) for i, c in record.call_rows if i != judgment_id],
        worker=kind.words.worker,
        value=None if row.get("value") is None else kind.view(str(row["value"])),
    )


def _priced(call: dict[str, Any] | None, run: RunInfo, judge: str) -> dict[str, Any] | None:
    """``call`` with ``unpriced``: why its judge's cost is unknown ("": it has a price)."""
    if call is None:
        return None
    unknown = cost_unknown(run.config)
    return {**call, "unpriced": unknown.get(judge_of(judge, run.config), "")}


@dataclass
class Side:
    model: str
    response: str
    #: criterion -> judge -> (score, status, rationale or failure, judgment id)
    cells: dict[str, dict[str, tuple[int | None, str, str, int]]]


@dataclass
class InstanceComparison:
    instance_id: str
    instance: dict[str, Any]
    domains: list[str]
    criteria: list[str]
    judges: list[str]
    sides: list[Side]


def compare(
    store: Store, run: RunInfo, instance_id: str, models: Sequence[str]
) -> InstanceComparison:
    """Models side by side on one instance: each judge's score and rationale per
    criterion."""
    found = browse.instance_judgments(store, run.id, instance_id, models)
    if found is None:
        raise NotFound(f"run {run.name} has no instance {instance_id!r}")
    criteria = list(dict.fromkeys(str(r["criterion"]) for r in found.rows))
    judges = list(dict.fromkeys(str(r["judge"]) for r in found.rows))
    sides = []
    for m in models:
        cells: dict[str, dict[str, tuple[int | None, str, str, int]]] = {}
        for r in found.rows:
            if r["model"] == m:
                text = r["rationale"] or (f"failed: {r['reason']}" if r["reason"] else "")
                cells.setdefault(str(r["criterion"]), {})[str(r["judge"])] = (
                    r["score"],
                    str(r["status"]),
                    str(text or ""),
                    int(r["id"]),
                )
        sides.append(Side(m, found.responses.get(m, ""), cells))
    return InstanceComparison(instance_id, found.instance, found.domains, criteria, judges, sides)


@dataclass(frozen=True)
class Facets:
    """What a run's judgments can be filtered by besides models and statuses."""

    judges: list[str]
    reasons: dict[str, int]  # failure reason -> judgments


def facets(store: Store, run: RunInfo) -> Facets:
    judges, reasons = browse.judgment_facets(store, run.id)
    order = {j: k for k, j in enumerate(config_judges(run.config))}
    return Facets(sorted(judges, key=lambda j: (order.get(j, len(order)), j)), reasons)


def neighbours(store: Store, run: RunInfo, instance_id: str) -> tuple[str | None, str | None]:
    """The run's instances before and after ``instance_id`` (None at either end)."""
    return browse.neighbour_instances(store, run.id, instance_id)


def disagreements(store: Store, run: RunInfo, models: Sequence[str]) -> list[Disagreement]:
    """The instances where the run's judges disagree most on ``models``' responses."""
    return browse.disagreements(store, run.id, models)


def run_models(store: Store, run: RunInfo) -> list[str]:
    """The run's models: as its config lists them, else those with responses."""
    return config_models(run.config) or browse.run_models(store, run.id)


def first_instances(store: Store, run: RunInfo, limit: int = 20) -> list[str]:
    return browse.run_instances(store, run.id, limit)


def number_of(text: str, what: str, signed: bool = False) -> int:
    """A parameter's whole number (ASCII digits, a sign if ``signed``) that the ledger's
    integer columns can hold (``core.limits.MAX_INTEGER``); InputError (a 400 page)
    otherwise."""
    digits = text.removeprefix("-") if signed else text
    if not (digits.isascii() and digits.isdigit()):
        raise InputError(f"{what} must be a whole number, not {clip(text, 40)}")
    value = int(text)
    if abs(value) > MAX_INTEGER:
        raise InputError(f"{what} is out of range: {clip(text, 40)}")
    return value


def parameter_problem(name: str, value: str) -> str | None:
    """Why a page parameter (a query's or a path's) cannot be used, or None: text that no
    store can hold or compare (NUL, which PostgreSQL refuses; a lone surrogate)."""
    problem = text_problem(name) or text_problem(value)
    return None if problem is None else f"parameter {clip(name, 40)} {problem}"


def query_of(params: Mapping[str, str], run: RunInfo | None = None) -> JudgmentQuery:
    """A judgments query from a shareable link's parameters (unknown ones ignored):
    ``ability`` means its skills in ``run``; ``pair=either``, both orders of ``model`` and
    ``model_b``. InputError for a difficulty that is not a number."""

    def get(name: str) -> str | None:
        value = params.get(name, "").strip()
        return value or None

    difficulty = get("difficulty")
    return JudgmentQuery(
        model=get("model"),
        model_b=get("model_b"),
        judge=get("judge"),
        criterion=get("criterion"),
        domain=get("domain"),
        difficulty=number_of(difficulty, "difficulty", signed=True) if difficulty else None,
        capability=get("capability"),
        task=get("task"),
        instance_id=get("instance"),
        status=get("status"),
        reason=get("reason"),
        search=get("q"),
        criteria=_ability_skills(get("ability"), run),
        either_order=get("pair") == "either",
    )


def _ability_skills(ability: str | None, run: RunInfo | None) -> tuple[str, ...]:
    if ability is None or run is None:
        return ()
    skills = tuple(s.name for s in codec.from_data(run.config.skills) if s.ability == ability)
    return skills or ("",)  # an ability the run does not know: nothing matches
