"""What the judge of one call is shown, from the call's first ledger row: the one place
that builds it, for the workers (workers/runner.py) and for the viewer's shown prompt
(app/prompts.py), so that both render the same prompt under the same cache key."""

from __future__ import annotations

from collections.abc import Mapping

from flask_eval.core.images import Image
from flask_eval.producer.context import Conversation, RunContext
from flask_eval.rubrics.grading import Subject
from flask_eval.storage.records import JobContext

__all__ = ["job_subject"]


def job_subject(context: RunContext, row: JobContext, images: Mapping[str, Image]) -> Subject:
    """What the judge of a call whose first row is ``row`` is shown: the row's texts, the
    conversation before its turn and its instruction's images (``images``: by digest,
    every one the row names), as every call of the run is rendered (the viewer's shown
    prompt too, ``app.prompts``, so its cache key is the call's)."""
    return context.subject(
        row.instruction,
        row.reference,
        row.response,
        row.system_prompt,
        row.response_b,
        row.model,
        Conversation(
            row.history,
            row.answers,
            row.answers_b,
            tuple(images[i.sha256] for i in row.images),
        ),
    )
