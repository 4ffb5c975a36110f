"""The one renderer of a report as JSON and CSV (pure: strings only); the text tables
are ``report.text``'s (re-exported here).

JSON is ``{"run", "judges", "rows": [...], "comparisons", "agreement", "bootstrap", "cost"}``,
each row with the keys of :data:`report.row_fields.FIELDS`. JSON and CSV keep full float
precision and go through :func:`plain`, so a numpy number is written as a plain number
whatever its type; only the text tables round (2 decimals). Text tables show models best
first and difficulty levels with FLASK's names; JSON and CSV keep the keys "1".."5".
JSON also carries the report's ``notes`` and ``position_patterns``.

The row contract (JSON ``rows`` and CSV lines alike): each row is one (model, judge,
``dimension``, ``key``) with ``mean``, ``n``, ``n_na``, ``n_failed`` and the interval.
``dimension`` is one of

- ``overall``: key ``all``, every judgment pooled (FLASK's overall); and, when the
  instances carry capabilities, key ``biggen``: overall = mean of capability means, as
  BiGGen Bench's report computes it (each capability's mean counts once, however many
  judgments it has; its interval comes from the same replicates, recomputed the same way);
- ``skill``: one key per criterion (FLASK's skills, custom criteria, or an instance
  rubric's name: instances whose own rubrics share a name make one key);
- ``ability``: FLASK's abilities (criteria without one are in no ability row);
- ``capability``, ``task``: BiGGen Bench's groups (only when instances carry them;
  MT-Bench's category is a capability);
- ``turn`` (keys ``"1"``, ``"2"``, ...): a conversation's turn (only when instances are
  turns of conversations);
- ``domain``, ``difficulty`` (keys ``"1"``..``"5"``), ``skill_difficulty``
  (``"skill|level"``).

A pairwise run's report adds the dimensions ``pairwise`` (key ``"A vs B"``: A's win,
tie and loss rates and score), ``rating`` (key = model: its Bradley-Terry rating),
``position`` (key = judge: position consistency and first-position preference) and
``length_bias`` (key = a bin of the length difference), each row with a ``criterion``
and the extra fields of its dimension, and a ``pairwise`` summary (models, anchor, judge
agreement, notes); :mod:`report.pairwise_report` defines them.

The JSON document also has ``definitions`` when some row needs saying what it is (BiGGen's
overall); the text header prints them. A run of conversations has an ``mtbench`` object
(MT-Bench's scores as FastChat computes them, :mod:`report.mtbench`) and, in CSV, rows of
dimensions ``mt_bench`` (key a turn or ``average``) and ``mt_bench_pairwise`` (key a turn
or ``all``).

A report of a run in progress (judgments pending or being judged: its figures are
partial) says so in every format. JSON: ``"in_progress": true``, ``"pending"`` (judgments
not finished) and ``"judgments": {"total", "done", "failed", "pending"}`` after ``run``
(``"in_progress": false`` and ``"pending": 0`` once finished). CSV: its first rows are of
dimension ``progress``, keys ``total``, ``done``, ``failed`` and ``pending``, the count in
``n`` (none once finished). Text: a line under ``Run:``. HTML: a banner under the title.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask_eval.report.agreement import FIELDS as AGREEMENT_FIELDS
from flask_eval.report.agreement import Agreement
from flask_eval.report.document import FIELDS, Report, as_report
from flask_eval.report.intervals import Comparison
from flask_eval.report.metrics import Row
from flask_eval.report.serial import csv_text, dumps, plain, write_csv, write_jsonl
from flask_eval.report.text import (  # re-exported: the text renderer
    agreement_table,
    fmt,
    fmt_interval,
    run_summary,
    to_table,
)

__all__ = [
    "COMPARISON_FIELDS",
    "agreement_csv",
    "agreement_table",
    "comparisons_csv",
    "csv_text",
    "dumps",
    "fmt",
    "fmt_interval",
    "plain",
    "progress_rows",
    "report_csv",
    "rows_csv",
    "run_summary",
    "to_json",
    "to_table",
    "write_csv",
    "write_jsonl",
]

#: the dimension of the CSV rows of a report in progress (:func:`progress_rows`)
PROGRESS = "progress"

COMPARISON_FIELDS: tuple[str, ...] = (
    "judge",
    "model_a",
    "model_b",
    "dimension",
    "key",
    "n_instances",
    "mean_a",
    "mean_b",
    "diff",
    "ci_low",
    "ci_high",
)

# -- JSON and CSV ---------------------------------------------------------------------


def to_json(report: Report) -> str:
    return dumps(report.as_dict())


def progress_rows(report: Report) -> list[dict[str, Any]]:
    """The CSV rows saying a report's run is in progress: dimension ``progress``, keys
    ``total``, ``done``, ``failed`` and ``pending`` (judgments), the count in ``n``, no
    model or judge; none for a finished run (or a report of rows alone)."""
    progress = report.progress
    if progress is None or not progress.in_progress:
        return []
    return [
        {"dimension": PROGRESS, "key": key, "n": getattr(progress, key)}
        for key in ("total", "done", "failed", "pending")
    ]


def rows_csv(rows: Report | Sequence[Row]) -> str:
    """Report rows as CSV: the row fields plus the interval (empty without one); a
    report in progress begins with its :func:`progress_rows`."""
    report = as_report(rows)
    return csv_text(FIELDS, [*progress_rows(report), *(r.as_dict() for r in report.rows)])


def report_csv(report: Report) -> str:
    """All rows of a report as CSV: :func:`rows_csv`, or for a pairwise run every row
    (absolute and pairwise dimensions) with the wider ``PAIRWISE_FIELDS``; a run of
    conversations adds its MT-Bench rows (``report.mtbench.MTBench.rows``)."""
    mtbench = report.mtbench.rows() if report.mtbench is not None else []
    if report.pairwise is None and not mtbench:
        return rows_csv(report)
    from flask_eval.report.pairwise_report import PAIRWISE_FIELDS

    fields = PAIRWISE_FIELDS if report.pairwise is not None else FIELDS
    plain_rows = [dict.fromkeys(fields) | r.as_dict() for r in report.rows]
    pairwise = report.pairwise.rows() if report.pairwise is not None else []
    extra = [dict.fromkeys(fields) | {k: v for k, v in r.items() if k in fields} for r in mtbench]
    return csv_text(fields, [*progress_rows(report), *plain_rows, *pairwise, *extra])


def comparisons_csv(comparisons: Sequence[Comparison]) -> str:
    return csv_text(COMPARISON_FIELDS, [c.as_dict() for c in comparisons])


def agreement_csv(rows: Sequence[Agreement]) -> str:
    return csv_text(AGREEMENT_FIELDS, [a.as_dict() for a in rows])
