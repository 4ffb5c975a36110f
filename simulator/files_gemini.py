"""Gemini's Files API as the google-genai SDK uses it for batch mode (google/genai/files.py,
``_api_client.async_upload_file``, ``async_download_file``; the Gemini Developer API):

- ``POST /upload/v1beta/files`` with ``X-Goog-Upload-Command: start`` and a JSON body
  ``{"file": {"displayName", "mimeType", "sizeBytes"}}``: an empty answer whose
  ``X-Goog-Upload-URL`` header is where the bytes go (``X-Goog-Upload-Status: active``);
- ``POST`` to that URL with ``X-Goog-Upload-Command: upload[, finalize]`` and
  ``X-Goog-Upload-Offset``: the bytes; the finalizing one answers ``{"file": File}``
  with ``X-Goog-Upload-Status: final``;
- ``GET /v1beta/files/{id}``: the File; ``GET /v1beta/files/{id}:download?alt=media``
  (also under ``/download``): its bytes (a batch's responses file).

A batch's input file is one JSON object a line, ``{"key", "request"}``; its responses file
(written by the batch, ``output.responsesFile``) one ``{"key", "response"}`` or ``{"key",
"error"}`` a line (https://ai.google.dev/gemini-api/docs/batch-mode).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

from aiohttp import web

from .batch_store import rfc3339
from .wire_bodies import ErrorKind, error_body

VERSION = "v1beta"


def _error(status: int, message: str) -> web.Response:
    kind: ErrorKind = "not_found" if status == 404 else "invalid_request"
    return web.json_response(error_body("gemini", kind, message, status), status=status)


class GeminiFiles:
    """The files of one simulator app (uploaded inputs, written responses)."""

    def __init__(self) -> None:
        self.files: dict[str, dict[str, Any]] = {}  # name ("files/...") -> File
        self.contents: dict[str, bytes] = {}
        self._uploads: dict[str, tuple[dict[str, Any], bytearray]] = {}

    def add(
        self, data: bytes, display_name: str, mime_type: str, root: str, source: str = "GENERATED"
    ) -> str:
        """Keep ``data`` as a new file; its name (``files/...``)."""
        name = f"files/{uuid.uuid4().hex[:16]}"
        now = rfc3339(time.time())
        self.files[name] = {
            "name": name,
            "displayName": display_name,
            "mimeType": mime_type,
            "sizeBytes": str(len(data)),
            "createTime": now,
            "updateTime": now,
            "sha256Hash": hashlib.sha256(data).hexdigest(),
            "state": "ACTIVE",
            "uri": f"{root}/{VERSION}/{name}",
            "source": source,
        }
        if source == "GENERATED":
            self.files[name]["downloadUri"] = f"{root}/download/{VERSION}/{name}:download"
        self.contents[name] = data
        return name

    async def upload(self, request: web.Request) -> web.Response:
        command = request.headers.get("X-Goog-Upload-Command", "")
        root = f"{request.scheme}://{request.host}"
        if "start" in command:
            try:
                body = await request.json()
                file = body.get("file") or {}
                mime = str(file.get("mimeType") or "application/octet-stream")
                meta = {"displayName": str(file.get("displayName") or ""), "mimeType": mime}
            except (ValueError, AttributeError):
                return _error(400, "the upload's start must be a JSON object {file}")
            upload_id = uuid.uuid4().hex
            self._uploads[upload_id] = (meta, bytearray())
            url = f"{root}/upload/{VERSION}/files?upload_id={upload_id}&upload_protocol=resumable"
            return web.Response(
                headers={"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"}
            )
        upload = self._uploads.get(request.query.get("upload_id", ""))
        if upload is None or "upload" not in command:
            return _error(400, "no such upload (start one with X-Goog-Upload-Command: start)")
        meta, data = upload
        if request.headers.get("X-Goog-Upload-Offset", "0") != str(len(data)):
            return _error(400, "X-Goog-Upload-Offset does not match the bytes received")
        data += await request.read()
        if "finalize" not in command:
            return web.Response(headers={"X-Goog-Upload-Status": "active"})
        del self._uploads[request.query["upload_id"]]
        name = self.add(bytes(data), meta["displayName"], meta["mimeType"], root, "UPLOADED")
        return web.json_response(
            {"file": self.files[name]}, headers={"X-Goog-Upload-Status": "final"}
        )

    async def get(self, request: web.Request) -> web.Response:
        file = self.files.get(f"files/{request.match_info['name']}")
        if file is None:
            return _error(404, "Requested entity was not found. (simulated)")
        return web.json_response(file)

    async def download(self, request: web.Request) -> web.Response:
        data = self.contents.get(f"files/{request.match_info['name']}")
        if data is None:
            return _error(404, "Requested entity was not found. (simulated)")
        return web.Response(body=data, content_type="application/octet-stream")

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post(f"/upload/{VERSION}/files", self.upload)
        for prefix in ("", "/download"):
            app.router.add_get(f"{prefix}/{VERSION}/files/{{name:[^/:]+}}:download", self.download)
        app.router.add_get(f"/{VERSION}/files/{{name:[^/:]+}}", self.get)
