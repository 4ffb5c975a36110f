"""Anthropic's Message Batches through the judge's own SDK client (docs/design/
batches-providers.md).

Each request is the body a live call sends (``AnthropicJudge.request_body``) and each
answer is read by the live reader (``anthropic_judge.output_of``) from the result line's
own JSON, so a batched answer reads exactly as a live one.

A message batch carries no metadata of ours, so the tag travels in every ``custom_id``:
``{tag key}_{max_tokens}_{our custom_id}``, where the tag key is 16 hex digits of a hash
of the tag (the API allows ``^[a-zA-Z0-9_-]{1,64}$``; a 32-character tag beside a
32-character id would not fit). ``max_tokens`` rides along because the reader needs it
(an answer without a stop reason is cut off if it spent its whole budget) and a process
that collects a batch after a crash has nothing else to learn it from.

Finding a batch again (:meth:`AnthropicBatch.find_batch`): list the batches newest first
back to ``since`` (less ten minutes of clock skew); a candidate holds exactly ``size``
requests; an *ended* candidate is confirmed by the first ``custom_id`` of its results
(our tag key, or not); one still processing cannot be confirmed (the API shows results
only once a batch has ended), so while one is left the answer is "cannot tell yet"
(``Found(None, settled=False)``): never submit meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import re
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
from flask_eval.workers.providers.anthropic_judge import AnthropicJudge, output_of

#: what the API allows as a custom_id
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: batches created this long before ``since`` are still looked at (clocks differ)
CLOCK_SLACK = timedelta(minutes=10)
#: the HTTP status of each error type of an errored request (Anthropic's error types),
#: so that it fails as the same error of a live call would (workers/errors.py)
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
#: why a request that was never processed has no answer (retried: planned again)
NOT_PROCESSED = {
    "expired": "the message batch expired before this request was processed",
    "canceled": "the message batch was canceled before this request was processed",
}


def tag_key(tag: str) -> str:
    """The 16 hex digits that stand for ``tag`` in a custom_id."""
    return hashlib.blake2b(tag.encode("utf-8"), digest_size=8).hexdigest()


def wire_id(tag: str, custom_id: str, max_tokens: int) -> str:
    """The custom_id sent for our ``custom_id`` (ValueError if the API would refuse it)."""
    sent = f"{tag_key(tag)}_{max_tokens}_{custom_id}"
    if not CUSTOM_ID.fullmatch(sent):
        raise ValueError(f"custom_id {custom_id!r} does not fit Anthropic's rule as {sent!r}")
    return sent


def parse_wire_id(sent: str) -> tuple[str, int, str] | None:
    """(tag key, max_tokens, our custom_id) of a custom_id we sent; None: not ours."""
    key, _, rest = sent.partition("_")
    budget, _, custom_id = rest.partition("_")
    if len(key) != 16 or not budget.isdigit() or not custom_id:
        return None
    return key, int(budget), custom_id


def status_of(batch: Any) -> BatchStatus:
    """A ``MessageBatch`` as the executor reads it: ``ended`` once its processing ended
    (every request succeeded, errored, expired or was canceled), else ``open``."""
    counts = batch.request_counts
    failed = counts.errored + counts.expired + counts.canceled
    total = failed + counts.succeeded + counts.processing
    phase: BatchPhase = "ended" if batch.processing_status == "ended" else "open"
    return BatchStatus(
        batch.id, phase, batch.processing_status, total, counts.succeeded, failed, batch.expires_at
    )


def result_of(result: object, max_tokens: int, raw: bytes) -> JudgeOutput | JudgeError:
    """One result line's ``result``: the answer (read as a live one), or why there is
    none, as the same failure of a live call would be."""
    kind = result.get("type") if isinstance(result, dict) else None
    if isinstance(result, dict) and kind == "succeeded":
        try:
            return output_of(result.get("message"), raw, max_tokens)
        except JudgeError as exc:
            return exc
    if isinstance(result, dict) and kind == "errored":
        error = result.get("error")
        inner = error.get("error") if isinstance(error, dict) else None
        what = inner.get("type") if isinstance(inner, dict) else None
        said = inner.get("message") if isinstance(inner, dict) else None
        status = ERROR_STATUS.get(what, 500) if isinstance(what, str) else 500
        detail = f"the batch request errored: {what or 'unknown error'}: {said or ''}".rstrip()
        return from_status(status, detail, None, raw.decode("utf-8", "replace"))
    if isinstance(kind, str) and kind in NOT_PROCESSED:
        return JudgeError(FailureReason.PROVIDER_ERROR, NOT_PROCESSED[kind])
    return malformed(f"a batch result of unknown type {kind!r}", raw.decode("utf-8", "replace"))


class AnthropicBatch(BatchAPI):
    """Message Batches for one Anthropic judge (its client, key and model)."""

    max_batch_size = 100_000  # the API's limit (and 256 MB)

    def __init__(self, judge: Judge) -> None:
        if not isinstance(judge, AnthropicJudge):
            raise TypeError(f"AnthropicBatch needs an Anthropic judge, not {type(judge)}")
        self._judge = judge
        self._client = judge._client

    async def submit_batch(self, tag: str, requests: Sequence[BatchRequest]) -> BatchStatus:
        body = [
            {
                "custom_id": wire_id(tag, r.custom_id, r.config.max_tokens),
                "params": self._judge.request_body(r.messages, r.config),
            }
            for r in requests
        ]
        try:
            batch = await self._client.messages.batches.create(requests=body)  # type: ignore[arg-type]
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        return status_of(batch)

    async def find_batch(self, tag: str, since: datetime, size: int) -> Found:
        floor = (since if since.tzinfo else since.replace(tzinfo=UTC)) - CLOCK_SLACK
        key, unconfirmed = f"{tag_key(tag)}_", False
        try:
            async for batch in self._client.messages.batches.list(limit=100):
                if batch.created_at < floor:
                    break  # newest first: the rest are older still
                if status_of(batch).total != size:
                    continue
                if batch.processing_status != "ended":
                    unconfirmed = True  # its results, which would say, are not out yet
                    continue
                lines = await self._result_lines(batch.id, batch.results_url)
                first = next(iter(lines), None)
                if first is not None and str(first[0].get("custom_id", "")).startswith(key):
                    return Found(batch.id)
        except JudgeError:
            raise
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        return Found(None, settled=not unconfirmed)

    async def poll_batch(self, batch_id: str) -> BatchStatus:
        try:
            return status_of(await self._client.messages.batches.retrieve(batch_id))
        except Exception as exc:
            raise self._judge.classify(exc) from exc

    async def batch_results(self, batch_id: str) -> BatchResults:
        try:
            batch = await self._client.messages.batches.retrieve(batch_id)
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        if not batch.results_url:
            raise JudgeError(
                FailureReason.PROVIDER_ERROR,
                f"message batch {batch_id} has no results yet ({batch.processing_status})",
            )
        results = BatchResults()
        for line, raw in await self._result_lines(batch_id, batch.results_url):
            ours = parse_wire_id(str(line.get("custom_id", "")))
            if ours is not None:
                results.add(ours[2], result_of(line.get("result"), ours[1], raw))
        return results

    async def cancel_batch(self, batch_id: str) -> None:
        try:
            await self._client.messages.batches.cancel(batch_id)
        except Exception as exc:
            raise self._judge.classify(exc) from exc

    async def _result_lines(
        self, batch_id: str, url: str | None
    ) -> list[tuple[dict[str, Any], bytes]]:
        """The JSON Lines of an ended batch's results, each with its own bytes (kept by a
        failure, as a live call's body is)."""
        if not url:
            return []
        try:
            accept: Any = {"headers": {"Accept": "application/binary"}}  # RequestOptions
            raw = await self._client.get(url, cast_to=self._judge._response_type, options=accept)
        except Exception as exc:
            raise self._judge.classify(exc) from exc
        lines = []
        for chunk in raw.content.splitlines():
            if not chunk.strip():
                continue
            try:
                line = json.loads(chunk)
            except ValueError:
                raise malformed(
                    f"a results line of batch {batch_id} that is not JSON",
                    chunk.decode("utf-8", "replace"),
                ) from None
            if not isinstance(line, dict):
                raise malformed(
                    f"a results line of batch {batch_id} that is not an object",
                    chunk.decode("utf-8", "replace"),
                )
            lines.append((line, chunk))
        return lines
