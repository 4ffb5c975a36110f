"""The judges of a run's command line: `--judge [NAME=]SPEC` flags (``human/NAME``: a
rater) and `--judges FILE` files together, every name unique."""

from __future__ import annotations

from collections.abc import Sequence

from flask_eval.core.errors import InputError
from flask_eval.core.people import Panel
from flask_eval.core.text import clip
from flask_eval.core.types import JudgeConfig, JudgeSpec
from flask_eval.producer.judges_file import (
    NAME_THEM,
    PEOPLE_ELSEWHERE,
    BatchCheck,
    SpecParser,
    check_judge_name,
    load_workers_file,
    no_batch_check,
)
from flask_eval.producer.people_file import check_raters_once, is_people_spec, panel_of_spec

__all__ = ["combine", "combine_workers", "parse_judge_arg"]


def parse_judge_arg(arg: str, parse: SpecParser = JudgeSpec.parse) -> JudgeConfig:
    """One ``--judge`` value: ``SPEC`` or ``NAME=SPEC``.

    A name has no '@' and no '=', and a spec has '=' only in its base URL (after '@'),
    so ``NAME=SPEC`` is the reading exactly when the text before the first '=' has no '@'.
    """
    head, sep, rest = arg.partition("=")
    if sep and "@" not in head:
        name = check_judge_name(head)
        spec = parse(rest)
        return JudgeConfig(name=name, spec=spec.name)
    spec = parse(arg)
    return JudgeConfig(name=spec.default_name, spec=spec.name)


def combine(
    specs: Sequence[str],
    files: Sequence[str],
    parse: SpecParser = JudgeSpec.parse,
    check_batch: BatchCheck = no_batch_check,
) -> list[JudgeConfig]:
    """Judges from `--judge [NAME=]SPEC` flags and `--judges FILE` files, names unique
    (case-insensitively, as they become file names); each spec read by ``parse``. People
    (``human/...``) are refused: they rate in a judgment run (:func:`combine_workers`)."""
    judges, panels = combine_workers(specs, files, parse, check_batch)
    if panels:
        raise InputError(PEOPLE_ELSEWHERE)
    return judges


def combine_workers(
    specs: Sequence[str],
    files: Sequence[str],
    parse: SpecParser = JudgeSpec.parse,
    check_batch: BatchCheck = no_batch_check,
) -> tuple[list[JudgeConfig], list[Panel]]:
    """The judges and the people of `--judge` flags (``human/NAME``: one rater) and
    `--judges` files, every name unique (case-insensitively, as they become file names),
    and every rater in one entry only."""
    entries: list[tuple[JudgeConfig | Panel, str]] = []
    for s in specs:
        if is_people_spec(s.partition("=")[2] if "=" in s else s):
            entries.append((panel_of_spec(s.partition("=")[2] if "=" in s else s), "--judge"))
        else:
            entries.append((parse_judge_arg(s, parse), f"--judge {clip(s, 80)}"))
    for f in files:
        judges, panels = load_workers_file(f, parse, check_batch)
        entries += [(j, f"{f} ({clip(j.spec, 80)})") for j in judges]
        entries += [(p, f"{f} (line {line})") for p, line in panels]
    seen: dict[str, str] = {}
    for entry, origin in entries:
        key = entry.name.casefold()
        if key in seen:
            raise InputError(
                f"judge name {clip(entry.name)} is given twice ({seen[key]} and {origin}); "
                f"{NAME_THEM}"
            )
        seen[key] = origin
    panels_ = [e for e, _ in entries if isinstance(e, Panel)]
    check_raters_once(panels_)
    return [e for e, _ in entries if isinstance(e, JudgeConfig)], panels_
