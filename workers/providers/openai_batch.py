"""OpenAI's Batch API through the official SDK: a JSONL file of chat completion requests
(uploaded with purpose ``batch``), a batch over it carrying our tag in its ``metadata``,
its status, and its output and error files read back by the live reader.

Wire format (platform.openai.com/docs/guides/batch and the API reference of ``/v1/files``
and ``/v1/batches``): each input line is ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}``; each output line ``{"id", "custom_id", "response":
{"status_code", "request_id", "body"}, "error"}``, where ``body`` is a chat completion (or
an error object for a status other than 200); the error file holds the requests that got
no answer (``error.code``: ``batch_expired`` for those a batch that expired left,
``batch_cancelled`` ...). A batch's ``status`` is ``validating``, ``in_progress``,
``finalizing``, ``cancelling`` (open), ``completed``, ``expired``, ``cancelled`` (ended:
its files hold what was answered) or ``failed`` (the input was refused as a whole).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from flask_eval.core.errors import ConfigError, FailureReason, JudgeError
from flask_eval.core.types import JudgeSpec
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
from flask_eval.workers.providers.openai_judge import OpenAIJudge, output_of, tls_context

#: the metadata key that carries our tag
TAG_KEY = "flask_eval_tag"
ENDPOINT: Final = "/v1/chat/completions"
PHASES: Mapping[str, BatchPhase] = {
    "validating": "open",
    "in_progress": "open",
    "finalizing": "open",
    "cancelling": "open",
    "completed": "ended",
    "expired": "ended",
    "cancelled": "ended",
    "failed": "failed",
}
#: a finish_reason of null is read from the usage against the request's max_tokens, which
#: a result line does not repeat: such an answer is taken as whole (rare: OpenAI states it)
_UNSTATED_MAX_TOKENS = 2**31
#: batches created this long before the tagged one was written are not looked at
_CLOCK_SKEW = timedelta(minutes=10)


def _moment(seconds: object) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if isinstance(seconds, int | float) else None


class OpenAIBatch(BatchAPI):
    max_batch_size = 50_000

    def __init__(self, judge: Judge) -> None:
        if not isinstance(judge, OpenAIJudge):
            raise TypeError(f"OpenAIBatch needs an OpenAI judge, got {type(judge).__name__}")
        self.judge = judge
        self.client = judge._client

    async def submit_batch(self, tag: str, requests: Sequence[BatchRequest]) -> BatchStatus:
        lines = [
            json.dumps(
                {
                    "custom_id": r.custom_id,
                    "method": "POST",
                    "url": ENDPOINT,
                    "body": self.judge.request_body(r.messages, r.config),
                }
            )
            for r in requests
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        try:
            uploaded = await self.client.files.create(file=(f"{tag}.jsonl", data), purpose="batch")
            batch = await self.client.batches.create(
                input_file_id=uploaded.id,
                endpoint=ENDPOINT,
                completion_window="24h",
                metadata={TAG_KEY: tag},
            )
        except Exception as exc:
            raise self.judge.classify(exc) from exc
        return self._status(batch)

    async def find_batch(self, tag: str, since: datetime, size: int) -> Found:
        oldest = (since - _CLOCK_SKEW).timestamp()
        try:
            async for batch in self.client.batches.list(limit=100):
                if (batch.metadata or {}).get(TAG_KEY) == tag:
                    return Found(batch.id)
                if batch.created_at < oldest:  # newest first: nothing older is ours
                    break
        except Exception:  # cannot tell now: ask again later, never submit meanwhile
            return Found(None, settled=False)
        return Found(None)

    async def poll_batch(self, batch_id: str) -> BatchStatus:
        try:
            batch = await self.client.batches.retrieve(batch_id)
        except Exception as exc:
            raise self.judge.classify(exc) from exc
        return self._status(batch)

    async def batch_results(self, batch_id: str) -> BatchResults:
        try:
            batch = await self.client.batches.retrieve(batch_id)
            results = BatchResults()
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    content = await self.client.files.content(file_id)
                    for line in content.content.splitlines():
                        if line.strip():
                            results.add(*result_of(line))
        except JudgeError:
            raise
        except Exception as exc:
            raise self.judge.classify(exc) from exc
        return results

    async def cancel_batch(self, batch_id: str) -> None:
        try:
            await self.client.batches.cancel(batch_id)
        except Exception as exc:
            raise self.judge.classify(exc) from exc

    @classmethod
    def check_endpoint(cls, spec: JudgeSpec) -> None:
        """A server named by a base URL must list batches (``GET /batches``): a local
        OpenAI-compatible server answers 404 (vLLM, llama.cpp) or 405."""
        if not spec.base_url:
            return
        import openai

        client = openai.OpenAI(
            api_key=os.environ.get(OpenAIJudge.key_env) or "EMPTY",
            base_url=spec.base_url,
            max_retries=0,
            timeout=10.0,
            http_client=openai.DefaultHttpxClient(verify=tls_context()),
        )
        try:
            client.batches.list(limit=1)
        except openai.APIStatusError as exc:
            if exc.status_code in (404, 405):
                raise ConfigError(
                    f"judge {spec.name}: batch: true, but the server at {spec.base_url} has "
                    f"no batch API (GET /batches answered {exc.status_code}); remove "
                    "`batch: true` to call it one by one"
                ) from None
        except openai.APIError:
            pass  # not reachable now, or another error: its calls will say
        finally:
            client.close()

    def _status(self, batch: Any) -> BatchStatus:
        counts = batch.request_counts
        files = {
            k: v
            for k, v in (
                ("input", batch.input_file_id),
                ("output", batch.output_file_id),
                ("error", batch.error_file_id),
            )
            if v
        }
        return BatchStatus(
            batch_id=batch.id,
            phase=PHASES.get(batch.status, "open"),
            state=str(batch.status),
            total=counts.total if counts else 0,
            succeeded=counts.completed if counts else 0,
            failed=counts.failed if counts else 0,
            expires_at=_moment(batch.expires_at),
            files=files,
        )


def result_of(line: bytes) -> tuple[str, JudgeOutput | JudgeError]:
    """One line of an output or error file: its custom_id and the answer (read as a live
    answer is, ``openai_judge.output_of``) or why there is none."""
    raw = line.decode("utf-8", "replace")
    try:
        item = json.loads(line)
        custom_id = item["custom_id"]
    except (ValueError, KeyError, TypeError):
        raise malformed("a batch result line without a custom_id", raw) from None
    if not isinstance(custom_id, str):
        raise malformed("a batch result line without a custom_id", raw)
    response = item.get("response") if isinstance(item, dict) else None
    error = item.get("error")
    if isinstance(response, dict) and response.get("status_code") == 200:
        body = response.get("body")
        try:
            return custom_id, output_of(body, json.dumps(body).encode(), _UNSTATED_MAX_TOKENS)
        except JudgeError as exc:
            return custom_id, exc
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        body = response.get("body")
        message = body.get("error", {}).get("message", "") if isinstance(body, dict) else ""
        return custom_id, from_status(response["status_code"], str(message), {}, json.dumps(body))
    if isinstance(error, dict):
        code, message = str(error.get("code") or ""), str(error.get("message") or "")
        reason = FailureReason.TIMEOUT if code == "batch_expired" else FailureReason.PROVIDER_ERROR
        return custom_id, JudgeError(reason, f"batch request not answered ({code}): {message}")
    return custom_id, JudgeError(
        FailureReason.PROVIDER_ERROR,
        "a batch result line with neither a response nor an error",
        raw[:2000],
    )
