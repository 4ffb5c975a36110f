"""Where a run's instances and responses come from: FLASK's JSON Lines files, a BiGGen
Bench file (instances with their own rubrics, and the responses it carries), or one of
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
from flask_eval.producer.inputs import Inputs, check_model_name, load_inputs
from flask_eval.producer.pairwise_sets import PairLabel, load_pairwise_set
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

    @property
    def path(self) -> str:
        return self.instances or self.biggen or self.prometheus_set or self.pairwise_set or ""


@dataclass(frozen=True)
class Loaded:
    """A run's validated inputs, its criteria, and the gold labels of a pairwise set."""

    inputs: Inputs
    skillset: SkillSet
    labels: tuple[PairLabel, ...] = ()


def instance_rubric_skillset() -> SkillSet:
    """The one criterion of sets whose instances each carry their own rubric: its text and
    score descriptions come from each instance (``producer.context.RunContext.criterion``)."""
    return SkillSet(
        (
            Skill(
                name=INSTANCE_CRITERION,
                ability=INSTANCE_ABILITY,
                criterion="the instance's own rubric",
                rubric={n: f"score {n} of the instance's own rubric" for n in range(1, 6)},
                allow_na=False,
            ),
        )
    )


def load_sources(sources: Sources) -> Loaded:
    """The validated inputs and the criteria of a run; InputError naming the problem."""
    given = [
        flag
        for flag, value in (
            ("--instances", sources.instances),
            ("--biggen", sources.biggen),
            ("--prometheus-set", sources.prometheus_set),
            ("--pairwise-set", sources.pairwise_set),
        )
        if value
    ]
    if len(given) != 1:
        what = f"got {' and '.join(given)}" if given else "got none"
        raise InputError(
            "give exactly one of --instances, --biggen, --prometheus-set and --pairwise-set "
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
    if sources.responses:
        raise InputError(f"{flag} FILE carries its own responses; --responses is not used with it")
    if sources.rubrics:
        raise InputError(
            f"{flag} FILE carries a rubric per instance; use --criteria to judge "
            "its instances on criteria of your own instead"
        )
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
    if custom is None:
        return Loaded(inputs, own, labels)
    # custom criteria replace the instances' own rubrics: every criterion on every instance
    judged = tuple(replace(i, skills=custom.names, rubrics={}) for i in inputs.instances)
    return Loaded(Inputs(judged, inputs.response_sets), custom, labels)


#: how many models --model names, per source
_MODELS = {"--biggen": 1, "--prometheus-set": 1, "--pairwise-set": 2}


def _check_models(flag: str, models: Sequence[str]) -> None:
    """``--model`` names the models of a file that carries its responses: one for a
    BiGGen file or a Prometheus set, two (first, second) for a pairwise set."""
    if not models:
        return
    wanted = _MODELS.get(flag)
    if wanted is None:
        raise InputError(
            f"--model names the model of a --biggen, --prometheus-set or --pairwise-set file; "
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
