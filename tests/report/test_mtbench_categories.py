"""Pairwise reports of runs of conversations broken down by turn and by MT-Bench category
(the instance's capability): the MT-Bench section's per-category tallies (FastChat's
both-orders rule) and the pairwise report's per-turn and per-category scores, checked
against loops written here from the ledger's own verdicts; in every format."""

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
from flask_eval.report.mtbench import PAIR_CATEGORY_DIMENSION
from flask_eval.report.pairwise_report import BY_CATEGORY, BY_TURN
from flask_eval.report.pairwise_tally import ALL_TURNS, NO_CATEGORY, by_category, by_turn, tally
from flask_eval.report.render import report_csv, to_json, to_table
from flask_eval.storage.store import Store
from tests.report import conversations as conv

TOL = 1e-12
Counts = dict[tuple[str, str, str], list[int]]


def turn_of(iid: str) -> int:
    return int(iid.rpartition(":t")[2])


def category_of(iid: str) -> str:
    return conv.CONVERSATIONS[iid.partition(":")[0]]


def both_orders_tally(judged: list[conv.Judged]) -> tuple[Counts, Counts, Counts]:
    """(judge, group, model) -> [win, loss, tie] by FastChat's rule, written out: pooled
    (group ``all``), per turn (``"1"``, ``"2"``) and per category."""
    verdict = {
        (j.judge, j.instance_id, j.model, j.model_b): j.score for j in judged if j.status == "done"
    }
    pooled: Counts = defaultdict(lambda: [0, 0, 0])
    turns: Counts = defaultdict(lambda: [0, 0, 0])
    categories: Counts = defaultdict(lambda: [0, 0, 0])
    for judge in conv.JUDGES:
        for iid in {j.instance_id for j in judged}:
            for a, b in combinations(conv.MODELS, 2):
                g1, g2 = verdict.get((judge, iid, a, b)), verdict.get((judge, iid, b, a))
                if g1 is None or g2 is None:
                    continue
                a_wins = g1 == VERDICT_FIRST and g2 == VERDICT_SECOND
                b_wins = g1 == VERDICT_SECOND and g2 == VERDICT_FIRST
                for counts, group in (
                    (pooled, "all"),
                    (turns, str(turn_of(iid))),
                    (categories, category_of(iid)),
                ):
                    if a_wins or b_wins:
                        counts[(judge, group, a if a_wins else b)][0] += 1
                        counts[(judge, group, b if a_wins else a)][1] += 1
                    else:
                        counts[(judge, group, a)][2] += 1
                        counts[(judge, group, b)][2] += 1
    return dict(pooled), dict(turns), dict(categories)


def summed(counts: Counts) -> Counts:
    """The counts of each (judge, model) summed over the groups, as group ``all``."""
    out: Counts = defaultdict(lambda: [0, 0, 0])
    for (judge, _, model), values in counts.items():
        out[(judge, "all", model)] = [
            x + y for x, y in zip(out[(judge, "all", model)], values, strict=True)
        ]
    return dict(out)


def test_mt_bench_pairwise_tallies_per_category_sum_to_the_pooled_ones(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    run = conv.create(store, "pair", pairwise=True)
    judged = conv.finish(store, run, seed=21, pairwise=True)
    report = build_report(store, run, replicates=0, progress=False)
    section = report.mtbench
    assert section is not None
    pooled, turns, categories = both_orders_tally(judged)
    got = {(p.judge, p.key, p.model): [p.win, p.loss, p.tie] for p in section.pairwise_categories}
    assert got == categories
    assert {k for _, k, _ in got} == set(conv.CONVERSATIONS.values())
    assert all(p.turn == ALL_TURNS and p.category == p.key for p in section.pairwise_categories)
    assert (
        summed(got)
        == pooled
        == {
            (p.judge, p.key, p.model): [p.win, p.loss, p.tie]
            for p in section.pairwise
            if p.turn == ALL_TURNS
        }
    )
    assert summed(turns) == pooled
    for p in section.pairwise_categories:
        assert p.win_rate_adjusted == pytest.approx((p.win + p.tie / 2) / p.matches, abs=TOL)
    # text: one table per judge, a row per (category, model)
    text = to_table(report)
    assert text.count("pairwise, by category") == len(conv.JUDGES)
    for judge, category, model in got:
        win, loss, tie = got[(judge, category, model)]
        assert any(
            line.split()[:5] == [category, model, str(win), str(loss), str(tie)]
            for line in text.splitlines()
        )
    # JSON
    data = json.loads(to_json(report))["mtbench"]
    assert {
        (p["judge"], p["category"], p["model"]): [p["win"], p["loss"], p["tie"]]
        for p in data["pairwise_by_category"]
    } == categories
    assert all("turn" not in p for p in data["pairwise_by_category"])
    assert {p["turn"] for p in data["pairwise"]} == {"all", 1, 2}  # per turn, as before
    # CSV
    table = list(csv.DictReader(io.StringIO(report_csv(report))))
    rows = [r for r in table if r["dimension"] == PAIR_CATEGORY_DIMENSION]
    assert len(rows) == len(categories)
    for r in rows:
        win, loss, tie = categories[(r["judge"], r["key"], r["model"])]
        assert int(r["n"]) == win + loss + tie
        assert float(r["mean"]) == pytest.approx((win + tie / 2) / (win + loss + tie), abs=TOL)
        assert float(r["tie"]) == pytest.approx(tie / (win + loss + tie), abs=TOL)
    # HTML
    page = html_page(report, [])
    assert "pairwise, by category" in page and '<th class="key">category</th>' in page
    store.close()


def test_the_pairwise_report_breaks_win_rates_down_by_turn_and_category(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    run = conv.create(store, "both", pairwise=True)
    judged = conv.finish(store, run, seed=22, pairwise=True)
    report = build_report(store, run, replicates=0, progress=False)
    pw, section = report.pairwise, report.mtbench
    assert pw is not None and section is not None
    pooled, turns, categories = both_orders_tally(judged)
    got = {
        (p.judge, p.key, p.model, p.category is None): [p.win, p.loss, p.tie] for p in pw.breakdowns
    }
    want = {(*k, True): v for k, v in (pooled | turns).items()}
    want |= {(*k, False): v for k, v in categories.items()}
    assert got == want
    # the same numbers as the MT-Bench section's: one implementation
    assert [p for p in pw.breakdowns if p.category is None] == section.pairwise
    assert [p for p in pw.breakdowns if p.category is not None] == section.pairwise_categories
    # rows in JSON and CSV
    rows = json.loads(to_json(report))["rows"]
    for dimension, counts in ((BY_TURN, pooled | turns), (BY_CATEGORY, categories)):
        mine = [r for r in rows if r["dimension"] == dimension]
        assert len(mine) == len(counts)
        for r in mine:
            win, loss, tie = counts[(r["judge"], r["key"], r["model"])]
            n = win + loss + tie
            assert (r["n"], r["criterion"]) == (n, "all")
            assert r["mean"] == pytest.approx((win + tie / 2) / n, abs=TOL)
            assert (r["win"], r["loss"]) == pytest.approx((win / n, loss / n), abs=TOL)
    table = list(csv.DictReader(io.StringIO(report_csv(report))))
    assert sum(r["dimension"] in (BY_TURN, BY_CATEGORY) for r in table) == len(want)
    # text and HTML: a table per judge, models by (all turns, each turn, each category)
    text = to_table(report)
    assert text.count("By turn and category | judge") == len(conv.JUDGES)
    assert "all turns" in text and "turn 2" in text and "humanities" in text
    page = html_page(report, [])
    assert page.count("class='breakdown'") == len(conv.JUDGES)
    store.close()


def test_a_run_judged_in_one_order_breaks_its_games_down(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'o.db'}")
    run = conv.create(store, "one", pairwise=True, swap=False)
    judged = conv.finish(store, run, seed=23, pairwise=True)
    report = build_report(store, run, replicates=0, progress=False)
    assert report.pairwise is not None and report.mtbench is not None
    assert not report.mtbench.pairwise_categories  # FastChat's rule needs both orders
    want: Counts = defaultdict(lambda: [0, 0, 0])
    for j in judged:
        if j.status != "done":
            continue
        winner = {VERDICT_FIRST: j.model, VERDICT_SECOND: j.model_b}.get(j.score or 0)
        for model in (j.model, j.model_b):
            slot = 2 if winner is None else 0 if model == winner else 1
            want[(j.judge, category_of(j.instance_id), model)][slot] += 1
    got = {
        (p.judge, p.key, p.model): [p.win, p.loss, p.tie]
        for p in report.pairwise.breakdowns
        if p.category is not None
    }
    assert got == dict(want)
    store.close()


def test_tally_groups_an_instance_without_a_category_apart() -> None:
    outcomes = [
        ("j", "q:t1", "a", "b", "a"),
        ("j", "q:t2", "a", "b", None),
        ("j", "r:t1", "b", "a", "b"),
    ]
    cats = tally(outcomes, by_category({"q:t1": "math", "q:t2": "math"}), ("a", "b"))
    assert [(p.model, p.key, p.win, p.loss, p.tie) for p in cats] == [
        ("a", NO_CATEGORY, 0, 1, 0),
        ("b", NO_CATEGORY, 1, 0, 0),
        ("a", "math", 1, 0, 1),
        ("b", "math", 0, 1, 1),
    ]
    turns = tally(outcomes, by_turn({"q:t1": 1, "q:t2": 2, "r:t1": 1}), ("a", "b"))
    pooled = {p.model: (p.win, p.loss, p.tie) for p in turns if p.turn == ALL_TURNS}
    assert pooled == {"a": (1, 1, 1), "b": (1, 1, 1)}
    for model, (win, loss, tie) in pooled.items():
        mine = [p for p in cats if p.model == model]
        assert (sum(p.win for p in mine), sum(p.loss for p in mine)) == (win, loss)
        assert sum(p.tie for p in mine) == tie
