"""The inputs of a `run`, read and checked before anything is written: its instance and
response files (``producer.sources``) or a Perception-Bench file, their images
(``producer.images``), the reference answers of ``--reference-answers``, and the
instances as MT-Bench judges ask them (``producer.mtbench_judging``), checked against
what the judges' providers accept of images (``producer.image_plan``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from flask_eval.core.errors import InputError
from flask_eval.core.spec import RunSpec
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.image_plan import check_provider_limits
from flask_eval.producer.images import reading_images
from flask_eval.producer.inputs import Inputs, parse_responses_arg, with_reference_answers
from flask_eval.producer.mtbench_judging import mtbench_judging
from flask_eval.producer.perception_bench import image_options, load_run_sources
from flask_eval.producer.sources import Loaded, Sources
from flask_eval.rubrics.skills import SkillSet

__all__ = ["judged_inputs", "load_run_inputs"]


def load_run_inputs(spec: RunSpec) -> tuple[Loaded, str]:
    """The run's loaded inputs and the path of its instances (the file errors about an
    instance name); InputError/ConfigError for bad input, nothing written."""
    src = spec.inputs
    named = [parse_responses_arg(a) for a in src.responses]
    if not named and src.instances:
        raise InputError("no responses given; add --responses NAME=PATH")
    sources = Sources(
        src.instances,
        named,
        src.biggen,
        src.prometheus_set,
        src.rubrics,
        src.criteria,
        src.pairwise_set,
        src.biggen_llm_judge,
        src.models,
        src.reference,
        src.multifaceted,
    )
    with reading_images(image_options(spec)):
        loaded = load_run_sources(sources, src.perception_bench)
    if src.reference_answers is not None:
        loaded = replace(
            loaded, inputs=with_reference_answers(loaded.inputs, src.reference_answers)
        )
    return loaded, src.perception_bench or sources.path


def judged_inputs(
    inputs: Inputs,
    skillset: SkillSet,
    judges: Sequence[JudgeConfig],
    spec: RunSpec,
    *,
    pairwise: bool,
    path: str,
) -> tuple[Inputs, SkillSet]:
    """``inputs`` and ``skillset`` as the ``judges`` ask them (MT-Bench's judges: its
    questions' turns, ``producer.mtbench_judging``); InputError (``path``) for an image a
    judge's provider refuses."""
    src = spec.inputs
    inputs, skillset = mtbench_judging(
        inputs,
        skillset,
        judges,
        pairwise=pairwise,
        own_criteria=bool(src.criteria or src.rubrics),
    )
    check_provider_limits(inputs.instances, judges, path)
    return inputs, skillset
