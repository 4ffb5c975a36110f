"""Judges whose scores follow the criterion's position in the prompt are flagged, per
judge, in the report's notes and JSON; judges whose scores follow the responses are not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.app.report import build_report
from flask_eval.report.patterns import MIN_JUDGMENTS, pattern, patterns
from flask_eval.report.render import to_json, to_table
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.report.ledger import Outcome, Row, every_ending, finish, judges, planned_run


def test_a_score_that_is_the_position_is_flagged_with_its_share() -> None:
    calls = [("tiny", f"c{k}", float(p)) for k in range(20) for p in (1, 2, 3)]
    (found,) = patterns(calls)
    assert found.flagged and found.n == 60 and found.share == 1.0
    assert [(p.position, p.score, p.count, p.n) for p in found.positions] == [
        (1, 1.0, 20, 20),
        (2, 2.0, 20, 20),
        (3, 3.0, 20, 20),
    ]
    assert "60 of its 60 scores (100%)" in found.note()
    assert "1st criterion 1 in 20/20, 2nd criterion 2 in 20/20, 3rd criterion 3 in 20/20" in (
        found.note()
    )


def test_nearly_a_function_is_flagged_and_a_real_judge_or_a_constant_one_is_not() -> None:
    nearly = [(1, 4.0)] * 19 + [(1, 3.0)] + [(2, 2.0)] * 19 + [(2, 5.0)]
    assert pattern("j", nearly).flagged and pattern("j", nearly).share == 0.95
    spread = [(1 + k % 3, float(1 + (k * 7) % 5)) for k in range(60)]
    assert not pattern("j", spread).flagged and (pattern("j", spread).share or 0) < 0.9
    constant = [(1 + k % 3, 5.0) for k in range(60)]
    assert not pattern("j", constant).flagged  # the same score everywhere: no position
    few = [(1, 1.0), (2, 2.0)] * ((MIN_JUDGMENTS - 1) // 2)
    assert not pattern("j", few).flagged


def test_single_criterion_calls_and_unscored_positions() -> None:
    """A call asking for one criterion has no position; an N/A takes its place in a call
    without being counted."""
    rows = [("j", "one", 3.0)] + [("j", f"c{k}", s) for k in range(12) for s in (None, 4.0)]
    (found,) = patterns(rows)
    assert [(p.position, p.score, p.n) for p in found.positions] == [(2, 4.0, 12)]
    assert not found.flagged  # a single position: no pattern across positions


def test_the_report_flags_the_judge_in_its_notes_and_json(tmp_path: Path) -> None:
    """A ledger where judge "tiny" gave each criterion its position in the call and
    judge "real" scored the responses: the notes and the JSON name tiny alone."""
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    run = planned_run(
        store,
        "patterns",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}"],
        judges=judges("tiny", "real"),
    )
    position: dict[tuple[str, str, str], int] = {}

    def score(row: Row) -> Outcome:
        call = f"{row.judge}-{row.model}-{row.instance_id}"
        at = position[(row.judge, row.model, row.instance_id)] = (
            position.get((row.judge, row.model, row.instance_id), 0) + 1
        )
        if row.judge == "tiny":
            return "done", at, call
        return "done", 1 + (len(row.criterion) + int(row.instance_id)) % 5, call

    finish(store, run, score)
    report = build_report(store, run, replicates=0, progress=False)
    store.close()
    flagged = [n for n in report.notes if "position in the prompt" in n]
    assert len(flagged) == 1 and flagged[0].startswith("judge tiny: ")
    doc = json.loads(to_json(report))
    by_judge = {p["judge"]: p for p in doc["position_patterns"]}
    assert by_judge["tiny"]["flagged"] and by_judge["tiny"]["share"] == 1.0
    assert not by_judge["real"]["flagged"] and by_judge["real"]["share"] < 0.9
    assert "judge tiny: " in to_table(report)


def test_what_runs_beside_the_breakdowns_is_timed_and_its_failure_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The position check runs in a thread beside the breakdowns: its time is reported
    apart, and an error in it is raised by ``build_report`` (not lost with the thread)."""
    from flask_eval.storage import analytics

    store = Store(f"sqlite:///{tmp_path / 'aside.db'}")
    run = planned_run(
        store,
        "aside",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}"],
        judges=judges("one"),
    )
    finish(store, run, lambda row: ("done", 1 + row.id % 5, f"call-{row.id}"))
    timings: dict[str, float] = {}
    build_report(store, run, replicates=20, progress=False, timings=timings)
    assert {"query", "means", "intervals", "positions (aside)", "aside"} <= set(timings)

    def broken(read: object) -> None:
        raise RuntimeError("the position check broke")

    monkeypatch.setattr(analytics, "positions_of_pivot", broken)
    with pytest.raises(RuntimeError, match="the position check broke"):
        build_report(store, run, replicates=20, progress=False)
    store.close()


def test_the_pivots_position_counts_equal_the_ledgers(postgres_url: str) -> None:
    """PostgreSQL's report counts positions from the pivot's one pass (ids and call
    hashes): the same counts as the ledger's window functions, with calls split in two
    for one response and judge, interleaved by id, failed rows with and without an
    answer, N/A, single-criterion calls and unfinished rows."""
    from flask_eval.storage import analytics

    store = Store(postgres_url)
    run = planned_run(
        store,
        "positions",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"],
        judges=judges("tiny", "split", "real"),
    )

    def scored(row: Row, base: str) -> Outcome:
        if row.judge == "tiny":
            return "done", 1 + row.id % 5, base
        return "done", 1 + len(row.criterion) % 5, base if row.id % 5 else f"{base}-{row.id}"

    finish(store, run, lambda row: every_ending(row, scored))
    read = analytics.pivot(store, run.id, calls=True)
    counted = analytics.positions_of_pivot(read)
    expected = sorted(analytics.position_counts(store, run.id))
    store.close()
    assert counted is not None and counted == expected
    assert {p for _, p, _, _ in counted} >= {1, 2}
