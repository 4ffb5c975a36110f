"""FLASK metadata annotation (pure): combining several annotators' labels of an instance
(``report.annotation_combine``) and measuring agreement with given labels
(``report.annotation_quality``). One import for the commands that use both."""

from __future__ import annotations

from flask_eval.report.annotation_combine import (
    LEVELS,
    Combined,
    Labels,
    combine,
    combine_difficulty,
    combine_domains,
    combine_skills,
)
from flask_eval.report.annotation_quality import (
    STATISTICS,
    Agreement,
    FacetAgreement,
    agreement_rows,
    agreement_table,
    compare,
    confusion_matrix,
    weighted_kappa,
)

__all__ = [
    "LEVELS",
    "STATISTICS",
    "Agreement",
    "Combined",
    "FacetAgreement",
    "Labels",
    "agreement_rows",
    "agreement_table",
    "combine",
    "combine_difficulty",
    "combine_domains",
    "combine_skills",
    "compare",
    "confusion_matrix",
    "weighted_kappa",
]
