"""Bundles of format version 1 read by this version (docs/design/bundles.md).

A version 1 bundle of a run whose rows are about an instance alone (generation,
annotation: ``rubrics.kind.INSTANCE``) holds a stand-in model (``''``) with an empty
response to every instance, named in the run's configuration (``responses``, ``models``,
``coverage``): what stores held before schema version 12. Version 2 holds neither.
:func:`upgraded` reads a version 1 bundle's rows as version 2 holds them, so that an
import stores the run as this version writes it (and as schema version 12's migration
leaves a store that held it). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from flask_eval.core.stored import StoredConfig
from flask_eval.rubrics import kinds
from flask_eval.rubrics.kind import INSTANCE, NO_MODEL

#: a bundle's rows, a table at a time: (table, its rows in the header's column order)
Sections = Iterable[tuple[str, Iterable[list[Any]]]]


def _stored(config: dict[str, Any]) -> StoredConfig | None:
    """A bundle's run configuration, decoded (None: unreadable, which the bundle's row
    checks refuse)."""
    try:
        return StoredConfig.from_data(config)
    except (TypeError, ValueError, AttributeError):
        return None


def _about_instances(config: dict[str, Any]) -> bool:
    stored = _stored(config)
    return (
        stored is not None
        and kinds.known(stored.kind)
        and kinds.of(stored.kind).subject == INSTANCE
    )


def without_stand_in(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without the stand-in model in its responses, models and coverage, and
    without the rubric its kind's unscored criteria carried (a generation's
    ``response``)."""
    changed = dict(config)
    stored = StoredConfig.from_data(config)
    kind = kinds.of(stored.kind)
    unscored = {s.name for s in kind.criteria(stored.kind_options) if not s.rubric}
    if isinstance(changed.get("skills"), list):
        changed["skills"] = [
            {**s, "rubric": {}} if isinstance(s, dict) and s.get("name") in unscored else s
            for s in changed["skills"]
        ]
    for key in ("responses", "coverage"):
        if isinstance(changed.get(key), dict):
            changed[key] = {m: v for m, v in changed[key].items() if m != NO_MODEL}
    if isinstance(changed.get("models"), list):
        changed["models"] = [m for m in changed["models"] if m != NO_MODEL]
    return changed


def upgraded(
    sections: Sections, columns: dict[str, list[str]]
) -> Iterator[tuple[str, Iterable[list[Any]]]]:
    """``sections`` of a version 1 bundle as version 2 holds them: for a run about
    instances alone, its configuration without the stand-in model and no response rows
    of it; any other run's rows as they are."""
    stand_in = False
    for table, rows in sections:
        if table == "run":
            at = columns["run"].index("config")
            kept = []
            for row in rows:
                config = json.loads(row[at])
                if isinstance(config, dict) and _about_instances(config):
                    stand_in = True
                    row = [*row[:at], json.dumps(without_stand_in(config)), *row[at + 1 :]]
                kept.append(row)
            yield table, kept
        elif table == "response" and stand_in:
            model = columns["response"].index("model")
            yield table, (row for row in rows if row[model] != NO_MODEL)
        else:
            yield table, rows
