"""Gemini's batch mode with inlined requests, as the google-genai SDK calls it
(``client.batches.create(model=..., src=[...], config={"display_name": ...})``, ``get``,
``list``, ``cancel``; google/genai/batches.py, the Gemini Developer API paths):

- ``POST /v1beta/models/{model}:batchGenerateContent`` ``{"batch": {"displayName",
  "inputConfig": {"requests": {"requests": [{"request", "metadata"}]}}}}``: each
  ``request`` a generateContent body; an Operation back whose ``metadata`` is the batch;
- ``GET /v1beta/batches/{id}``: that Operation (``metadata.state`` ``BATCH_STATE_PENDING``,
  ``_RUNNING``, ``_SUCCEEDED``, ``_FAILED``, ``_CANCELLED`` or ``_EXPIRED``, which the SDK
  reads as ``JOB_STATE_*``; once ended ``metadata.output.inlinedResponses.inlinedResponses``
  in request order, each ``{"response"}`` or ``{"error"}`` with the request's
  ``metadata``; ``batchStats`` counts);
- ``GET /v1beta/batches``: ``{"operations", "nextPageToken"}``, newest first, ``pageSize``
  / ``pageToken``;
- ``POST /v1beta/batches/{id}:cancel``: ``{}``; the batch is cancelled at the next look.

Shapes from the API reference (https://ai.google.dev/api/batch-mode) and the SDK's
readers (``_BatchJob_from_mldev``, ``_InlinedResponse_from_mldev``). ``/v1/...`` too.
An expired batch answers nothing (no output), a cancelled one nothing either: its
requests were still waiting.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .batch_store import BatchStore, SimBatch, api_key, drop_answer, rfc3339, store_of
from .wire import BadRequest, ErrorKind, ParsedRequest, error_body, parse_request

if TYPE_CHECKING:
    from .server import Simulator

BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput"
#: the batch's state, by the store's
_STATES = {"in_progress": "BATCH_STATE_RUNNING", "canceling": "BATCH_STATE_RUNNING",
           "completed": "BATCH_STATE_SUCCEEDED", "expired": "BATCH_STATE_EXPIRED",
           "canceled": "BATCH_STATE_CANCELLED", "failed": "BATCH_STATE_FAILED"}  # fmt: skip


def _error(status: int, kind: ErrorKind, message: str) -> web.Response:
    return web.json_response(error_body("gemini", kind, message, status), status=status)


def _state(batch: SimBatch) -> str:
    return _STATES[batch.state]


def _response(item: Any) -> dict[str, Any]:
    """One inlined response: the answer, or a google.rpc.Status; the request's metadata."""
    out: dict[str, Any] = {}
    if item.outcome == "succeeded":
        out["response"] = item.answer.body
    else:
        out["error"] = {"code": 500, "message": "Internal error (simulated batch request failure)"}
    if item.echo is not None:
        out["metadata"] = item.echo
    return out


def operation(batch: SimBatch) -> dict[str, Any]:
    """The Operation of a batch (its ``metadata`` the GenerateContentBatch)."""
    state = _state(batch)
    done = batch.ended is not None
    answered = done and state == "BATCH_STATE_SUCCEEDED"
    succeeded = batch.count("succeeded")
    meta: dict[str, Any] = {
        "@type": BATCH_TYPE,
        "model": f"models/{batch.model}",
        "name": f"batches/{batch.id}",
        "displayName": batch.display_name,
        "createTime": rfc3339(batch.created),
        "updateTime": rfc3339(batch.ended or batch.created),
        "batchStats": {  # int64 fields: strings in JSON
            "requestCount": str(len(batch.items)),
            "successfulRequestCount": str(succeeded),
            "failedRequestCount": str(batch.count("errored")),
            "pendingRequestCount": str(0 if done else len(batch.items)),
        },
        "state": state,
    }
    if done:
        meta["endTime"] = rfc3339(batch.ended)
    body: dict[str, Any] = {"name": f"batches/{batch.id}", "metadata": meta, "done": done}
    if answered:
        output = {"inlinedResponses": {"inlinedResponses": [_response(i) for i in batch.items]}}
        meta["output"] = output
        body["response"] = {"@type": OUTPUT_TYPE, **output}
    return body


def parse_batch(body: object, model: str) -> tuple[str, list[tuple[str, ParsedRequest, Any]]]:
    """The display name and the requests of a create body (custom_id: the request's
    ``metadata.custom_id`` if it has one, else its index)."""
    batch = body.get("batch") if isinstance(body, dict) else None
    if not isinstance(batch, dict):
        raise BadRequest("batch: an object is required")
    name = batch.get("displayName")
    if not isinstance(name, str) or not name:
        raise BadRequest("batch.displayName: required")
    config = batch.get("inputConfig")
    inner = config.get("requests") if isinstance(config, dict) else None
    entries = inner.get("requests") if isinstance(inner, dict) else None
    if not isinstance(entries, list) or not entries:
        raise BadRequest("batch.inputConfig.requests.requests: a non-empty list is required")
    parsed = []
    for i, entry in enumerate(entries):
        request = entry.get("request") if isinstance(entry, dict) else None
        metadata = entry.get("metadata") if isinstance(entry, dict) else None
        if not isinstance(request, dict):
            raise BadRequest(f"batch.inputConfig.requests.requests[{i}].request: required")
        asked = request.get("model")
        where = asked if isinstance(asked, str) and asked else model
        try:
            one = parse_request("gemini", request, where)
        except BadRequest as exc:
            raise BadRequest(f"batch.inputConfig.requests.requests[{i}]: {exc}") from None
        custom_id = metadata.get("custom_id") if isinstance(metadata, dict) else None
        parsed.append((custom_id if isinstance(custom_id, str) else str(i), one, metadata))
    return name, parsed


class GeminiBatches:
    """The handlers, over the app's batch store."""

    def __init__(self, store: BatchStore) -> None:
        self.store = store

    def _batch(self, request: web.Request) -> SimBatch | None:
        return self.store.get(request.match_info["name"], "gemini")

    async def create(self, request: web.Request) -> web.Response:
        model = request.match_info["model"].removeprefix("models/")
        try:
            name, requests = parse_batch(json.loads(await request.read()), model)
        except (BadRequest, ValueError) as exc:
            return _error(400, "invalid_request", str(exc))
        batch = self.store.create("gemini", model, requests, "sim", api_key(request), name)
        if self.store.lose_response("gemini"):
            return drop_answer(request)
        return web.json_response(operation(batch))

    async def get(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return _error(404, "not_found", "Requested entity was not found. (simulated)")
        return web.json_response(operation(batch))

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return _error(404, "not_found", "Requested entity was not found. (simulated)")
        if batch.ended is None and batch.cancel_at is None:
            batch.cancel_at = time.time()
        return web.json_response({})

    async def list(self, request: web.Request) -> web.Response:
        try:
            size = int(request.query.get("pageSize", "50"))
            start = int(request.query.get("pageToken") or "0")
        except ValueError:
            return _error(400, "invalid_request", "pageSize and pageToken must be integers")
        size = min(max(size, 1), 1000)
        batches = self.store.newest_first("gemini")
        body: dict[str, Any] = {"operations": [operation(b) for b in batches[start : start + size]]}
        if start + size < len(batches):
            body["nextPageToken"] = str(start + size)
        return web.json_response(body)


def add_routes(app: web.Application, sim: Simulator) -> None:
    """Route Gemini's batch endpoints on ``app`` (``sim``'s answers) under ``/v1beta``,
    the version our judge pins: ``/v1/batches`` is OpenAI's Batch API on the same server
    (simulator/batches_openai.py), so Gemini's batches are not served under ``/v1``."""
    handlers = GeminiBatches(store_of(app, sim))
    version = "v1beta"
    app.router.add_post(f"/{version}/models/{{model}}:batchGenerateContent", handlers.create)
    app.router.add_get(f"/{version}/batches", handlers.list)
    app.router.add_get(f"/{version}/batches/{{name:[^/:]+}}", handlers.get)
    app.router.add_post(f"/{version}/batches/{{name:[^/:]+}}:cancel", handlers.cancel)
