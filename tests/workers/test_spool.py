"""The worker's spool (workers/spool.py): what it writes to the worker's disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from flask_eval.core.errors import Status
from flask_eval.storage.records import CallRecord, Outcome
from flask_eval.workers.spool import Spool, load


def test_a_spill_holds_no_secret_and_survives_a_nul_or_a_lone_surrogate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer echoing the judge's key, with a NUL and a lone surrogate in it, is spilled
    as the ledger would keep it: the key hidden, both characters replaced."""
    key = "sk-spool-secret-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    raw = f"Authorization: Bearer {key}\x00 [SCORES] 4 \ud800"
    call = CallRecord("u1", "k" * 64, 1, "openai/j", raw, True)
    outcome = Outcome(7, Status.DONE, score=4, rationale=raw, call_uid="u1")
    spool = Spool(tmp_path / "spool", "sqlite:///x.db")
    path = spool.save([call], [outcome])
    text = path.read_text(encoding="utf-8")
    assert key not in text and "\\u0000" not in text and "\x00" not in text
    calls, outcomes = load(path)
    assert calls[0].raw.endswith("\ufffd [SCORES] 4 \ufffd") and key not in calls[0].raw
    assert outcomes[0].score == 4 and key not in (outcomes[0].rationale or "")
