"""What a provider batch's results put in the ledger, for each provider's real SDK against
the simulator: an answer that echoes the API key is stored without it (SQLite and
PostgreSQL), as a live one is; a request answered twice keeps its first answer, and the
second is a paid call of its own, said in ``status`` and the report."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import CALL, JUDGMENT
from flask_eval.storage.store import Store
from tests.helpers import cli_env, flask_eval
from tests.workers.test_batch_lane import CALLS, INPUTS, PROVIDERS, judges, report, sim_post

#: an API key of no recognizable shape: only its value can hide it
ECHOED_KEY = "echoed-batch-key-5d1e8a7c"
KEY_VARIABLE = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}


def stored(database_url: str) -> list[dict[str, Any]]:
    """Every row of the answers and judgments tables."""
    store = Store(database_url)
    with store.engine.connect() as conn:
        return [dict(r._mapping) for t in (CALL, JUDGMENT) for r in conn.execute(select(t))]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_answer_echoing_the_key_is_stored_and_exported_without_it(
    tmp_path: Path, database_url: str, provider: str
) -> None:
    """A proxy that echoes the request's headers, in front of each provider's batch API:
    the answers, rationales, export and bundle (made where the key is not set) hold
    ``***`` in the key's place, and every judgment is done."""
    variable = KEY_VARIABLE[provider]
    with running_simulator(SimConfig(seed=7, echo_headers=True)) as sim:
        env = cli_env(database_url, FLASK_EVAL_BATCH_POLL_SECONDS="0.1", **{variable: ECHOED_KEY})
        flask_eval(
            "run",
            *INPUTS,
            "--judges",
            judges(tmp_path, sim, True, provider=provider),
            "--run",
            "r",
            "--quiet",
            env=env,
        )
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert st["done"] == st["total"] == CALLS * 3 and st["batch_calls"] == CALLS
    rows = stored(database_url)
    assert ECHOED_KEY not in json.dumps(rows, default=str)
    answers = [r["raw"] for r in rows if "raw" in r]
    assert len(answers) == CALLS and all("request headers:" in a and "***" in a for a in answers)
    elsewhere = {k: v for k, v in env.items() if k != variable}  # the key is not known here
    exported = flask_eval("export", "r", env=elsewhere).stdout
    flask_eval("export", "r", "--bundle", str(tmp_path / "r.bundle"), env=elsewhere)
    bundle = gzip.decompress((tmp_path / "r.bundle").read_bytes()).decode()
    assert exported.count("***") >= CALLS and ECHOED_KEY not in exported + bundle


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_request_answered_twice_keeps_its_first_answer_and_pays_the_second(
    tmp_path: Path, provider: str
) -> None:
    """The provider lists each request of every batch twice, the second answer scoring 5
    everywhere: the run reports as the same run judged live (the first answers), each
    second answer is a paid call of its own in the cost, and ``status`` and the report
    say so."""
    with running_simulator(SimConfig(seed=7)) as sim:
        live = cli_env(f"sqlite:///{tmp_path / 'live.db'}")
        flask_eval(
            "run",
            *INPUTS,
            "--judges",
            judges(tmp_path, sim, False, provider=provider),
            "--run",
            "r",
            "--quiet",
            env=live,
        )
        sim_post(sim, "/batches/settings", {"duplicate_results": 100})
        batched = cli_env(f"sqlite:///{tmp_path / 'batch.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.1")
        flask_eval(
            "run",
            *INPUTS,
            "--judges",
            judges(tmp_path, sim, True, "  batch_max_size: 20\n", provider),
            "--run",
            "r",
            "--quiet",
            env=batched,
        )
    st = json.loads(flask_eval("status", "r", "--json", env=batched).stdout)
    assert st["done"] == st["total"] == CALLS * 3
    assert report(batched, "r") == report(live, "r")  # the first answers, not the 5s
    assert st["duplicate_batch_answers"] == {"j": CALLS}
    calls = stored(batched["FLASK_EVAL_DATABASE_URL"])
    paid = [c for c in calls if "raw" in c]
    duplicates = [c for c in paid if c["finish"] == "duplicate"]
    assert len(paid) == 2 * CALLS and len(duplicates) == CALLS
    assert all(c["cost"] > 0 and not c["parsed"] for c in duplicates)
    assert st["cost"] == pytest.approx(sum(c["cost"] for c in paid), rel=1e-9)
    text = flask_eval("status", "r", env=batched).stdout
    notes = json.loads(flask_eval("report", "r", "--format", "json", env=batched).stdout)
    said = f"judge j: its provider returned {CALLS} duplicate batch answers"
    assert said in text and any(said in n for n in notes["notes"])
