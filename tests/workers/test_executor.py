"""The executor with the in-memory judge: retries, reminders, failures, cache, redelivery."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from flask_eval.app.score_tables import score_table
from flask_eval.core.errors import FailureReason, JudgeError
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.protocol import requested_skills, scores_line
from flask_eval.rubrics.skills import load_default
from flask_eval.storage import exports, queries
from flask_eval.storage.store import Store
from flask_eval.workers.judge import Message
from flask_eval.workers.providers.memory_judge import MemoryJudge, default_answer
from flask_eval.workers.runner import Executor, ExecutorConfig
from tests.reference import point_cells
from tests.storage.test_store import create, open_ids

SKILLS = load_default()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'x.db'}")


@pytest.fixture(autouse=True)
def reset_memory_judge() -> Iterator[None]:
    MemoryJudge.calls = 0
    yield
    MemoryJudge.script = staticmethod(default_answer)  # type: ignore[assignment]
    MemoryJudge.calls = 0


def run_all(store: Store, run_id: int, **config: float) -> None:
    executor = Executor(store, ExecutorConfig(**config))  # type: ignore[arg-type]

    async def go() -> None:
        await executor.run_batch(run_id, open_ids(store, run_id))
        await executor.aclose()

    asyncio.run(go())


def rows(store: Store, run_id: int) -> list[dict[str, object]]:
    return list(exports.export_rows(store, run_id, "r1"))


def test_every_row_is_judged_once_and_a_redelivery_pays_nothing(store: Store) -> None:
    run_id = create(store)
    run_all(store, run_id)
    calls = MemoryJudge.calls
    assert calls == (6 + 5) * 2  # one call per (model, instance, judge)
    assert {r["status"] for r in rows(store, run_id)} == {"done"}
    # the same batch delivered again: rows are done, nothing is claimed or paid
    ids = [[r] for r in range(1, 67)]
    summary = asyncio.run(Executor(store, ExecutorConfig()).run_batch(run_id, ids))
    assert summary.skipped == 66 and summary.calls == 0 and MemoryJudge.calls == calls
    assert open_ids(store, run_id) == []


def test_unparseable_answer_gets_one_reminder_then_succeeds(store: Store) -> None:
    run_id = create(store)

    def script(messages: Sequence[Message]) -> str:
        return (
            default_answer(messages)
            if len(messages) > 2
            else "I think it is fine overall. Score: 5"
        )

    MemoryJudge.script = staticmethod(script)  # type: ignore[assignment]
    run_all(store, run_id)
    assert MemoryJudge.calls == 2 * 22
    assert {r["status"] for r in rows(store, run_id)} == {"done"}


def test_twice_unparseable_is_failed_with_raw_output_kept(store: Store) -> None:
    run_id = create(store)
    MemoryJudge.script = staticmethod(lambda m: "no scores here, sorry")  # type: ignore[assignment]
    run_all(store, run_id, halt_after=0)
    failed = rows(store, run_id)
    assert {r["status"] for r in failed} == {"failed"}
    assert {r["reason"] for r in failed} == {FailureReason.UNPARSEABLE}
    assert all(r["raw"] == "no scores here, sorry" for r in failed)
    assert all("no final" in str(r["detail"]) for r in failed)
    assert {r["attempts"] for r in failed} == {2}  # the answer, then the format reminder
    counts = queries.status(store, run_id, "r1")
    assert counts.failed == 66 and counts.failed_by_reason == {"unparseable": 66}


def test_retryable_errors_are_retried_then_recorded_with_their_reason(store: Store) -> None:
    run_id = create(store)
    attempts: dict[str, int] = {}

    def script(messages: Sequence[Message]) -> str:
        key = text_of(messages[1])
        attempts[key] = attempts.get(key, 0) + 1
        if "question 0" in key:
            raise JudgeError(FailureReason.RATE_LIMITED, "429", retry_after=0.0)
        if attempts[key] < 3:
            raise JudgeError(FailureReason.PROVIDER_ERROR, "503")
        return default_answer(messages)

    MemoryJudge.script = staticmethod(script)  # type: ignore[assignment]
    MemoryJudge.max_attempts = 4
    try:
        run_all(store, run_id)
    finally:
        MemoryJudge.max_attempts = 6
    by_status: dict[object, int] = {}
    for r in rows(store, run_id):
        by_status[(r["status"], r["reason"])] = by_status.get((r["status"], r["reason"]), 0) + 1
    # instance 0: 2 models x 2 judges x 3 skills, always rate limited
    assert by_status == {("failed", "rate_limited"): 12, ("done", None): 54}


def test_non_retryable_error_fails_at_once(store: Store) -> None:
    run_id = create(store)

    def script(messages: Sequence[Message]) -> str:
        raise JudgeError(FailureReason.REFUSED, "400 content policy")

    MemoryJudge.script = staticmethod(script)  # type: ignore[assignment]
    run_all(store, run_id, halt_after=0)
    assert MemoryJudge.calls == 22
    assert {r["reason"] for r in rows(store, run_id)} == {"refused"}


def test_na_scores_are_done_not_failed(store: Store) -> None:
    run_id = create(store)

    def script(messages: Sequence[Message]) -> str:
        skills = requested_skills("\n".join(text_of(m) for m in messages)) or []
        return "ok\n" + scores_line({s: None for s in skills})

    MemoryJudge.script = staticmethod(script)  # type: ignore[assignment]
    run_all(store, run_id)
    report = point_cells(score_table(store, run_id))
    assert sum(c.n_na for c in report.skill.values()) == 66
    assert sum(c.n for c in report.skill.values()) == 0


def test_cache_answers_a_second_run_with_the_same_prompts(store: Store) -> None:
    first = create(store, "a", "a" * 64)
    run_all(store, first)
    paid = MemoryJudge.calls
    second = create(store, "b", "b" * 64)
    run_all(store, second)
    assert MemoryJudge.calls == paid  # every prompt was answered before
    assert queries.status(store, second, "b").done == 66
    assert point_cells(score_table(store, second)) == point_cells(score_table(store, first))
