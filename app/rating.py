"""The rating workspace's read and write side: what one rating page shows, built from the
store (templates do no I/O), and a posted form checked strictly before it is stored.

A page is blind: it holds the item's id, the instance's texts and the criteria, never a
model's, judge's or run's name. A pairwise page shows the two responses as "Response 1"
and "Response 2" in the order the item's ``swapped`` says; the rater's choice is mapped
back to the ledger's verdict (relative to its ``model`` / ``model_b``) here, and nowhere
else."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from flask_eval.core.stored import StoredConfig
from flask_eval.core.text import text_problem
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE, Instance
from flask_eval.producer.context import RunContext
from flask_eval.rubrics.grading import RUBRIC_LEVELS, Criterion, Protocol, Subject
from flask_eval.storage import ratings
from flask_eval.storage.response_history import response_histories
from flask_eval.storage.response_texts import response_texts
from flask_eval.storage.store import Store

__all__ = [
    "MAX_RATIONALE",
    "MAX_REASON",
    "NA",
    "TIE",
    "CriterionView",
    "EarlierTurn",
    "FormError",
    "ItemGone",
    "Level",
    "RatingPage",
    "build_page",
    "flag_form",
    "scale_of",
    "seconds_since",
    "submit_form",
]

#: the most characters of one criterion's rationale, and of a "cannot judge" reason
MAX_RATIONALE = 4000
MAX_REASON = 500
#: the form's value of "not applicable" and of a pairwise tie
NA = "na"
TIE = "tie"
#: the shown responses' choices of a pairwise criterion: the first shown, the second, a tie
PAIR_CHOICES = ("1", "2", TIE)
#: what a value of the workspace says it came from
SOURCE = "workspace"
_INTEGER = re.compile(r"-?[0-9]{1,4}")
_SCORE_FIELD = re.compile(r"c([0-9]{1,3})")
_RATIONALE_FIELD = re.compile(r"r([0-9]{1,3})")
#: texts no instance holds: rendered into a protocol's prompt to see whether it shows them
_PROBE_SYSTEM = "probe-system-9c41e7"
_PROBE_REFERENCE = "probe-reference-5b0d2a"


class ItemGone(LookupError):
    """The item's run, instance or responses are no longer in the store."""


class FormError(ValueError):
    """A posted form that cannot be stored: ``problems`` by field name (``c0``, ``r2``,
    ``reason``, ``form``), each a sentence a rater can act on."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.problems.items()))


@dataclass(frozen=True)
class Level:
    """One score of a rubric and what it means."""

    score: int
    text: str


@dataclass(frozen=True)
class CriterionView:
    """One criterion as a rater sees it; ``field`` names its form field (``c<index>``)."""

    name: str
    description: str
    levels: tuple[Level, ...]
    #: the scores the rater picks from (empty on a pairwise page: 1, 2 or a tie)
    scale: tuple[int, ...]
    allow_na: bool
    index: int

    @property
    def field(self) -> str:
        return f"c{self.index}"

    @property
    def rationale_field(self) -> str:
        return f"r{self.index}"


@dataclass(frozen=True)
class EarlierTurn:
    """A turn of the conversation before the one rated: the user's text, its reference
    (empty where the judges are not shown references) and the answer of each response's
    model to it, in the order the responses are shown (empty: none recorded)."""

    user: str
    reference: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class RatingPage:
    """What one rating page shows (every text untrusted: templates escape it).

    ``system_prompt`` and ``reference`` are empty where the run's protocol does not show
    them to a judge (or the instance has none); ``responses`` holds one response, or two
    in the order shown; ``earlier``: the turns of the conversation before the rated one
    (none for a one-shot instruction), as a judge is shown them."""

    item_id: int
    instruction: str
    system_prompt: str
    reference: str
    responses: tuple[str, ...]
    criteria: tuple[CriterionView, ...]
    earlier: tuple[EarlierTurn, ...] = ()

    @property
    def pairwise(self) -> bool:
        return len(self.responses) == 2


def build_page(store: Store, item: ratings.RatingItem) -> RatingPage:
    """The page of ``item``; ItemGone when its run, instance or a response is gone."""
    context, instance, protocol = _context(store, item)
    pairwise = bool(item.model_b)
    keys = [(item.model, item.instance_id)] + ([(item.model_b, item.instance_id)] * pairwise)
    texts = response_texts(store, item.run_id, keys)
    if any(k not in texts for k in keys):
        raise ItemGone(f"item {item.id}: a response is no longer stored")
    responses = tuple(texts[k] for k in keys)
    if pairwise and item.swapped:
        responses = responses[::-1]
    shows_system, shows_reference = _shows(protocol, context.reference, pairwise)
    earlier: tuple[EarlierTurn, ...] = ()
    if instance.history:  # a conversation's turn: the turns before it, each model's answers
        answers = response_histories(store, item.run_id, keys)
        of_each = [answers.get(k, ()) for k in keys]
        if pairwise and item.swapped:
            of_each = of_each[::-1]
        earlier = tuple(
            EarlierTurn(
                t.user,
                t.reference if shows_reference else "",
                tuple(a[n] if n < len(a) else "" for a in of_each),
            )
            for n, t in enumerate(instance.history)
        )
    return RatingPage(
        item_id=item.id,
        instruction=instance.instruction,
        system_prompt=instance.system_prompt if shows_system else "",
        reference=instance.answer if shows_reference else "",
        responses=responses,
        criteria=_criteria(context, instance, protocol, item.criteria, pairwise),
        earlier=earlier,
    )


def submit_form(
    store: Store,
    item: ratings.RatingItem,
    form: Mapping[str, str],
    now: datetime | None = None,
    first_seen: datetime | None = None,
) -> bool:
    """Store the ratings a rater posted for ``item`` (storage's ``submit``: exactly once,
    False when the item was rated already). FormError, nothing stored, when a criterion
    is unanswered, a value is off the scale, N/A is given where it is not allowed, a
    rationale is too long or the form holds a field the page has not."""
    page = build_page(store, item)
    scores, rationales = parse_form(page, item.swapped, form)
    value = _value(item, now, first_seen)
    return ratings.submit(store, item.id, item.judge, scores, rationales, value)


def flag_form(
    store: Store,
    item: ratings.RatingItem,
    form: Mapping[str, str],
    now: datetime | None = None,
    first_seen: datetime | None = None,
) -> bool:
    """Mark ``item`` "cannot judge" with the rater's reason (1-500 characters); False when
    it was rated or flagged already."""
    unknown = sorted(set(form) - {"reason"})
    if unknown:
        raise FormError({"form": f"unexpected field {unknown[0][:40]!r}"})
    reason = form.get("reason", "").strip()
    problem = _text_problem(reason, MAX_REASON)
    if not reason:
        problem = "say why this item cannot be judged"
    if problem is not None:
        raise FormError({"reason": problem})
    return ratings.flag(store, item.id, item.judge, reason, _value(item, now, first_seen))


def parse_form(
    page: RatingPage, swapped: bool, form: Mapping[str, str]
) -> tuple[dict[str, int | None], dict[str, str]]:
    """The (scores, rationales) by criterion name of a posted form; FormError otherwise.
    A pairwise choice of the response shown first ("1"), second ("2") or a tie becomes
    the ledger's verdict through ``swapped``."""
    problems: dict[str, str] = {}
    fields = {c.field: c for c in page.criteria}
    notes = {c.rationale_field: c for c in page.criteria}
    for key in form:
        if key not in fields and key not in notes:
            problems.setdefault("form", f"unexpected field {key[:40]!r}")
    scores: dict[str, int | None] = {}
    rationales: dict[str, str] = {}
    for c in page.criteria:
        raw = form.get(c.field, "")
        try:
            scores[c.name] = (
                _verdict(raw, swapped) if page.pairwise else _score(raw, c.scale, c.allow_na)
            )
        except ValueError as exc:
            problems[c.field] = str(exc)
        note = form.get(c.rationale_field, "").strip()
        problem = _text_problem(note, MAX_RATIONALE)
        if problem is not None:
            problems[c.rationale_field] = problem
        elif note:
            rationales[c.name] = note
    if problems:
        raise FormError(problems)
    return scores, rationales


def seconds_since(start: datetime | None, now: datetime | None = None) -> float:
    """Seconds from ``start`` (a stored time, naive ones being UTC) to ``now``; 0 when
    there is no start or the clock went back."""
    if start is None:
        return 0.0
    now = now or datetime.now(UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0.0, round((now - start).total_seconds(), 3))


def _value(item: ratings.RatingItem, now: datetime | None, first_seen: datetime | None) -> str:
    data: dict[str, object] = {"seconds": seconds_since(item.served_at or first_seen, now)}
    if item.model_b:
        data["swapped"] = item.swapped
    data["source"] = SOURCE
    return json.dumps(data)


def _score(raw: str, scale: Sequence[int], allow_na: bool) -> int | None:
    if raw == NA:
        if not allow_na:
            raise ValueError("N/A is not allowed for this criterion: pick a score")
        return None
    if not raw:
        raise ValueError("pick a score" + (" or N/A" if allow_na else ""))
    if _INTEGER.fullmatch(raw) is None or int(raw) not in scale:
        raise ValueError(f"a score is one of {scale[0]}-{scale[-1]}")
    return int(raw)


def _verdict(raw: str, swapped: bool) -> int:
    if raw not in PAIR_CHOICES:
        raise ValueError("pick Response 1, Response 2 or a tie")
    if raw == TIE:
        return VERDICT_TIE
    first_shown_wins = raw == "1"
    return VERDICT_FIRST if first_shown_wins != swapped else VERDICT_SECOND


def _text_problem(text: str, limit: int) -> str | None:
    if len(text) > limit:
        return f"at most {limit} characters ({len(text)} given)"
    return text_problem(text)


def _context(store: Store, item: ratings.RatingItem) -> tuple[RunContext, Instance, Protocol]:
    config = store.run_config_text(item.run_id)
    if config is None:
        raise ItemGone(f"item {item.id}: its run is gone")
    instance = store.instances(item.run_id, [item.instance_id]).get(item.instance_id)
    if instance is None:
        raise ItemGone(f"item {item.id}: its instance is gone")
    context = RunContext.from_config(StoredConfig.from_text(config))
    try:
        protocol = context.protocol_for(item.judge)
    except KeyError:  # a protocol of another version: ours
        protocol = RunContext(context.skillset, {}, pairwise=context.pairwise).protocol_for("")
    return context, instance, protocol


def _criteria(
    context: RunContext,
    instance: Instance,
    protocol: Protocol,
    names: Sequence[str],
    pairwise: bool,
) -> tuple[CriterionView, ...]:
    views = []
    for index, name in enumerate(names):
        try:
            c = context.criterion(name, instance.rubrics)
        except KeyError:  # neither the run nor the instance describes it: its name alone
            views.append(CriterionView(name, name, (), (), False, index))
            continue
        views.append(
            CriterionView(
                name=c.name,
                description=c.criterion,
                levels=tuple(Level(k, v) for k, v in c.rubric.items()),
                scale=() if pairwise else scale_of(protocol, c),
                allow_na=c.allow_na and not pairwise,
                index=index,
            )
        )
    return tuple(views)


def scale_of(protocol: Protocol, criterion: Criterion) -> tuple[int, ...]:
    """The scores a rater picks from for ``criterion``: its rubric's levels where the
    protocol shows them as the scale's (they are the scale in any run the protocol
    accepted, and a criteria file's own ``scale``), else the protocol's scale."""
    levels = sorted(criterion.rubric)
    if (
        protocol.rubric_rule == RUBRIC_LEVELS
        and len(levels) >= 2
        and levels == list(range(levels[0], levels[-1] + 1))
    ):
        return tuple(levels)
    return protocol.scale.levels


def _shows(protocol: Protocol, reference: bool, pairwise: bool) -> tuple[bool, bool]:
    """Whether ``protocol`` shows a judge the models' system prompt and the reference
    answer (a run without references shows none)."""
    system, ref = _probe(type(protocol), protocol.mode, pairwise)
    return system, ref and reference


@cache
def _probe(kind: type[Protocol], mode: str, pairwise: bool) -> tuple[bool, bool]:
    from flask_eval.rubrics.skills import Skill

    protocol = kind(mode)
    probe = Skill("Probe", "Probe", "probe", {k: "probe" for k in protocol.scale.levels})
    subject = Subject(
        instruction="probe",
        reference=_PROBE_REFERENCE,
        response="probe",
        system_prompt=_PROBE_SYSTEM,
        response_b="probe" if pairwise else None,
    )
    try:
        text = json.dumps(protocol.render(subject, [probe]))
    except Exception:  # a protocol that cannot render the probe: show both
        return True, True
    return _PROBE_SYSTEM in text, _PROBE_REFERENCE in text
