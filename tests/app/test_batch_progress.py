"""What a user sees of a batch run: `run` says each batch's change of state while it
waits, `status` counts batches and calls by state (text and JSON), and a batch price is
half the live one in `status`'s cost."""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from pathlib import Path

import pytest

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
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


def test_run_says_each_batch_state_and_status_counts_batches_and_calls(tmp_path: Path) -> None:
    with running_simulator(SimConfig(seed=3)) as sim:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  name: j\n"
            "  price: {input: 2.0, output: 8.0, batch: 0.5}\n  batch: true\n"
            "  batch_max_size: 30\n"
        )
        env = cli_env(f"sqlite:///{tmp_path / 'b.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.1")
        ran = flask_eval("run", *INPUTS, "--judges", str(judges), "--run", "b", env=env)
    said = [line for line in ran.stderr.splitlines() if line.startswith("batch ")]
    # two batches of at most 30 calls: each seen at least once, and seen collected
    assert len({line.split()[1] for line in said}) == 2, ran.stderr
    assert sum("(openai, " in line and ": collected" in line for line in said) == 2, said
    text = flask_eval("status", "b", env=env).stdout
    assert "judge j through its provider's batch API: batches 2 collected" in text
    assert f"calls {CALLS} collected" in text and "cost unknown" not in text
    data = json.loads(flask_eval("status", "b", "--json", env=env).stdout)
    assert data["batches"] == {"j": {"batches": {"collected": 2}, "calls": {"collected": CALLS}}}
    assert data["done"] == data["total"] == CALLS * 3
    assert data["batch_calls"] == data["calls"] == CALLS
    # the run's estimate (what --max-cost reserves) at the batch price: half the live one
    estimated = float(ran.stderr.split("estimated $", 1)[1].split(")", 1)[0])
    live = tmp_path / "live.yaml"
    live.write_text(judges.read_text().replace("  batch: true\n  batch_max_size: 30\n", ""))
    fresh = cli_env(f"sqlite:///{tmp_path / 'fresh.db'}")  # no answer cache to make it free
    dry = flask_eval("run", *INPUTS, "--judges", str(live), "--dry-run", env=fresh)
    live_usd = float(next(x for x in dry.stdout.splitlines() if x.startswith("total")).split()[-3])
    assert estimated == pytest.approx(live_usd / 2, abs=1e-4)  # as printed: 4 decimals


def test_a_live_run_shows_no_batch_lines_and_an_unpriced_cost_as_unknown(tmp_path: Path) -> None:
    with running_simulator(SimConfig(seed=3)) as sim:
        env = cli_env(f"sqlite:///{tmp_path / 'l.db'}")
        ran = flask_eval(
            "run",
            *INPUTS,
            "--judge",
            f"openai/sim-gpt@{sim.openai_base_url}",
            "--run",
            "l",
            env=env,
        )
    assert not [line for line in ran.stderr.splitlines() if line.startswith("batch ")]
    data = json.loads(flask_eval("status", "l", "--json", env=env).stdout)
    assert data["batches"] == {} and data["batch_calls"] == 0
    text = flask_eval("status", "l", env=env).stdout
    assert "batch API: batches" not in text
    # a judge without a price: its calls' cost is unknown, not $0
    assert "unknown (openai/sim-gpt: no price known for openai/sim-gpt)" in text


def test_runs_delete_cancels_the_open_batches_at_their_provider(tmp_path: Path) -> None:
    """A deleted run's batch still processing at the provider is canceled there (it would
    go on being billed for answers nobody reads); a batch whose provider id was never
    recorded is named with its tag instead."""
    import asyncio

    from sqlalchemy import insert

    from flask_eval.storage.models import BATCH
    from flask_eval.workers.batching import BatchRequest, batch_api
    from flask_eval.workers.judge import GenerateConfig, create_judge
    from tests.workers.test_batch_lane import sim_batches, sim_post

    with running_simulator(SimConfig(seed=3)) as sim:
        spec = f"openai/sim-gpt@{sim.openai_base_url}"
        env = cli_env(f"sqlite:///{tmp_path / 'd.db'}")
        flask_eval("run", *INPUTS, "--judge", f"j={spec}", "--run", "d", "--quiet", env=env)
        sim_post(sim, "/batches/settings", {"delay_s": 3600})  # it stays in progress

        async def submit() -> str:
            judge = create_judge(spec)
            try:
                request = BatchRequest("c1", [{"role": "user", "content": "hi"}], GenerateConfig())
                return (await batch_api(judge).submit_batch("tag-open", [request])).batch_id
            finally:
                await judge.aclose()

        provider_id = asyncio.run(submit())
        store = Store(env["FLASK_EVAL_DATABASE_URL"])
        run = store.find_run("d")
        assert run is not None
        with store.engine.begin() as conn:
            for uid, pid in (("tag-open", provider_id), ("tag-unrecorded", None)):
                conn.execute(
                    insert(BATCH).values(
                        uid=uid,
                        run_id=run.id,
                        judge="j",
                        provider="openai",
                        provider_id=pid,
                        state="submitted" if pid else "created",
                        provider_state="",
                        size=1,
                        succeeded=0,
                        failed=0,
                        files="{}",
                    )
                )
        store.close()
        assert sim_batches(sim)["states"] == {"in_progress": 1}
        deleted = flask_eval("runs", "delete", "d", "--yes", env=env)
        assert sim_batches(sim)["states"] in ({"canceling": 1}, {"canceled": 1})
    assert f"canceled at the provider ({provider_id})" in deleted.stderr
    assert "its tag: tag-unrecorded" in deleted.stderr
    assert "deleted run d" in deleted.stderr


def test_the_batch_queue_token_limit_holds_what_open_batches_carry(tmp_path: Path) -> None:
    """`batch_max_tokens`: the prompt tokens of a judge's open batches never pass the
    limit (a provider's batch-queue limit), so calls go in several batches, one after
    another; the run still ends done == total."""
    from flask_eval.storage.batches import BatchLedger

    limit = 15_000  # about ten of these calls' prompts
    with running_simulator(SimConfig(seed=3)) as sim:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  name: j\n  batch: true\n"
            f"  batch_max_tokens: {limit}\n"
        )
        env = cli_env(f"sqlite:///{tmp_path / 'q.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.05")
        flask_eval("run", *INPUTS, "--judges", str(judges), "--run", "q", "--quiet", env=env)
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    ledger = BatchLedger(store)
    batches = ledger.batches(1)
    carried = [sum(c.tokens for c in ledger.calls_of(b.uid)) for b in batches]
    assert len(batches) >= 4 and sum(b.size for b in batches) == CALLS
    assert max(carried) <= limit, carried
    # one open at a time: each was submitted after the one before it ended
    times = store_times(store)
    assert all(ended <= nxt for (_, ended), (nxt, _) in itertools.pairwise(times))
    assert json.loads(flask_eval("status", "q", "--json", env=env).stdout)["done"] == CALLS * 3


def store_times(store: Store) -> list[tuple[datetime, datetime]]:
    """(created, ended) of each batch, in order."""
    from sqlalchemy import select

    from flask_eval.storage.models import BATCH

    with store.engine.connect() as conn:
        return [
            (r.created_at, r.ended_at)
            for r in conn.execute(select(BATCH.c.created_at, BATCH.c.ended_at).order_by(BATCH.c.id))
        ]
