"""Generating conversations turn by turn (MT-Bench's way: FastChat's
``gen_model_answer``): turn k of a conversation is asked of a model with the model's own
answers to turns 1..k-1, so it is asked only once those answers exist.

A generation is done in rounds, each a run of the ledger (docs/design/conversations.md):

- round 1 is the generation run of every one-shot instance and every conversation's
  first turn, for every model: the run a generation without conversations always was
  (same plan, same name);
- round k (k >= 2) is, per model, one generation run of the turn-k instances whose
  earlier turns that model answered. Its one worker is the model, and the run holds the
  model's earlier answers in the rows it is made of: the response of the row's model
  (none, ``rubrics.kind.NO_MODEL``) to each turn-k instance is empty and its ``history``
  holds the model's answers, so the claim that hands a worker its rows hands it those
  answers too (``JobContext.answers``), and the generation protocol renders them as
  assistant messages. The worker reads no other row and knows nothing of rounds.

So the ledger stays exactly-once and resumable as every run is: a round's run is named
after the generation, the turn, the model and a digest of the answers it holds, so a
rerun finds the runs of the rounds done or under way and resumes them (a turn already
answered is never asked again); a turn whose earlier turn has no answer (failed, still
open, or left out by ``--limit``) is not planned, and is said as not generated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from flask_eval.app import steps
from flask_eval.app.generation import Generated, generated
from flask_eval.app.jobs import MODE
from flask_eval.app.pipeline import Plan, judge_identity
from flask_eval.app.steps import StepIncomplete, StepResult, StepWork
from flask_eval.core.limits import MAX_RUN_NAME
from flask_eval.core.settings import Settings
from flask_eval.core.types import Instance, JudgeConfig, Response, ResponseSet
from flask_eval.producer.dispatch import Transport
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.jobs import job_inputs
from flask_eval.producer.plan import Judging, fingerprint
from flask_eval.rubrics import kinds
from flask_eval.rubrics.kind import NO_MODEL
from flask_eval.storage import queries
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store


def turn_of(instance: Instance) -> int:
    """The turn an instance is (1 for a one-shot instruction)."""
    return instance.turn or 1


@dataclass(frozen=True)
class TurnPlan:
    """A generation split in rounds: round 1's plan, and the instances of each later turn
    (``later[0]``: turn 2's); ``instances``: every instance of the generation."""

    first: Plan
    later: tuple[tuple[Instance, ...], ...]
    instances: tuple[Instance, ...]

    @property
    def name(self) -> str:
        """The generation's name: its first round's run."""
        return self.first.name

    @property
    def models(self) -> tuple[JudgeConfig, ...]:
        return self.first.judges

    def turns(self) -> int:
        """The most turns of a conversation in the generation (1: none)."""
        return len(self.later) + 1


def split_turns(plan: Plan) -> TurnPlan:
    """``plan`` (a generation's, ``jobs.prepare_generation``) in rounds: without any turn
    past the first, round 1 is ``plan`` itself; else round 1 is the same plan over the
    one-shot instances and first turns, under the same name."""
    instances = plan.inputs.instances
    last = max((turn_of(i) for i in instances), default=1)
    if last == 1:
        return TurnPlan(plan, (), instances)
    first = tuple(i for i in instances if turn_of(i) == 1)
    later = tuple(tuple(i for i in instances if turn_of(i) == k) for k in range(2, last + 1))
    inputs = Inputs(first, (), about_instances=True)
    digest = _fingerprint(inputs, plan.judges)
    return TurnPlan(replace(plan, inputs=inputs, digest=digest), later, instances)


def generation_plan(
    instances: Sequence[Instance],
    models: Sequence[JudgeConfig],
    source: str,
    run_name: str | None = None,
) -> TurnPlan:
    """The generation of ``instances`` (validated already: a conversation's turns each an
    instance, ``core.conversations``) by ``models``, in rounds, as `generate` plans a
    file's (``jobs.prepare_generation``): named ``run_name``, else after its fingerprint."""
    return split_turns(whole_plan(instances, models, source, run_name))


def whole_plan(
    instances: Sequence[Instance],
    models: Sequence[JudgeConfig],
    source: str,
    run_name: str | None = None,
) -> Plan:
    """:func:`generation_plan` before its split in rounds (``jobs.prepare_generation``'s
    plan of the same instances and models)."""
    criteria = kinds.kind(kinds.GENERATION).criteria({})
    inputs = job_inputs(instances, criteria)
    digest = _fingerprint(inputs, models)
    return Plan(
        inputs,
        criteria,
        tuple(models),
        MODE,
        run_name or f"gen-{digest[:10]}",
        digest,
        source,
        kind=kinds.GENERATION,
    )


def _fingerprint(inputs: Inputs, models: Sequence[JudgeConfig]) -> str:
    """A generation's fingerprint over ``inputs`` (``jobs.prepare_generation``'s)."""
    kind = kinds.kind(kinds.GENERATION)
    skills = kind.fingerprinted({}) if kind.fingerprinted else []
    how = Judging(MODE, skills, kind=kinds.GENERATION, kind_options={})
    return fingerprint(inputs, [judge_identity(j) for j in models], how)


def turn_plan(
    turns: TurnPlan, k: int, model: JudgeConfig, answers: Mapping[str, tuple[str, ...]]
) -> Plan | None:
    """The run of round ``k`` (2 or more) for ``model``: the turn-k instances of the
    conversations ``answers`` holds the model's answers to all k-1 earlier turns of
    (conversation -> its answers, in turn order), each held as the empty response of no
    model whose ``history`` is those answers; None when there is no such instance."""
    todo = [
        i
        for i in turns.later[k - 2]
        if i.conversation is not None and len(answers.get(i.conversation, ())) == k - 1
    ]
    if not todo:
        return None
    held = tuple(Response(NO_MODEL, i.id, "", history=answers[i.conversation or ""]) for i in todo)
    source = f"{turns.name}: the answers of {model.name} to turns 1-{k - 1}"
    inputs = Inputs(tuple(todo), (ResponseSet(NO_MODEL, source, held),), about_instances=True)
    name = round_name(turns.name, k, model, held)
    digest = _fingerprint(inputs, (model,))
    return replace(turns.first, judges=(model,), inputs=inputs, digest=digest, name=name)


def round_name(base: str, k: int, model: JudgeConfig, held: Sequence[Response]) -> str:
    """The run of round ``k`` for ``model``: the generation's name, the turn, the model
    and a digest of the model's answers the run holds (other answers, another run)."""
    data = [judge_identity(model), [[r.instance_id, list(r.history)] for r in held]]
    digest = hashlib.sha256(json.dumps(data, ensure_ascii=False).encode()).hexdigest()[:10]
    tail = f"-t{k}-{model.name.replace('/', '_')}-{digest}"
    if len(base) + len(tail) > MAX_RUN_NAME:
        tail = f"-t{k}-{digest}"
    return base[: MAX_RUN_NAME - len(tail)] + tail


@dataclass
class TurnsDone:
    """What a generation in rounds produced: its runs (round 1's first), each model's
    responses in the generation's instance order (a turn with the model's earlier
    answers), the turns not asked of each model (an earlier turn unanswered), the
    calls dispatched and those the answer cache answered, and what was left
    incomplete; ``blank``: of the turns not asked, those whose model answered the turn
    before with nothing (a conversation is not continued after an empty answer);
    ``steps``: how each run that ended complete ended."""

    runs: list[RunInfo] = field(default_factory=list)
    responses: dict[str, list[Generated]] = field(default_factory=dict)
    not_asked: dict[str, int] = field(default_factory=dict)
    blank: dict[str, int] = field(default_factory=dict)
    steps: list[StepResult] = field(default_factory=list)
    dispatched: int = 0
    cached: int = 0
    incomplete: list[str] = field(default_factory=list)

    @property
    def run(self) -> RunInfo:
        """Round 1's run: the generation's."""
        return self.runs[0]


def generate_turns(
    turns: TurnPlan,
    store: Store,
    dispatcher: Transport,
    settings: Settings,
    *,
    work: StepWork = steps.DEFAULT_WORK,
    verb: str = "generate",
) -> TurnsDone:
    """Do the generation round by round (the module docstring): round k starts once round
    k-1 is over, with the answers it produced. A round left with work failed or open does
    not stop the next (the turns it could not answer are not asked); StepIncomplete at the
    end when a turn failed, stayed open or was not asked, naming it all."""
    done = TurnsDone()
    by_id = {i.id: i for i in turns.instances}
    answered: dict[str, dict[tuple[str, int], Generated]] = {m.name: {} for m in turns.models}
    asked = dict.fromkeys(answered, 0)  # turns past the first asked of each model
    for k in range(1, turns.turns() + 1):
        plans = [turns.first]
        if k > 1:
            plans = []
            for m in turns.models:
                answers, blank = _answers(answered[m.name], k)
                if blank:
                    done.blank[m.name] = done.blank.get(m.name, 0) + sum(
                        i.conversation in blank for i in turns.later[k - 2]
                    )
                made = turn_plan(turns, k, m, answers)
                if made is not None:
                    plans.append(made)
            for p in plans:
                asked[p.judges[0].name] += len(p.inputs.instances)
        for run in _execute(plans, store, dispatcher, settings, work, verb, done):
            for model, items in generated(store, run).items():
                for g in items:
                    instance = by_id[g.instance_id]
                    key = (instance.conversation or instance.id, turn_of(instance))
                    answered.setdefault(model, {})[key] = replace(
                        g, conversation=instance.conversation, turn=instance.turn
                    )
    rank = {i.id: n for n, i in enumerate(turns.instances)}
    later = sum(len(t) for t in turns.later)
    for model, of_model in answered.items():
        own = {key: g.text for key, g in of_model.items()}
        done.responses[model] = sorted(
            (_with_history(g, own) for g in of_model.values()), key=lambda g: rank[g.instance_id]
        )
        if later - asked.get(model, 0):
            done.not_asked[model] = later - asked.get(model, 0)
    if done.not_asked:
        said = ", ".join(f"{m}: {n}" for m, n in done.not_asked.items())
        line = f"{verb}: turns not generated, an earlier turn of theirs having no answer ({said})"
        if done.blank:
            empty = ", ".join(f"{m}: {n}" for m, n in done.blank.items())
            line += (
                f"; of those, right after an empty answer, after which a conversation is "
                f"not continued ({empty})"
            )
        done.incomplete.append(line)
    if done.incomplete:
        raise TurnsIncomplete("; ".join(done.incomplete), done)
    return done


class TurnsIncomplete(StepIncomplete):
    """A generation in rounds left turns failed, open or not asked; ``done`` is what it
    produced."""

    def __init__(self, message: str, done: TurnsDone) -> None:
        super().__init__(message)
        self.done = done


def _answers(
    of_model: Mapping[tuple[str, int], Generated], k: int
) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """Conversation -> the model's answers to its turns 1..k-1, where it has them all
    and none is blank; and the conversations whose answer to turn k-1 is blank (one
    with an earlier blank answer was not asked turn k-1).

    An empty (or blank) answer ends the conversation: turn k would show the model an
    assistant turn with nothing in it, which Anthropic's API refuses outright, and no
    stand-in text would be the model's own; the turn is not asked and is said as not
    generated (docs/design/conversations.md)."""
    found: dict[str, tuple[str, ...]] = {}
    blank: set[str] = set()
    for conversation, turn in of_model:
        if turn != 1:
            continue
        texts = [of_model.get((conversation, j)) for j in range(1, k)]
        if not all(t is not None for t in texts):
            continue
        answers = tuple(t.text for t in texts if t is not None)
        if all(a.strip() for a in answers):
            found[conversation] = answers
        elif all(a.strip() for a in answers[:-1]):
            blank.add(conversation)
    return found, blank


def _with_history(g: Generated, own: Mapping[tuple[str, int], str]) -> Generated:
    """``g`` with the model's answers to the turns before it."""
    turn = g.turn or 1
    if g.conversation is None or turn == 1:
        return g
    return replace(g, history=tuple(own[(g.conversation, j)] for j in range(1, turn)))


def _execute(
    plans: Sequence[Plan],
    store: Store,
    dispatcher: Transport,
    settings: Settings,
    work: StepWork,
    verb: str,
    done: TurnsDone,
) -> list[RunInfo]:
    """One round's runs, each written (or found again), dispatched within what the runs
    before it left of ``work.max_cost`` and waited for, one after the other; their runs
    (a run left incomplete too: what it did answer is read)."""
    runs: list[RunInfo] = []
    for plan in plans:
        spent = sum(queries.status(store, r.id, r.name).cost for r in done.runs)
        left = None if work.max_cost is None else max(0.0, work.max_cost - spent)
        before = _cached(store, plan.name)
        try:
            result = steps.execute(
                plan, store, dispatcher, settings, verb=verb, work=replace(work, max_cost=left)
            )
            run, sent = result.run, result.dispatched
            done.steps.append(result)
        except StepIncomplete as exc:
            found = store.find_run(plan.name)
            if found is None:
                raise
            done.incomplete.append(str(exc))
            run, sent = found, 0
        done.runs.append(run)
        done.dispatched += sent
        done.cached += queries.cache_answered(store, run.id) - before
        runs.append(run)
    return runs


def _cached(store: Store, name: str) -> int:
    """The calls of the run ``name`` answered from the answer cache so far (0: no run)."""
    run = store.find_run(name)
    return 0 if run is None else queries.cache_answered(store, run.id)
