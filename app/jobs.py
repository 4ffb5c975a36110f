"""Use cases of the kinds of work other than judgment (rubrics/kinds.py): plan a
generation run (the models under test answer the instances), an annotation run
(annotators label instances with FLASK's metadata) or a run of any other kind of the
registry (:func:`prepare_kind`), and read what such a run produced.

A plan is the `run` pipeline's ``Plan`` with its kind: ``pipeline.start`` writes it,
dispatches it within its budget and ``pipeline.wait`` waits for it, through the same
workers, leases, answer cache, limits, halts and batches as judging. Validation is
complete before the first write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flask_eval.app.pipeline import Plan, judge_identity, load_judges
from flask_eval.core.errors import InputError
from flask_eval.core.spec import NO_SAMPLING, Sampling
from flask_eval.core.types import Instance, JudgeConfig, ResponseSet
from flask_eval.producer.biggen import load_biggen
from flask_eval.producer.inputs import check_model_name, check_run_name, parse_responses_arg
from flask_eval.producer.jobs import job_inputs
from flask_eval.producer.loaders import load_instances
from flask_eval.producer.pairwise_sets import load_pairwise_set
from flask_eval.producer.parallel import load_all_responses
from flask_eval.producer.plan import Judging, fingerprint
from flask_eval.producer.prices import settle_prices
from flask_eval.producer.prometheus_sets import load_prometheus_set
from flask_eval.producer.select import select
from flask_eval.rubrics import codec, kinds
from flask_eval.rubrics.criteria import load_criteria
from flask_eval.rubrics.kind import RESPONSE
from flask_eval.rubrics.skills import load_default
from flask_eval.storage import queries
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: the mode of every generation and annotation run: one call per instance
MODE = "instance"


@dataclass(frozen=True)
class InstanceSource:
    """Where a run's instances come from: exactly one of the four sources `run` reads
    (their responses, if any, are not used: the models under test answer anew)."""

    instances: str | None = None
    biggen: str | None = None
    prometheus_set: str | None = None
    pairwise_set: str | None = None

    @property
    def path(self) -> str:
        given = [
            p for p in (self.instances, self.biggen, self.prometheus_set, self.pairwise_set) if p
        ]
        if len(given) != 1:
            what = f"got {len(given)}" if given else "got none"
            raise InputError(
                "give exactly one of --instances, --biggen, --prometheus-set and "
                f"--pairwise-set ({what})"
            )
        return given[0]


def load_instance_source(source: InstanceSource, criteria: str | None = None) -> list[Instance]:
    """The instances of ``source``, validated, in file order; metadata optional (an
    instance to answer or to label need not carry its skills, domains or difficulty;
    what it carries is checked, against ``criteria``'s names when given)."""
    path = source.path
    if source.instances:
        names = load_criteria(criteria).names if criteria else load_default().names
        # metadata optional: an instance without skills has none (not every criterion)
        return load_instances(path, names, metadata=False)
    if source.biggen:
        return load_biggen(path)[0]
    if source.prometheus_set:
        return list(load_prometheus_set(path).instances)
    return list(load_pairwise_set(path).instances)


def _plan(
    kind: str,
    instances: Sequence[Instance],
    workers: Sequence[JudgeConfig],
    path: str,
    run_name: str | None,
    prefix: str,
    options: dict[str, object] | None = None,
    responses: Sequence[ResponseSet] | None = None,
) -> Plan:
    made = kinds.kind(kind)
    criteria = made.criteria(options or {})
    inputs = job_inputs(instances, criteria, responses)
    # what the fingerprint reads of the criteria: as the kind declares it (runs planned
    # before keep their fingerprints, hence their names)
    skills = made.fingerprinted(options or {}) if made.fingerprinted else codec.to_data(criteria)
    identities = [judge_identity(w) for w in workers]
    how = Judging(MODE, skills, kind=kind, kind_options=options)
    digest = fingerprint(inputs, identities, how)
    name = run_name or f"{prefix}-{digest[:10]}"
    return Plan(
        inputs,
        criteria,
        tuple(workers),
        MODE,
        name,
        digest,
        path,
        kind=kind,
        kind_options=dict(options or {}),
    )


def prepare_generation(
    source: InstanceSource,
    *,
    models: Sequence[str] = (),
    models_files: Sequence[str] = (),
    run_name: str | None = None,
    sampling: Sampling = NO_SAMPLING,
) -> Plan:
    """The plan of a generation run: one response per (instance, model under test), the
    models given as `--model` specs or `--models` files (the judges file's format:
    spec, sampling settings, rpm/tpm, prices, batch). Writes nothing."""
    configs = _load_workers(models, models_files, kinds.kind(kinds.GENERATION).words.worker)
    if run_name is not None:
        check_run_name(run_name)
    instances = _selected(load_instance_source(source), sampling)
    return _plan(kinds.GENERATION, instances, configs, source.path, run_name, "gen")


def prepare_annotation(
    source: InstanceSource,
    *,
    annotators: Sequence[str] = (),
    annotators_files: Sequence[str] = (),
    criteria: str | None = None,
    relabel: bool = False,
    run_name: str | None = None,
    sampling: Sampling = NO_SAMPLING,
) -> tuple[Plan | None, list[Instance]]:
    """The plan of an annotation run over the instances that lack metadata (all with
    ``relabel``; a conversation's turns never), and every instance of the source (those
    not annotated keep theirs); the plan is None when none is to be labelled.
    ``criteria``: a criteria file whose criteria are the skill labels instead of FLASK's
    12 skills. Writes nothing."""
    from flask_eval.rubrics.annotation import flask_label_space, label_space_of

    configs = _load_workers(annotators, annotators_files, kinds.kind(kinds.ANNOTATION).words.worker)
    if run_name is not None:
        check_run_name(run_name)
    instances = _selected(load_instance_source(source, criteria), sampling)
    space = label_space_of(load_criteria(criteria)) if criteria else flask_label_space()
    # a conversation's turns are not labelled: one skill set per turn has no place in a
    # conversation's record, and one without skills is judged on every criterion
    todo = [i for i in instances if (relabel or not labelled(i)) and i.conversation is None]
    if not todo:
        return None, instances
    plan = _plan(
        kinds.ANNOTATION, todo, configs, source.path, run_name, "ann", {"labels": space.to_data()}
    )
    return plan, instances


def prepare_kind(
    name: str,
    source: InstanceSource,
    *,
    workers: Sequence[str] = (),
    workers_files: Sequence[str] = (),
    responses: Sequence[str] = (),
    run_name: str | None = None,
    sampling: Sampling = NO_SAMPLING,
) -> Plan:
    """The plan of a run of the kind ``name`` (``rubrics.kinds``), for the command the
    registry makes of it: one row per instance (or per response given as ``NAME=PATH``
    responses files, for a kind whose rows are about responses) and worker, the
    workers named in the kind's words. Writes nothing."""
    kind = kinds.kind(name)
    configs = _load_workers(workers, workers_files, kind.words.worker)
    if run_name is not None:
        check_run_name(run_name)
    instances = _selected(load_instance_source(source), sampling)
    sets = None
    if kind.subject == RESPONSE:
        if not responses:
            raise InputError(f"a {name} run is about responses; add --responses NAME=PATH")
        pairs = [parse_responses_arg(arg) for arg in responses]
        for model, _ in pairs:
            check_model_name(model)
        sets = load_all_responses(pairs, {i.id: i.id for i in instances})
        answered = {iid for s in sets for iid in s.instance_ids()}
        instances = [i for i in instances if i.id in answered]
    return _plan(name, instances, configs, source.path, run_name, name[:4], responses=sets)


def _load_workers(specs: Sequence[str], files: Sequence[str], noun: str) -> list[JudgeConfig]:
    """The models doing a kind's work, from flags and files in the judges file's format;
    what is said of a bad one names it as what it is here (a model, an annotator)."""
    if not specs and not files:
        raise InputError(f"no {noun} given; add --{noun} provider/model or --{noun}s FILE")
    try:
        return settle_prices(load_judges(specs, files))
    except InputError as exc:
        message = (
            exc.message.replace("judge name", f"{noun} name")
            .replace("--judge NAME=SPEC", f"--{noun} NAME=SPEC")
            .replace("the judges file", f"the {noun}s file")
        )
        raise InputError(message, exc.path, exc.line) from None


def labelled(instance: Instance) -> bool:
    """Whether ``instance`` carries all of FLASK's metadata (skills, a domain and a
    difficulty): such an instance keeps it unless asked to be labelled again."""
    return bool(instance.skills) and bool(instance.domains) and instance.difficulty is not None


def _selected(instances: list[Instance], sampling: Sampling) -> list[Instance]:
    from flask_eval.producer.inputs import Inputs

    s = sampling
    return list(select(Inputs(tuple(instances), ()), s.limit, s.sample, s.seed).instances)


def kind_of(run: RunInfo) -> str:
    """The kind of work of a stored run (judgment for runs made before kinds existed)."""
    return run.config.kind


def check_kind(run: RunInfo, wanted: str) -> None:
    """InputError unless ``run`` does ``wanted`` work (a report of a generation run, the
    responses of a judging run, ...)."""
    have = kind_of(run)
    if have != wanted:
        raise InputError(f"run {run.name} is a {have} run, not a {wanted} run")


def done_values(store: Store, run: RunInfo) -> list[queries.DoneValue]:
    """What a generation or annotation run read, row by row."""
    return queries.done_values(store, run.id)
