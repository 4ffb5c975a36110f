"""OpenAI's files and batches endpoints, simulated (the Batch API's wire format:
platform.openai.com/docs/api-reference/batch and /files).

``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches`` (newest first,
``limit`` and ``after``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.
Each request line is answered as the live endpoint answers it (``simulator.answer``,
the same scores for the same prompt), when the batch completes: ``delay_s`` seconds
after it was created (as ``delay_s`` is set when it is looked at: a test can end open
batches at once by setting it to 0).

Faults, set with ``POST /sim/batches/config`` (JSON, the fields of
:class:`BatchFaults`) and counted by ``GET /sim/batches/stats``:

- ``fail_rate``: share of requests answered with a 500 line, drawn per ``custom_id`` the
  first time it is submitted only (a retried request is answered);
- ``expire_batches``: the next N batches expire, answering only their first half
  (the rest ``batch_expired`` in the error file);
- ``lose_responses``: the next N batch creations are accepted but their HTTP answer is
  lost (the connection is closed: the client never learns the batch id);
- ``fail_batches``: the next N batches fail as a whole (``status: failed``).

``submitted`` counts, per ``custom_id``, the batches that carried it: the exactly-once
check of the batch tests.
"""

from __future__ import annotations

import collections
import hashlib
import json
import time
import uuid
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .answer import REFUSAL_TEXT, cut_off, estimate_tokens, make_answer
from .structured import structured_answer
from .wire import BadRequest, as_served, parse_request, success_body

if TYPE_CHECKING:
    from .server import Simulator


EXPIRED = "This request could not be executed before the completion window expired."


@dataclass(frozen=True)
class BatchFaults:
    delay_s: float = 0.0
    fail_rate: float = 0.0
    expire_batches: int = 0
    lose_responses: int = 0
    fail_batches: int = 0


def _json(payload: object, status: int = 200) -> web.Response:
    return web.json_response(payload, status=status, dumps=lambda o: json.dumps(o))


def _error(status: int, message: str) -> web.Response:
    return _json({"error": {"message": message, "type": "invalid_request_error",
                            "param": None, "code": None}}, status)  # fmt: skip


class OpenAIBatches:
    """The files and batches of one simulator app."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.faults = BatchFaults()
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []  # batch ids, oldest first
        self.created_at: dict[str, float] = {}  # monotonic: ends delay_s after (as set now)
        self.expiring: set[str] = set()
        self.submitted: collections.Counter[str] = collections.Counter()
        self.lost = 0

    # -- files ---------------------------------------------------------------------------

    def _file(self, data: bytes, name: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        obj = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
               "filename": name, "purpose": purpose, "status": "processed"}  # fmt: skip
        self.files[file_id] = obj
        self.contents[file_id] = data
        return obj

    async def upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField) or purpose != "batch":
            return _error(400, "expected a multipart file and purpose 'batch'")
        return _json(self._file(upload.file.read(), upload.filename, "batch"))

    async def get_file(self, request: web.Request) -> web.Response:
        obj = self.files.get(request.match_info["file_id"])
        return _json(obj) if obj else _error(404, "No such File object")

    async def content(self, request: web.Request) -> web.Response:
        data = self.contents.get(request.match_info["file_id"])
        if data is None:
            return _error(404, "No such File object")
        return web.Response(body=data, content_type="application/octet-stream")

    # -- batches -------------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        data = self.contents.get(str(body.get("input_file_id")))
        if data is None:
            return _error(400, "input_file_id is not an uploaded file")
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, "only /v1/chat/completions is simulated")
        lines = [json.loads(x) for x in data.splitlines() if x.strip()]
        for line in lines:
            self.submitted[str(line.get("custom_id"))] += 1
        now = int(time.time())
        batch_id = f"batch_{uuid.uuid4().hex[:24]}"
        self.batches[batch_id] = {
            "id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
            "input_file_id": body["input_file_id"], "completion_window": "24h",
            "status": "in_progress", "output_file_id": None, "error_file_id": None,
            "created_at": now, "in_progress_at": now, "expires_at": now + 86_400,
            "completed_at": None, "failed_at": None, "expired_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata") or {},
        }  # fmt: skip
        self.order.append(batch_id)
        self.created_at[batch_id] = time.monotonic()
        if self.faults.fail_batches > 0:
            self.faults = replace(self.faults, fail_batches=self.faults.fail_batches - 1)
            self.batches[batch_id].update(
                status="failed",
                failed_at=now,
                errors={
                    "object": "list",
                    "data": [{"code": "invalid_request", "message": "simulated"}],
                },
            )
        elif self.faults.expire_batches > 0:
            self.faults = replace(self.faults, expire_batches=self.faults.expire_batches - 1)
            self.expiring.add(batch_id)
        if self.faults.lose_responses > 0:  # accepted, but the client never hears of it
            self.faults = replace(self.faults, lose_responses=self.faults.lose_responses - 1)
            self.lost += 1
            if request.transport is not None:
                request.transport.close()
            raise web.HTTPServiceUnavailable()
        return _json(self.batches[batch_id])

    def _settle(self, batch_id: str) -> dict[str, Any]:
        """The batch as it is now: completed (or expired) once its delay is over."""
        batch = self.batches[batch_id]
        ready_at = self.created_at[batch_id] + self.faults.delay_s
        if batch["status"] != "in_progress" or time.monotonic() < ready_at:
            return batch
        lines = [json.loads(x) for x in self.contents[batch["input_file_id"]].splitlines()
                 if x.strip()]  # fmt: skip
        answered = lines[: len(lines) // 2] if batch_id in self.expiring else lines
        out, err = [], []
        for line in answered:
            custom_id = str(line.get("custom_id"))
            if self._fails(custom_id):
                err.append({"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": custom_id,
                            "response": {"status_code": 500, "request_id": "", "body": {
                                "error": {"message": "The server had an error (simulated)",
                                          "type": "server_error"}}}, "error": None})  # fmt: skip
                continue
            out.append({"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": custom_id,
                        "response": {"status_code": 200, "request_id": uuid.uuid4().hex,
                                     "body": self.answer(line.get("body"))},
                        "error": None})  # fmt: skip
        for line in lines[len(answered) :]:
            err.append({"id": f"batch_req_{uuid.uuid4().hex[:16]}",
                        "custom_id": str(line.get("custom_id")), "response": None,
                        "error": {"code": "batch_expired", "message": EXPIRED}})  # fmt: skip
        now = int(time.time())
        expired = batch_id in self.expiring
        batch.update(status="expired" if expired else "completed",
                     **{"expired_at" if expired else "completed_at": now})  # fmt: skip
        batch["request_counts"].update(completed=len(out), failed=len(err))
        if out:
            batch["output_file_id"] = self._file(_jsonl(out), f"{batch_id}_output.jsonl",
                                                 "batch_output")["id"]  # fmt: skip
        if err:
            batch["error_file_id"] = self._file(_jsonl(err), f"{batch_id}_error.jsonl",
                                                "batch_output")["id"]  # fmt: skip
        return batch

    def _fails(self, custom_id: str) -> bool:
        rate = self.faults.fail_rate
        if rate <= 0 or self.submitted[custom_id] > 1:
            return False
        digest = hashlib.blake2b(f"{self.sim.config.seed}\x1f{custom_id}".encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big") / 2**64 < rate

    def answer(self, body: object) -> Any:
        """A request line's answer, as the live endpoint gives it (server._answer, without
        latency or transport faults)."""
        cfg, rng = self.sim.config, self.sim.rng
        try:
            parsed = parse_request("openai", body)
        except BadRequest as exc:
            return {"error": {"message": str(exc), "type": "invalid_request_error"}}
        garbage = cfg.garbage_rate > 0 and rng.random() < cfg.garbage_rate
        refusal = cfg.refusal_rate > 0 and rng.random() < cfg.refusal_rate
        text = REFUSAL_TEXT if refusal else make_answer(
            parsed.prompt, parsed.model, cfg, garbage=garbage)  # fmt: skip
        if parsed.structured is not None and not (refusal or garbage):
            text = structured_answer(parsed.prompt, parsed.model, parsed.structured.schema, cfg)
        prompt_tokens, completion_tokens = estimate_tokens(parsed.prompt), estimate_tokens(text)
        limit = parsed.max_tokens
        truncated = limit is not None and completion_tokens > limit
        if limit is not None and cfg.min_max_tokens is not None and limit < cfg.min_max_tokens:
            truncated = True
        if truncated and limit is not None and not refusal:
            text = cut_off(text, parsed.prompt, limit)
            completion_tokens = min(limit, estimate_tokens(text))
        payload = success_body("openai", parsed.model, text, prompt_tokens, completion_tokens,
                               truncated, refusal, parsed.tool)  # fmt: skip
        return as_served("openai", payload, whole=not (truncated or refusal),
                         stop_reason=cfg.stop_reason, malformed=cfg.malformed)  # fmt: skip

    async def retrieve(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["batch_id"]
        if batch_id not in self.batches:
            return _error(404, "No such Batch object")
        return _json(self._settle(batch_id))

    async def listing(self, request: web.Request) -> web.Response:
        limit = max(1, min(100, int(request.query.get("limit", "20"))))
        ids = list(reversed(self.order))
        after = request.query.get("after")
        if after in ids:
            ids = ids[ids.index(after) + 1 :]
        page = [self._settle(i) for i in ids[:limit]]
        return _json({"object": "list", "data": page,
                      "first_id": page[0]["id"] if page else None,
                      "last_id": page[-1]["id"] if page else None,
                      "has_more": len(ids) > limit})  # fmt: skip

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "No such Batch object")
        if batch["status"] == "in_progress":
            batch.update(status="cancelled", cancelled_at=int(time.time()))
        return _json(batch)

    # -- control -------------------------------------------------------------------------

    async def configure(self, request: web.Request) -> web.Response:
        body = await request.json()
        known = {f.name for f in fields(BatchFaults)}
        if not isinstance(body, dict) or set(body) - known:
            return _error(400, f"expected a JSON object with keys among {sorted(known)}")
        self.faults = replace(self.faults, **body)
        return _json(asdict(self.faults))

    async def stats(self, request: web.Request) -> web.Response:
        return _json({"batches": len(self.batches), "lost": self.lost,
                      "submitted": dict(self.submitted),
                      "states": dict(collections.Counter(
                          b["status"] for b in self.batches.values()))})  # fmt: skip


def _jsonl(items: list[dict[str, Any]]) -> bytes:
    return ("\n".join(json.dumps(i) for i in items) + "\n").encode("utf-8")


def add_routes(app: web.Application, sim: Simulator) -> OpenAIBatches:
    """Serve OpenAI's files and batches endpoints on ``app`` (server.make_app)."""
    batches = OpenAIBatches(sim)
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/files", batches.upload)
        app.router.add_get(f"{prefix}/files/{{file_id}}", batches.get_file)
        app.router.add_get(f"{prefix}/files/{{file_id}}/content", batches.content)
        app.router.add_post(f"{prefix}/batches", batches.create)
        app.router.add_get(f"{prefix}/batches", batches.listing)
        app.router.add_get(f"{prefix}/batches/{{batch_id}}", batches.retrieve)
        app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", batches.cancel)
    app.router.add_post("/sim/batches/config", batches.configure)
    app.router.add_get("/sim/batches/stats", batches.stats)
    return batches
