"""Reports of runs of conversations: per-turn and per-category (capability) rows, and the
MT-Bench section (FastChat's single-answer and pairwise scores), checked against loops
written here from the ledger's own outcomes; in every format."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import pytest

from flask_eval.app.report import build_report
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from flask_eval.report.html import render as html_page
from flask_eval.report.metrics import BIGGEN_KEY, CAPABILITY, OVERALL, TURN
from flask_eval.report.mtbench import ALL_TURNS, matches, pair_scores
from flask_eval.report.render import report_csv, to_json, to_table
from flask_eval.storage.store import Store
from tests.report import conversations as conv

TOL = 1e-12


def turn_of(iid: str) -> int:
    return int(iid.rpartition(":t")[2])


def test_turn_and_category_rows_and_mt_bench_single_scores(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run = conv.create(store, "single", pairwise=False)
    judged = conv.finish(store, run, seed=11, pairwise=False)
    report = build_report(store, run, replicates=20, progress=False)
    scores: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    written: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)  # FastChat's
    excluded: dict[tuple[str, str], int] = defaultdict(int)
    for j in judged:
        if j.score is None or j.written is None:
            excluded[(j.model, j.judge)] += 1
            continue
        iid = j.instance_id
        category = conv.CONVERSATIONS[iid.partition(":")[0]]
        for key in ((TURN, str(turn_of(iid))), (CAPABILITY, category), (OVERALL, "all")):
            scores[(j.model, j.judge, *key)].append(j.score)
            written[(j.model, j.judge, *key)].append(j.written)
    assert any(j.exact is not None for j in judged)  # ratings written with a fraction
    rows = {(r.model, r.judge, r.dimension, r.key): r for r in report.rows}
    for key, values in scores.items():
        assert rows[key].mean == pytest.approx(sum(values) / len(values), abs=TOL)
        assert rows[key].n == len(values)
        if key[2] == TURN:  # every dimension with bootstrap intervals
            assert rows[key].ci_low is not None
    assert {k for _, _, d, k in rows if d == TURN} == {"1", "2"}
    assert {k for _, _, d, k in rows if d == CAPABILITY} == set(conv.CONVERSATIONS.values())
    # MT-Bench's categories are no BiGGen capabilities: no BiGGen overall, no BiGGen note
    assert not any(d == OVERALL and k == BIGGEN_KEY for _, _, d, k in rows)
    assert not report.definitions and not any("BiGGen" in n for n in report.notes)
    section = report.mtbench
    assert section is not None and not section.pairwise
    apart = 0
    for s in section.single:
        for turn in (1, 2):
            want = written[(s.model, s.judge, TURN, str(turn))]
            assert s.turn_mean(turn) == pytest.approx(sum(want) / len(want), abs=TOL)
        pooled = written[(s.model, s.judge, OVERALL, "all")]
        assert s.average == pytest.approx(sum(pooled) / len(pooled), abs=TOL)
        assert (s.n, s.n_excluded) == (len(pooled), excluded[(s.model, s.judge)])
        mean_of_means = (s.turn_mean(1) or 0.0) / 2 + (s.turn_mean(2) or 0.0) / 2
        apart += abs(mean_of_means - (s.average or 0.0)) > 1e-6
    assert apart  # the fixture tells the pooled Average from the mean of turn means
    assert len(section.single) == len(conv.MODELS) * len(conv.JUDGES)
    # every format
    text = to_table(report, details=True)
    assert "MT-Bench" in text and "First turn" in text and "Second turn" in text
    assert "Turns" in text and "Capabilities" in text
    data = json.loads(to_json(report))
    assert {r["dimension"] for r in data["rows"]} >= {TURN, CAPABILITY}
    first = data["mtbench"]["single"][0]
    assert set(first) == {"model", "judge", "turns", "average", "n", "n_excluded"}
    assert "not the mean of the two turn means" in data["mtbench"]["definition"]
    table = list(csv.DictReader(io.StringIO(report_csv(report))))
    averages = [r for r in table if r["dimension"] == "mt_bench" and r["key"] == "average"]
    assert len(averages) == len(section.single)
    assert any(r["dimension"] == TURN for r in table)
    page = html_page(report, [])
    assert 'id="mt-bench"' in page and 'id="turns"' in page and "Second turn" in page
    store.close()


def test_mt_bench_pairwise_counts_a_win_only_when_both_orders_agree(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    run = conv.create(store, "pair", pairwise=True)
    judged = conv.finish(store, run, seed=12, pairwise=True)
    report = build_report(store, run, replicates=0, progress=False)
    section = report.mtbench
    assert section is not None and not section.single
    verdict = {
        (j.judge, j.instance_id, j.model, j.model_b): j.score for j in judged if j.status == "done"
    }
    tally: dict[tuple[str, int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for judge in conv.JUDGES:
        for iid in {j.instance_id for j in judged}:
            for a, b in combinations(conv.MODELS, 2):
                g1 = verdict.get((judge, iid, a, b))
                g2 = verdict.get((judge, iid, b, a))
                if g1 is None or g2 is None:
                    continue
                a_wins = g1 == VERDICT_FIRST and g2 == VERDICT_SECOND
                b_wins = g1 == VERDICT_SECOND and g2 == VERDICT_FIRST
                for turn in (ALL_TURNS, turn_of(iid)):
                    if a_wins or b_wins:
                        tally[(judge, turn, a if a_wins else b)][0] += 1
                        tally[(judge, turn, b if a_wins else a)][1] += 1
                    else:
                        tally[(judge, turn, a)][2] += 1
                        tally[(judge, turn, b)][2] += 1
    got = {(p.judge, p.turn, p.model): [p.win, p.loss, p.tie] for p in section.pairwise}
    assert got == dict(tally)
    assert {t for _, t, _ in got} == {ALL_TURNS, 1, 2}
    for p in section.pairwise:
        assert p.win_rate_adjusted == pytest.approx((p.win + p.tie / 2) / p.matches, abs=TOL)
    assert any("left out" in n for n in section.notes)
    text = to_table(report)
    assert "pairwise, all turns" in text and "pairwise, turn 2" in text
    data = json.loads(to_json(report))
    assert {p["turn"] for p in data["mtbench"]["pairwise"]} == {"all", 1, 2}
    assert 'id="mt-bench"' in html_page(report, [])
    store.close()


def test_pairwise_without_both_orders_has_no_mt_bench_tally_and_says_why(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'o.db'}")
    run = conv.create(store, "one", pairwise=True, swap=False)
    conv.finish(store, run, seed=13, pairwise=True)
    section = build_report(store, run, replicates=0, progress=False).mtbench
    assert section is not None and not section.pairwise
    assert any("both orders" in n for n in section.notes)
    store.close()


def test_a_run_of_one_shot_instructions_has_no_turns_and_no_mt_bench(tmp_path: Path) -> None:
    from dataclasses import replace

    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    items = [replace(x, turn=None, conversation=None, history=()) for x in conv.instances()]
    run, _ = store.create_run(
        name="plain",
        fingerprint="x" * 64,
        mode="instance",
        config={"judges": list(conv.JUDGES), "models": list(conv.MODELS), "skills": []},
        instances=items,
        response_sets=[
            replace(s, responses=tuple(replace(r, history=()) for r in s.responses))
            for s in conv.response_sets(items)
        ],
        judges=list(conv.JUDGES),
    )
    conv.finish(store, run, seed=14, pairwise=False)
    report = build_report(store, run, replicates=0, progress=False)
    assert report.mtbench is None and "mtbench" not in report.as_dict()
    assert not any(r.dimension == TURN for r in report.rows)
    # capabilities without conversations: BiGGen's overall, as before
    assert any(r.dimension == OVERALL and r.key == BIGGEN_KEY for r in report.rows)
    store.close()


def test_matches_pair_the_orders_and_mark_a_missing_one_as_error() -> None:
    found = matches(
        [
            ("q:t1", "b", "a", "c", "j", VERDICT_FIRST),  # b shown first wins
            ("q:t1", "a", "b", "c", "j", VERDICT_SECOND),  # b wins again
            ("q:t2", "a", "b", "c", "j", 3),  # a tie, the other order missing
        ],
        models=("a", "b"),
    )
    assert [(m.model_1, m.g1, m.g2) for m in found] == [
        ("a", "model_2", "model_2"),
        ("a", "tie", "error"),
    ]
    scores = pair_scores(found, {"q:t1": 1, "q:t2": 2}, ("a", "b"))
    assert [(p.model, p.turn, p.win, p.loss, p.tie) for p in scores] == [
        ("a", ALL_TURNS, 0, 1, 0),
        ("b", ALL_TURNS, 1, 0, 0),
        ("a", 1, 0, 1, 0),
        ("b", 1, 1, 0, 0),
    ]
