"""A provider's token usage is untrusted input (workers/usage.py): negative, non-integer
or impossible counts are never stored nor costed as given, on every provider, live and
batched; the answer is kept with the usage as given, the call is flagged where `status`
and the report show it, and its cost is never below the request's estimate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from flask_eval.core.types import JudgeConfig, Price
from flask_eval.rubrics.grading import protocol
from flask_eval.rubrics.prompt import estimate_tokens
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.storage.models import CALL
from flask_eval.storage.records import JobContext
from flask_eval.storage.store import Store
from flask_eval.workers.asking import keep
from flask_eval.workers.calls import Answer, Call
from flask_eval.workers.judge import GenerateConfig, JudgeOutput
from flask_eval.workers.providers.openai_judge import output_of
from flask_eval.workers.usage import COMPLETION_OVERHEAD, Request, checked_usage
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

INPUTS = [
    "--instances",
    str(EXAMPLES / "instances.jsonl"),
    "--responses",
    f"model_a={EXAMPLES / 'model_a.jsonl'}",
]
CALLS = 27  # instance mode: one call per (model, instance)
MAX_TOKENS = 700

#: (provider, the usage fields the simulator overwrites in its wire's own names)
HOSTILE = {
    "openai": {"prompt_tokens": -1_000_000_000},
    "anthropic": {"cache_read_input_tokens": 10**9},
    "gemini": {"promptTokenCount": -1_000_000_000},
    "vllm": {"completion_tokens": 10**9},  # an OpenAI-compatible server
}
CASES = [(p, False) for p in HOSTILE] + [(p, True) for p in ("openai", "anthropic", "gemini")]


def spec_of(provider: str, sim: SimHandle) -> str:
    if provider in ("openai", "vllm"):
        return f"{provider}/sim-gpt@{sim.openai_base_url}"
    return f"{provider}/sim-{provider}@{sim.base_url}"


def judges_file(tmp_path: Path, sim: SimHandle, provider: str, batch: bool) -> str:
    path = tmp_path / "judges.yaml"
    text = f"- spec: {spec_of(provider, sim)}\n  name: j\n  max_tokens: {MAX_TOKENS}\n"
    text += "  price: {input: 2.0, output: 8.0, batch: 0.5}\n"
    if batch:
        text += "  batch: true\n"
    path.write_text(text)
    return str(path)


def estimated_cost(env: dict[str, str], judges: str, batch: bool) -> float:
    """The run's cost as `--dry-run` estimates it, live or batched."""
    out = flask_eval("run", *INPUTS, "--judges", judges, "--run", "r", "--dry-run", env=env)
    row = next(line for line in out.stdout.splitlines() if line.startswith("j "))
    return float(row.split()[8 if batch else 7])


def paid_calls(env: dict[str, str]) -> list[Any]:
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(select(CALL)).mappings())
    finally:
        store.close()


@pytest.mark.parametrize(("provider", "batch"), CASES)
def test_impossible_usage_is_flagged_and_costed_at_a_safe_estimate(
    tmp_path: Path, provider: str, batch: bool
) -> None:
    hostile = HOSTILE[provider]
    with running_simulator(SimConfig(seed=7, usage=hostile)) as sim:
        env = cli_env(
            f"sqlite:///{tmp_path / 'u.db'}",
            FLASK_EVAL_BATCH_POLL_SECONDS="0.1",
            GEMINI_API_KEY="k",
            OPENAI_API_KEY="k",
        )
        judges = judges_file(tmp_path, sim, provider, batch)
        estimate = estimated_cost(env, judges, batch)
        flask_eval("run", *INPUTS, "--judges", judges, "--run", "r", "--quiet", env=env)
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert st["done"] == st["total"] == CALLS * 3  # the answers are kept and read
    assert st["untrusted_usage_calls"] == st["calls"] == CALLS
    # never below the request's estimate, never the hostile count
    assert estimate > 0 and estimate - 1e-4 <= st["cost"] < 10 * estimate
    calls = paid_calls(env)
    assert len(calls) == CALLS
    for c in calls:
        assert (
            0 < c["prompt_tokens"] < 100_000
            and 0 < c["completion_tokens"] <= MAX_TOKENS + COMPLETION_OVERHEAD
        )
        assert c["cached_tokens"] == c["cache_write_tokens"] == 0 and c["batch"] == batch
        key, value = next(iter(hostile.items()))
        assert f'"{key}": {value}' in c["usage_note"]  # the usage as given is kept
    text = flask_eval("status", "r", env=env).stdout
    assert f"{CALLS} judge calls with a usage not trusted" in text
    report = flask_eval("report", "r", env=env).stdout
    assert f"{CALLS} with a usage not trusted" in report


def test_honest_usage_is_taken_as_given(tmp_path: Path) -> None:
    with running_simulator(SimConfig(seed=7)) as sim:
        env = cli_env(f"sqlite:///{tmp_path / 'u.db'}")
        judges = judges_file(tmp_path, sim, "anthropic", False)
        flask_eval("run", *INPUTS, "--judges", judges, "--run", "r", "--quiet", env=env)
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert st["untrusted_usage_calls"] == 0 and st["cost"] > 0
    assert all(c["usage_note"] is None for c in paid_calls(env))
    assert "not trusted" not in flask_eval("status", "r", env=env).stdout


def _request() -> Request:
    messages = [{"role": "user", "content": "q " * 400}]
    return Request(messages, max_tokens=300, expected_completion=120)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        ({"prompt_tokens": -5, "completion_tokens": 10}, "prompt tokens not a count"),
        ({"prompt_tokens": 12.5, "completion_tokens": 10}, "prompt tokens not a count"),
        ({"prompt_tokens": "400", "completion_tokens": 10}, "prompt tokens not a count"),
        ({"prompt_tokens": 400, "completion_tokens": True}, "completion tokens not a count"),
        (
            {
                "prompt_tokens": 400,
                "completion_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 401},
            },
            "more cached tokens",
        ),
        ({"prompt_tokens": 10**7, "completion_tokens": 10}, "above the request's size"),
        ({"prompt_tokens": 400, "completion_tokens": 5000}, "above the request's limit"),
    ],
)
def test_every_impossible_count_is_caught_at_the_one_boundary(
    usage: dict[str, Any], why: str
) -> None:
    body = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}], "usage": usage}
    output = output_of(body, json.dumps(body).encode(), 300)
    request = _request()
    counted = checked_usage(output, request)
    assert counted.note is not None and why in counted.note
    assert json.dumps(usage, sort_keys=True)[:40] in counted.note
    assert counted.prompt_tokens >= estimate_tokens(request.messages)
    assert 120 <= counted.completion_tokens <= request.completion_limit()
    assert counted.cached_tokens == counted.cache_write_tokens == 0


def test_gemini_s_thinking_may_go_past_max_tokens_but_not_past_its_output_limit() -> None:
    """Gemini bills thinking tokens as output, apart from maxOutputTokens: 5,000 of them
    on a 300-token request is an honest answer there, not on OpenAI; 10^6 is not."""
    messages = [{"role": "user", "content": "q " * 400}]
    thinking = JudgeOutput("ok", 380, 5_300)
    gemini = Request(messages, 300, 120, provider="gemini")  # type: ignore[arg-type]
    openai = Request(messages, 300, 120, provider="openai")  # type: ignore[arg-type]
    assert checked_usage(thinking, gemini).note is None
    assert checked_usage(thinking, openai).note is not None
    assert checked_usage(JudgeOutput("ok", 380, 10**6), gemini).note is not None


def test_a_possible_usage_is_kept_as_given() -> None:
    output = JudgeOutput("ok", 380, 90, cached_tokens=256, usage={"any": 1})
    counted = checked_usage(output, _request())
    assert (counted.prompt_tokens, counted.completion_tokens, counted.cached_tokens) == (
        380,
        90,
        256,
    )
    assert counted.note is None


def test_a_paid_row_is_costed_at_least_at_the_request_s_estimate() -> None:
    """keep() (every paid answer, live or a batch's) stores the checked usage: the cost is
    the safe estimate's, never the negative one given."""
    config = JudgeConfig("j", "memory/j", price=Price(2.0, 8.0, batch=0.5))
    row = JobContext(1, 1, "m", "", "i", "c", "j", "q", "ref", "resp")
    messages = [{"role": "user", "content": "x" * 4000}]
    call = Call(
        [row],
        config,
        None,
        protocol(),
        [],
        messages,  # type: ignore[arg-type]
        GenerateConfig(max_tokens=300),
        "k",
    )
    hostile = JudgeOutput("text", -1_000_000_000, 50, usage={"promptTokenCount": -(10**9)})
    keep(call, Answer("text", "stop", "u1", hostile, key="k", batch=True), None)
    [paid] = call.paid
    floor = config.cost(estimate_tokens(messages), 50, batch=True)  # type: ignore[arg-type]
    assert paid.cost >= floor > 0 and paid.prompt_tokens >= estimate_tokens(messages)  # type: ignore[arg-type]
    assert paid.usage_note is not None and "-1000000000" in paid.usage_note


def test_the_flag_and_the_usage_as_given_are_stored_on_postgresql(
    postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL's own write path keeps the note; `status` counts the flagged calls."""
    with running_simulator(SimConfig(seed=7, usage=HOSTILE["gemini"])) as sim:
        env = cli_env(postgres_url, GEMINI_API_KEY="k")
        path = tmp_path / "judges.yaml"
        path.write_text(
            f"- spec: {spec_of('gemini', sim)}\n  name: j\n  price: {{input: 2.0, output: 8.0}}\n"
        )
        flask_eval("run", *INPUTS, "--judges", str(path), "--run", "r", "--quiet", env=env)
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert st["untrusted_usage_calls"] == st["calls"] == CALLS and st["cost"] > 0
    assert all("promptTokenCount" in c["usage_note"] for c in paid_calls(env))


def test_a_budget_holds_against_a_provider_reporting_negative_usage(tmp_path: Path) -> None:
    """A Gemini judge whose every answer reports -10^9 prompt tokens, under a budget for
    half the run: the spending counted is positive, so the budget stops the dispatch, and
    a resume at the same budget sends nothing more."""
    with running_simulator(SimConfig(seed=7, usage=HOSTILE["gemini"])) as sim:
        env = cli_env(f"sqlite:///{tmp_path / 'u.db'}", GEMINI_API_KEY="k")
        judges = judges_file(tmp_path, sim, "gemini", False)
        budget = f"{estimated_cost(env, judges, False) / 2:.6f}"
        capped = flask_eval(
            "run",
            *INPUTS,
            "--judges",
            judges,
            "--run",
            "r",
            "--max-cost",
            budget,
            "--quiet",
            env=env,
            check=False,
        )
        served = sim.stats()["requests"]
        again = flask_eval("resume", "r", "--max-cost", budget, "--quiet", env=env, check=False)
        assert sim.stats()["requests"] == served
    assert capped.returncode == again.returncode == 1 and 0 < served < CALLS
    st = json.loads(flask_eval("status", "r", "--json", env=env).stdout)
    assert 0 < st["cost"] <= 1.5 * float(budget) and st["pending"] > 0


def test_a_duplicate_batch_answer_s_usage_is_checked_too(tmp_path: Path) -> None:
    """A provider that lists each batch request twice, every answer with 10^9 cached
    prompt tokens: the duplicates (paid, stored, never read) are flagged and costed at a
    safe estimate like the answers read."""
    from tests.workers.test_batch_lane import sim_post

    with running_simulator(SimConfig(seed=7, usage=HOSTILE["anthropic"])) as sim:
        sim_post(sim, "/batches/settings", {"duplicate_results": 100})
        env = cli_env(f"sqlite:///{tmp_path / 'u.db'}", FLASK_EVAL_BATCH_POLL_SECONDS="0.1")
        judges = judges_file(tmp_path, sim, "anthropic", True)
        flask_eval("run", *INPUTS, "--judges", judges, "--run", "r", "--quiet", env=env)
    calls = paid_calls(env)
    assert len(calls) == 2 * CALLS and sum(c["finish"] == "duplicate" for c in calls) == CALLS
    assert all(c["usage_note"] and "cache_read_input_tokens" in c["usage_note"] for c in calls)
    assert all(0 < c["prompt_tokens"] < 100_000 and c["cached_tokens"] == 0 for c in calls)


@pytest.mark.parametrize("usage", [None, {}, {"prompt_tokens": 0, "completion_tokens": 0}])
def test_an_answer_without_usage_is_never_free(usage: dict[str, Any] | None) -> None:
    body: dict[str, Any] = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    request = _request()
    counted = checked_usage(output_of(body, json.dumps(body).encode(), 300), request)
    assert counted.note is not None and "no prompt tokens" in counted.note
    assert counted.prompt_tokens >= estimate_tokens(request.messages)
    assert counted.completion_tokens >= request.expected_completion
