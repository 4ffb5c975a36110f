"""Gemini's batch mode (an input file) through the judge's own google-genai client
(docs/design/batches-providers.md).

Each request is what a live call sends (``gemini_judge.request_of``, less its per-call
HTTP options, in the REST form the SDK itself sends inlined requests in) and each
response is read by the live reader (``gemini_judge.output_of``), so a batched answer
reads exactly as a live one.

Answers are matched to requests by the one link the API guarantees: the batch's input is
a JSONL file (uploaded through the Files API), one ``{"key", "request"}`` a line, and its
results a JSONL file (``dest.file_name``, downloaded) whose every line carries the
``key`` of its request beside its ``response`` (or ``error``), in no particular order.
Inlined requests are not used: their responses come back in a list whose ``metadata``
the API does not reliably return (open reports against google-genai), so nothing would
tell which answer is whose. The key is ``{max_tokens}_{custom_id}``: the reader needs the
budget (an answer without a stop reason is cut off if it spent it all) and a process
collecting after a crash has nothing else to learn it from.

The tag is the batch's ``display_name`` (and its input file's). Finding a batch again:
the one batch listed with ``display_name`` == tag, created after ``since`` (less ten
minutes of clock skew); the list is read whole (its order is not documented).

States (the SDK's ``JOB_STATE_*``): PENDING and RUNNING are ``open``; SUCCEEDED is
``ended``; CANCELLED and EXPIRED are ``ended`` when the batch holds responses (the
answers paid for are read; the rest are retried) and ``failed`` when it holds none (its
calls are planned again); FAILED is ``failed``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.workers.batching import (
    BatchAPI,
    BatchPhase,
    BatchRequest,
    BatchResults,
    BatchStatus,
    Found,
)
from flask_eval.workers.errors import from_status, malformed
from flask_eval.workers.judge_base import Judge, JudgeOutput
from flask_eval.workers.providers.gemini_judge import GeminiJudge, output_of, request_of
from flask_eval.workers.providers.images import check_images

CLOCK_SLACK = timedelta(minutes=10)
#: requests in one batch: an input file may hold 2 GB; a judge prompt is up to ~8 KB
#: (a prompt's images add their bytes, in base64, to its line)
MAX_REQUESTS = 50_000
OPEN_STATES = (
    "JOB_STATE_PENDING",
    "JOB_STATE_RUNNING",
    "JOB_STATE_QUEUED",
    "JOB_STATE_UNSPECIFIED",
    "JOB_STATE_PAUSED",
    "JOB_STATE_UPDATING",
    "JOB_STATE_CANCELLING",
)
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
    """A ``BatchJob`` as a BatchStatus, without counts (the SDK does not read the
    Developer API's ``batchStats``); ``answered``: it names a results file."""
    state = _name(job.state)
    answered = job.dest is not None and bool(job.dest.file_name or job.dest.inlined_responses)
    return BatchStatus(job.name or "", phase_of(state, answered), state)


def key_of(request: BatchRequest) -> str:
    """The ``key`` a request's line carries: ``{max_tokens}_{custom_id}``."""
    return f"{request.config.max_tokens}_{request.custom_id}"


def parse_key(key: object) -> tuple[int, str] | None:
    """(max_tokens, custom_id) of a key we wrote; None: not ours."""
    budget, _, custom_id = str(key).partition("_")
    return (int(budget), custom_id) if budget.isdigit() and custom_id else None


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


def input_line(api_client: Any, request: BatchRequest) -> str:
    """One line of a batch's input file: ``{"key", "request"}``, the request in the REST
    form the SDK sends an inlined one in (its own converter, ``_InlinedRequest_to_mldev``,
    then its own ``convert_to_dict`` and ``encode_unserializable_types``, as
    ``batches.create`` does: an image's bytes become URL-safe base64, as in a live call)."""
    from google.genai import _common, batches

    contents, config = request_of(request.messages, request.config)
    # per-call transport options: not part of a batched request
    config.http_options = config.automatic_function_calling = None
    config.automatic_continuation = None
    body = batches._InlinedRequest_to_mldev(api_client, {"contents": contents, "config": config})
    body = _common.encode_unserializable_types(_common.convert_to_dict(body))
    return json.dumps({"key": key_of(request), "request": body["request"]}, ensure_ascii=False)


def results_of(data: bytes) -> BatchResults:
    """A results file's answers by our custom_id: each line ``{"key", "response"}`` or
    ``{"key", "error"}``, read as an inlined response is (the SDK's own converter)."""
    from google.genai import batches, types

    results = BatchResults()
    for chunk in data.splitlines():
        if not chunk.strip():
            continue
        raw = chunk.decode("utf-8", "replace")
        try:
            line = json.loads(chunk)
            ours = parse_key(line.get("key"))
            parsed = types.InlinedResponse._from_response(
                response=batches._InlinedResponse_from_mldev(line), kwargs={}
            )
        except (ValueError, AttributeError, TypeError):
            raise malformed("a batch results line that is not a keyed response", raw) from None
        if ours is not None:
            results.add(ours[1], result_of(parsed, ours[0]))
    return results


class GeminiBatch(BatchAPI):
    """Batch mode for one Gemini judge (its client, key and model)."""

    max_batch_size = MAX_REQUESTS

    def __init__(self, judge: Judge) -> None:
        if not isinstance(judge, GeminiJudge):
            raise TypeError(f"GeminiBatch needs a Gemini judge, not {type(judge)}")
        self._judge = judge
        self._client = judge._client.aio
        self._batches = judge._client.aio.batches

    async def submit_batch(self, tag: str, requests: Sequence[BatchRequest]) -> BatchStatus:
        api_client = self._judge._client._api_client
        for r in requests:  # an image Gemini cannot read: refused, nothing uploaded
            check_images(self._judge.spec.name, r.messages, self._judge.image_types)
        lines = [input_line(api_client, r) for r in requests]
        data = io.BytesIO(("\n".join(lines) + "\n").encode("utf-8"))
        try:
            named: Any = {"display_name": tag, "mime_type": "jsonl"}  # UploadFileConfigDict
            uploaded = await self._client.files.upload(file=data, config=named)
            tagged: Any = {"display_name": tag}
            job = await self._batches.create(
                model=self._judge.spec.model, src=str(uploaded.name), config=tagged
            )
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

    async def batch_results(self, batch_id: str) -> BatchResults:
        try:
            job = await self._batches.get(name=batch_id)
            status = status_of(job)
            if status.phase == "open":
                raise JudgeError(
                    FailureReason.PROVIDER_ERROR, f"batch {batch_id} has not ended ({status.state})"
                )
            name = job.dest.file_name if job.dest else None
            data = await self._client.files.download(file=name) if name else b""
        except JudgeError:
            raise
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        return results_of(data)

    async def cancel_batch(self, batch_id: str) -> None:
        try:
            await self._batches.cancel(name=batch_id)
        except Exception as exc:
            raise self._judge.classify(exc) from exc
