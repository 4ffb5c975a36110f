"""`flask-eval generate`, `annotate` and `eval`: the ends of an evaluation, through the
same workers as judging (app/jobs.py, app/evaluate.py).

The use cases and the store are imported where a command runs (start-up: `--help`
imports neither SQLAlchemy nor Celery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flask_eval.cli.common import (
    ENV_RUN,
    SHORT_HELP,
    EnvHelp,
    handle_errors,
)
from flask_eval.cli.dry_run import print_dry_run
from flask_eval.cli.job_options import (
    _execute,
    _plan_options,
    _sampling,
    _say,
    _source,
    _source_options,
    _work_options,
)
from flask_eval.cli.wait import check_waiting
from flask_eval.core import settings as settings_mod

if TYPE_CHECKING:
    from flask_eval.app.generation import Generated
    from flask_eval.app.turns import TurnPlan
    from flask_eval.storage.records import RunInfo
    from flask_eval.storage.store import Store


@click.command(cls=EnvHelp, env=ENV_RUN, short_help=SHORT_HELP["generate"])
@_source_options
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="[NAME=]SPEC",
    help="A model under test, provider/model[@BASE_URL]; repeatable.",
)
@click.option(
    "--models",
    "models_files",
    multiple=True,
    metavar="FILE",
    help="Models file (the judges file's format: spec, max_tokens, temperature, "
    "rpm/tpm, price, batch).",
)
@click.option(
    "--out",
    "out_dir",
    default="responses",
    show_default=True,
    metavar="DIR",
    help="Where each model's responses go (FLASK's model-output JSON Lines; a "
    "conversation as FastChat's model answer, its turns together).",
)
@_plan_options
@_work_options
@handle_errors
def generate(**kw: Any) -> None:
    """The models under test answer the instances: one response per instance and model,
    with its sampling settings, tokens and cost, written as FLASK's model outputs (a
    response cut off by its token limit is kept and marked `cut_off`). A conversation is
    answered turn by turn, each turn asked with the model's own earlier answers, and
    written as FastChat's model answer (its turns in `choices[0].turns`)."""
    from flask_eval.app import generation, jobs, turns

    settings = settings_mod.load()
    check_waiting(settings, False, kw["timeout"])
    source = _source(kw)
    plan = jobs.prepare_generation(
        source,
        models=kw["models"],
        models_files=kw["models_files"],
        run_name=kw["run_name"],
        sampling=_sampling(kw),
    )
    if kw["dry_run"]:
        print_dry_run(plan, settings)
        return

    rounds = turns.split_turns(plan)
    if rounds.later:  # conversations: turn by turn
        run, responses = _generate_turns(rounds, settings, kw)
    else:

        def read(store: Store, run: RunInfo) -> tuple[RunInfo, dict[str, list[Generated]]]:
            return run, generation.generated(store, run)

        run, responses = _execute(plan, settings, "generate", kw, read)
    written = generation.write_model_outputs(responses, run, kw["out_dir"])
    cut = generation.cut_off_counts(responses)
    for model, path in written.items():
        n = len(responses[model])
        note = f" ({cut[model]} cut off by the token limit)" if model in cut else ""
        click.echo(f"{model}: {n} responses{note} -> {path}")
    if source.biggen:  # also as BiGGen's own file: `run --biggen` judges it on its rubrics
        for model, path in generation.write_biggen_responses(
            responses, source.biggen, kw["out_dir"]
        ).items():
            click.echo(f"{model}: BiGGen Bench responses -> {path} (`run --biggen {path}`)")


def _generate_turns(
    rounds: TurnPlan, settings: settings_mod.Settings, kw: dict[str, Any]
) -> tuple[RunInfo, dict[str, list[Generated]]]:
    """A generation with conversations, round by round (app/turns.py): its first run and
    each model's responses; StepIncomplete (exit code 1) when a turn failed, stayed
    open or could not be asked."""
    from flask_eval.app import steps, turns
    from flask_eval.app.budget import check_budget
    from flask_eval.storage.store import Store

    check_budget(rounds.models, rounds.name, settings.database_url, kw["max_cost"])
    store = Store(settings.database_url)
    try:
        dispatcher = steps.dispatcher_for(settings, store, rounds.models, kw["in_flight"])
        work = steps.StepWork(
            kw["max_cost"], progress=not kw["quiet"], timeout=kw["timeout"], say=_say(kw["quiet"])
        )
        done = turns.generate_turns(rounds, store, dispatcher, settings, work=work)
    finally:
        store.close()
    return done.run, done.responses


@click.command(cls=EnvHelp, env=ENV_RUN, short_help=SHORT_HELP["annotate"])
@_source_options
@click.option(
    "--annotator",
    "annotators",
    multiple=True,
    metavar="[NAME=]SPEC",
    help="An annotator, provider/model[@BASE_URL]; repeatable.",
)
@click.option(
    "--annotators",
    "annotators_files",
    multiple=True,
    metavar="FILE",
    help="Annotators file (the judges file's format).",
)
@click.option(
    "--criteria",
    default=None,
    metavar="FILE",
    help="Custom criteria (YAML) as the skill labels instead of FLASK's 12 skills.",
)
@click.option(
    "--relabel",
    is_flag=True,
    help="Label every instance, also those that carry metadata (kept by default).",
)
@click.option(
    "--compare",
    "compare_path",
    default=None,
    metavar="LABELS",
    help="Agreement of the labels with a FLASK instance file's (e.g. FLASK's own).",
)
@click.option(
    "--out",
    "out_path",
    default="instances.jsonl",
    show_default=True,
    metavar="FILE",
    help="The instances with their labels (FLASK's schema, ready for `run`).",
)
@_plan_options
@_work_options
@handle_errors
def annotate(**kw: Any) -> None:
    """Annotators label instances with FLASK's metadata: the 3 most relevant skills in
    order, 1-2 domains and a difficulty 1-5, each with a rationale; several annotators
    are combined (ties stated). Instances that carry metadata keep it (--relabel)."""
    from flask_eval.app import annotation, jobs

    settings = settings_mod.load()
    check_waiting(settings, False, kw["timeout"])
    source = _source(kw)
    gold = None
    plan, instances = jobs.prepare_annotation(
        source,
        annotators=kw["annotators"],
        annotators_files=kw["annotators_files"],
        criteria=kw["criteria"],
        relabel=kw["relabel"],
        run_name=kw["run_name"],
        sampling=_sampling(kw),
    )
    if kw["compare_path"]:
        gold = annotation.gold_labels(kw["compare_path"], _skill_names(kw["criteria"]))
    if plan is None:
        click.echo(
            "every instance carries its metadata; nothing to label (--relabel labels them again)",
            err=True,
        )
        return
    if kw["dry_run"]:
        print_dry_run(plan, settings)
        return
    combined = _execute(plan, settings, "annotate", kw, annotation.combined)
    labelled = annotation.apply(instances, combined)
    names = [j.name for j in plan.judges]
    lacking = annotation.write_instances(
        labelled, kw["out_path"], combined, names, custom=kw["criteria"] is not None
    )
    ties = sum(bool(c.ties) for c in combined.values())
    click.echo(
        f"{len(combined)} instances labelled by {len(names)} annotators ({ties} with "
        f"a tie broken) -> {kw['out_path']}"
    )
    if lacking:
        click.echo(f"warning: {lacking} instances still lack a facet", err=True)
    if gold is not None:
        from flask_eval.report.annotation import agreement_table, compare

        predicted = {
            i.id: c.labels for i, c in ((i, combined.get(i.id)) for i in instances) if c is not None
        }
        click.echo(agreement_table(compare(predicted, gold)), nl=False)


def _skill_names(criteria: str | None) -> tuple[str, ...]:
    from flask_eval.rubrics.criteria import load_criteria
    from flask_eval.rubrics.skills import load_default

    return load_criteria(criteria).names if criteria else load_default().names


@click.command("eval", cls=EnvHelp, env=ENV_RUN, short_help=SHORT_HELP["eval"])
@click.option(
    "--instances",
    required=True,
    metavar="FILE",
    help="FLASK instances (JSON Lines); metadata optional (annotated when missing).",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N.")
@click.option("--sample", type=click.IntRange(min=1), default=None, help="A sample of N.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="[NAME=]SPEC",
    help="A model under test; repeatable.",
)
@click.option("--models", "models_files", multiple=True, metavar="FILE", help="Models file.")
@click.option("--judge", "judges", multiple=True, metavar="[NAME=]SPEC", help="A judge.")
@click.option("--judges", "judges_files", multiple=True, metavar="FILE", help="Judges file.")
@click.option(
    "--annotator",
    "annotators",
    multiple=True,
    metavar="[NAME=]SPEC",
    help="An annotator (default: the judges).",
)
@click.option(
    "--annotators", "annotators_files", multiple=True, metavar="FILE", help="Annotators file."
)
@click.option("--criteria", default=None, metavar="FILE", help="Custom criteria (YAML).")
@click.option(
    "--mode",
    type=click.Choice(["instance", "skill"]),
    default="instance",
    show_default=True,
    help="One judge call per instance or per skill.",
)
@click.option(
    "--name",
    default="eval",
    show_default=True,
    help="The evaluation's name: its runs are NAME-generate-..., NAME-judge-...",
)
@click.option(
    "--out",
    "out_dir",
    default="flask-eval-out",
    show_default=True,
    metavar="DIR",
    help="Responses, labelled instances and the report.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Estimate each step's tokens and cost (generation, annotation, judging) and exit: "
    "nothing is sent or written.",
)
@_work_options
@handle_errors
def evaluate(**kw: Any) -> None:
    """Generate -> annotate (where metadata is missing) -> judge -> report, for a list of
    models, in one resumable command: a rerun pays for nothing done, a model more
    pays only for its own calls."""
    from flask_eval.app import evaluate as use_case
    from flask_eval.app import steps
    from flask_eval.app.budget import check_budget
    from flask_eval.app.jobs import InstanceSource
    from flask_eval.storage.store import Store

    settings = settings_mod.load()
    check_waiting(settings, False, kw["timeout"])
    plan = use_case.prepare_eval(
        InstanceSource(kw["instances"]),
        workers=use_case.EvalWorkers(
            kw["models"],
            kw["models_files"],
            kw["judges"],
            kw["judges_files"],
            kw["annotators"],
            kw["annotators_files"],
        ),
        criteria=kw["criteria"],
        out_dir=kw["out_dir"],
        name=kw["name"],
        mode=kw["mode"],
        sampling=_sampling(kw),
    )
    if kw["dry_run"]:
        _eval_dry_run(plan, settings)
        return
    check_budget(plan.workers, plan.name, settings.database_url, kw["max_cost"])
    store = Store(settings.database_url)
    try:
        dispatcher = steps.dispatcher_for(settings, store, plan.workers, kw["in_flight"])
        result = use_case.evaluate(
            plan,
            store,
            dispatcher,
            settings,
            max_cost=kw["max_cost"],
            progress=not kw["quiet"],
            timeout=kw["timeout"],
            say=_say(kw["quiet"]),
        )
    finally:
        store.close()
    sent = sum(s.dispatched for s in result.steps)
    cached = sum(s.cached for s in result.steps)
    click.echo(result.report_path.read_text(encoding="utf-8"), nl=False)
    click.echo(
        f"eval {plan.name}: {len(result.steps)} steps done; {sent} calls dispatched "
        f"({cached} answered from the answer cache); report -> {result.report_path}",
        err=True,
    )


def _eval_dry_run(plan: Any, settings: settings_mod.Settings) -> None:
    """Print the evaluation's estimates; the answer cache is read when the database
    exists already."""
    from flask_eval.app.cache import existing_cache
    from flask_eval.app.eval_estimate import estimate_eval

    click.echo(f"dry run of eval {plan.name}: nothing is written or sent")
    cache = existing_cache(settings)
    try:
        for line in estimate_eval(plan, cache):
            click.echo(line)
    finally:
        if cache is not None:
            cache.store.close()


def register(main: click.Group) -> None:
    main.add_command(generate)
    main.add_command(annotate)
    main.add_command(evaluate)
