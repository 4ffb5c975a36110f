"""Planning a run: its identity (fingerprint), name, stored configuration, and the judge
calls its open ledger rows make (or a fresh run would make: :func:`planned_calls`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flask_eval.core.gcpause import paused_gc
from flask_eval.core.stored import STORED_VERSION, StoredConfig
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.pairs import planned_pairwise_rows
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.rubrics.kinds import JUDGMENT
from flask_eval.storage.planning import Subject
from flask_eval.storage.records import OpenRow, PlannedCall, RunInfo
from flask_eval.storage.store import Store

MODES = ("instance", "skill")
#: One call per (instance, response, judge) scoring all of the instance's skills: FLASK's
#: own protocol, ~2.5x fewer prompt tokens (docs/design/job-granularity.md).
DEFAULT_MODE = "instance"


@dataclass(frozen=True)
class Judging:
    """How a run's items are judged: the protocol ``mode``, the criteria (``skills``, as
    ``rubrics.codec.to_data`` writes them), whether judges see the reference answers, a
    pairwise run's settings and ordered model ``pairs``, the kind of work and its
    options, and judgments per judge and item (``samples``)."""

    mode: str = DEFAULT_MODE
    skills: list[dict[str, Any]] = field(default_factory=list)
    reference: bool = True
    pairwise: Mapping[str, Any] | None = None
    pairs: Sequence[tuple[str, str]] = ()
    kind: str = JUDGMENT
    kind_options: Mapping[str, Any] | None = None
    samples: int = 1
    #: a probe run's probes (``producer.probe_plan``; None: not one)
    probes: Mapping[str, Any] | None = None


def fingerprint(inputs: Inputs, judges: Sequence[str], how: Judging) -> str:
    """A digest of everything that decides what is judged and how (what runs made before
    an input existed never had is left out while it is at its default, so their
    fingerprints stay as they were). ``how.samples`` is not in it: the judges' identities
    carry their samples."""
    mode, skills, reference, pairwise = how.mode, how.skills, how.reference, how.pairwise
    pairs, kind, kind_options = how.pairs, how.kind, how.kind_options
    h = hashlib.sha256()

    def feed(obj: Any) -> None:
        h.update(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")

    head: dict[str, Any] = {"mode": mode, "judges": sorted(judges), "skills": skills}
    if not reference:
        head["reference"] = False
    if pairwise:  # the pairs too: without the swap, their order decides who is shown first
        head["pairwise"] = {**pairwise, "pairs": [list(p) for p in pairs]}
    if kind != JUDGMENT:
        head["kind"] = {"name": kind, "options": dict(kind_options or {})}
    if how.probes:
        head["probes"] = dict(how.probes)
    feed(head)
    for i in sorted(inputs.instances, key=lambda i: i.id):
        item: list[Any] = [
            i.id,
            i.instruction,
            i.answer,
            list(i.skills),
            list(i.domains),
            i.difficulty,
        ]
        extra = {
            "system_prompt": i.system_prompt,
            "rubrics": {k: v.to_data() for k, v in sorted(i.rubrics.items())},
            "capability": i.capability,
            "task": i.task,
            "images": [r.sha256 for r in i.images],
        }
        item += [{k: v for k, v in extra.items() if v}] if any(extra.values()) else []
        feed(item)
    if inputs.about_instances:  # each instance, with no model and no response: as runs
        # planned when such rows had an empty stand-in response were fingerprinted
        for i in sorted(inputs.instances, key=lambda i: i.id):
            feed([NO_MODEL, i.id, ""])
    with paused_gc():  # every response read again, no cycles (core.gcpause)
        for rs in sorted(inputs.response_sets, key=lambda rs: rs.model):
            for r in sorted(rs.responses, key=lambda r: r.instance_id):
                feed([rs.model, r.instance_id, r.text])
    return h.hexdigest()


def default_run_name(digest: str) -> str:
    return f"run-{digest[:10]}"


def run_config(
    inputs: Inputs, judges: Sequence[JudgeConfig], how: Judging, instances_path: str
) -> StoredConfig:
    """What the store keeps about a run (never secrets: judge specs carry no keys); a
    run of another kind of work than judgment says which, with its options; a run of
    repeated judgments (``--samples`` > 1) says how many, so the report merges them."""
    pairwise, samples, kind, kind_options = how.pairwise, how.samples, how.kind, how.kind_options
    extra: dict[str, Any] = {"pairwise": dict(pairwise)} if pairwise else {}
    if samples > 1:
        extra["samples"] = samples
    if kind != JUDGMENT:
        extra |= {"kind": kind, "kind_options": dict(kind_options or {})}
    if how.probes:
        extra["probes"] = dict(how.probes)
    return StoredConfig.from_data(
        {
            **extra,
            "version": STORED_VERSION,
            "judges": [j.to_data() for j in judges],
            "mode": how.mode,
            "reference": how.reference,
            "skills": how.skills,
            "instances_path": instances_path,
            "responses": {rs.model: rs.path for rs in inputs.response_sets},
            # the models in the order given (the stored config is sorted): the rating anchor
            "models": [rs.model for rs in inputs.response_sets],
            "coverage": {m: list(c) for m, c in inputs.coverage().items()},
        }
    )


class _Calls:
    """A subject's judge calls, as its judge's protocol groups its criteria (one call per
    instance, or per criterion): the protocol's split computed once per (judge, criteria),
    each part as the positions of its criteria."""

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self.parts: dict[tuple[str, tuple[str, ...]], list[tuple[list[str], list[int]]]] = {}

    def of(
        self,
        judge: str,
        model: str,
        model_b: str,
        instance_id: str,
        criteria: tuple[str, ...],
        rows: Sequence[int],
    ) -> list[PlannedCall]:
        """The calls of one subject: its ``criteria`` in order, ``rows`` their row ids."""
        split = self.parts.get((judge, criteria))
        if split is None:
            split = self.parts[(judge, criteria)] = [
                (part, [criteria.index(c) for c in part])
                for part in self.context.protocol_for(judge).calls(list(criteria))
            ]
        return [
            PlannedCall([rows[k] for k in at], model, instance_id, judge, list(part), model_b)
            for part, at in split
        ]


def group_calls(rows: Sequence[OpenRow], context: RunContext) -> list[PlannedCall]:
    """The judge calls that cover ``rows``, as each judge's protocol groups a subject's
    criteria (one call per instance, or per criterion), in the rows' order."""
    subjects: dict[tuple[str, str, str, str], dict[str, int]] = {}  # -> criterion: id
    for r in rows:
        key = (r.judge, r.model, r.model_b, r.instance_id)
        ids = subjects.get(key)
        if ids is None:
            subjects[key] = {r.criterion: r.id}
        else:
            ids[r.criterion] = r.id
    calls = _Calls(context)
    return [
        call
        for (judge, model, model_b, instance_id), ids in subjects.items()
        for call in calls.of(judge, model, model_b, instance_id, tuple(ids), list(ids.values()))
    ]


def planned_calls(
    inputs: Inputs, context: RunContext, pairs: Sequence[tuple[str, str]] | None = None
) -> list[PlannedCall]:
    """Every call a fresh run would make, without touching the store (``pairs``: the
    ordered model pairs of a pairwise run)."""
    if pairs is not None:
        return group_calls(planned_pairwise_rows(inputs, pairs, list(context.judges)), context)
    criteria_of = {i.id: i.skills for i in inputs.instances}
    rows = [
        OpenRow(0, model, "", instance_id, criterion, judge)
        for judge in context.judges
        for model, answered in inputs.subjects()
        for instance_id in answered
        for criterion in criteria_of[instance_id]
    ]
    return group_calls(rows, context)


def new_calls(
    subjects: Iterable[Subject], ids: range, context: RunContext
) -> Iterator[PlannedCall]:
    """The judge calls of a ledger just written, from its subjects and the ids its rows
    took (``RunInfo.ledger``, in the same order): what :func:`group_calls` makes of the
    rows read back, without reading them (1M judgments: 8 s less)."""
    calls = _Calls(context)
    at = ids.start
    for model, model_b, instance_id, judge, criteria in subjects:
        rows = range(at, at + len(criteria))
        yield from calls.of(judge, model, model_b, instance_id, criteria, rows)
        at += len(criteria)
    if at != ids.stop:
        raise RuntimeError(f"the ledger's {len(ids)} ids do not match its {at - ids.start} rows")


#: ledger rows read at a time when a run's open calls are planned
OPEN_ROWS_PAGE = 50_000


def open_call_stream(
    store: Store, run: RunInfo, page: int = OPEN_ROWS_PAGE
) -> Iterator[PlannedCall]:
    """The judge calls still to make for ``run``, from its ledger, a page of rows at a
    time (memory stays flat whatever the run's size). A subject's rows are grouped within
    a page; the rows of a page's last subject wait for the next page, so a subject cut
    by a page's end is still one call."""
    context = RunContext.from_config(run.config)
    after, carried = 0, list[OpenRow]()  # the rows of the last subject of the page before
    while True:
        rows = store.open_rows(run.id, after, page)
        full = len(rows) == page
        if rows:
            after = rows[-1].id
        rows = carried + rows
        carried = []
        if full:
            last, cut = _subject(rows[-1]), len(rows)
            while cut > 0 and _subject(rows[cut - 1]) == last:
                cut -= 1
            rows, carried = rows[:cut], rows[cut:]
        yield from group_calls(rows, context)
        if not full:
            return


def _subject(row: OpenRow) -> tuple[str, str, str, str]:
    return row.judge, row.model, row.model_b, row.instance_id


def open_calls(store: Store, run: RunInfo) -> list[PlannedCall]:
    """The judge calls still to make for ``run``, from its ledger."""
    return list(open_call_stream(store, run))


def batches(calls: Sequence[list[int]], size: int) -> list[list[list[int]]]:
    """Pack judge calls into messages of ``size`` calls each."""
    return [list(calls[i : i + size]) for i in range(0, len(calls), size)]
