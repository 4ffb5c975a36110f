"""The keys of a report row in JSON and CSV, shared by the absolute report
(``report.document``) and the pairwise one (``report.pairwise_report``)."""

from __future__ import annotations

#: The keys of a report row in JSON and CSV: :meth:`report.metrics.Row.as_dict` plus the
#: interval.
ROW_FIELDS: tuple[str, ...] = (
    "model",
    "judge",
    "dimension",
    "key",
    "mean",
    "n",
    "n_na",
    "n_failed",
)
FIELDS: tuple[str, ...] = (*ROW_FIELDS, "ci_low", "ci_high")
