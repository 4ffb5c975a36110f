"""The plain export's read (`flask-eval export`, JSON Lines or CSV): one row per judgment,
with its rationale and the judge's raw output, secrets of the environment removed; a
kind with an export hook (``rubrics.kind.Kind.export``) makes each row its own record."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flask_eval.core.redact import redact_known
from flask_eval.rubrics import kinds
from flask_eval.storage import exports
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store


@dataclass(frozen=True)
class ExportRows:
    """The export of a run: its fields (the CSV header) and its rows, streamed."""

    fields: tuple[str, ...]
    rows: Iterator[dict[str, Any]]


def export_rows(store: Store, run: RunInfo) -> ExportRows:
    """``run``'s judgments as export rows (``storage.exports.export_rows``), in id order.
    Answers are stored without known secrets; a ledger from before may hold them, so each
    text is cleaned again here."""
    hook = kinds.of(run.config.kind).export
    fields = exports.export_fields(store, run.id)
    read = exports.export_rows(store, run.id, run.name, value=hook is not None)
    if hook is not None:
        fields = tuple(hook(dict.fromkeys((*fields, "value"))))
        read = (hook(row) for row in read)
    return ExportRows(fields, (_cleaned(row) for row in read))


def _cleaned(row: dict[str, Any]) -> dict[str, Any]:
    return {k: redact_known(v) if isinstance(v, str) else v for k, v in row.items()}
