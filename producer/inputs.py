"""All inputs of one evaluation run, loaded and validated together (all or nothing)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from flask_eval.core.errors import InputError
from flask_eval.core.gcpause import paused_gc
from flask_eval.core.limits import MAX_MODEL_NAME, MAX_RUN_NAME
from flask_eval.core.text import clip, control_problem
from flask_eval.core.types import Instance, ResponseSet
from flask_eval.producer.conversations import TurnIds, load_reference_answers
from flask_eval.producer.loaders import load_instances
from flask_eval.producer.parallel import load_all_responses
from flask_eval.rubrics.kind import NO_MODEL

__all__ = [
    "MODEL_NAME_PATTERN",
    "Inputs",
    "check_model_name",
    "check_response_names",
    "check_run_name",
    "load_inputs",
    "parse_responses_arg",
    "with_reference_answers",
]

#: A model name: 1-MAX_MODEL_NAME characters, letters, digits, '.', '_' or '-', not
#: starting with a punctuation character.
MODEL_NAME_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_MODEL_NAME - 1}}}"
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
_NAME_RULE = (
    f"use 1-{MAX_MODEL_NAME} letters, digits, '.', '_' or '-', starting with a letter or digit"
)


def check_model_name(name: str, arg: str | None = None) -> None:
    """Raise InputError unless ``name`` matches :data:`MODEL_NAME_PATTERN`."""
    if _MODEL_NAME.fullmatch(name) is None:
        where = f" in responses argument {clip(arg)}" if arg is not None else ""
        raise InputError(f"invalid model name {clip(name)}{where}; {_NAME_RULE}")


def check_run_name(name: str) -> str:
    """A ``--run`` name as stored: non-empty, at most MAX_RUN_NAME characters, and
    without NUL, surrogates or control characters (both databases take it, and it
    prints on one line). Returns the name; raises InputError."""
    if not name.strip():
        raise InputError("--run needs a non-empty name")
    if len(name) > MAX_RUN_NAME:
        raise InputError(f"--run name is longer than {MAX_RUN_NAME} characters: {clip(name)}")
    problem = control_problem(name)
    if problem is not None:
        raise InputError(f"--run name {problem}")
    return name


def parse_responses_arg(arg: str) -> tuple[str, str]:
    """Parse a CLI ``NAME=PATH`` responses argument into ``(name, path)``."""
    name, sep, path = arg.partition("=")
    if not sep:
        raise InputError(
            f"invalid responses argument {clip(arg)}: expected NAME=PATH, "
            "e.g. gpt4=outputs/gpt4.jsonl"
        )
    check_model_name(name, arg)
    if not path:
        raise InputError(
            f"missing path in responses argument {clip(arg)}: expected NAME=PATH, "
            "e.g. gpt4=outputs/gpt4.jsonl"
        )
    return name, path


@dataclass(frozen=True)
class Inputs:
    """Validated instances and the responses of every model to evaluate; or, for a kind
    whose rows are about an instance alone (``about_instances``: generation,
    annotation), the instances and no responses."""

    instances: tuple[Instance, ...]
    response_sets: tuple[ResponseSet, ...]
    about_instances: bool = False

    def subjects(self) -> list[tuple[str, list[str]]]:
        """What the rows are about: (model, the ids of the instances it answered) per
        response set; for rows about instances alone, every instance with no model
        (``rubrics.kind.NO_MODEL``, the empty name)."""
        if self.about_instances:
            return [(NO_MODEL, [i.id for i in self.instances])]
        return [(rs.model, list(rs.instance_ids())) for rs in self.response_sets]

    def coverage(self) -> dict[str, tuple[int, int]]:
        """Model name -> (instances it answered, total instances)."""
        ids = {instance.id for instance in self.instances}
        total = len(self.instances)
        return {rs.model: (len(set(rs.instance_ids()) & ids), total) for rs in self.response_sets}

    def ignored(self) -> dict[str, int]:
        """Model name -> its responses to instances not in the instances file (left out,
        as ``--limit`` leaves out the instances it drops); models with none are absent."""
        return {
            rs.model: n for rs in self.response_sets if (n := getattr(rs.responses, "unknown", 0))
        }

    def missing(self) -> dict[str, tuple[str, ...]]:
        """Model name -> ids of the instances it has no response for, in file order."""
        result: dict[str, tuple[str, ...]] = {}
        for rs in self.response_sets:
            answered = set(rs.instance_ids())
            result[rs.model] = tuple(i.id for i in self.instances if i.id not in answered)
        return result


def check_response_names(responses: Sequence[tuple[str, str]]) -> None:
    """Every ``(model, path)`` of ``--responses``: a valid model name, unique
    case-insensitively; InputError naming the first problem."""
    seen: dict[str, tuple[str, str]] = {}
    for name, path in responses:
        check_model_name(name)
        key = name.casefold()
        if key in seen:
            first_name, first_path = seen[key]
            raise InputError(
                f"duplicate model name {clip(name)}: {first_name}={clip(first_path, 80)} and "
                f"{name}={clip(path, 80)}; "
                "give each responses file its own NAME"
            )
        seen[key] = (name, path)


def load_inputs(
    instances_path: str,
    responses: Sequence[tuple[str, str]],
    known_skills: Collection[str],
    *,
    custom: bool = False,
    reference: bool = True,
) -> Inputs:
    """Load and validate the instances file and every ``(model, path)`` responses file.

    All or nothing: the first problem raises InputError and nothing is returned. Model
    names must be valid and unique (case-insensitively); at least one responses file is
    required. ``custom`` (criteria of a ``--criteria`` file) and ``reference`` (False:
    judges never see a reference answer) say which instance fields are optional
    (:func:`producer.loaders.load_instances`).
    """
    if not responses:
        raise InputError(
            "no responses files given; pass at least one NAME=PATH, e.g. gpt4=outputs/gpt4.jsonl"
        )
    check_response_names(responses)
    instances = tuple(
        load_instances(instances_path, known_skills, custom_criteria=custom, reference=reference)
    )
    ids: dict[str, str] = (
        TurnIds(instances)  # the conversations' turns too, for their responses' lines
        if any(instance.conversation is not None for instance in instances)
        else {instance.id: instance.id for instance in instances}
    )
    with paused_gc():  # millions of lines, no cycles (core.gcpause)
        response_sets = load_all_responses(responses, ids)
    return Inputs(instances=instances, response_sets=response_sets)


def with_reference_answers(inputs: Inputs, path: str) -> Inputs:
    """``inputs`` whose conversations named in the reference-answer file ``path``
    (``--reference-answers``, FastChat's model_answer format) have its references as
    their turns' reference answers (``producer.conversations.load_reference_answers``)."""
    instances = load_reference_answers(path, inputs.instances)
    return Inputs(instances, inputs.response_sets, inputs.about_instances)
