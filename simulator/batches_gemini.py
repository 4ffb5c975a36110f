"""Gemini's batch mode, as the google-genai SDK calls it (``client.batches.create(model=...,
src=..., config={"display_name": ...})``, ``get``, ``list``, ``cancel``;
google/genai/batches.py, the Gemini Developer API paths), with its input file or inlined:

- ``POST /v1beta/models/{model}:batchGenerateContent`` ``{"batch": {"displayName",
  "inputConfig": {"fileName": "files/..."}}}``, the file uploaded through the Files API
  (simulator/files_gemini.py), one ``{"key", "request"}`` a line; or ``"inputConfig":
  {"requests": {"requests": [{"request", "metadata"}]}}``: each ``request`` a
  generateContent body; an Operation back whose ``metadata`` is the batch;
- ``GET /v1beta/batches/{id}``: that Operation (``metadata.state`` ``BATCH_STATE_PENDING``,
  ``_RUNNING``, ``_SUCCEEDED``, ``_FAILED``, ``_CANCELLED`` or ``_EXPIRED``, which the SDK
  reads as ``JOB_STATE_*``; ``batchStats`` counts); once ended, a file batch's
  ``metadata.output.responsesFile`` names a file of ``{"key", "response"}`` (or
  ``{"key", "error"}``) lines; an inlined batch's
  ``metadata.output.inlinedResponses.inlinedResponses`` lists ``{"response"}`` or
  ``{"error"}`` objects *without* the requests' ``metadata`` (the API does not reliably
  return it: open reports against google-genai). Both come in no particular order: the
  simulator shuffles them, so only a file's ``key`` tells which answer is which;
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
import random
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .batch_state import Item, SimBatch
from .batch_store import BatchStore, drop_answer, rfc3339, store_of
from .files_gemini import GeminiFiles
from .reply import Reply
from .wire import BadRequest, ParsedRequest, parse_request
from .wire_bodies import ErrorKind, error_body

if TYPE_CHECKING:
    from .state import SimState

BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput"
#: the batch's state, by the store's
_STATES = {
    "in_progress": "BATCH_STATE_RUNNING",
    "canceling": "BATCH_STATE_RUNNING",
    "completed": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "canceled": "BATCH_STATE_CANCELLED",
    "failed": "BATCH_STATE_FAILED",
}


def _error(status: int, kind: ErrorKind, message: str) -> web.Response:
    return web.json_response(error_body("gemini", kind, message, status), status=status)


def _state(batch: SimBatch) -> str:
    return _STATES[batch.state]


def _root(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _response(item: Item, answer: Reply | None) -> dict[str, Any]:
    """One response: the answer, or a google.rpc.Status (no metadata)."""
    if item.outcome == "succeeded" and answer is not None:
        return {"response": answer.body}
    return {"error": {"code": 500, "message": "Internal error (simulated batch request failure)"}}


def responses(batch: SimBatch) -> list[tuple[Item, dict[str, Any]]]:
    """The batch's responses in shuffled request order (the same at every look: the
    batch's id seeds it); a request answered twice has its second answer listed later."""
    items = list(batch.items)
    random.Random(batch.id).shuffle(items)
    rank = {id(item): n for n, item in enumerate(items)}
    listed = sorted(batch.listed(), key=lambda pair: rank[id(pair[0])])  # stable: first first
    return [(item, _response(item, answer)) for item, answer in listed]


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
        output: dict[str, Any]
        if "responses_file" in batch.extra:
            output = {"responsesFile": batch.extra["responses_file"]}
        else:
            output = {"inlinedResponses": {"inlinedResponses": [r for _, r in responses(batch)]}}
        meta["output"] = output
        body["response"] = {"@type": OUTPUT_TYPE, **output}
    return body


def parse_lines(data: bytes, model: str) -> list[tuple[str, ParsedRequest, Any]]:
    """The requests of an input file: one ``{"key", "request"}`` a line (custom_id: its
    ``key``)."""
    parsed = []
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            raise BadRequest(f"input file line {n}: not JSON") from None
        key = line.get("key") if isinstance(line, dict) else None
        request = line.get("request") if isinstance(line, dict) else None
        if not isinstance(key, str) or not key or not isinstance(request, dict):
            raise BadRequest(f"input file line {n}: a string key and a request are required")
        asked = request.get("model")
        try:
            one = parse_request(
                "gemini", request, asked if isinstance(asked, str) and asked else model
            )
        except BadRequest as exc:
            raise BadRequest(f"input file line {n}: {exc}") from None
        parsed.append((key, one, None))
    if not parsed:
        raise BadRequest("the input file holds no requests")
    return parsed


def parse_batch(body: object, model: str) -> tuple[str, list[tuple[str, ParsedRequest, Any]]]:
    """The display name and the requests of an inlined create body (custom_id: the
    request's ``metadata.custom_id`` if it has one, else its index)."""
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
        self.files = GeminiFiles()

    def _batch(self, request: web.Request) -> SimBatch | None:
        batch = self.store.get(request.match_info["name"], "gemini")
        return None if batch is None else self._settled(batch, _root(request))

    def _parse(self, body: object, model: str) -> tuple[str, list[Any], str | None]:
        """The display name, the requests and the input file (None: inlined) of a body."""
        batch = body.get("batch") if isinstance(body, dict) else None
        config = batch.get("inputConfig") if isinstance(batch, dict) else None
        file_name = config.get("fileName") if isinstance(config, dict) else None
        if file_name is None:
            name, requests = parse_batch(body, model)
            return name, requests, None
        assert isinstance(batch, dict)
        display = batch.get("displayName")
        if not isinstance(display, str) or not display:
            raise BadRequest("batch.displayName: required")
        data = self.files.contents.get(str(file_name))
        if data is None:
            raise BadRequest(f"batch.inputConfig.fileName: no file {file_name!r}")
        return display, parse_lines(data, model), str(file_name)

    def _settled(self, batch: SimBatch, root: str) -> SimBatch:
        """A file batch that ended answered gets its responses file, once."""
        extra = batch.extra
        answered = batch.ended is not None and _state(batch) == "BATCH_STATE_SUCCEEDED"
        if answered and "input_file" in extra and "responses_file" not in extra:
            lines = (
                json.dumps({"key": item.custom_id, **out}, ensure_ascii=False) + "\n"
                for item, out in responses(batch)
            )
            batch.extra["responses_file"] = self.files.add(
                "".join(lines).encode("utf-8"), f"batch-{batch.id}", "application/jsonl", root
            )
        return batch

    async def create(self, request: web.Request) -> web.Response:
        model = request.match_info["model"].removeprefix("models/")
        try:
            name, requests, file_name = self._parse(json.loads(await request.read()), model)
        except (BadRequest, ValueError) as exc:
            return _error(400, "invalid_request", str(exc))
        batch = self.store.create("gemini", model, requests, "sim", request, name)
        if file_name is not None:
            batch.extra["input_file"] = file_name
        self._settled(batch, _root(request))
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
        batches = [self._settled(b, _root(request)) for b in self.store.newest_first("gemini")]
        body: dict[str, Any] = {"operations": [operation(b) for b in batches[start : start + size]]}
        if start + size < len(batches):
            body["nextPageToken"] = str(start + size)
        return web.json_response(body)


def add_routes(app: web.Application, sim: SimState) -> None:
    """Route Gemini's batch endpoints on ``app`` (``sim``'s answers) under ``/v1beta``,
    the version our judge pins: ``/v1/batches`` is OpenAI's Batch API on the same server
    (simulator/batches_openai.py), so Gemini's batches are not served under ``/v1``."""
    handlers = GeminiBatches(store_of(app, sim))
    handlers.files.add_routes(app)
    version = "v1beta"
    app.router.add_post(f"/{version}/models/{{model}}:batchGenerateContent", handlers.create)
    app.router.add_get(f"/{version}/batches", handlers.list)
    app.router.add_get(f"/{version}/batches/{{name:[^/:]+}}", handlers.get)
    app.router.add_post(f"/{version}/batches/{{name:[^/:]+}}:cancel", handlers.cancel)
