"""The `run` pipeline: validate everything, write the run and its ledger, dispatch, wait.

Validation is complete before the first write: bad input leaves the database and the
queue untouched.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from tqdm import tqdm

from flask_eval.app.budget import meter, prices_after, set_max_cost, update_judges
from flask_eval.app.cache import LedgerCache
from flask_eval.app.people import plan_people
from flask_eval.app.plan import Plan as Plan  # re-exported: pipeline.Plan
from flask_eval.app.protocol_checks import as_judges
from flask_eval.app.protocol_checks import check_protocols as check_protocols  # re-exported
from flask_eval.app.run_inputs import judged_inputs, load_run_inputs
from flask_eval.app.wait_loop import wait as wait  # re-exported: pipeline.wait
from flask_eval.app.waiting import (
    await_leases,
)
from flask_eval.core.errors import FailureReason, InputError
from flask_eval.core.people import HUMAN_FIRST, Panel, People
from flask_eval.core.settings import Settings
from flask_eval.core.spec import RunSpec
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.dispatch import Dispatched, Transport, dispatch_open, metered
from flask_eval.producer.estimate import (
    CallCosts,
    Estimator,
)
from flask_eval.producer.inputs import Inputs, check_run_name
from flask_eval.producer.judge_args import combine, combine_workers
from flask_eval.producer.open_sample import sample_open_calls
from flask_eval.producer.pairs import (
    check_pairs_answered,
    pairwise_config,
    parse_pairwise_arg,
    plan_pairs,
)
from flask_eval.producer.plan import (
    MODES,
    Judging,
    default_run_name,
    fingerprint,
    run_config,
)
from flask_eval.producer.prices import check_budget_prices, settle_prices
from flask_eval.producer.probe_plan import parse_families, plan_probes
from flask_eval.producer.samples import sampled
from flask_eval.producer.select import select
from flask_eval.rubrics import codec
from flask_eval.rubrics.coverage import rubric_levels
from flask_eval.rubrics.pairwise import PAIRWISE_OVERALL, overall_criterion
from flask_eval.rubrics.skills import SkillSet
from flask_eval.storage import queries
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.workers.batching import check_batch_spec
from flask_eval.workers.broker import transport_of
from flask_eval.workers.inprocess import InProcessTransport
from flask_eval.workers.judge import create_judge, spec_of
from flask_eval.workers.runner import executor_config


@dataclass(frozen=True)
class Started:
    run: RunInfo
    created: bool
    dispatched: Dispatched
    changed: list[str] = field(default_factory=list)  # judge settings updated on the run

    @property
    def held_back(self) -> int:
        return self.dispatched.held_back


def judge_identity(j: JudgeConfig) -> str:
    """What of a judge decides its answers: name, spec and non-default sampling settings
    (defaults are left out, so runs made before these settings existed keep their
    fingerprint)."""
    settings = (
        ("max_tokens", j.max_tokens),
        ("temperature", j.temperature),
        ("protocol", j.protocol),
        ("structured", j.structured or None),
        ("sample", j.sample if (j.sample or 1) > 1 else None),
    )
    extra = "".join(f"|{k}={v}" for k, v in settings if v is not None)
    return f"{j.name}={j.spec}{extra}"


def prepare(spec: RunSpec) -> Plan:
    """Validate all inputs and flags of ``spec``; raises InputError/ConfigError; writes
    nothing. ``spec.inputs.models`` names the model(s) of a file that carries its
    responses (``--model``); ``spec.sampling.samples`` asks each judge that many times
    per item (:func:`sampled`)."""
    src, sampling, mode, run_name = spec.inputs, spec.sampling, spec.protocol.mode, spec.name
    judges, judges_files = spec.workers.judges, spec.workers.judges_files
    pairwise_set, reference = src.pairwise_set, src.reference
    pw = spec.pairwise
    pairwise, swap, per_criterion = pw.against, pw.swap, pw.per_criterion
    samples = sampling.samples
    if mode not in MODES:
        raise InputError(f"invalid --mode {mode!r}; choose one of: {', '.join(MODES)}")
    if not judges and not judges_files:
        raise InputError(
            "no judge given; add --judge provider/model (e.g. --judge openai/gpt-5.4-mini) "
            "or --judges FILE"
        )
    machines, panels = combine_workers(judges, judges_files, spec_of, check_batch_spec)
    configs = sampled(settle_prices(machines), samples)
    people = _people(panels, spec)
    if run_name is not None:
        check_run_name(run_name)
    loaded, where = load_run_inputs(spec)
    skillset = loaded.skillset
    inputs = select(loaded.inputs, sampling.limit, sampling.sample, sampling.seed)
    if pairwise_set and pairwise is None:
        pairwise = "all"  # the set's two responses, in both orders
    kept = {i.id for i in inputs.instances}
    labels = [lab for lab in loaded.labels if lab.instance_id in kept]
    plan_config: dict[str, Any] | None = None
    pairs: tuple[tuple[str, str], ...] | None = None  # ordered (shown first, second)
    if pairwise is not None:
        kind, baseline = parse_pairwise_arg(pairwise)
        models = [rs.model for rs in inputs.response_sets]
        pairs = tuple(plan_pairs(models, kind, baseline, swap))
        check_pairs_answered(inputs, pairs)
        plan_config = pairwise_config(kind, baseline, swap)
        if not per_criterion and not pairwise_set:  # one overall preference per comparison
            skillset = SkillSet((overall_criterion(),))
            overall = (PAIRWISE_OVERALL,)
            inputs = Inputs(
                tuple(replace(i, skills=overall, rubrics={}) for i in inputs.instances),
                inputs.response_sets,
            )
    elif not swap or per_criterion:
        raise InputError("--no-swap and --per-criterion go with --pairwise")
    if samples > 1 and pairwise is not None:
        raise InputError("--samples goes with absolute grading, not with --pairwise")
    inputs, skillset = judged_inputs(
        inputs, skillset, configs, spec, pairwise=pairs is not None, path=where
    )
    check_protocols(
        [*configs, *as_judges(people)],
        mode,
        pairwise=plan_config is not None,
        shown=rubric_levels(skillset, inputs.instances),
    )
    probing: dict[str, Any] | None = None
    if spec.probing.probes or spec.probing.families:
        if people is not None:
            raise InputError(
                "--probes with people (human/... entries): people rate a run's own "
                "responses, not a probe's twins; probe the judges in a run of their own"
            )
        inputs, pairs, probing = _probed(spec, inputs, pairs, machines)
    skills = codec.to_data(skillset)
    identities = [judge_identity(j) for j in configs]
    # the fingerprint reads every response again: computed when asked (a dry run named
    # with --run never asks), of the configuration as it is now
    how = Judging(
        mode, skills, reference, None if plan_config is None else dict(plan_config), probes=probing
    )
    later = partial(fingerprint, inputs, identities, replace(how, pairs=pairs or ()))
    digest: str | Callable[[], str] = later
    name = run_name
    if name is None:
        digest = later()
        name = default_run_name(digest)
    if plan_config is not None and labels:
        plan_config["labels"] = [
            [x.instance_id, x.first_model, x.second_model, x.label] for x in labels
        ]
    return Plan(
        inputs,
        skillset,
        tuple(configs),
        mode,
        name,
        digest,
        where,
        reference,
        plan_config,
        pairs,
        samples=samples,
        people=people,
        probes=probing,
    )


def _probed(
    spec: RunSpec,
    inputs: Inputs,
    pairs: tuple[tuple[str, str], ...] | None,
    judges: Sequence[JudgeConfig],
) -> tuple[Inputs, tuple[tuple[str, str], ...] | None, dict[str, Any]]:
    """The inputs and pairs of a probe run (``producer.probe_plan``), and what its stored
    configuration says of its probes; InputError for a probe that cannot apply."""
    if not spec.probing.probes:
        raise InputError("--family goes with --probes (the self-preference probe)")
    names = [rs.model for rs in inputs.response_sets] + [j.name for j in judges]
    families = parse_families(spec.probing.families, names)
    planned = plan_probes(inputs, pairs, judges, spec.probing.probes, families, spec.protocol.mode)
    return planned.inputs, planned.pairs, planned.config


def _people(panels: Sequence[Panel], spec: RunSpec) -> People | None:
    """The run's people (None: no ``human/...`` entry); InputError for an order of their
    queues that is not one, or one given without people."""
    order = spec.workers.human_first
    if order not in HUMAN_FIRST:
        raise InputError(
            f"invalid --human-first {order!r}; choose one of: {', '.join(HUMAN_FIRST)}"
        )
    if not panels:
        if order != HUMAN_FIRST[0]:
            raise InputError(
                "--human-first goes with people: a judges file entry `spec: human/NAME`"
            )
        return None
    return People(tuple(panels), order, spec.sampling.seed)


def load_judges(specs: Sequence[str], files: Sequence[str]) -> list[JudgeConfig]:
    """Judges from `--judge` flags and `--judges` files, each spec checked by its provider."""
    return combine(specs, files, spec_of, check_batch_spec)


def check_judges_locally(judges: Sequence[JudgeConfig]) -> None:
    """In-process runs call the judges from here: their keys must be set here."""
    for judge in judges:
        create_judge(judge.spec)  # raises ConfigError naming the missing variable


def preflight(settings: Settings) -> None:
    """Before anything is written: the broker, when one is configured, must answer."""
    if settings.broker_url:
        transport_of(settings).check()


def _to_stderr(line: str) -> None:
    tqdm.write(line, file=sys.stderr)


def make_dispatcher(settings: Settings, store: Store, in_flight: int) -> Transport:
    if settings.broker_url:
        return transport_of(settings)
    return InProcessTransport(store, executor_config(settings, in_flight))


def reopen(store: Store, run: RunInfo, reasons: Sequence[str] | None = None) -> int:
    """Before dispatching again: clear the run's judge halts and send the judgments they
    stopped back to pending, with the failures of ``reasons`` (all of them when empty
    is passed as None with ``retry_failed``)."""
    store.clear_halts(run.id)
    reset = store.reset_failed(run.id, [FailureReason.HALTED.value])
    if reasons is not None:
        reset += store.reset_failed(run.id, list(reasons) or None)
    return reset


def start(
    plan: Plan,
    store: Store,
    dispatcher: Transport,
    settings: Settings,
    *,
    retry_failed: bool = False,
    max_cost: float | None = None,
    say: Callable[[str], None] | None = None,
) -> Started:
    """Write the run (or find it again) and dispatch what is not done yet, within the
    run's cost budget; ``say`` hears what takes time before the first answer."""
    tell = say or (lambda _line: None)
    dispatcher.check()
    existing = store.find_run(plan.name)
    budget = max_cost if max_cost is not None or existing is None else existing.config.max_cost
    check_budget_prices(prices_after(plan.judges, existing), budget)
    if existing is None:
        tell(f"run {plan.name}: writing {plan.size():,} judgments to the ledger")
    run, created = store.create_run(
        name=plan.name,
        fingerprint=plan.fingerprint_soon(),
        mode=plan.mode,
        config=run_config(
            plan.inputs, plan.judges, plan.judging(), plan.instances_path
        ).with_people(plan.people),
        instances=plan.inputs.instances,
        response_sets=plan.inputs.response_sets,
        judges=[j.name for j in plan.judges],
        pairs=plan.pairs,
    )
    changed: list[str] = []
    if not created:
        run, changed = update_judges(store, run, plan.judges)
        if plan.people is not None and run.config.people != plan.people:
            people = plan.people
            run = store.update_config(run.id, lambda c: c.with_people(people))
            changed.append("people: " + ", ".join(people.judges))
        reopen(store, run, () if retry_failed else None)
        if dispatcher.queue is None:  # judged here: not the rows a killed process holds
            await_leases(store, run, say or _to_stderr)
    if plan.people is not None:
        planned = plan_people(store, run, plan, plan.people)
        if planned:
            who = ", ".join(plan.people.judges)
            tell(f"run {plan.name}: {planned:,} items planned for people ({who})")
    # a ledger just written in one unbroken range of ids: its calls come from the plan
    fresh = plan.new_calls(run.ledger) if created and run.ledger is not None else None
    run = set_max_cost(store, run, max_cost)
    estimator: CallCosts | None = None  # built only to meter
    if metered(run):
        tell(
            f"run {plan.name}: estimating the cost of its open calls (the answer cache's are free)"
        )
        cache = LedgerCache(store, settings.judge_timeout)
        estimator = meter(plan.size(), lambda: plan.estimator(cache), plan.sampled, cache)
    result = dispatch_open(
        store, run, dispatcher, settings.calls_per_message, estimator, calls=fresh
    )
    return Started(run, created, result, changed)


def resume(
    store: Store,
    run: RunInfo,
    dispatcher: Transport,
    settings: Settings,
    *,
    reasons: Sequence[str] = (),
    max_cost: float | None = None,
    judges: Sequence[JudgeConfig] = (),
    say: Callable[[str], None] | None = None,
) -> tuple[int, Dispatched, list[str]]:
    """Send again what is pending, stale or failed (``reasons``: only those failures),
    honouring the run's stored budget; returns (rows reset, dispatch, changes). Judged
    here, it first waits for the rows another process holds (``say`` says so)."""
    unknown = sorted({j.name for j in judges} - set(run.config.judge_names))
    if unknown:
        raise InputError(f"--judges names judges the run does not have: {', '.join(unknown)}")
    given = {j.name: j for j in judges}
    held = [given.get(j.name) or j for j in run.config.judges]
    budget = max_cost if max_cost is not None else run.config.max_cost
    check_budget_prices(prices_after(held, run), budget)
    changed: list[str] = []
    if judges:
        run, changed = update_judges(store, run, judges)
    run = set_max_cost(store, run, max_cost)
    reset = reopen(store, run, reasons)
    if dispatcher.queue is None:  # judged here: not the rows a killed process holds
        await_leases(store, run, say or _to_stderr)
    estimator: CallCosts | None = None  # built only to meter
    if metered(run):
        cache = LedgerCache(store, settings.judge_timeout)
        estimator = meter(
            queries.status(store, run.id, run.name).pending,
            lambda: Estimator.of_run(store, run, cache),
            lambda: sample_open_calls(store, run),
            cache,
        )
    sent = dispatch_open(store, run, dispatcher, settings.calls_per_message, estimator)
    return reset, sent, changed
