"""Before a run or an evaluation writes anything: every judge, and every person's panel,
is asked in a protocol that exists in the run's mode, whose scale the criteria's rubrics
cover, and in structured form only where its provider, model and protocol have one.
"""

from __future__ import annotations

from collections.abc import Sequence

from flask_eval.core.errors import ConfigError
from flask_eval.core.models import model_info
from flask_eval.core.people import People, is_person
from flask_eval.core.types import JudgeConfig
from flask_eval.rubrics.coverage import Shown, check_rubrics
from flask_eval.rubrics.grading import DEFAULT_PROTOCOL, protocol
from flask_eval.rubrics.pairwise import pairwise_protocol
from flask_eval.rubrics.skills import load_default
from flask_eval.workers.judge import judge_class

__all__ = ["as_judges", "check_protocols"]


def as_judges(people: People | None) -> list[JudgeConfig]:
    """The panels as the judges whose protocols they are asked in (to check them)."""
    if people is None:
        return []
    return [JudgeConfig(p.name, p.judges[0], protocol=p.protocol) for p in people.panels]


def check_protocols(
    judges: Sequence[JudgeConfig], mode: str, pairwise: bool = False, shown: Sequence[Shown] = ()
) -> None:
    """ConfigError for a judge asked in a protocol that does not exist, or has no pairwise
    form in a pairwise run, or whose scale a criterion's rubric in ``shown`` does not cover
    (``rubrics.coverage``), or structured where its model has no structured outputs
    (before anything is written)."""
    make = pairwise_protocol if pairwise else protocol
    for judge in judges:
        try:
            asked = make(judge.protocol or DEFAULT_PROTOCOL, mode)
        except KeyError as exc:
            raise ConfigError(f"judge {judge.name}: {exc.args[0]}") from None
        check_rubrics(judge.name, asked, shown)
        if not judge.structured or is_person(judge.spec):
            continue
        provider = judge.spec.partition("/")[0]
        if not judge_class(provider).takes_schema:
            raise ConfigError(
                f"judge {judge.name}: structured: true, but provider {provider} "
                "cannot hold an answer to a JSON schema"
            )
        model = model_info(judge.spec.partition("@")[0])
        if model.family is not None and not model.structured:  # the table says no
            raise ConfigError(
                f"judge {judge.name}: structured: true, but model {model.id} "
                "has no structured outputs (its API refuses a schema)"
            )
        if asked.response_schema(list(load_default())[:1]) is None:
            raise ConfigError(
                f"judge {judge.name}: structured: true, but protocol {asked.name} "
                "has no structured form"
            )
