"""OpenAI's files and batches endpoints, simulated over the app's batch store
(``simulator/batch_store.py``: its knobs, answers and counts are shared by all three
dialects). The Batch API's wire format: platform.openai.com/docs/api-reference/batch and
/files.

- ``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``;
- ``POST /v1/batches`` ``{"input_file_id", "endpoint": "/v1/chat/completions",
  "completion_window", "metadata"}``: each input line ``{"custom_id", "method": "POST",
  "url", "body"}``, each ``custom_id`` unique, each ``body`` a chat completion request
  (a bad line refuses the whole batch with a 400 naming it); a ``batch`` object back;
- ``GET /v1/batches`` (newest first, ``limit`` and ``after``; each with its
  ``metadata``, which is how a batch whose creation answer was lost is found again),
  ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.

Once a batch has ended its output file holds a line per request answered (``response``
with ``status_code`` 200 and the chat completion, or 500 and an error for a request that
failed) and its error file a line per request left unanswered (``error.code``
``batch_expired`` or ``batch_cancelled``). A batch failed as a whole has neither file and
its ``errors``. Every route is served under ``/v1`` and without it (base URLs of either
form).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .batch_state import Item, SimBatch
from .batch_store import BatchStore, drop_answer, store_of
from .reply import Reply
from .wire import BadRequest, ParsedRequest, parse_request
from .wire_bodies import ErrorKind, error_body

if TYPE_CHECKING:
    from .state import SimState

ENDPOINT = "/v1/chat/completions"
MAX_REQUESTS = 50_000
#: the batch's ``status``, by the store's state
STATUS = {
    "in_progress": "in_progress",
    "canceling": "cancelling",
    "completed": "completed",
    "expired": "expired",
    "canceled": "cancelled",
    "failed": "failed",
}
UNANSWERED = {
    "expired": (
        "batch_expired",
        "This request could not be executed before the completion window expired.",
    ),
    "canceled": ("batch_cancelled", "This request was not executed: the batch was cancelled."),
}


def _error(status: int, kind: ErrorKind, message: str) -> web.Response:
    return web.json_response(error_body("openai", kind, message), status=status)


def parse_lines(data: bytes) -> list[tuple[str, ParsedRequest, Any]]:
    """The requests of an input file; BadRequest names the first line that is wrong."""
    parsed: list[tuple[str, ParsedRequest, Any]] = []
    seen: set[str] = set()
    for n, text in enumerate(data.splitlines(), 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            raise BadRequest(f"input line {n}: not JSON") from None
        custom_id = line.get("custom_id") if isinstance(line, dict) else None
        if not isinstance(custom_id, str) or not custom_id or custom_id in seen:
            raise BadRequest(f"input line {n}: custom_id must be a unique non-empty string")
        if line.get("method") != "POST" or line.get("url") != ENDPOINT:
            raise BadRequest(f"input line {n}: method must be POST and url {ENDPOINT}")
        seen.add(custom_id)
        try:
            parsed.append((custom_id, parse_request("openai", line.get("body")), None))
        except BadRequest as exc:
            raise BadRequest(f"input line {n}: body: {exc}") from None
    if not parsed:
        raise BadRequest("the input file holds no request")
    if len(parsed) > MAX_REQUESTS:
        raise BadRequest(f"at most {MAX_REQUESTS} requests in one batch")
    return parsed


def _line(item: Item, answer: Reply | None) -> dict[str, Any]:
    """The output or error file line of one request of an ended batch (``answer``: the
    one this line carries, of a request answered twice)."""
    line: dict[str, Any] = {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": item.custom_id,
        "response": None,
        "error": None,
    }
    if item.outcome == "succeeded" and answer is not None:
        line["response"] = {"status_code": 200, "request_id": uuid.uuid4().hex, "body": answer.body}
    elif item.outcome == "errored":
        message = "The server had an error while processing your request (simulated)"
        line["response"] = {
            "status_code": 500,
            "request_id": uuid.uuid4().hex,
            "body": error_body("openai", "server_error", message),
        }
    else:
        code, message = UNANSWERED[item.outcome or "expired"]
        line["error"] = {"code": code, "message": message}
    return line


def _jsonl(lines: Iterator[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")


class OpenAIBatches:
    """The files of one simulator app, and its OpenAI batches (in the store)."""

    def __init__(self, store: BatchStore) -> None:
        self.store = store
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}

    # -- files ---------------------------------------------------------------------------

    def _file(self, data: bytes, name: str, purpose: str) -> str:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }
        self.contents[file_id] = data
        return file_id

    async def upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField) or purpose != "batch":
            return _error(400, "invalid_request", "expected a multipart file and purpose 'batch'")
        file_id = self._file(upload.file.read(), upload.filename, "batch")
        return web.json_response(self.files[file_id])

    async def get_file(self, request: web.Request) -> web.Response:
        obj = self.files.get(request.match_info["file_id"])
        return web.json_response(obj) if obj else _error(404, "not_found", "No such File object")

    async def content(self, request: web.Request) -> web.Response:
        data = self.contents.get(request.match_info["file_id"])
        if data is None:
            return _error(404, "not_found", "No such File object")
        return web.Response(body=data, content_type="application/octet-stream")

    # -- batches -------------------------------------------------------------------------

    def batch_json(self, batch: SimBatch) -> dict[str, Any]:
        """A ``batch`` object; once ended (and not failed), its output and error files
        (written at the first look after its end)."""
        extra, ended = batch.extra, batch.ended is not None
        if ended and not batch.failed and "output_file_id" not in extra:
            listed = batch.listed()
            out = [(i, a) for i, a in listed if i.outcome in ("succeeded", "errored")]
            err = [(i, a) for i, a in listed if i.outcome not in ("succeeded", "errored")]
            extra["output_file_id"] = (
                self._file(
                    _jsonl(_line(i, a) for i, a in out), f"{batch.id}_output.jsonl", "batch_output"
                )
                if out
                else None
            )
            extra["error_file_id"] = (
                self._file(
                    _jsonl(_line(i, a) for i, a in err), f"{batch.id}_error.jsonl", "batch_output"
                )
                if err
                else None
            )
        state = batch.state
        created, at = int(batch.created), int(batch.ended) if batch.ended else None
        errors = None
        if batch.failed:
            failure = {
                "code": "invalid_request",
                "line": None,
                "param": None,
                "message": "batch failed (simulated)",
            }
            errors = {"object": "list", "data": [failure]}
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": ENDPOINT,
            "errors": errors,
            "input_file_id": extra["input_file_id"],
            "completion_window": "24h",
            "status": STATUS[state],
            "output_file_id": extra.get("output_file_id"),
            "error_file_id": extra.get("error_file_id"),
            "created_at": created,
            "in_progress_at": None if batch.failed else created,
            "expires_at": int(batch.expires),
            "finalizing_at": None,
            "completed_at": at if state == "completed" else None,
            "failed_at": at if state == "failed" else None,
            "expired_at": at if state == "expired" else None,
            "cancelling_at": int(batch.cancel_at) if batch.cancel_at else None,
            "cancelled_at": at if state == "canceled" else None,
            "request_counts": {
                "total": len(batch.items),
                "completed": batch.count("succeeded"),
                "failed": 0
                if batch.failed or not ended
                else len(batch.items) - batch.count("succeeded"),
            },
            "metadata": extra.get("metadata") or None,
        }

    async def create(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise BadRequest("expected a JSON object")
            file_id = str(body.get("input_file_id"))
            data = self.contents.get(file_id)
            if data is None:
                raise BadRequest(f"input_file_id {file_id!r} is not an uploaded file")
            if body.get("endpoint") != ENDPOINT:
                raise BadRequest(f"endpoint: only {ENDPOINT} is simulated")
            metadata = body.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                raise BadRequest("metadata: an object of strings")
            requests = parse_lines(data)
        except (BadRequest, ValueError) as exc:
            return _error(400, "invalid_request", str(exc))
        batch = self.store.create("openai", requests[0][1].model, requests, "batch_", request)
        batch.extra.update(input_file_id=file_id, metadata=metadata)
        if self.store.lose_response("openai"):
            return drop_answer(request)
        return web.json_response(self.batch_json(batch))

    async def retrieve(self, request: web.Request) -> web.Response:
        batch = self.store.get(request.match_info["batch_id"], "openai")
        if batch is None:
            return _error(404, "not_found", "No such Batch object")
        return web.json_response(self.batch_json(batch))

    async def listing(self, request: web.Request) -> web.Response:
        try:
            limit = max(1, min(100, int(request.query.get("limit", "20"))))
        except ValueError:
            return _error(400, "invalid_request", "limit: an integer in 1..100")
        batches = self.store.newest_first("openai")
        ids = [b.id for b in batches]
        after = request.query.get("after")
        start = ids.index(after) + 1 if after in ids else 0
        page = [self.batch_json(b) for b in batches[start : start + limit]]
        return web.json_response(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": start + limit < len(ids),
            }
        )

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self.store.get(request.match_info["batch_id"], "openai")
        if batch is None:
            return _error(404, "not_found", "No such Batch object")
        if batch.ended is None and batch.cancel_at is None:
            batch.cancel_at = time.time()
        return web.json_response(self.batch_json(batch))


def add_routes(app: web.Application, sim: SimState) -> None:
    """Serve OpenAI's files and batches endpoints on ``app`` (server.make_app)."""
    handlers = OpenAIBatches(store_of(app, sim))
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/files", handlers.upload)
        app.router.add_get(f"{prefix}/files/{{file_id}}", handlers.get_file)
        app.router.add_get(f"{prefix}/files/{{file_id}}/content", handlers.content)
        app.router.add_post(f"{prefix}/batches", handlers.create)
        app.router.add_get(f"{prefix}/batches", handlers.listing)
        app.router.add_get(f"{prefix}/batches/{{batch_id}}", handlers.retrieve)
        app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", handlers.cancel)
