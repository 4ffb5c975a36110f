"""`eval`: from a list of models to a report in one resumable command.

generate (the models under test answer the instances) -> annotate (the instances that
lack FLASK's metadata) -> judge -> report, each step a run of its own kind through the
same workers. Every input is validated before the first write. Each step's run is named
after the evaluation and the step's fingerprint, so a second invocation with the same
inputs finds every run done and pays for nothing, and one with a model more makes new
runs whose other calls the answer cache answers: only the new model's calls are paid.

A conversation is generated turn by turn (app/turns.py: turn k asked with the model's own
answers to the turns before it), not annotated (judged on the criteria its record names,
else on every one), and judged turn by turn with the conversation up to it in view.

What lands in ``out_dir``: ``responses/<model>.jsonl`` (FLASK's model outputs, with
tokens, cost and cut-off marks; a conversation as FastChat's model answer),
``instances.jsonl`` (FLASK's schema, labels filled in; a conversation as one record)
and ``report.txt``: written also when the judging ends with work failed or pending (the
exit code is then 1), the report of what is judged so far, which says that it is
partial and how many judgments are pending.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from flask_eval.app import annotation, generation, jobs, pipeline, steps, turns
from flask_eval.app.report import build_report
from flask_eval.app.steps import Say, StepIncomplete, StepResult
from flask_eval.core.errors import InputError
from flask_eval.core.settings import Settings
from flask_eval.core.spec import NO_SAMPLING, Protocol, RunSpec, Sampling, SpecInputs, Workers
from flask_eval.core.types import Instance, JudgeConfig
from flask_eval.producer.dispatch import Transport
from flask_eval.producer.inputs import check_run_name
from flask_eval.report import render
from flask_eval.report.document import Report
from flask_eval.rubrics.coverage import rubric_levels
from flask_eval.rubrics.criteria import load_criteria
from flask_eval.rubrics.skills import load_default
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: the steps of an evaluation, in the order they run; each makes a run of its own
STEPS = ("generate", "annotate", "judge")
_STEP_RUN = re.compile(rf"(?P<name>.+)-(?P<step>{'|'.join(STEPS)})-[0-9a-f]{{10}}")


def step_run_name(name: str, step: str, fingerprint: str) -> str:
    """The run of an evaluation's step: named after the evaluation, the step and the
    step's fingerprint (the same inputs find the same run)."""
    return f"{name}-{step}-{fingerprint[:10]}"


def eval_step(run_name: str) -> tuple[str, str] | None:
    """(evaluation, step) of a run named by :func:`step_run_name`, else None."""
    found = _STEP_RUN.fullmatch(run_name)
    return (found["name"], found["step"]) if found else None


@dataclass(frozen=True)
class EvalPlan:
    """An evaluation, validated: the generation plan, the annotation plan (None when every
    instance carries its metadata), the judges and where the outputs go."""

    name: str
    generation: pipeline.Plan
    annotation: pipeline.Plan | None
    instances: tuple[Instance, ...]
    judges: tuple[JudgeConfig, ...]
    judges_specs: tuple[str, ...]
    judges_files: tuple[str, ...]
    criteria: str | None
    out_dir: Path
    mode: str

    @property
    def workers(self) -> tuple[JudgeConfig, ...]:
        """Every model the evaluation calls: the models under test, annotators, judges."""
        annotators = self.annotation.judges if self.annotation is not None else ()
        return (*self.generation.judges, *annotators, *self.judges)


@dataclass(frozen=True)
class EvalResult:
    steps: tuple[StepResult, ...]
    report: Report
    report_path: Path


@dataclass(frozen=True)
class EvalWorkers:
    """The workers of an evaluation: models under test, judges and annotators (``--model``
    specs and ``--models`` files, and so on)."""

    models: Sequence[str] = ()
    models_files: Sequence[str] = ()
    judges: Sequence[str] = ()
    judges_files: Sequence[str] = ()
    annotators: Sequence[str] = ()
    annotators_files: Sequence[str] = ()


def prepare_eval(
    source: jobs.InstanceSource,
    *,
    workers: EvalWorkers,
    criteria: str | None = None,
    out_dir: str = "flask-eval-out",
    name: str = "eval",
    mode: str = "instance",
    sampling: Sampling = NO_SAMPLING,
) -> EvalPlan:
    """Validate every input of an evaluation (writes nothing). The annotators default to
    the judges."""
    judges, judges_files = workers.judges, workers.judges_files
    annotators, annotators_files = workers.annotators, workers.annotators_files
    check_run_name(name)
    if not source.instances:
        raise InputError(
            "eval takes --instances (FLASK's instance schema); for BiGGen Bench, "
            "MT-Bench or a pairwise set, `generate` the responses, then `run` "
            "them"
        )
    if not judges and not judges_files:
        raise InputError("no judge given; add --judge provider/model or --judges FILE")
    judge_configs = pipeline.load_judges(judges, judges_files)
    criteria_set = load_criteria(criteria) if criteria else load_default()
    pipeline.check_protocols(judge_configs, mode, shown=rubric_levels(criteria_set))
    gen = jobs.prepare_generation(
        source, models=workers.models, models_files=workers.models_files, sampling=sampling
    )
    gen = replace(gen, name=step_run_name(name, "generate", gen.fingerprint))
    if not annotators and not annotators_files:
        annotators, annotators_files = judges, judges_files
    ann, instances = jobs.prepare_annotation(
        source,
        annotators=annotators,
        annotators_files=annotators_files,
        criteria=criteria,
        sampling=sampling,
    )
    if ann is not None:
        ann = replace(ann, name=step_run_name(name, "annotate", ann.fingerprint))
    return EvalPlan(
        name,
        gen,
        ann,
        tuple(instances),
        tuple(judge_configs),
        tuple(judges),
        tuple(judges_files),
        criteria,
        Path(out_dir),
        mode,
    )


def evaluate(
    plan: EvalPlan,
    store: Store,
    dispatcher: Transport,
    settings: Settings,
    *,
    max_cost: float | None = None,
    progress: bool = False,
    timeout: float | None = None,
    say: Say | None = None,
) -> EvalResult:
    """Run the evaluation's steps in order, each waiting for the last; StepIncomplete when
    a step leaves work failed or open (rerun to resume: done work is not paid twice).
    ``max_cost`` bounds the whole evaluation: each step's run gets what the steps before it
    left (their runs' spending, paid then or in an earlier invocation)."""
    tell = say or (lambda _line: None)
    done: list[StepResult] = []

    def step(p: pipeline.Plan, verb: str) -> StepResult:
        spent = sum(s.counts.cost for s in done)
        left = None if max_cost is None else max(0.0, max_cost - spent)
        work = steps.StepWork(left, progress=progress, timeout=timeout, say=say)
        result = steps.execute(p, store, dispatcher, settings, verb=verb, work=work)
        done.append(result)
        return result

    rounds = turns.split_turns(plan.generation)
    if rounds.later:  # conversations: turn by turn, each with the model's own answers
        work = steps.StepWork(max_cost, progress=progress, timeout=timeout, say=say)
        made = turns.generate_turns(rounds, store, dispatcher, settings, work=work)
        done += made.steps
        gen_run, responses = made.run, made.responses
    else:
        gen_run = step(plan.generation, "generate").run
        responses = generation.generated(store, gen_run)
    out = plan.out_dir
    # a conversation's answers as one record each: the judging step reads each turn's
    # response with the model's earlier answers (Response.history)
    written = generation.write_model_outputs(responses, gen_run, str(out / "responses"))
    for model, n in generation.cut_off_counts(responses).items():
        tell(
            f"generate: {n} responses of {model} were cut off by its token limit (kept, "
            "marked cut_off in its responses file, and judged as given)"
        )
    instances = list(plan.instances)
    if plan.annotation is not None:
        ann = step(plan.annotation, "annotate")
        combined = annotation.combined(store, ann.run)
        instances = annotation.apply(instances, combined)
        annotators = [j.name for j in plan.annotation.judges]
    else:
        combined, annotators = {}, []
    lacking = annotation.write_instances(
        instances,
        str(out / "instances.jsonl"),
        combined,
        annotators,
        custom=plan.criteria is not None,
    )
    if lacking:
        raise StepIncomplete(
            f"annotate: {lacking} instances still lack a facet of FLASK's "
            f"metadata; see {out / 'instances.jsonl'}"
        )
    judged = pipeline.prepare(
        RunSpec(
            workers=Workers(tuple(plan.judges_specs), tuple(plan.judges_files)),
            inputs=SpecInputs(
                instances=str(out / "instances.jsonl"),
                responses=tuple(f"{model}={path}" for model, path in written.items()),
                criteria=plan.criteria,
            ),
            protocol=Protocol(plan.mode),
        )
    )
    judged = replace(judged, name=step_run_name(plan.name, "judge", judged.fingerprint))
    path = out / "report.txt"
    try:
        result = step(judged, "judge")
    except StepIncomplete as incomplete:  # the report of what is judged so far, said partial
        run = store.find_run(judged.name)
        if run is None:
            raise
        _write_report(store, run, path)
        raise StepIncomplete(f"{incomplete}; the report so far -> {path}") from None
    return EvalResult(tuple(done), _write_report(store, result.run, path), path)


def _write_report(store: Store, run: RunInfo, path: Path) -> Report:
    """The judge run's report into ``path`` (its first lines say when it is partial)."""
    report = build_report(store, run, progress=False)
    path.write_text(render.to_table(report), encoding="utf-8")
    return report
