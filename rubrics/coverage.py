"""A protocol's scale against its criteria's rubrics, checked before a run starts (pure).

A protocol declares its scale (``Protocol.scale``) and how its prompt uses a criterion's
rubric (``Protocol.rubric_rule``). Under the rule ``levels`` (every built-in absolute
protocol) the prompt shows each level's description under the scale's name, so every
criterion a judge may be shown must have a rubric that describes exactly the scale's
levels: FLASK's 1-5 rubrics under a 1-10 protocol would be five descriptions of ten
scores. Under the rule ``any`` the prompt never puts a rubric's levels under the scale's
name, so a rubric on any scale is taken. :func:`check_rubrics` refuses a mismatch in one
line that names the judge, the protocol's scale and the criterion.
"""

from __future__ import annotations

from collections.abc import Iterable

from flask_eval.core.errors import ConfigError
from flask_eval.core.text import clip
from flask_eval.core.types import Instance
from flask_eval.rubrics.grading import RUBRIC_ANY, Protocol
from flask_eval.rubrics.scale import levels_text
from flask_eval.rubrics.skills import SkillSet

#: a criterion a judge may be shown: its name and the levels its rubric describes
Shown = tuple[str, tuple[int, ...]]


def rubric_levels(skillset: SkillSet, instances: Iterable[Instance] | None = None) -> list[Shown]:
    """The criteria a judge may be shown and their rubrics' levels, each pair once, in
    the order first met: each instance's criteria, through its own rubric for a criterion
    when it has one (as ``producer.context.RunContext.criterion`` resolves them), else
    the run's. Without ``instances``: every criterion of ``skillset``."""
    if instances is None:
        return list(dict.fromkeys((s.name, tuple(sorted(s.rubric))) for s in skillset))
    seen: dict[Shown, None] = {}
    for instance in instances:
        for name in instance.skills:
            own = instance.rubrics.get(name)
            if own is not None:
                seen.setdefault((name, tuple(sorted(own.scores))), None)
            elif name in skillset:
                seen.setdefault((name, tuple(sorted(skillset.get(name).rubric))), None)
    return list(seen)


def rubric_problem(proto: Protocol, levels: Iterable[int]) -> str | None:
    """Why ``proto`` cannot show a rubric of ``levels`` (None: it can). Only the rule
    ``any`` takes any rubric: a rule this version does not know is read as ``levels``."""
    levels = tuple(sorted(levels))
    if proto.rubric_rule == RUBRIC_ANY or levels == proto.scale.levels:
        return None
    return (
        f"protocol {proto.name} scores {proto.scale.text} and shows every level's "
        f"description, but the rubric describes levels {levels_text(levels)}"
    )


def check_rubrics(judge: str, proto: Protocol, shown: Iterable[Shown]) -> None:
    """ConfigError, one line, for the first criterion in ``shown`` whose rubric does not
    cover ``proto``'s scale (before anything is written)."""
    for name, levels in shown:
        problem = rubric_problem(proto, levels)
        if problem is None:
            continue
        scale = proto.scale.text
        raise ConfigError(
            f"judge {judge}: criterion {clip(name)}: {problem}; give every criterion a "
            f"rubric of levels {scale} (a criteria file's 'scale: {scale}'), or judge "
            f"these criteria with a protocol on a {levels_text(levels)} scale"
        )
