"""Where a run's instances and responses come from: FLASK's JSON Lines files, a BiGGen
Bench file (instances with their own rubrics, and the responses it carries), a Multifaceted
Bench file (instances with several rubrics each; responses it carries or --responses), or one of
Prometheus's eval sets (MT-Bench, Vicuna Bench: filled prompts with GPT-4's scores); and
the criteria they are judged on (FLASK's skills, a rubric file, or a custom-criteria
file). Validation only: nothing is written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from flask_eval.core.errors import InputError
from flask_eval.producer.biggen import load_biggen
from flask_eval.producer.context import INSTANCE_ABILITY
from flask_eval.producer.importing import INSTANCE_CRITERION
from flask_eval.producer.inputs import (
    Inputs,
    check_model_name,
    check_response_names,
    load_inputs,
)
from flask_eval.producer.multifaceted import load_multifaceted
from flask_eval.producer.pairwise_sets import PairLabel, load_pairwise_set
from flask_eval.producer.parallel import load_all_responses
from flask_eval.producer.prometheus_sets import load_prometheus_set
from flask_eval.rubrics.criteria import load_criteria
from flask_eval.rubrics.pairwise import PAIRWISE_OVERALL, overall_criterion
from flask_eval.rubrics.skills import Skill, SkillSet, load, load_default


@dataclass(frozen=True)
class Sources:
    """What the user named on the command line (exactly one instance source)."""

    instances: str | None = None
    responses: Sequence[tuple[str, str]] = ()
    biggen: str | None = None
    prometheus_set: str | None = None
    rubrics: str | None = None
    criteria: str | None = None
    pairwise_set: str | None = None
    #: keep BiGGen's llm_judge instances (left out by default, see report.biggen)
    biggen_llm_judge: bool = False
    #: ``--model``: the model a --biggen or --prometheus-set file carries the responses
    #: of, or the two models of a --pairwise-set file (first, second)
    models: tuple[str, ...] = ()
    #: whether judges see reference answers (False: instances need none)
    reference: bool = True
    #: a Multifaceted Bench file (Janus): instances with several rubrics each
    multifaceted: str | None = None

    @property
    def path(self) -> str:
        return (
            self.instances
            or self.biggen
            or self.multifaceted
            or self.prometheus_set
            or self.pairwise_set
            or ""
        )


@dataclass(frozen=True)
class Loaded:
    """A run's validated inputs, its criteria, and the gold labels of a pairwise set."""

    inputs: Inputs
    skillset: SkillSet
    labels: tuple[PairLabel, ...] = ()


def instance_rubric_skillset(names: Sequence[str] = (INSTANCE_CRITERION,)) -> SkillSet:
    """The criteria of sets whose instances each carry their own rubrics (one named
    :data:`INSTANCE_CRITERION`, or ``names``): their texts and score descriptions come
    from each instance (``producer.context.RunContext.criterion``)."""
    return SkillSet(
        tuple(
            Skill(
                name=name,
                ability=INSTANCE_ABILITY,
                criterion="the instance's own rubric",
                rubric={n: f"score {n} of the instance's own rubric" for n in range(1, 6)},
                allow_na=False,
            )
            for name in names
        )
    )


def load_sources(sources: Sources) -> Loaded:
    """The validated inputs and the criteria of a run; InputError naming the problem."""
    given = [
        flag
        for flag, value in (
            ("--instances", sources.instances),
            ("--biggen", sources.biggen),
            ("--multifaceted", sources.multifaceted),
            ("--prometheus-set", sources.prometheus_set),
            ("--pairwise-set", sources.pairwise_set),
        )
        if value
    ]
    if len(given) != 1:
        what = f"got {' and '.join(given)}" if given else "got none"
        raise InputError(
            "give exactly one of --instances, --biggen, --multifaceted, --prometheus-set and "
            "--pairwise-set "
            f"({what})"
        )
    if sources.criteria and sources.rubrics:
        raise InputError("--criteria and --rubrics are exclusive; give one of them")
    if sources.biggen_llm_judge and not sources.biggen:
        raise InputError("--biggen-llm-judge goes with --biggen")
    _check_models(given[0], sources.models)
    custom = load_criteria(sources.criteria) if sources.criteria else None
    if sources.instances:
        skillset = custom or (load(sources.rubrics) if sources.rubrics else load_default())
        inputs = load_inputs(
            sources.instances,
            sources.responses,
            skillset.names,
            custom=custom is not None,
            reference=sources.reference,
        )
        return Loaded(inputs, skillset)
    flag = given[0]
    if sources.multifaceted:
        _refuse_rubrics(flag, sources.rubrics)
        return _custom(_multifaceted(sources), custom)
    if sources.responses:
        raise InputError(f"{flag} FILE carries its own responses; --responses is not used with it")
    _refuse_rubrics(flag, sources.rubrics)
    labels: tuple[PairLabel, ...] = ()
    own = instance_rubric_skillset()
    model = sources.models[0] if sources.models else None
    if sources.biggen:
        instances, sets = load_biggen(sources.biggen, model, llm_judge=sources.biggen_llm_judge)
        inputs = Inputs(tuple(instances), tuple(sets))
    elif sources.pairwise_set:
        pairs = load_pairwise_set(sources.pairwise_set, sources.models or None)
        inputs, labels = Inputs(pairs.instances, pairs.response_sets), pairs.labels
        if all(i.skills == (PAIRWISE_OVERALL,) for i in pairs.instances):
            own = SkillSet((overall_criterion(),))  # Auto-J: one overall preference
    else:
        assert sources.prometheus_set is not None
        loaded = load_prometheus_set(sources.prometheus_set, model)
        inputs = Inputs(loaded.instances, loaded.response_sets)
    if not inputs.response_sets:
        raise InputError(f"{flag} {sources.path}: the file carries no responses to judge")
    return _custom(Loaded(inputs, own, labels), custom)


def _refuse_rubrics(flag: str, rubrics: str | None) -> None:
    if rubrics:
        raise InputError(
            f"{flag} FILE carries a rubric per instance; use --criteria to judge "
            "its instances on criteria of your own instead"
        )


def _custom(loaded: Loaded, custom: SkillSet | None) -> Loaded:
    """``loaded`` as it is, or with ``custom`` criteria in place of the instances' own
    rubrics (every criterion on every instance)."""
    if custom is None:
        return loaded
    inputs = loaded.inputs
    judged = tuple(replace(i, skills=custom.names, rubrics={}) for i in inputs.instances)
    return Loaded(Inputs(judged, inputs.response_sets), custom, loaded.labels)


def _multifaceted(sources: Sources) -> Loaded:
    """A Multifaceted Bench file's instances, judged on their rubrics, with the responses
    it carries and those of ``--responses`` (question_id: the instance id)."""
    assert sources.multifaceted is not None
    model = sources.models[0] if sources.models else None
    instances, carried = load_multifaceted(sources.multifaceted, model, reference=sources.reference)
    check_response_names([*((s.model, s.path) for s in carried), *sources.responses])
    ids = {i.id: i.id for i in instances}
    named = load_all_responses(sources.responses, ids) if sources.responses else ()
    sets = (*carried, *named)
    if not sets:
        raise InputError(
            f"--multifaceted {sources.multifaceted}: the file carries no responses; "
            "add --responses NAME=PATH (JSON Lines: question_id, text)"
        )
    names = dict.fromkeys(name for i in instances for name in i.skills)
    return Loaded(Inputs(tuple(instances), sets), instance_rubric_skillset(tuple(names)))


#: how many models --model names, per source
_MODELS = {"--biggen": 1, "--multifaceted": 1, "--prometheus-set": 1, "--pairwise-set": 2}


def _check_models(flag: str, models: Sequence[str]) -> None:
    """``--model`` names the models of a file that carries its responses: one for a
    BiGGen or Multifaceted Bench file or a Prometheus set, two (first, second) for a
    pairwise set."""
    if not models:
        return
    wanted = _MODELS.get(flag)
    if wanted is None:
        raise InputError(
            "--model names the model of a --biggen, --multifaceted, --prometheus-set or "
            f"--pairwise-set file; "
            f"with {flag}, name each model in --responses NAME=PATH"
        )
    if len(models) != wanted:
        what = "one model (all its responses)" if wanted == 1 else "two models, first and second"
        raise InputError(f"{flag} takes --model for {what}, got {len(models)}")
    for name in models:
        try:
            check_model_name(name)
        except InputError as exc:
            raise InputError(f"--model: {exc}") from None
