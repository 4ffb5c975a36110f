"""`judge-eval`: Prometheus 2's meta-evaluation of a judge in one command.

Each chosen set (producer/judge_eval_sets.py) is judged by a run of its own through the
usual pipeline (the ledger, the answer cache and the budget as for ``run``), at
prometheus-eval's settings (``eval/run_evaluate.py``): temperature 1.0 and at most 1024
completion tokens per call, the Prometheus protocol, absolute sets asked 3 times per
record (``--samples``), pairwise sets once per order of each comparison. Recorded answers
(``recorded:NAME``, producer/judge_eval_replay.py): ``recorded:auto-j-13b`` is a judge
replaying Auto-J-13B's recorded verdicts (the in-process simulator's replay table, keyed
on the responses shown) through a run of Auto-J's set like any judge's, in flask-eval's
pairwise protocol (Auto-J's answers have ties; Prometheus' relative grading has none);
``recorded:gpt-4``'s scores are read, not run. The figures are report/meta_eval.py's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from flask_eval.app import steps
from flask_eval.app.pipeline import prepare
from flask_eval.app.probe_card import card_inputs
from flask_eval.app.score_tables import run_table
from flask_eval.core.errors import InputError
from flask_eval.core.settings import Settings
from flask_eval.core.spec import RunSpec, Sampling, SpecInputs, Workers
from flask_eval.producer import judge_eval_replay as replay
from flask_eval.producer.judge_eval_sets import (
    ABSOLUTE,
    SETS,
    AbsoluteGold,
    LoadedSet,
    SetInfo,
    load_set,
)
from flask_eval.report import meta_eval
from flask_eval.report.meta_eval import SetResult
from flask_eval.report.pairwise import Comparison
from flask_eval.report.pairwise_labels import ALL_GROUPS, label_accuracy
from flask_eval.report.probe_card import card_of
from flask_eval.report.probe_types import Card
from flask_eval.rubrics.pairwise import FlaskEvalPairwiseProtocol
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.pairwise import replay_key
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage import analytics
from flask_eval.storage.store import Store

#: prometheus-eval's sampling settings (run_evaluate.py; its top_p 0.9 and repetition
#: penalty 1.03 are vLLM's, which the providers' APIs here do not all take)
TEMPERATURE = 1.0
MAX_TOKENS = 1024
ABSOLUTE_REPETITIONS = 3
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
#: the protocol a model judge is asked in
PROMETHEUS = "prometheus"
_KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class JudgeEvalConfig:
    """What to meta-evaluate: the judge (a model spec, ``NAME=SPEC`` or
    ``recorded:NAME``), the sets and where their files are, and how."""

    spec: str
    sets: tuple[str, ...] = ()
    data_dir: Path = Path(".")
    files: dict[str, str] = field(default_factory=dict)
    limit: int | None = None
    samples: int = ABSOLUTE_REPETITIONS
    replicates: int = meta_eval.DEFAULT_REPLICATES
    seed: int = meta_eval.DEFAULT_SEED
    in_flight: int = 64
    max_cost: float | None = None


def chosen_sets(config: JudgeEvalConfig) -> list[tuple[SetInfo, str]]:
    """(set, file) of each set to evaluate: ``--sets`` (each must have its file), else
    every known set whose file is there; ``--file NAME=PATH`` places a set's file."""
    unknown = sorted(set(config.sets) - set(SETS))
    unknown += sorted(k for k in config.files if k not in SETS and k not in replay.RECORDED_FILES)
    if unknown:
        raise InputError(
            f"unknown set {unknown[0]!r}; choose from: {', '.join(SETS)}"
            f" (and for --file also {', '.join(replay.RECORDED_FILES)})"
        )
    names = list(config.sets) or [
        n for n in SETS if n in config.files or (config.data_dir / SETS[n].file).is_file()
    ]
    if not names:
        raise InputError(
            f"no eval set found under {config.data_dir}; give --data DIR or --file NAME=PATH"
        )
    out = []
    for name in names:
        path = config.files.get(name) or str(config.data_dir / SETS[name].file)
        if not Path(path).is_file():
            raise InputError(f"set {name}: no file {path} (give --file {name}=PATH)")
        out.append((SETS[name], path))
    return out


def judge_name(spec: str) -> tuple[str, str]:
    """(name, spec) of ``NAME=SPEC`` or of a bare spec (named after its model)."""
    name, sep, rest = spec.partition("=")
    if sep and "/" not in name:
        return name, rest
    model = spec.partition("@")[0].rpartition("/")[2]
    return (_NAME.sub("-", model).strip("-") or "judge"), spec


def _judges_file(work_dir: Path, name: str, spec: str, protocol: str) -> str:
    path = work_dir / "judge.yaml"
    path.write_text(
        f"- name: {name}\n  spec: {spec}\n  protocol: {protocol}\n"
        f"  temperature: {TEMPERATURE}\n  max_tokens: {MAX_TOKENS}\n",
        encoding="utf-8",
    )
    return str(path)


def _gold(g: AbsoluteGold, reference: str) -> tuple[float, ...]:
    return g.gpt4 if reference == "gpt-4" else g.human


def _absolute_result(
    loaded: LoadedSet,
    judge: str,
    scores: dict[int, float],
    asked: int,
    config: JudgeEvalConfig,
) -> list[SetResult]:
    """One row against GPT-4 (and one against people, where the set has their scores),
    over the records of ``asked`` that have a score."""
    numbers = sorted(scores)
    notes = (
        (f"{asked - len(numbers)} records without a score left out",)
        if asked > len(numbers)
        else ()
    )
    rows = []
    for reference in ("gpt-4", "human"):
        golds = [_gold(loaded.records[n], reference) for n in numbers]
        if reference == "human" and not all(golds):
            continue
        metrics = meta_eval.correlation_metrics(
            [scores[n] for n in numbers],
            [sum(g) / len(g) for g in golds],
            replicates=config.replicates,
            seed=config.seed,
        )
        name = loaded.info.name if reference == "gpt-4" else f"{loaded.info.name} (human)"
        rows.append(SetResult(name, ABSOLUTE, judge, reference, metrics, notes))
    return rows


def _pairwise_result(loaded: LoadedSet, judge: str, records: Sequence[Comparison]) -> SetResult:
    judged = {c.instance_id for c in records}
    labels = [x for x in loaded.labels if x.instance_id in judged]
    found = [a for a in label_accuracy(records, labels) if a.group == ALL_GROUPS]
    notes: tuple[str, ...] = ()
    if not found:
        return SetResult(loaded.info.name, "pairwise", judge, "labels", {}, ("no verdicts",))
    acc = found[0]
    if acc.n_one_order:
        notes = (f"{acc.n_one_order} comparisons judged in one order only",)
    return SetResult(
        loaded.info.name, "pairwise", judge, "labels", meta_eval.accuracy_metrics(acc), notes
    )


def _run(
    loaded: LoadedSet,
    name: str,
    spec: str,
    config: JudgeEvalConfig,
    ctx: _Context,
    protocol: str = PROMETHEUS,
) -> list[SetResult]:
    absolute = loaded.info.kind == ABSOLUTE
    run_spec = RunSpec(
        workers=Workers(judges_files=(_judges_file(ctx.work_dir, name, spec, protocol),)),
        inputs=SpecInputs(prometheus_set=loaded.run_path)
        if absolute
        else SpecInputs(pairwise_set=loaded.run_path),
        sampling=Sampling(limit=config.limit, samples=config.samples if absolute else 1),
    )
    plan = prepare(run_spec)
    dispatcher = steps.dispatcher_for(ctx.settings, ctx.store, plan.judges, config.in_flight)
    work = steps.StepWork(max_cost=config.max_cost, say=ctx.say)
    run = steps.execute(plan, ctx.store, dispatcher, ctx.settings, verb="judge-eval", work=work).run
    ctx.say(f"judge-eval: {loaded.info.name}: run {run.name}")
    ctx.cards.append((loaded.info.name, card_of(card_inputs(ctx.store, run))))
    if not absolute:
        records = [Comparison(*row) for row in analytics.pairwise_rows(ctx.store, run.id).done]
        return [_pairwise_result(loaded, name, records)]
    table = run_table(ctx.store, run)
    column = table.judges.index(name)
    scores: dict[int, float] = {}
    asked = 0
    for m, i, s in zip(table.model, table.instance, table.score[:, column], strict=True):
        key = (table.models[int(m)], table.instances[int(i)])
        if key in loaded.keys:
            asked += 1
            if s == s:  # NaN: no score
                scores[loaded.keys[key]] = float(s)
    return _absolute_result(loaded, name, scores, asked, config)


@contextmanager
def _api_key() -> Iterator[None]:
    """OPENAI_API_KEY set for the calls to the local simulator when it is not set."""
    if os.environ.get(_KEY_ENV):
        yield
        return
    os.environ[_KEY_ENV] = "sk-replay-simulator"
    try:
        yield
    finally:
        os.environ.pop(_KEY_ENV, None)


def _autoj_table(loaded: LoadedSet, config: JudgeEvalConfig) -> dict[str, str]:
    """The simulator's replay table of Auto-J-13B's recorded verdicts on the set."""
    shown = replay.autoj_shown(
        loaded,
        replay.recorded_path(config.data_dir, config.files, replay.AUTOJ_OUTPUT),
        replay.recorded_path(config.data_dir, config.files, replay.AUTOJ_EXCHANGE),
    )
    return {replay_key(first, second): verdict for first, second, verdict in shown}


def _replay_autoj(
    loaded: LoadedSet, table: dict[str, str], config: JudgeEvalConfig, ctx: _Context
) -> list[SetResult]:
    """Auto-J's set judged by a run whose judge replays Auto-J-13B's recorded verdicts."""
    with running_simulator(SimConfig(replay=table)) as sim, _api_key():
        spec = f"openai/{replay.AUTOJ_13B}@{sim.openai_base_url}"
        return _run(loaded, replay.AUTOJ_13B, spec, config, ctx, FlaskEvalPairwiseProtocol.name)


@dataclass(frozen=True)
class _Context:
    settings: Settings
    store: Store
    work_dir: Path
    say: Callable[[str], None]
    #: each judged set's name and judge card (its run's: how the judge worked, and the
    #: order swap on pairwise sets)
    cards: list[tuple[str, Card]] = field(default_factory=list)


def judge_eval(
    config: JudgeEvalConfig,
    settings: Settings,
    open_store: Callable[[], Store],
    work_dir: Path,
    say: Callable[[str], None] | None = None,
    cards: list[tuple[str, Card]] | None = None,
) -> list[SetResult]:
    """Every chosen set checked first (InputError: nothing written, the store not even
    opened), then judged set by set: the table's rows (:func:`report.meta_eval.table_data`
    makes the table of them); each set's name and the judge card of its run are appended
    to ``cards`` (``recorded:gpt-4``'s scores are read: no run, no card)."""
    tell = say or (lambda _line: None)
    if config.limit is not None and config.limit < 1:
        raise InputError("--limit must be at least 1")
    recorded = replay.recorded_name(config.spec)
    loaded = [load_set(info, path, work_dir) for info, path in chosen_sets(config)]
    rows: list[SetResult] = []
    if recorded is not None:
        usable = [x for x in loaded if replay.replays(recorded, x)]
        for x in loaded:
            if x not in usable:
                tell(f"judge-eval: {x.info.name}: no recorded answers of {recorded}; skipped")
        if not usable:
            raise InputError(f"recorded:{recorded} has answers for none of the chosen sets")
        loaded = usable
        if recorded == replay.GPT_4:
            for x in loaded:
                scores = replay.gpt4_scores(x, config.samples, config.limit)
                rows += _absolute_result(x, recorded, scores, len(scores), config)
            return rows
    tables = [_autoj_table(x, config) if recorded else {} for x in loaded]
    name, spec = judge_name(config.spec)
    store = open_store()
    try:
        ctx = _Context(settings, store, work_dir, tell, cards if cards is not None else [])
        for x, table in zip(loaded, tables, strict=True):
            if recorded:
                rows += _replay_autoj(x, table, config, ctx)
            else:
                rows += _run(x, name, spec, config, ctx)
    finally:
        store.close()
    return rows
