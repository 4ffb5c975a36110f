"""How the command line logs: text lines (the default) or one JSON object per line
(``flask-eval --log-format json ...``, docs/operations.md), secrets redacted either way.

A JSON line holds ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` and, when
known, ``run``, ``judge`` and ``call`` (the judge call's prompt key): from the record's
``extra=`` or from the context the executor sets around the work it does
(:func:`context`), so that every line a call's task logs carries them. A traceback is in
``exc``. The whole line goes through ``core.redact.redact`` after it is built: a secret
in a message, an argument, an extra field or a traceback never reaches the output.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from flask_eval.core.redact import RedactingFilter, redact

#: the fields of a JSON line that the work in progress fills in
CONTEXT_FIELDS = ("run", "judge", "call")
_CONTEXT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "flask_eval_log_context", default=None
)
FORMATS = ("text", "json")
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"


def set_context(**fields: Any) -> None:
    """Add ``fields`` (``run``, ``judge``, ``call``) to the lines logged from here on in
    this context (an asyncio task, or a thread)."""
    current = _CONTEXT.get()
    _CONTEXT.set({**current, **fields} if current else fields)


@contextlib.contextmanager
def context(**fields: Any) -> Iterator[None]:
    """``fields`` on the lines logged inside the block."""
    current = _CONTEXT.get()
    token = _CONTEXT.set({**current, **fields} if current else fields)
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        known = _CONTEXT.get()
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is None and known:
                value = known.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        return redact(json.dumps(line, default=str, ensure_ascii=False))


def configure(log_format: str = "text", level: int = logging.WARNING) -> None:
    """The root logger's one handler (stderr) in ``log_format``, with redaction."""
    if log_format == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        handler.addFilter(RedactingFilter())
        root = logging.getLogger()
        if not root.handlers:  # basicConfig's rule: a process configured already keeps its own
            root.addHandler(handler)
            root.setLevel(level)
    else:
        logging.basicConfig(level=level, format=TEXT_FORMAT)
