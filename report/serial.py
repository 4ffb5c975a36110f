"""Plain values as JSON and CSV (pure: strings and streams only), shared by the report's
renderers (``report.render`` re-exports them) and the pairwise ones
(``report.pairwise_render``)."""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np

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
