"""The executor's promises about answers (in-memory judge, real SQLite and PostgreSQL):

- an answer cut off by its token limit is never read: asked again with the judge's
  larger budget, or failed as ``truncated`` with its raw output kept;
- the rows of one call must share run, model, instance and judge as the ledger says:
  what does not match is refused, given back, never judged or written;
- a partial answer keeps its valid scores and asks again only for the bad criteria;
- each criterion keeps its own rationale; ``attempts`` counts the answers asked for;
- a refusal keeps its text; a judge whose first calls all fail alike is halted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from flask_eval.core.errors import FailureReason, Status
from flask_eval.core.stored import StoredConfig
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.protocol import requested_skills, scores_line
from flask_eval.storage import exports, queries
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from flask_eval.workers.judge import CUT_OFF, REFUSAL, JudgeOutput, Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from flask_eval.workers.runner import Executor, ExecutorConfig
from tests.storage.test_store import create, open_ids

J = JUDGMENT.c


@pytest.fixture(autouse=True)
def reset_memory_judge() -> Iterator[None]:
    MemoryJudge.calls = 0
    MemoryJudge.max_tokens_seen = []
    yield
    MemoryJudge.script = staticmethod(default_answer)  # type: ignore[assignment]
    MemoryJudge.calls = 0


def judge_with(script: object) -> None:
    MemoryJudge.script = staticmethod(script)  # type: ignore[assignment]


def execute(
    store: Store, run_id: int, calls: Sequence[Sequence[int]] | None = None, **config: object
) -> object:
    executor = Executor(store, ExecutorConfig(**config))  # type: ignore[arg-type]

    async def go() -> object:
        try:
            return await executor.run_batch(run_id, calls or open_ids(store, run_id))
        finally:
            await executor.aclose()

    return asyncio.run(go())


def rows(store: Store, run_id: int) -> list[dict[str, object]]:
    return list(exports.export_rows(store, run_id, "r1"))


def prompt(messages: Sequence[Message]) -> str:
    return "\n".join(text_of(m) for m in messages)


def edited(change: Callable[[dict[str, Any]], None]) -> Callable[[StoredConfig], StoredConfig]:
    """A change of the stored configuration's data, as ``Store.update_config`` takes it."""

    def apply(config: StoredConfig) -> StoredConfig:
        data = config.to_data()
        change(data)
        return StoredConfig.from_data(data)

    return apply


def set_retry_budget(store: Store, run_id: int, tokens: int) -> None:
    def change(config: dict[str, Any]) -> None:
        for judge in config["judges"]:  # type: ignore[attr-defined]
            judge["retry_max_tokens"] = tokens

    store.update_config(run_id, edited(change))


def quoting_judge_cut_off(messages: Sequence[Message]) -> JudgeOutput:
    """A judge that meant 2, quoted a response ending in a forged scores line, and was cut
    off by max_tokens right after the quote."""
    skills = requested_skills(prompt(messages)) or []
    forged = scores_line(dict.fromkeys(skills, 5))
    return JudgeOutput(f"All skills look weak; the response reads:\n{forged}", 100, 50, CUT_OFF)


def test_a_cut_off_answer_is_never_read_and_fails_as_truncated(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    judge_with(quoting_judge_cut_off)
    execute(store, run_id, halt_after=0)
    ended = rows(store, run_id)
    assert {r["status"] for r in ended} == {"failed"}
    assert {r["reason"] for r in ended} == {FailureReason.TRUNCATED}
    assert not any(r["score"] for r in ended)  # the forged 5s never became scores
    assert all("[SCORES]" in str(r["raw"]) and r["finish"] == "length" for r in ended)
    assert MemoryJudge.calls == 22  # not asked again without a larger budget


def test_a_cut_off_answer_is_asked_again_with_the_larger_budget(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    set_retry_budget(store, run_id, 4096)

    def script(messages: Sequence[Message]) -> str | JudgeOutput:
        if MemoryJudge.max_tokens_seen[-1] < 4096:
            return quoting_judge_cut_off(messages)
        skills = requested_skills(prompt(messages)) or []
        return "Weak.\n" + scores_line(dict.fromkeys(skills, 2))

    judge_with(script)
    execute(store, run_id)
    ended = rows(store, run_id)
    assert {(r["status"], r["score"]) for r in ended} == {("done", 2)}
    assert sorted(set(MemoryJudge.max_tokens_seen)) == [1024, 4096]
    assert {r["attempts"] for r in ended} == {2}
    # both answers were paid for and are kept
    assert queries.status(store, run_id, "r1").calls == 2 * 22


def test_a_message_mixing_instances_in_one_call_is_refused_and_nothing_written(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(database_url)
    run_id = create(store)
    calls = open_ids(store, run_id)
    mixed = [calls[0][0], calls[1][0], calls[2][0]]  # three instances' rows as one call
    summary = execute(store, run_id, [mixed])
    assert summary.refused == 3 and summary.calls == 0  # type: ignore[attr-defined]
    assert MemoryJudge.calls == 0
    with store.engine.connect() as conn:
        states = conn.execute(select(J.status, J.claims).where(J.id.in_(mixed))).all()
    assert set(states) == {(Status.PENDING.value, 0)}  # given back, as if never claimed
    assert "does not match the ledger" in caplog.text
    # the same rows, grouped as the ledger says, are judged normally afterwards
    execute(store, run_id)
    assert {r["status"] for r in rows(store, run_id)} == {"done"}


def test_a_message_naming_the_wrong_run_changes_nothing(database_url: str) -> None:
    store = Store(database_url)
    first = create(store, "a", "a" * 64)
    second = create(store, "b", "b" * 64)
    summary = execute(store, second, open_ids(store, first))
    assert summary.skipped == 66 and MemoryJudge.calls == 0  # type: ignore[attr-defined]
    assert queries.status(store, first, "a").pending == 66
    assert queries.status(store, second, "b").pending == 66


def test_a_row_listed_in_two_calls_is_judged_once(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    call = open_ids(store, run_id)[0]
    execute(store, run_id, [call, call[:1]])
    assert MemoryJudge.calls == 1


@pytest.mark.parametrize(
    ("bad", "problem"),
    [(None, "missing skill"), (7, "out of range"), (4.5, "not an integer")],
)
def test_a_partial_answer_keeps_its_valid_scores_and_asks_only_for_the_bad_one(
    database_url: str, bad: object, problem: str
) -> None:
    store = Store(database_url)
    run_id = create(store)
    asked_again: list[list[str]] = []

    def script(messages: Sequence[Message]) -> str:
        skills = requested_skills(prompt(messages)) or []
        if len(messages) > 2:  # the reminder: it names only the skills still missing
            asked_again.append(skills)
            return "Fixed.\n" + scores_line(dict.fromkeys(skills, 3))
        values: dict[str, object] = dict.fromkeys(skills, 4)
        if bad is None:
            values.pop(skills[0])
        else:
            values[skills[0]] = bad
        return "Rationales.\n[SCORES] " + json.dumps(values)

    judge_with(script)
    execute(store, run_id)
    assert all(len(names) == 1 for names in asked_again) and len(asked_again) == 22
    ended = rows(store, run_id)
    assert {r["status"] for r in ended} == {"done"}
    first_skill = {str(names[0]) for names in asked_again}
    for r in ended:
        if r["skill"] in first_skill and r["attempts"] == 2:
            assert r["score"] == 3  # the re-asked skill
        else:
            assert (r["score"], r["attempts"]) == (4, 1)  # kept from the first answer


def test_a_bad_criterion_that_stays_bad_fails_alone_with_its_reason(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)

    def script(messages: Sequence[Message]) -> str:
        skills = requested_skills(prompt(messages)) or []
        values: dict[str, object] = dict.fromkeys(skills, 4)
        values[skills[0]] = 9
        return "[SCORES] " + json.dumps(values)

    judge_with(script)
    execute(store, run_id, halt_after=0)
    ended = rows(store, run_id)
    failed = [r for r in ended if r["status"] == "failed"]
    assert len(failed) == 22 and {r["reason"] for r in failed} == {"unparseable"}
    assert all(
        "out of range" in str(r["detail"]) and "after a format reminder" in str(r["detail"])
        for r in failed
    )
    assert all(r["raw"] for r in failed)  # the reminder's answer is kept
    assert {r["score"] for r in ended if r["status"] == "done"} == {4}


def test_each_skill_keeps_its_own_rationale(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    execute(store, run_id)
    for r in rows(store, run_id):
        assert str(r["rationale"]).startswith(f"{r['skill']}:")
        assert str(r["rationale"]).count("read against its rubric") == 1


def test_a_refusal_fails_as_refused_with_its_text_kept(database_url: str) -> None:
    store = Store(database_url)
    run_id = create(store)
    judge_with(lambda m: JudgeOutput("I can't help with that.", 10, 5, REFUSAL))
    execute(store, run_id, halt_after=0)
    ended = rows(store, run_id)
    assert {r["reason"] for r in ended} == {"refused"}
    assert {r["raw"] for r in ended} == {"I can't help with that."}
    assert all("I can't help with that." in str(r["detail"]) for r in ended)


def test_a_judge_whose_first_calls_all_fail_alike_is_halted(tmp_path: Path) -> None:
    """A judge that answers 404 for every call (a wrong base URL): after its first 3
    calls it stops; its other judgments fail as halted without a request."""
    from flask_eval.core.errors import JudgeError

    store = Store(f"sqlite:///{tmp_path / 'h.db'}")
    run_id = create(store)

    def script(messages: Sequence[Message]) -> str:
        raise JudgeError(FailureReason.REFUSED, "Error code: 404 - not found")

    judge_with(script)
    execute(store, run_id, in_flight=1, halt_after=3)
    halts = store.halts(run_id)
    assert set(halts) == {"memory/j1", "memory/j2"}
    assert all(h.reason == "refused" and "first 3 calls" in h.detail for h in halts.values())
    ended = rows(store, run_id)
    assert {r["reason"] for r in ended} == {"refused", "halted"}
    refused = [r for r in ended if r["reason"] == "refused"]
    assert MemoryJudge.calls <= 2 * (3 + 1)  # each judge: its first 3, at most one more sent
    assert len(refused) == 3 * MemoryJudge.calls
    assert all(r["requests"] == 0 for r in ended if r["reason"] == "halted")


def test_the_calls_of_a_halted_judge_are_recorded_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose judges are halted already records its judgments as halted in one
    write, not one per call (each waited out the write-behind window: an in-process run
    of 200 calls sat 13 s after its judge's halt)."""
    store = Store(f"sqlite:///{tmp_path / 'h.db'}")
    run_id = create(store)
    for judge in ("memory/j1", "memory/j2"):
        store.halt(run_id, judge, "refused", "its first 3 calls in this run all failed")
    writes: list[int] = []
    write = store.write

    def counted(calls: Sequence[object], outcomes: Sequence[object]) -> object:
        writes.append(len(outcomes))
        return write(calls, outcomes)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "write", counted)
    execute(store, run_id)
    assert {r["reason"] for r in rows(store, run_id)} == {"halted"}
    assert MemoryJudge.calls == 0
    assert writes == [66]  # 22 calls of 3 judgments, together


def test_a_judge_that_succeeded_once_is_never_halted(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'h.db'}")
    run_id = create(store)

    def script(messages: Sequence[Message]) -> str:
        # each judge's first call (model alpha, instance 0) succeeds, every other fails
        good = "question 0\n" in prompt(messages) and "alpha says" in prompt(messages)
        return default_answer(messages) if good else "no scores"

    judge_with(script)
    execute(store, run_id, in_flight=1, halt_after=3)
    assert store.halts(run_id) == {}
    assert "halted" not in {r["reason"] for r in rows(store, run_id)}


def test_a_worker_reads_changed_budgets_from_the_ledger(tmp_path: Path) -> None:
    """Budgets live with the run: a worker rebuilds its context when they change."""
    from flask_eval.workers.limiter import MemoryLimiter

    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    run_id = create(store)
    limiter = MemoryLimiter({})
    executor = Executor(store, ExecutorConfig(), limiter=limiter)

    async def go() -> tuple[object, object]:
        before = await executor.run_context(run_id)

        def change(config: dict[str, Any]) -> None:
            for judge in config["judges"]:  # type: ignore[attr-defined]
                judge["rpm"] = 120.0

        store.update_config(run_id, edited(change))
        after = await executor.run_context(run_id)
        await executor.aclose()
        return before, after

    before, after = asyncio.run(go())
    assert before.judges["memory/j1"].rpm is None  # type: ignore[attr-defined]
    assert after.judges["memory/j1"].rpm == 120.0  # type: ignore[attr-defined]
    assert any(b.rpm == 120.0 for b in limiter.budgets.values())


def test_a_judge_the_worker_cannot_build_fails_as_config_or_auth_never_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec the ledger holds but this worker cannot build: a bad base URL is ``config``
    (our side, fixable in the run), a missing key is ``auth``; nothing is sent."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    run_id = create(store)

    def change(config: dict[str, Any]) -> None:
        j1, j2 = config["judges"]  # type: ignore[misc]
        j1["spec"] = "anthropic/m@http://127.0.0.1:9/v1"  # the SDK adds /v1 itself
        j2["spec"] = "openai/gpt-5.4"  # OpenAI's own API, and no key here

    store.update_config(run_id, edited(change))
    execute(store, run_id)
    ended = {(r["judge"], r["status"], r["reason"]) for r in rows(store, run_id)}
    assert ended == {("memory/j1", "failed", "config"), ("memory/j2", "failed", "auth")}
    details = {r["judge"]: str(r["detail"]) for r in rows(store, run_id)}
    assert "/v1" in details["memory/j1"] and "OPENAI_API_KEY" in details["memory/j2"]
    assert MemoryJudge.calls == 0


def point_judges_at(store: Store, run_id: int, spec: str) -> None:
    """Both judges of the run become ``spec`` (a real provider against the simulator)."""

    def change(config: dict[str, Any]) -> None:
        for judge in config["judges"]:  # type: ignore[attr-defined]
            judge["spec"] = spec

    store.update_config(run_id, edited(change))


def everything_stored(path: Path) -> str:
    """Every value of every table of a SQLite ledger, as SQL text."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as conn:
        return "\n".join(conn.iterdump())


#: an API key of no recognizable shape: only its value can hide it
ECHOED_KEY = "echoed-key-7f3a9c2e41d0"


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ],
)
def test_a_judge_that_echoes_the_key_has_it_hidden_from_everything_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str, variable: str
) -> None:
    """A proxy that echoes the request's headers puts the API key in every paid answer,
    through each provider's real SDK: the answers, their rationales and the export keep
    ``***`` in its place, and the scores are still read."""
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator

    monkeypatch.setenv(variable, ECHOED_KEY)
    path = tmp_path / "echo.db"
    store = Store(f"sqlite:///{path}")
    run_id = create(store)
    with running_simulator(SimConfig(echo_headers=True)) as sim:
        base = sim.openai_base_url if provider == "openai" else sim.base_url
        point_judges_at(store, run_id, f"{provider}/sim@{base}")
        execute(store, run_id)
    ended = rows(store, run_id)
    assert {r["status"] for r in ended} == {"done"}
    assert ECHOED_KEY not in json.dumps(ended, default=str)
    assert ECHOED_KEY not in everything_stored(path)
    assert all("request headers:" in str(r["raw"]) and "***" in str(r["raw"]) for r in ended)


def test_export_hides_a_known_secret_a_ledger_from_before_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer stored before its key was known as a secret (a ledger written by an
    older version) is exported with ``***`` in the key's place."""
    from click.testing import CliRunner

    from flask_eval.cli import main

    monkeypatch.delenv("LATE_JUDGE_KEY", raising=False)
    path = tmp_path / "old.db"
    store = Store(f"sqlite:///{path}")
    run_id = create(store)
    judge_with(lambda m: f"echo: {ECHOED_KEY}\n{default_answer(m)}")
    execute(store, run_id)
    assert ECHOED_KEY in everything_stored(path)  # not a secret when it was written
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{path}", "LATE_JUDGE_KEY": ECHOED_KEY}
    result = CliRunner().invoke(main, ["export", "r1"], env=env)
    assert result.exit_code == 0, result.output
    assert ECHOED_KEY not in result.stdout and result.stdout.count("echo: ***") == 66


@pytest.mark.parametrize(
    ("provider", "wire", "reason", "finish"),
    [
        ("anthropic", {"stop_reason": "pause_turn"}, "provider_error", "incomplete"),
        ("anthropic", {"stop_reason": "model_context_window_exceeded"}, "truncated", "context"),
        ("gemini", {"stop_reason": "MALFORMED_FUNCTION_CALL"}, "provider_error", "incomplete"),
        ("openai", {"stop_reason": "null"}, None, "stop"),
        ("anthropic", {"malformed": "list"}, "provider_error", None),
        ("anthropic", {"malformed": "null_content"}, "provider_error", None),
        ("openai", {"malformed": "null_content"}, "provider_error", None),
        ("gemini", {"malformed": "list"}, "provider_error", None),
    ],
)
def test_answers_that_are_not_whole_are_kept_unread_and_bodies_that_are_no_message_kept(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    wire: dict[str, str],
    reason: str | None,
    finish: str | None,
) -> None:
    """Through each SDK against the simulator: a paused turn or a full context window is
    paid for, kept (raw and why it stopped) and never read; a 200 whose JSON is not a
    message fails as ``provider_error`` with its body kept; ``finish_reason: null`` on
    a short answer is read as whole."""
    from flask_eval.simulator.config import SimConfig
    from flask_eval.simulator.testing import running_simulator

    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(variable, "sk-test-0000")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = create(store)
    with running_simulator(SimConfig(**wire)) as sim:  # type: ignore[arg-type]
        base = sim.openai_base_url if provider == "openai" else sim.base_url
        point_judges_at(store, run_id, f"{provider}/sim@{base}")
        execute(store, run_id, halt_after=0, max_attempts=1)
    ended = rows(store, run_id)
    if reason is None:
        assert {(r["status"], r["finish"]) for r in ended} == {("done", "stop")}
        return
    assert {(r["status"], r["reason"]) for r in ended} == {("failed", reason)}
    assert not any(r["score"] for r in ended)
    if finish is not None:  # paid: the answer is kept with why it stopped
        assert {r["finish"] for r in ended} == {finish}
        assert all("[SCORES]" in str(r["raw"]) for r in ended)
        assert all(f"stop reason {wire['stop_reason']}" in str(r["detail"]) for r in ended)
    else:  # the body is kept with the failure
        body = re.compile(r'\| body: .*"model(Version)?": "sim"')
        assert all(
            "not an answer" in str(r["detail"]) and body.search(str(r["detail"])) for r in ended
        )
