"""The plain export's read (`flask-eval export`, JSON Lines or CSV): one row per judgment,
with its rationale and the judge's raw output, secrets of the environment removed; a
kind with an export hook (``rubrics.kind.Kind.export``) makes each row its own record.
`export --format fastchat` writes one judge's judgments as FastChat's MT-Bench judgment
file instead (:func:`fastchat_export`, ``report.fastchat``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flask_eval.app.score_tables import config_models
from flask_eval.core.errors import InputError
from flask_eval.core.redact import redact_known
from flask_eval.report import fastchat
from flask_eval.rubrics import kinds
from flask_eval.storage import exports, turn_rows
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


def fastchat_export(store: Store, run: RunInfo, judge: str | None = None) -> ExportRows:
    """``run``'s judgments as FastChat's judgment file (``report.fastchat``): its pairwise
    records for a pairwise run, else its single-answer records, of one judge.

    FastChat's ``show_result.py`` pools every record of a file, so a file holds one
    judge's: ``judge`` names it (it may be left out when the run has one). An unknown
    judge, or none named in a run of several, is an InputError."""
    judges = turn_rows.run_judges(store, run.id)
    if judge is None:
        if len(judges) > 1:
            raise InputError(
                f"run {run.name} has judges {', '.join(judges)}: FastChat's show_result.py "
                "pools every record of a file, so name one with --judge"
            )
        judge = judges[0] if judges else None
    elif judge not in judges:
        known = ", ".join(judges) or "none"
        raise InputError(f"--judge {judge}: not a judge of run {run.name} (its judges: {known})")
    rows = turn_rows.turn_rows(store, run.id, judge) if judge is not None else iter(())
    cleaned = (_cleaned(r) for r in _records(run, rows))
    fields = fastchat.PAIR_FIELDS if run.config.pairwise is not None else fastchat.SINGLE_FIELDS
    return ExportRows(fields, cleaned)


def _records(run: RunInfo, rows: Iterator[turn_rows.TurnRow]) -> Iterator[dict[str, Any]]:
    if run.config.pairwise is not None:
        yield from fastchat.pair_records(rows, config_models(run.config))
    else:
        yield from fastchat.single_records(rows)
