"""A Gemini judge end to end: the real CLI, the real google-genai SDK, the simulator.

The third provider is one file (workers/providers/gemini_judge.py) plus one registry line;
these runs show that it is a judge like the others:

- a run in-process (SQLite) completes with every judgment done, and its cost ledger
  holds exactly the tokens the simulator billed;
- an answer cut off by its token limit (finishReason MAX_TOKENS) fails as ``truncated``,
  never scoring the forged scores line it quoted;
- a blocked candidate (finishReason SAFETY) fails as ``refused`` with its evidence, and a
  proxy's HTML page as ``provider_error`` with the page kept;
- a wrong key (the Gemini API's 400 API_KEY_INVALID) is ``auth`` and halts the judge;
- a base URL with the SDK's part in it, or a missing key, is refused before anything is
  written;
- the same through a real worker process and Redis.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage import queries
from flask_eval.storage.store import Store
from tests.app.test_run_promises import FORGED, export, run_args
from tests.helpers import cli_env, flask_eval, wait_done, workers

#: the SDK's variables: none may leak from the environment of whoever runs the tests
GOOGLE_PREFIXES = ("GEMINI_", "GOOGLE_")


def gemini_env(database_url: str, broker_url: str | None = None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in cli_env(database_url, broker_url).items()
        if not k.startswith(GOOGLE_PREFIXES)
    }
    env["GEMINI_API_KEY"] = "gemini-test-key"
    env.update(extra)
    return env


def test_a_gemini_run_completes_and_its_ledger_matches_the_bill(
    sqlite_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 12, models=("m1", "m2"))
    env = gemini_env(sqlite_url)
    with running_simulator(SimConfig(seed=4)) as s:
        proc = flask_eval(
            *run_args(instances, responses, f"gemini/sim-gemini@{s.gemini_base_url}", name="gem"),
            env=env,
            check=False,
        )
        billed = s.stats()
    assert proc.returncode == 0, proc.stderr
    rows = export(env, "gem")
    assert len(rows) == 12 * 2 * 3
    assert {r["status"] for r in rows} == {"done"}
    assert {r["finish"] for r in rows} == {"stop"}
    assert all(1 <= int(str(r["score"])) <= 5 for r in rows)
    store = Store(sqlite_url)
    run = store.find_run("gem")
    assert run is not None
    status = queries.status(store, run.id, "gem")
    assert status.done == status.total == 72
    assert status.calls == billed["served"] == billed["requests"] == 24
    # the tokens the ledger counts are the usageMetadata the simulator billed
    assert (status.prompt_tokens, status.completion_tokens) == (
        billed["prompt_tokens"],
        billed["completion_tokens"],
    )


def test_a_cut_off_gemini_answer_fails_as_truncated(sqlite_url: str, tmp_path: Path) -> None:
    instances, responses = write_inputs(tmp_path / "in", 8, models=("m",), texts=FORGED)
    env = gemini_env(sqlite_url, FLASK_EVAL_HALT_AFTER="0")
    sim = SimConfig(score=2, quote_response=True, min_max_tokens=2048)
    with running_simulator(sim) as s:
        proc = flask_eval(
            *run_args(instances, responses, f"gemini/g@{s.gemini_base_url}", name="cut"),
            env=env,
            check=False,
        )
    rows = export(env, "cut")
    assert len(rows) == 8 * 3
    assert not any(r["score"] == 5 for r in rows)
    assert {r["reason"] for r in rows} == {"truncated"}
    assert {r["finish"] for r in rows} == {"length"}
    quoted = [r for r in rows if "[SCORES]" in FORGED[int(str(r["instance_id"]))]]
    # the forged line, kept in the raw answer as the prompt showed it (neutralized)
    assert quoted and all("\uff3bSCORES\uff3d" in str(r["raw"]) for r in quoted)
    assert proc.returncode == 1 and "truncated: 24" in proc.stderr


def test_a_blocked_gemini_answer_and_a_proxy_page_keep_their_evidence(
    sqlite_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 20, models=("m",))
    env = gemini_env(sqlite_url, FLASK_EVAL_HALT_AFTER="0", FLASK_EVAL_MAX_ATTEMPTS="1")
    with running_simulator(SimConfig(refusal_rate=0.5, html_rate=0.3, seed=3)) as s:
        proc = flask_eval(
            *run_args(instances, responses, f"gemini/g@{s.gemini_base_url}", name="ev"),
            env=env,
            check=False,
        )
    assert proc.returncode == 1
    rows = export(env, "ev")
    refused = [r for r in rows if r["reason"] == "refused"]
    proxy = [r for r in rows if r["reason"] == "provider_error"]
    assert refused and proxy and not [r for r in rows if r["reason"] == "internal"]
    assert all(r["finish"] == "refusal" and "SAFETY" in str(r["raw"]) for r in refused)
    assert all("SAFETY" in str(r["detail"]) for r in refused)
    assert all("502 Bad Gateway" in str(r["detail"]) for r in proxy)
    assert {r["status"] for r in rows} == {"done", "failed"}


def test_a_wrong_gemini_key_is_auth_and_halts_the_judge(sqlite_url: str, tmp_path: Path) -> None:
    instances, responses = write_inputs(tmp_path / "in", 60, models=("m",))
    env = gemini_env(sqlite_url, FLASK_EVAL_HALT_AFTER="5", FLASK_EVAL_MAX_ATTEMPTS="2")
    with running_simulator(SimConfig(require_key="the-right-key")) as s:
        proc = flask_eval(
            *run_args(instances, responses, f"gemini/g@{s.gemini_base_url}", name="key"),
            "--in-flight",
            "4",
            env=env,
            check=False,
        )
        requests = s.stats()["requests"]
        # auth is not retried; the halt stops the rest: the first 5 calls and those the 4
        # lanes began before the 5th failure was seen (on a busy machine, a handful per
        # lane; test_run_promises.py says why), not the run's 60 calls
        assert requests <= 5 + 4 * 4
        env["GEMINI_API_KEY"] = "the-right-key"
        flask_eval("resume", "key", "--quiet", env=env)
    assert proc.returncode == 1
    halted = [line for line in proc.stderr.splitlines() if "halted" in line and "first 5" in line]
    assert len(halted) == 1 and "auth" in halted[0]
    st = json.loads(flask_eval("status", "key", "--json", env=env).stdout)
    assert st["done"] == st["total"] == 180


@pytest.mark.redis
def test_a_gemini_judge_through_a_broker_and_a_worker(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    """On Redis (what a broker carries does not depend on the provider)."""
    instances, responses = write_inputs(tmp_path / "in", 15, models=("m1", "m2"))
    env = gemini_env(sqlite_url, redis_url)
    with (
        running_simulator(SimConfig(latency_ms=20, seed=5)) as sim,
        workers(env, log=tmp_path / "w.log"),
    ):
        flask_eval(
            *run_args(
                instances, responses, f"gemini/sim-gemini@{sim.gemini_base_url}", name="celery-gem"
            ),
            "--no-wait",
            env=env,
        )
        st = wait_done(env, "celery-gem")
        served = sim.stats()["served"]
    assert st["done"] == st["total"] == 15 * 2 * 3 and st["failed"] == 0
    assert st["calls"] == served == 30


def test_a_bad_gemini_base_url_or_a_missing_key_is_refused_up_front(
    sqlite_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 2, models=("m",))
    env = gemini_env(sqlite_url)
    url = "http://127.0.0.1:9/v1beta/models/gemini-3-flash-preview:generateContent"
    proc = flask_eval(
        *run_args(instances, responses, f"gemini/gemini-3-flash-preview@{url}", name="url"),
        env=env,
        check=False,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "without /v1beta" in proc.stderr and "e.g. http://127.0.0.1:9" in proc.stderr
    del env["GEMINI_API_KEY"]
    proc = flask_eval(
        *run_args(instances, responses, "gemini/gemini-3-flash-preview", name="key"),
        env=env,
        check=False,
    )
    last = proc.stderr.strip().splitlines()[-1]  # after the inputs' coverage line
    assert proc.returncode == 2 and last.startswith("error: ") and "GEMINI_API_KEY" in last
    assert "Traceback" not in proc.stderr
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()
