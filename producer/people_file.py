"""People's entries of a judges file: ``spec: human/NAME`` (one rater) or ``spec:
human/panel`` with ``raters:`` (a panel).

::

    - spec: human/alice          # one rater, named alice: her items wait for her
      sample: 100                # optional: how many of the run's items people see
    - spec: human/panel          # a panel of raters
      name: experts              # optional; default the spec
      raters: [alice, bob, carol]
      per_item: 2                # raters per item (default 1)
      overlap: 30                # the first 30 items go to every rater (default 0)
      limit: 200                 # the first 200 items (or sample: N, a seeded sample)
      protocol: flask            # whose rubrics and scale the raters see

Every problem is an InputError naming ``file:line``, as for a judge's entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.people import (
    HUMAN,
    PANEL,
    Panel,
    RaterNameError,
    check_rater_name,
)
from flask_eval.core.text import clip

__all__ = ["PEOPLE_KEYS", "check_raters_once", "is_people_spec", "panel_entry", "panel_of_spec"]

PEOPLE_KEYS = frozenset(
    {"spec", "name", "raters", "per_item", "overlap", "sample", "limit", "protocol"}
)
MAX_RATERS = 1000


def is_people_spec(spec: object) -> bool:
    """Whether a judge spec's text names people (``human/...``)."""
    return isinstance(spec, str) and spec.strip().partition("/")[0] == HUMAN


def panel_of_spec(spec: str) -> Panel:
    """The one-rater panel of ``--judge human/NAME``; InputError if NAME is no rater's
    name (a panel needs a judges file: its raters are a list)."""
    rater = spec.strip().partition("/")[2]
    if rater == PANEL:
        raise InputError(
            "a panel of raters is given in a judges file (`spec: human/panel` with `raters:`)"
        )
    try:
        return Panel(spec.strip(), (check_rater_name(rater),))
    except RaterNameError as exc:
        raise InputError(str(exc)) from None


def panel_entry(
    data: dict[str, Any],
    at: Callable[[str], int],
    path: str,
    check_name: Callable[[object, str, int], str],
    check_protocol: Callable[[dict[str, Any], str, int], str | None],
) -> Panel:
    """The panel of a judges file's people entry ``data`` (``at`` gives a key's line;
    ``check_name`` and ``check_protocol`` are the judges file's own checks)."""
    unknown = [k for k in data if k not in PEOPLE_KEYS]
    if unknown:
        raise InputError(
            f"unknown key {clip(unknown[0])} for people; allowed: {', '.join(sorted(PEOPLE_KEYS))}",
            path,
            at(str(unknown[0])),
        )
    spec = str(data["spec"]).strip()
    rater = spec.partition("/")[2]
    if rater == PANEL:
        raters = _raters(data.get("raters"), path, at("raters"))
    else:
        if "raters" in data:
            raise InputError(
                "`raters` goes with `spec: human/panel`; `spec: human/NAME` is one rater",
                path,
                at("raters"),
            )
        try:
            raters = (check_rater_name(rater),)
        except RaterNameError as exc:
            raise InputError(str(exc), path, at("spec")) from None
    name = check_name(data.get("name", spec), path, at("name"))
    per_item = _whole(data, "per_item", path, at("per_item"), 1) or 1
    if per_item > len(raters):
        raise InputError(
            f"`per_item` is {per_item}, but the panel has {len(raters)} rater(s)",
            path,
            at("per_item"),
        )
    overlap = _whole(data, "overlap", path, at("overlap"), 0) or 0
    sample = _whole(data, "sample", path, at("sample"), 1)
    limit = _whole(data, "limit", path, at("limit"), 1)
    if sample is not None and limit is not None:
        raise InputError("give `sample` or `limit`, not both", path, at("limit"))
    return Panel(
        name=name,
        raters=raters,
        per_item=per_item,
        overlap=overlap,
        sample=sample,
        limit=limit,
        protocol=check_protocol(data, path, at("protocol")),
    )


def _raters(value: object, path: str, line: int) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise InputError(
            f"`raters` must be a non-empty list of names, e.g. [alice, bob], got {clip(value)}",
            path,
            line,
        )
    if len(value) > MAX_RATERS:
        raise InputError(f"`raters` lists more than {MAX_RATERS} raters", path, line)
    seen: set[str] = set()
    for item in value:
        try:
            name = check_rater_name(item)
        except RaterNameError as exc:
            raise InputError(str(exc), path, line) from None
        if name.casefold() in seen:
            raise InputError(f"rater {clip(name)} is listed twice", path, line)
        seen.add(name.casefold())
    return tuple(str(v) for v in value)


def _whole(data: dict[str, Any], key: str, path: str, line: int, least: int) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise InputError(
            f"`{key}` must be a whole number >= {least}, got {clip(value)}", path, line
        )
    return value


def check_raters_once(
    panels: Sequence[Panel], path: str | None = None, lines: Sequence[int] = ()
) -> None:
    """InputError for a rater in two people's entries (a rater has one queue per run)."""
    seen: dict[str, str] = {}
    for k, panel in enumerate(panels):
        for rater in panel.raters:
            key = rater.casefold()
            if key in seen:
                raise InputError(
                    f"rater {clip(rater)} is in two people's entries ({seen[key]} and "
                    f"{panel.name}); a rater rates a run's items through one entry",
                    path,
                    lines[k] if k < len(lines) else None,
                )
            seen[key] = panel.name
