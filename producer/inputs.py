"""All inputs of one evaluation run, loaded and validated together (all or nothing)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from flask_eval.exceptions import InputError
from producer.loaders import load_instances, load_responses
from producer.schema import Instance, ResponseSet

__all__ = ["MODEL_NAME_PATTERN", "Inputs", "check_model_name", "load_inputs", "parse_responses_arg"]

#: A model name: 1-64 characters, letters, digits, '.', '_' or '-', not starting with a
#: punctuation character.
MODEL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
_NAME_RULE = "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def check_model_name(name: str, arg: str | None = None) -> None:
    """Raise InputError unless ``name`` matches :data:`MODEL_NAME_PATTERN`."""
    if _MODEL_NAME.fullmatch(name) is None:
        where = f" in responses argument {arg!r}" if arg is not None else ""
        raise InputError(f"invalid model name {name!r}{where}; {_NAME_RULE}")


def parse_responses_arg(arg: str) -> tuple[str, str]:
    """Parse a CLI ``NAME=PATH`` responses argument into ``(name, path)``."""
    name, sep, path = arg.partition("=")
    if not sep:
        raise InputError(
            f"invalid responses argument {arg!r}: expected NAME=PATH, e.g. gpt4=outputs/gpt4.jsonl"
        )
    check_model_name(name, arg)
    if not path:
        raise InputError(
            f"missing path in responses argument {arg!r}: expected NAME=PATH, "
            "e.g. gpt4=outputs/gpt4.jsonl"
        )
    return name, path


@dataclass(frozen=True)
class Inputs:
    """Validated instances and the responses of every model to evaluate."""

    instances: tuple[Instance, ...]
    response_sets: tuple[ResponseSet, ...]

    def coverage(self) -> dict[str, tuple[int, int]]:
        """Model name -> (instances it answered, total instances)."""
        ids = {instance.id for instance in self.instances}
        total = len(self.instances)
        return {
            rs.model: (len({r.instance_id for r in rs.responses} & ids), total)
            for rs in self.response_sets
        }

    def missing(self) -> dict[str, tuple[str, ...]]:
        """Model name -> ids of the instances it has no response for, in file order."""
        result: dict[str, tuple[str, ...]] = {}
        for rs in self.response_sets:
            answered = {r.instance_id for r in rs.responses}
            result[rs.model] = tuple(i.id for i in self.instances if i.id not in answered)
        return result


def load_inputs(
    instances_path: str,
    responses: Sequence[tuple[str, str]],
    known_skills: Collection[str],
) -> Inputs:
    """Load and validate the instances file and every ``(model, path)`` responses file.

    All or nothing: the first problem raises InputError and nothing is returned. Model
    names must be valid and unique (case-insensitively); at least one responses file is
    required.
    """
    if not responses:
        raise InputError(
            "no responses files given; pass at least one NAME=PATH, e.g. gpt4=outputs/gpt4.jsonl"
        )
    seen: dict[str, tuple[str, str]] = {}
    for name, path in responses:
        check_model_name(name)
        key = name.casefold()
        if key in seen:
            first_name, first_path = seen[key]
            raise InputError(
                f"duplicate model name {name!r}: {first_name}={first_path} and {name}={path}; "
                "give each responses file its own NAME"
            )
        seen[key] = (name, path)
    instances = tuple(load_instances(instances_path, known_skills))
    ids = frozenset(instance.id for instance in instances)
    response_sets = tuple(load_responses(name, path, ids) for name, path in responses)
    return Inputs(instances=instances, response_sets=response_sets)
