"""The one renderer of a report as JSON and CSV (pure: strings only); the text tables
are ``report.text``'s (re-exported here).

JSON is ``{"run", "judges", "rows": [...], "comparisons", "agreement", "bootstrap", "cost"}``,
each row with the keys of :data:`report.document.FIELDS`. JSON and CSV keep full float
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
- ``capability``, ``task``: BiGGen Bench's groups (only when instances carry them);
- ``domain``, ``difficulty`` (keys ``"1"``..``"5"``), ``skill_difficulty``
  (``"skill|level"``).

A pairwise run's report adds the dimensions ``pairwise`` (key ``"A vs B"``: A's win,
tie and loss rates and score), ``rating`` (key = model: its Bradley-Terry rating),
``position`` (key = judge: position consistency and first-position preference) and
``length_bias`` (key = a bin of the length difference), each row with a ``criterion``
and the extra fields of its dimension, and a ``pairwise`` summary (models, anchor, judge
agreement, notes); :mod:`report.pairwise_report` defines them.

The JSON document also has ``definitions`` when some row needs saying what it is (BiGGen's
overall); the text header prints them.

A report of a run in progress (judgments pending or being judged: its figures are
partial) says so in every format. JSON: ``"in_progress": true``, ``"pending"`` (judgments
not finished) and ``"judgments": {"total", "done", "failed", "pending"}`` after ``run``
(``"in_progress": false`` and ``"pending": 0`` once finished). CSV: its first rows are of
dimension ``progress``, keys ``total``, ``done``, ``failed`` and ``pending``, the count in
``n`` (none once finished). Text: a line under ``Run:``. HTML: a banner under the title.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from flask_eval.report.agreement import FIELDS as AGREEMENT_FIELDS
from flask_eval.report.agreement import Agreement
from flask_eval.report.document import FIELDS, Report, as_report
from flask_eval.report.intervals import Comparison
from flask_eval.report.metrics import Row
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


_AS_IS = frozenset({str, int, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` with every number a plain ``int`` or ``float`` (numpy scalars and arrays
    included), tuples as lists, and NaN or infinity as None: what JSON and CSV take."""
    kind = type(value)
    if kind in _AS_IS:  # the common cases first: a report has ~10^5 values
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {str(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    if isinstance(value, np.generic | np.ndarray):
        return plain(value.tolist())
    if isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def dumps(payload: Any) -> str:
    """Indented JSON of ``payload`` through :func:`plain` (strict: never NaN)."""
    return json.dumps(plain(payload), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def to_json(report: Report) -> str:
    return dumps(report.as_dict())


def _csv_field(value: Any) -> str:
    value = plain(value)
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def write_csv(out: TextIO, fields: Sequence[str], records: Iterable[Mapping[str, Any]]) -> None:
    """CSV with a header of ``fields``, streamed to ``out``: None (or a field a record
    lacks) is an empty field, floats at full precision. The one CSV writer: reports and
    ``flask-eval export`` both write through it."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields)
    for rec in records:
        writer.writerow([_csv_field(rec.get(f)) for f in fields])


def write_jsonl(out: TextIO, records: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line, streamed to ``out`` (UTF-8 text as is, never NaN)."""
    for rec in records:
        out.write(json.dumps(plain(rec), ensure_ascii=False, allow_nan=False) + "\n")


def csv_text(fields: Sequence[str], records: Sequence[Mapping[str, Any]]) -> str:
    """:func:`write_csv` into a string."""
    buffer = io.StringIO()
    write_csv(buffer, fields, records)
    return buffer.getvalue()


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
    (absolute and pairwise dimensions) with the wider ``PAIRWISE_FIELDS``."""
    if report.pairwise is None:
        return rows_csv(report)
    from flask_eval.report.pairwise_report import PAIRWISE_FIELDS

    plain_rows = [dict.fromkeys(PAIRWISE_FIELDS) | r.as_dict() for r in report.rows]
    return csv_text(PAIRWISE_FIELDS, [*progress_rows(report), *plain_rows, *report.pairwise.rows()])


def comparisons_csv(comparisons: Sequence[Comparison]) -> str:
    return csv_text(COMPARISON_FIELDS, [c.as_dict() for c in comparisons])


def agreement_csv(rows: Sequence[Agreement]) -> str:
    return csv_text(AGREEMENT_FIELDS, [a.as_dict() for a in rows])
