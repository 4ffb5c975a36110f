"""The batch lane end to end in-process, with each provider's real SDK (OpenAI, Anthropic,
Gemini) against the simulator's batch endpoints: the run ends done == total with the
report of a live run; a batch accepted but whose answer was lost is found by its tag,
never sent twice; an expired, partly failed or wholly failed batch plans only its
unanswered calls again."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.storage.batches import BatchLedger
from flask_eval.storage.store import Store
from flask_eval.workers.batching import BatchRequest, batch_api
from flask_eval.workers.judge import GenerateConfig, JudgeOutput, create_judge
from flask_eval.workers.providers.anthropic_batch import parse_wire_id
from flask_eval.workers.providers.gemini_batch import parse_key
from flask_eval.workers.providers.openai_batch import result_of
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

INPUTS = [
    "--instances",
    str(EXAMPLES / "instances.jsonl"),
    "--responses",
    f"model_a={EXAMPLES / 'model_a.jsonl'}",
    "--responses",
    f"model_b={EXAMPLES / 'model_b.jsonl'}",
]
CALLS = 27 + 25  # instance mode: one call per (model, instance)
PROVIDERS = ("openai", "anthropic", "gemini")


def sim_post(sim: SimHandle, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{sim.base_url}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        data: dict[str, Any] = json.loads(resp.read())
    return data


def sim_batches(sim: SimHandle, provider: str = "openai") -> dict[str, Any]:
    """The simulator's batch counts for ``provider``; ``calls``: how many times each of our
    calls was submitted (Anthropic's custom_ids and Gemini's keys carry more: our id is
    their tail)."""
    with urllib.request.urlopen(f"{sim.base_url}/batches/submitted", timeout=10) as resp:
        data: dict[str, Any] = json.loads(resp.read())[provider]
    calls: Counter[str] = Counter()
    for sent, n in data["submitted"].items():
        if provider == "anthropic":
            ours = parse_wire_id(sent)
            sent = ours[2] if ours else sent
        elif provider == "gemini":
            keyed = parse_key(sent)
            sent = keyed[1] if keyed else sent
        calls[sent] += n
    data["calls"] = dict(calls)
    return data


def spec_of(provider: str, sim: SimHandle) -> str:
    if provider == "openai":
        return f"openai/sim-gpt@{sim.openai_base_url}"
    return f"{provider}/sim-{provider}@{sim.base_url}"


def judges(
    tmp_path: Path, sim: SimHandle, batch: bool, extra: str = "", provider: str = "openai"
) -> str:
    path = tmp_path / ("batch.yaml" if batch else "live.yaml")
    text = f"- spec: {spec_of(provider, sim)}\n  name: j\n"
    text += "  price: {input: 2.0, output: 8.0, batch: 0.5}\n"  # no cache prices: cost = tokens
    if batch:
        text += "  batch: true\n" + extra
    path.write_text(text)
    return str(path)


def report(env: dict[str, str], run: str) -> Any:
    return json.loads(flask_eval("report", run, "--format", "json", env=env).stdout)["rows"]


def test_the_sdk_submits_finds_polls_and_reads_a_batch() -> None:
    """OpenAIBatch through the real SDK: the tag is kept in the batch's metadata and finds
    it; the results are read by the live reader."""
    import asyncio

    with running_simulator(SimConfig(seed=1)) as sim:

        async def main() -> None:
            judge = create_judge(f"openai/sim-gpt@{sim.openai_base_url}")
            api = batch_api(judge)
            requests = [
                BatchRequest(
                    f"c{i}", [{"role": "user", "content": f"q {i}"}], GenerateConfig(max_tokens=300)
                )
                for i in range(3)
            ]
            since = datetime.now(UTC)
            status = await api.submit_batch("tag-1", requests)
            assert status.total == 3 and status.files and "input" in status.files
            assert (await api.find_batch("tag-1", since, 3)).batch_id == status.batch_id
            missing = await api.find_batch("tag-2", since, 3)
            assert missing.batch_id is None and missing.settled
            polled = await api.poll_batch(status.batch_id)
            assert (polled.phase, polled.succeeded) == ("ended", 3)
            results = await api.batch_results(status.batch_id)
            assert set(results) == {"c0", "c1", "c2"}
            assert all(isinstance(r, JudgeOutput) and r.prompt_tokens for r in results.values())
            await judge.aclose()

        asyncio.run(main())


def test_result_lines_map_to_answers_and_reasons() -> None:
    ok = {
        "custom_id": "a",
        "response": {
            "status_code": 200,
            "body": {
                "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            },
        },
        "error": None,
    }
    expired = {
        "custom_id": "b",
        "response": None,
        "error": {"code": "batch_expired", "message": "late"},
    }
    server = {
        "custom_id": "c",
        "response": {"status_code": 500, "body": {"error": {"message": "boom"}}},
        "error": None,
    }
    answers = dict(result_of(json.dumps(x).encode()) for x in (ok, expired, server))
    usage = {"prompt_tokens": 3, "completion_tokens": 1}  # kept as given: workers/usage.py
    assert answers["a"] == JudgeOutput("hi", 3, 1, stop_reason="stop", usage=usage)
    assert isinstance(answers["b"], JudgeError) and answers["b"].reason == FailureReason.TIMEOUT
    assert isinstance(answers["c"], JudgeError)
    assert answers["c"].reason == FailureReason.PROVIDER_ERROR


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_run_reports_as_a_live_run_at_half_the_price(tmp_path: Path, provider: str) -> None:
    """The same inputs and simulator seed, judged live and in provider batches (two
    ledgers, so no answer comes from the other's cache): done == total, the same report,
    every call submitted once, each paid answer a batch's."""
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
        seen = sim_batches(sim, provider)
    st = json.loads(flask_eval("status", "r", "--json", env=batched).stdout)
    assert st["done"] == st["total"] == CALLS * 3
    assert report(batched, "r") == report(live, "r")
    assert seen["batches"] == 3 and len(seen["calls"]) == CALLS  # 20 + 20 + 12
    assert set(seen["calls"].values()) == {1}  # each call submitted exactly once
    assert {c.uid for c in paid(batched)} == set(seen["calls"])  # uid = our custom_id
    # the same tokens, each answer metered at the batch price: half the live run's cost
    live_cost = json.loads(flask_eval("status", "r", "--json", env=live).stdout)["cost"]
    assert live_cost > 0 and st["cost"] == pytest.approx(live_cost / 2, rel=1e-9)
    assert st["batch_calls"] == CALLS


def test_a_batch_answer_is_costed_at_the_judge_s_batch_price() -> None:
    """The executor keeps a prepaid batch answer as a paid call at ``cost(batch=True)``."""
    from flask_eval.core.types import JudgeConfig, Price
    from flask_eval.storage.records import JobContext
    from flask_eval.workers.asking import keep
    from flask_eval.workers.calls import Answer, Call

    config = JudgeConfig("j", "memory/j", price=Price(2.0, 8.0, batch=0.5))
    row = JobContext(1, 1, "m", "", "i", "c", "j", "q", "ref", "resp")
    from flask_eval.rubrics.grading import protocol

    big = [{"role": "user", "content": "x" * 1_000_000}]  # a request the usage fits
    call = Call(
        [row],
        config,
        None,
        protocol(),
        [],
        big,  # type: ignore[arg-type]
        GenerateConfig(max_tokens=1_000_000),
        "k",
    )
    output = JudgeOutput("text", 1_000_000, 1_000_000)
    keep(call, Answer("text", "stop", "u1", output, key="k", batch=True), None)
    keep(call, Answer("text", "stop", "u2", output, key="k"), None)
    assert [c.cost for c in call.paid] == [5.0, 10.0]


def paid(env: dict[str, str]) -> list[Any]:
    from sqlalchemy import select

    from flask_eval.storage.models import CALL

    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    with store.engine.connect() as conn:
        return list(conn.execute(select(CALL.c.uid, CALL.c.cost)))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_accepted_batch_whose_answer_was_lost_is_found_not_sent_twice(
    tmp_path: Path, provider: str
) -> None:
    """The simulator accepts the batch and drops its HTTP answer: the lane never learns
    its id, finds it by its tag on a later pass (Anthropic's once it has ended: its
    results confirm it), and collects it; each call was submitted exactly once."""
    with running_simulator(SimConfig(seed=7)) as sim:
        sim_post(sim, "/batches/settings", {"lose_responses": 1, "delay_s": 0.3})
        env = cli_env(f"sqlite:///{tmp_path / 'b.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.1")
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
        seen = sim_batches(sim, provider)
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert st["done"] == st["total"] == CALLS * 3
    assert seen["lost"] == 1 and seen["batches"] == 1
    assert len(seen["calls"]) == CALLS and set(seen["calls"].values()) == {1}
    [batch] = BatchLedger(Store(env["FLASK_EVAL_DATABASE_URL"])).batches(1)
    assert batch.state == "collected" and batch.provider_id is not None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_expired_and_failed_requests_are_planned_again_alone(tmp_path: Path, provider: str) -> None:
    """One batch expires (OpenAI's and Anthropic's with half its calls answered; Gemini's
    expired batch holds no results), a share of the first submissions fail: only the
    calls without an answer go into the next batches, and the run ends done == total."""
    with running_simulator(SimConfig(seed=7)) as sim:
        sim_post(sim, "/batches/settings", {"expire_batches": 1, "error_rate": 0.2})
        env = cli_env(f"sqlite:///{tmp_path / 'b.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.1")
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
        seen = sim_batches(sim, provider)
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert st["done"] == st["total"] == CALLS * 3
    counts = seen["calls"]
    retried = {k for k, n in counts.items() if n > 1}
    assert seen["states"] == {"expired": 1, "completed": seen["batches"] - 1}
    assert len(counts) == CALLS and max(counts.values()) == 2
    if provider == "gemini":
        assert len(retried) == CALLS
    else:  # the answered half stays answered, a share of it failed
        assert CALLS // 2 < len(retried) < CALLS
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    assert len(paid(env)) == CALLS  # one paid answer per call: none paid twice
    first = "failed" if provider == "gemini" else "collected"  # Gemini's: nothing to collect
    assert next(b.state for b in BatchLedger(store).batches(1)) == first


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_failed_as_a_whole_is_planned_again(tmp_path: Path, provider: str) -> None:
    """The provider fails the first batch as a whole (Anthropic, which has no such state:
    every request errored): all its calls go into one new batch, none is paid twice."""
    with running_simulator(SimConfig(seed=7)) as sim:
        sim_post(sim, "/batches/settings", {"fail_batches": 1})
        env = cli_env(f"sqlite:///{tmp_path / 'b.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.1")
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
        seen = sim_batches(sim, provider)
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert st["done"] == st["total"] == CALLS * 3
    assert seen["states"] == {"failed": 1, "completed": 1}
    assert len(seen["calls"]) == CALLS and set(seen["calls"].values()) == {2}
    assert len(paid(env)) == CALLS


@pytest.mark.e2e
@pytest.mark.integration
def test_kill_9_of_every_worker_and_the_producer_while_batches_are_open(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    """Real Redis and Celery worker processes, one batch judge on each provider's batch
    API (OpenAI, Anthropic, Gemini): the producer waits and two workers have submitted the
    batches (one's answer lost: accepted, found again by its tag) when all three are
    killed with -9; one new worker completes the run, every call submitted exactly once,
    and the report equals a live run's with the same seed."""
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO
    from tests.helpers import kill_group, wait_until, workers

    fast = {
        "FLASK_EVAL_LEASE_SECONDS": "3",
        "FLASK_EVAL_VISIBILITY_TIMEOUT": "8",
        "FLASK_EVAL_BATCH_POLL_SECONDS": "0.3",
    }
    env = cli_env(sqlite_url, redis_url, **fast)
    with running_simulator(SimConfig(seed=11)) as sim:
        sim_post(sim, "/batches/settings", {"lose_responses": 1, "delay_s": 3600})

        def three(batch: bool, on: SimHandle) -> str:
            text = "".join(
                f"- spec: {spec_of(p, on)}\n  name: j-{p}\n  price: {{input: 2.0, output: 8.0}}\n"
                + ("  batch: true\n  batch_max_wait: 0.5\n  batch_max_size: 20\n" if batch else "")
                for p in PROVIDERS
            )
            path = tmp_path / ("three-batch.yaml" if batch else "three-live.yaml")
            path.write_text(text)
            return str(path)

        path = three(True, sim)
        producer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flask_eval",
                "run",
                *INPUTS,
                "--judges",
                path,
                "--run",
                "r",
                "--quiet",
            ],
            env=env,
            cwd=REPO,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with workers(env, processes=2, in_flight=8, log=tmp_path / "w1.log") as proc:
                wait_until(
                    lambda: [sim_batches(sim, p) for p in PROVIDERS],
                    lambda seen: all(len(s["calls"]) == CALLS for s in seen),
                    timeout=120,
                    what="every call submitted in a batch",
                )
                kill_group(proc, signal.SIGKILL)
                proc.wait()
            os.killpg(producer.pid, signal.SIGKILL)
            producer.wait()
        finally:
            if producer.poll() is None:
                kill_group(producer, signal.SIGKILL)
        store = Store(sqlite_url)
        open_ = BatchLedger(store).open_batches()
        # every call is in one open batch of at most 20, none answered; how the calls were
        # cut into batches (3 or more each) depends on how fast they came, not on the code
        for p in PROVIDERS:
            mine = [b for b in open_ if b.judge == f"j-{p}"]
            assert sum(b.size for b in mine) == CALLS and len(mine) >= 3, p
            assert all(b.size <= 20 and b.succeeded == b.failed == 0 for b in mine), p
        sim_post(sim, "/batches/settings", {"delay_s": 0})  # the provider ends them now
        with workers(env, processes=1, in_flight=8, log=tmp_path / "w2.log"):
            st = wait_until(
                lambda: json.loads(flask_eval("status", "r", "--json", env=env).stdout),
                lambda s: s["done"] + s["failed"] == s["total"],
                timeout=180,
                what="the run to complete",
                interval=1,
            )
        seen = {p: sim_batches(sim, p) for p in PROVIDERS}
    assert st["done"] == st["total"] == CALLS * 3 * len(PROVIDERS)
    for p in PROVIDERS:
        assert len(seen[p]["calls"]) == CALLS and set(seen[p]["calls"].values()) == {1}, p
    assert sum(s["lost"] for s in seen.values()) == 1
    with running_simulator(SimConfig(seed=11)) as calm:
        live = cli_env(f"sqlite:///{tmp_path / 'live.db'}")
        flask_eval(
            "run", *INPUTS, "--judges", three(False, calm), "--run", "r", "--quiet", env=live
        )
    assert report(env, "r") == report(live, "r")
