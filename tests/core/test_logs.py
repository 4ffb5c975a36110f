"""JSON log lines (core/logs.py): fields, context, and no secret ever in them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from flask_eval.core import logs
from flask_eval.core.redact import install_log_redaction

KEY = "sk-live-0123456789abcdefXYZ"


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The root logger configured as `flask-eval --log-format json` does, into a buffer."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    root = logging.getLogger()
    saved = (root.level, root.handlers[:], root.filters[:])
    root.handlers.clear()
    root.filters.clear()
    out = io.StringIO()
    try:
        logs.configure("json", logging.INFO)
        install_log_redaction()
        root.handlers[0].setStream(out)  # type: ignore[attr-defined]
        yield out
    finally:
        root.level, root.handlers[:], root.filters[:] = saved


def lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_one_json_object_per_line_with_extra_and_context_fields(captured: io.StringIO) -> None:
    log = logging.getLogger("flask_eval.worker")
    log.warning("plain %s", "line")
    log.warning("from extra", extra={"run": 7, "judge": "openai/gpt"})
    with logs.context(run=8, judge="anthropic/claude", call="abc"):
        log.error("in context")
    first, second, third = lines(captured)
    assert first["message"] == "plain line" and first["level"] == "WARNING"
    assert first["logger"] == "flask_eval.worker" and str(first["ts"]).endswith("+00:00")
    assert "run" not in first
    assert (second["run"], second["judge"]) == (7, "openai/gpt")
    assert (third["run"], third["judge"], third["call"]) == (8, "anthropic/claude", "abc")


def test_an_api_key_in_a_message_an_argument_an_extra_or_a_traceback_never_shows(
    captured: io.StringIO,
) -> None:
    log = logging.getLogger("flask_eval.producer")
    log.warning(f"key is {KEY}")
    log.warning("key is %s", KEY)
    log.warning("extra", extra={"judge": f"openai/{KEY}"})
    try:
        raise ValueError(f"bad key {KEY}")
    except ValueError:
        log.exception("failed")
    text = captured.getvalue()
    assert KEY not in text
    assert len(lines(captured)) == 4 and "ValueError" in text
