"""Anthropic's Message Batches, as the anthropic SDK calls them (``client.messages.batches``):

- ``POST /v1/messages/batches`` ``{"requests": [{"custom_id", "params"}]}``: each
  ``params`` a Messages API body, each ``custom_id`` unique and ``^[a-zA-Z0-9_-]{1,64}$``
  (the API's rule); a ``message_batch`` object back;
- ``GET /v1/messages/batches/{id}``: the batch (``processing_status`` ``in_progress``,
  ``canceling`` or ``ended``; ``request_counts`` all ``processing`` until it ends;
  ``results_url`` once ended);
- ``GET /v1/messages/batches``: newest first, ``limit`` (default 20) and ``after_id`` /
  ``before_id`` cursors; ``{"data", "has_more", "first_id", "last_id"}``;
- ``GET /v1/messages/batches/{id}/results``: JSON Lines of
  ``{"custom_id", "result": {"type": "succeeded", "message"}}`` (or ``errored`` with an
  error response, ``canceled``, ``expired``);
- ``POST /v1/messages/batches/{id}/cancel``: ``canceling``, ended at the next look.

Shapes as the SDK's types (anthropic/types/messages/message_batch*.py) and the API
reference (https://docs.anthropic.com/en/api/creating-message-batches) give them.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .batch_state import SimBatch
from .batch_store import BatchStore, drop_answer, rfc3339, store_of
from .wire import BadRequest, ParsedRequest, parse_request
from .wire_bodies import ErrorKind, error_body

if TYPE_CHECKING:
    from .state import SimState

CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_REQUESTS = 100_000
BASE = "/v1/messages/batches"


def _error(status: int, kind: ErrorKind, message: str) -> web.Response:
    return web.json_response(error_body("anthropic", kind, message), status=status)


def batch_json(batch: SimBatch, root: str) -> dict[str, Any]:
    """A ``message_batch`` object; ``root`` the server's URL (for ``results_url``)."""
    ended = batch.ended is not None
    if batch.ended is not None:
        status = "ended"
    else:
        status = "canceling" if batch.cancel_at is not None else "in_progress"
    counts = {o: batch.count(o) for o in ("succeeded", "errored", "canceled", "expired")}
    counts["processing"] = 0 if ended else len(batch.items)
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": counts,
        "created_at": rfc3339(batch.created),
        "expires_at": rfc3339(batch.expires),
        "ended_at": rfc3339(batch.ended),
        "archived_at": None,
        "cancel_initiated_at": rfc3339(batch.cancel_at),
        "results_url": f"{root}{BASE}/{batch.id}/results" if ended else None,
    }


def result_line(item: Any, answer: Any) -> dict[str, Any]:
    """One line of the results file (``answer``: the one it carries, of a request
    answered twice)."""
    outcome = item.outcome
    if outcome == "succeeded":
        result: dict[str, Any] = {"type": "succeeded", "message": answer.body}
    elif outcome == "errored":
        message = "Internal server error (simulated batch request failure)"
        result = {"type": "errored", "error": error_body("anthropic", "server_error", message)}
    else:
        result = {"type": outcome}
    return {"custom_id": item.custom_id, "result": result}


def parse_batch(body: object) -> list[tuple[str, ParsedRequest, Any]]:
    """The requests of a create body; BadRequest names the first one that is wrong."""
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        raise BadRequest("requests: a non-empty list of {custom_id, params} is required")
    if len(requests) > MAX_REQUESTS:
        raise BadRequest(f"requests: at most {MAX_REQUESTS} requests in one batch")
    parsed, seen = [], set()
    for i, entry in enumerate(requests):
        custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
        if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
            raise BadRequest(f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$")
        if custom_id in seen:
            raise BadRequest(f"requests.{i}.custom_id: {custom_id!r} is not unique")
        seen.add(custom_id)
        try:
            parsed.append((custom_id, parse_request("anthropic", entry.get("params")), None))
        except BadRequest as exc:
            raise BadRequest(f"requests.{i}.params: {exc}") from None
    return parsed


class AnthropicBatches:
    """The handlers, over the app's batch store."""

    def __init__(self, store: BatchStore) -> None:
        self.store = store

    def _batch(self, request: web.Request) -> SimBatch | None:
        return self.store.get(request.match_info["batch_id"], "anthropic")

    @staticmethod
    def _root(request: web.Request) -> str:
        return f"{request.scheme}://{request.host}"

    async def create(self, request: web.Request) -> web.Response:
        try:
            requests = parse_batch(json.loads(await request.read()))
        except (BadRequest, ValueError) as exc:
            return _error(400, "invalid_request", str(exc))
        model = requests[0][1].model
        batch = self.store.create("anthropic", model, requests, "msgbatch_sim", request)
        if self.store.lose_response("anthropic"):
            return drop_answer(request)
        return web.json_response(batch_json(batch, self._root(request)))

    async def retrieve(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return _error(404, "not_found", "message batch not found (simulated)")
        return web.json_response(batch_json(batch, self._root(request)))

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return _error(404, "not_found", "message batch not found (simulated)")
        if batch.ended is None and batch.cancel_at is None:
            batch.cancel_at = time.time()
        return web.json_response(batch_json(batch, self._root(request)))

    async def results(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return _error(404, "not_found", "message batch not found (simulated)")
        if batch.ended is None:
            message = f"batch {batch.id} has not ended: no results yet"
            return _error(400, "invalid_request", message)
        lines = (
            json.dumps(result_line(item, answer), ensure_ascii=False)
            for item, answer in batch.listed()
        )
        text = "".join(line + "\n" for line in lines)
        return web.Response(body=text.encode("utf-8"), content_type="application/x-jsonl")

    async def list(self, request: web.Request) -> web.Response:
        query = request.query
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            return _error(400, "invalid_request", "limit: must be an integer in 1..1000")
        batches = self.store.newest_first("anthropic")
        ids = [b.id for b in batches]
        after, before = query.get("after_id"), query.get("before_id")
        if after is not None:
            start = ids.index(after) + 1 if after in ids else len(ids)
            page, has_more = batches[start : start + limit], start + limit < len(ids)
        elif before is not None:
            end = ids.index(before) if before in ids else 0
            page, has_more = batches[max(0, end - limit) : end], end - limit > 0
        else:
            page, has_more = batches[:limit], limit < len(ids)
        root = self._root(request)
        return web.json_response(
            {
                "data": [batch_json(b, root) for b in page],
                "has_more": has_more,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            }
        )


def add_routes(app: web.Application, sim: SimState) -> None:
    """Route Anthropic's Message Batches endpoints on ``app`` (``sim``'s answers)."""
    handlers = AnthropicBatches(store_of(app, sim))
    app.router.add_post(BASE, handlers.create)
    app.router.add_get(BASE, handlers.list)
    app.router.add_get(f"{BASE}/{{batch_id}}", handlers.retrieve)
    app.router.add_get(f"{BASE}/{{batch_id}}/results", handlers.results)
    app.router.add_post(f"{BASE}/{{batch_id}}/cancel", handlers.cancel)
