"""Rubrics: how judgments are asked for and read (pure).

The grading protocols other than ours subclass ``rubrics.grading.Protocol`` and add
themselves to ``rubrics.grading.PROTOCOLS`` (``rubrics.flask_review``,
``rubrics.prometheus``, ``rubrics.prometheus_vision``, ``rubrics.mtbench``, and every
module of ``rubrics/protocols/``, found rather than listed). They are imported here, with
the package, so the table is complete wherever any module of this package is imported,
and ``rubrics.grading`` does not import the modules built on it.
"""

from flask_eval.rubrics import (  # noqa: F401  (they register)
    flask_review,
    mtbench,
    prometheus,
    prometheus_vision,
    protocols,
)
from flask_eval.rubrics.discovery import discover

discover(protocols)  # a protocol on another scale is one module in rubrics/protocols/
