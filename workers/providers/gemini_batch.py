"""Gemini's batch mode (inlined requests) through the judge's own google-genai client
(docs/design/batches-providers.md).

Each request is what a live call sends (``gemini_judge.request_of``, less its per-call
HTTP options) and each inlined response is read by the live reader
(``gemini_judge.output_of``), so a batched answer reads exactly as a live one.

The tag is the batch's ``display_name``; each request's ``metadata`` (which every inlined
response carries back) holds our ``custom_id`` and its ``max_tokens`` (the reader needs
it; a process collecting after a crash has nothing else to learn it from). Finding a
batch again: the one batch listed with ``display_name`` == tag, created after ``since``
(less ten minutes of clock skew); the list is read whole (its order is not documented).

States (the SDK's ``JOB_STATE_*``): PENDING and RUNNING are ``open``; SUCCEEDED is
``ended``; CANCELLED and EXPIRED are ``ended`` when the batch holds responses (the
answers paid for are read; the rest are retried) and ``failed`` when it holds none (its
calls are planned again); FAILED is ``failed``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.workers.batching import BatchAPI, BatchPhase, BatchRequest, BatchStatus, Found
from flask_eval.workers.errors import from_status
from flask_eval.workers.judge import Judge, JudgeOutput
from flask_eval.workers.providers.gemini_judge import GeminiJudge, output_of, request_of

CLOCK_SLACK = timedelta(minutes=10)
#: inlined requests must stay under 20 MB in all; a judge prompt is up to ~8 KB
MAX_INLINED = 2_000
OPEN_STATES = ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_QUEUED",
               "JOB_STATE_UNSPECIFIED", "JOB_STATE_PAUSED", "JOB_STATE_UPDATING",
               "JOB_STATE_CANCELLING")  # fmt: skip
#: ended with whatever answers it holds (none: failed as a whole)
PARTIAL_STATES = ("JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED")


def _name(value: object) -> str:
    return str(getattr(value, "value", value) or "")


def phase_of(state: str, answered: bool) -> BatchPhase:
    """How the executor reads a batch's state (``answered``: it holds responses)."""
    if state in OPEN_STATES:
        return "open"
    if state == "JOB_STATE_SUCCEEDED" or (state in PARTIAL_STATES and answered):
        return "ended"
    return "failed"


def status_of(job: Any) -> BatchStatus:
    """A ``BatchJob`` as a BatchStatus (counts from its responses, once it holds some)."""
    state = _name(job.state)
    responses = (job.dest.inlined_responses if job.dest else None) or []
    succeeded = sum(r.response is not None and r.error is None for r in responses)
    return BatchStatus(job.name or "", phase_of(state, bool(responses)), state,
                       len(responses), succeeded, len(responses) - succeeded)  # fmt: skip


def result_of(response: Any, max_tokens: int) -> JudgeOutput | JudgeError:
    """One inlined response: the answer (read as a live one), or its error as the same
    HTTP error of a live call would fail."""

    def body() -> str:
        return json.dumps(response.model_dump(mode="json", exclude_none=True))

    if response.error is not None or response.response is None:
        error = response.error
        code = error.code if error is not None and error.code else 500
        said = (error.message if error is not None else None) or "no response and no error"
        return from_status(code, f"the batch request failed: {said}", None, body())
    try:
        return output_of(response.response, max_tokens, body)
    except JudgeError as exc:
        return exc


class GeminiBatch(BatchAPI):
    """Batch mode for one Gemini judge (its client, key and model)."""

    max_batch_size = MAX_INLINED

    def __init__(self, judge: Judge) -> None:
        if not isinstance(judge, GeminiJudge):
            raise TypeError(f"GeminiBatch needs a Gemini judge, not {type(judge)}")
        self._judge = judge
        self._batches = judge._client.aio.batches

    async def submit_batch(self, tag: str, requests: Sequence[BatchRequest]) -> BatchStatus:
        src: list[Any] = []  # InlinedRequestDicts (only gemini_judge.py imports the SDK)
        for r in requests:
            contents, config = request_of(r.messages, r.config)
            # per-call transport options: not part of a batched request
            config.http_options = config.automatic_function_calling = None
            config.automatic_continuation = None
            metadata = {"custom_id": r.custom_id, "max_tokens": str(r.config.max_tokens)}
            src.append({"contents": contents, "config": config, "metadata": metadata})
        try:
            tagged: Any = {"display_name": tag}
            job = await self._batches.create(model=self._judge.spec.model, src=src, config=tagged)
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        return status_of(job)

    async def find_batch(self, tag: str, since: datetime, size: int) -> Found:
        floor = (since if since.tzinfo else since.replace(tzinfo=UTC)) - CLOCK_SLACK
        try:
            async for job in await self._batches.list(config={"page_size": 100}):
                created = job.create_time
                if job.display_name == tag and (created is None or created >= floor):
                    return Found(job.name)
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        return Found(None)

    async def poll_batch(self, batch_id: str) -> BatchStatus:
        try:
            return status_of(await self._batches.get(name=batch_id))
        except Exception as exc:
            raise self._judge.classify(exc) from exc

    async def batch_results(self, batch_id: str) -> Mapping[str, JudgeOutput | JudgeError]:
        try:
            job = await self._batches.get(name=batch_id)
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        status = status_of(job)
        if status.phase == "open":
            raise JudgeError(FailureReason.PROVIDER_ERROR,
                             f"batch {batch_id} has not ended ({status.state})")  # fmt: skip
        results: dict[str, JudgeOutput | JudgeError] = {}
        for response in (job.dest.inlined_responses if job.dest else None) or []:
            metadata = response.metadata or {}
            custom_id, budget = metadata.get("custom_id"), metadata.get("max_tokens", "")
            if custom_id:
                max_tokens = int(budget) if budget.isdigit() else 2**31
                results[custom_id] = result_of(response, max_tokens)
        return results

    async def cancel_batch(self, batch_id: str) -> None:
        try:
            await self._batches.cancel(name=batch_id)
        except Exception as exc:
            raise self._judge.classify(exc) from exc
