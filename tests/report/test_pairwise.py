"""Pairwise aggregation: the swap rule, position bias, Bradley-Terry ratings, labels."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flask_eval.core.types import VERDICT_FIRST as F
from flask_eval.core.types import VERDICT_SECOND as S
from flask_eval.core.types import VERDICT_TIE as T
from flask_eval.report import ratings
from flask_eval.report.bootstrap import instance_weights
from flask_eval.report.document import Report
from flask_eval.report.pairwise import LOSS, TIE, WIN, Comparison, combine, instances_of
from flask_eval.report.pairwise_labels import Label, label_accuracy
from flask_eval.report.pairwise_report import PairwiseRunData, build
from flask_eval.report.render import report_csv, to_json, to_table


def both(iid: str, a: str, b: str, v_ab: int, v_ba: int, judge: str = "j") -> list[Comparison]:
    return [
        Comparison(iid, a, b, "overall", judge, v_ab),
        Comparison(iid, b, a, "overall", judge, v_ba),
    ]


def test_swap_rule() -> None:
    records = [
        *both("agree", "x", "y", F, S),  # x both times
        *both("flip", "x", "y", F, F),  # first shown both times -> tie
        *both("tiewin", "x", "y", T, S),  # tie + win -> tie
        *both("ties", "x", "y", T, T),
        Comparison("once", "y", "x", "overall", "j", F),  # one order: y wins
    ]
    games = {g.instance_id: g for g in combine(records, ["x", "y"])}
    assert games["agree"].outcome == WIN and games["agree"].consistent
    assert games["flip"].outcome == TIE and games["flip"].consistent is False
    assert games["tiewin"].outcome == TIE and games["tiewin"].consistent is False
    assert games["ties"].outcome == TIE and games["ties"].consistent
    assert games["once"].outcome == LOSS and games["once"].swapped is False


def test_duplicate_order_rejected() -> None:
    with pytest.raises(ValueError, match="two judgments"):
        combine([Comparison("i", "x", "y", "c", "j", F)] * 2)


def test_position_consistency_and_first_preference() -> None:
    records = [
        *both("1", "x", "y", F, S),  # consistent, x
        *both("2", "x", "y", F, F),  # flip
        *both("3", "x", "y", S, F),  # consistent, y
        *both("4", "x", "y", T, F),  # inconsistent
    ]
    inst = instances_of(records)
    pw = build(records, instance_weights(len(inst), 200, 1), inst, models=["x", "y"])
    pos = next(p for p in pw.positions if p.criterion == "all")
    assert pos.n_swapped == 4 and pos.consistency == pytest.approx(2 / 4)
    # non-tie verdicts: F,S,F,F,S,F,F -> 5 of 7 picked the first shown
    assert pos.n_decisive == 7 and pos.first_preference == pytest.approx(5 / 7)
    wr = next(w for w in pw.win_rates if w.criterion == "all")
    assert (wr.win, wr.tie, wr.loss) == pytest.approx((0.25, 0.5, 0.25))


def test_a_comparison_judged_in_one_order_is_set_apart_when_both_were_planned() -> None:
    """FastChat leaves out a comparison with an order in error; so do win rates and
    ratings here, and the comparison is reported apart (count and rates)."""
    records = [
        *both("1", "x", "y", F, S),  # x
        *both("2", "x", "y", S, F),  # y
        *both("3", "x", "y", F, S),  # x
        Comparison("4", "x", "y", "overall", "j", F),  # x, in one order only
    ]
    inst = instances_of(records)
    weights = instance_weights(len(inst), 50, 0)
    kept = build(records, weights, inst, models=["x", "y"], both_orders=True)
    (wr,) = kept.win_rates
    assert (wr.n, wr.n_swapped, wr.win) == (3, 3, pytest.approx(2 / 3))
    (single,) = kept.one_order
    assert (single.n, single.win, single.model_a) == (1, 1.0, "x")
    assert sum(r.games for r in kept.ratings) == 2 * 3
    assert any("1 comparisons were judged in one order only" in n for n in kept.notes)
    rows = [r for r in kept.rows() if r["dimension"] == "pairwise_one_order"]
    assert [(r["key"], r["n"]) for r in rows] == [("x vs y", 1)]
    assert "Judged in one order only" in to_table(Report("r", [], pairwise=kept))
    # a run planned in one order (--no-swap): every comparison counts as judged
    (once,) = build(records, weights, inst, models=["x", "y"]).win_rates
    assert once.n == 4 and not build(records, weights, inst, models=["x", "y"]).one_order


def _random_records(seed: int, n_inst: int = 60) -> list[Comparison]:
    rng = np.random.default_rng(seed)
    quality = {"m1": 0.0, "m2": 0.4, "m3": 0.9, "m4": 1.3}
    names = list(quality)
    out = []
    for i in range(n_inst):
        for x in range(4):
            for y in range(x + 1, 4):
                for first, second in ((names[x], names[y]), (names[y], names[x])):
                    d = quality[first] - quality[second] + rng.normal(0, 1)
                    v = T if abs(d) < 0.15 else (F if d > 0 else S)
                    out.append(Comparison(f"i{i}", first, second, "overall", "j", v))
    return out


def test_bradley_terry_equals_sklearn_logistic_regression() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(7)
    n = 6
    a, b = ratings.pair_index([str(k) for k in range(n)])
    games = rng.integers(5, 40, len(a)).astype(float)
    beta = rng.normal(0, 1, n)
    wins = rng.binomial(games.astype(int), 1 / (1 + np.exp(-(beta[a] - beta[b])))).astype(float)
    ties = np.minimum(rng.integers(0, 5, len(a)), games - wins)
    score = wins + 0.5 * ties
    fit = ratings.fit(n, a, b, score, games, anchor=0)
    assert not fit.regularized
    # Arena-Hard's design: +ln 10 / -ln 10 columns, each game once as a win (weight =
    # games won, ties half) and once as a loss; the anchor's column dropped (it is 0)
    rows, ys, ws = [], [], []
    for k in range(len(a)):
        x = np.zeros(n)
        x[a[k]], x[b[k]] = np.log(10), -np.log(10)
        rows += [x[1:], x[1:]]
        ys += [1, 0]
        ws += [score[k], games[k] - score[k]]
    lr = LogisticRegression(
        fit_intercept=False, C=np.inf, solver="newton-cholesky", tol=1e-14, max_iter=1000
    )
    lr.fit(np.array(rows), np.array(ys), sample_weight=np.array(ws))
    expected = np.concatenate([[1000.0], 400 * lr.coef_[0] + 1000.0])
    assert np.max(np.abs(fit.ratings - expected)) < 1e-6


def test_batched_replicates_equal_single_fits() -> None:
    rng = np.random.default_rng(3)
    n = 5
    a, b = ratings.pair_index([str(k) for k in range(n)])
    games = np.tile(rng.integers(5, 20, len(a)).astype(float), (30, 1))
    scores = rng.uniform(0.05, 0.95, games.shape) * games
    reps, _ = ratings.fit_replicates(n, a, b, scores, games, 0)
    single = np.array([ratings.fit(n, a, b, scores[r], games[r], 0).ratings for r in range(30)])
    assert np.max(np.abs(reps - single)) < 1e-6


def test_separation_adds_virtual_ties() -> None:
    a, b = np.array([0]), np.array([1])
    fit = ratings.fit(2, a, b, np.array([5.0]), np.array([5.0]), 0)
    assert fit.regularized and np.isfinite(fit.ratings).all() and fit.ratings[1] < 1000


def test_ratings_order_and_reproducible_intervals() -> None:
    records = _random_records(0)
    inst = instances_of(records)
    one = build(records, instance_weights(len(inst), 300, 5), inst, models=["m1", "m2", "m3", "m4"])
    two = build(records, instance_weights(len(inst), 300, 5), inst, models=["m1", "m2", "m3", "m4"])
    other = build(
        records, instance_weights(len(inst), 300, 6), inst, models=["m1", "m2", "m3", "m4"]
    )
    board = one.leaderboard("j")
    assert [r.model for r in board] == ["m4", "m3", "m2", "m1"]
    assert next(r for r in board if r.model == "m1").rating == pytest.approx(1000.0)
    assert [w.score_ci for w in one.win_rates] == [w.score_ci for w in two.win_rates]
    assert [r.ci for r in one.ratings] == [r.ci for r in two.ratings]
    assert [w.score_ci for w in one.win_rates] != [w.score_ci for w in other.win_rates]
    for w in one.win_rates:
        assert w.score_ci is not None and w.score_ci[0] <= w.score <= w.score_ci[1]


def test_label_accuracy_counts_orders_as_auto_j_does() -> None:
    """Right in both orders (Auto-J's rule), and in the order as listed; a flip is wrong
    even against a tie label; one judged order is in no both-orders figure."""
    records = [
        *both("1", "r1", "r2", F, S),  # r1 in both orders; label 0 -> right, listed right
        *both("2", "r1", "r2", F, F),  # a flip; label 2 -> wrong (not a tie), listed wrong
        *both("3", "r1", "r2", S, F),  # r2 in both; label 0 -> wrong
        *both("4", "r1", "r2", S, F),  # r2 in both; label 1 -> right
        *both("5", "r1", "r2", T, T),  # ties; label 1 -> wrong
        *both("7", "r1", "r2", T, T),  # ties; label 2 -> right
        Comparison("8", "r1", "r2", "overall", "j", F),  # listed order only: r1, label 0
        Comparison("9", "r2", "r1", "overall", "j", S),  # the other order only: r1
    ]
    gold = {"1": 0, "2": 2, "3": 0, "4": 1, "5": 1, "6": 0, "7": 2, "8": 0, "9": 0}
    labels = [Label(iid, "r1", "r2", label) for iid, label in gold.items()]
    groups = {"1": "a", "2": "a", "3": "b", "4": "b", "5": "b", "7": "b", "8": "a", "9": "a"}
    pooled, in_a, in_b = label_accuracy(records, labels, groups)
    assert (pooled.group, in_a.group, in_b.group) == ("all", "a", "b")
    assert (pooled.both.n, pooled.both.correct) == (6, 3)  # 1, 4, 7
    assert pooled.accuracy == pytest.approx(3 / 6)
    assert (pooled.listed.n, pooled.listed.correct) == (7, 4)  # 1, 4, 7, 8
    assert (pooled.both_no_tie.n, pooled.both_no_tie.correct) == (4, 2)  # of 1, 3, 4, 5
    assert (pooled.listed_no_tie.n, pooled.listed_no_tie.correct) == (5, 3)  # of 1,3,4,5,8
    assert (pooled.n_one_order, pooled.n_missing) == (2, 1)
    assert (in_a.both.n, in_a.both.correct, in_a.n_one_order) == (2, 1, 2)
    assert (in_b.both.n, in_b.both.correct, in_b.listed.correct) == (4, 2, 2)
    assert pooled.as_dict()["accuracy_listed"] == pytest.approx(4 / 7)


def test_a_position_biased_judge_cannot_gain_from_its_bias() -> None:
    """A judge that always picks the response shown first flips on every comparison: by
    Auto-J's rule it is never right (combining the orders first made each flip a tie,
    right against every tie label)."""
    labels = [Label(str(i), "r1", "r2", i % 3) for i in range(30)]
    biased = [c for i in range(30) for c in both(str(i), "r1", "r2", F, F)]
    (acc,) = label_accuracy(biased, labels)
    assert acc.both.n == 30 and acc.both.correct == 0
    assert acc.listed.correct == 10  # label 0: the first listed was right
    right = [(F, S), (S, F), (T, T)]  # label 0, 1, 2 in both orders
    fair = [c for i in range(30) for c in both(str(i), "r1", "r2", *right[i % 3])]
    assert label_accuracy(fair, labels)[0].both.correct == 30


def test_report_formats_carry_pairwise_rows() -> None:
    records = _random_records(1, 20)
    inst = instances_of(records)
    pw = build(records, instance_weights(len(inst), 100, 0), inst, models=["m1", "m2", "m3", "m4"])
    report = Report(run="r", rows=[], pairwise=pw, bootstrap={"replicates": 100})
    doc = json.loads(to_json(report))
    dims = {r["dimension"] for r in doc["rows"]}
    assert {"pairwise", "rating", "position", "length_bias"} <= dims or {
        "pairwise",
        "rating",
        "position",
    } <= dims
    pair = next(r for r in doc["rows"] if r["dimension"] == "pairwise")
    assert pair["key"] == f"{pair['model']} vs {pair['model_b']}"
    assert pair["win"] + pair["tie"] + pair["loss"] == pytest.approx(1.0)
    text = to_table(report)
    assert "Leaderboard" in text and "Win-rate matrix" in text and "Position bias" in text
    csv = report_csv(report)
    assert csv.splitlines()[0].startswith("model,judge,dimension,key,mean")
    # one criterion: its rows are the pooled ones, reported once (criterion "all")
    assert sum(1 for line in csv.splitlines() if ",rating," in line) == 4
    assert {r["criterion"] for r in doc["rows"]} == {"all"}
    assert "[overall]" not in text


def test_several_criteria_are_reported_each_and_pooled() -> None:
    records = [
        *_random_records(1, 10),
        *(
            Comparison(c.instance_id, c.first, c.second, "style", c.judge, c.verdict)
            for c in _random_records(2, 10)
        ),
    ]
    inst = instances_of(records)
    pw = build(records, instance_weights(len(inst), 20, 0), inst, models=["m1", "m2", "m3", "m4"])
    crits = {r["criterion"] for r in pw.rows() if r["dimension"] == "rating"}
    assert crits == {"overall", "style", "all"}
    assert {p.criterion for p in pw.positions} == {"overall", "style", "all"}


def test_html_has_leaderboard_matrix_and_position(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from flask_eval.report.html import write_report

    records = _random_records(2, 12)
    inst = instances_of(records)
    pw = build(records, instance_weights(len(inst), 50, 0), inst)
    pw.label_accuracy = label_accuracy(records, [Label("i0", "m1", "m2", 0)])
    page = write_report(Report(run="r", rows=[], pairwise=pw), tmp_path).read_text()
    assert "class='leaderboard'" in page and "class='winrate'" in page
    assert "class='position'" in page and (tmp_path / "winrate-0.svg").exists()
    assert (tmp_path / "ratings-0.svg").exists() and 'data-figure="ratings_chart"' in page
    assert "class='accuracy'" in page and "Auto-J's rule" in page
    # a pairwise run has no absolute grades: none of their (empty) sections
    for section in ("Overall", "Skills", "Abilities", "Domains", "Difficulty", "Judge agreement"):
        assert f">{section}</h2>" not in page


def test_html_shows_the_controlled_figures_best_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The HTML page shows each model's length-controlled win rate and style-controlled
    rating (not only the note on them), best style-controlled rating first."""
    import re

    from flask_eval.report.html import render as html_render

    records = _random_records(3, 30)
    inst = instances_of(records)
    texts = {
        (m, i): f"{m} answers {i}" + " more" * (k % 3)
        for k, (m, i) in enumerate((m, i) for m in ("m1", "m2", "m3", "m4") for i in inst)
    }
    pw = build(
        records,
        instance_weights(len(inst), 50, 0),
        inst,
        run_data=PairwiseRunData(texts=texts),
        models=["m1", "m2", "m3", "m4"],
    )
    page = html_render(Report(run="r", rows=[], pairwise=pw), [])
    table = re.search(r"<table class='controlled'>(.*?)</table>", page, re.S)
    assert table, "no table of the controlled figures"
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in table.group(1).split("</tr>")[1:-1]]
    assert [r[0] for r in rows] == ["m4", "m3", "m2", "m1"]  # best first, not as listed
    by_model = {r[0]: r for r in rows}
    assert by_model["m1"][2] == "0.500" and by_model["m1"][4] == "1000.0"  # the anchor
    assert float(by_model["m4"][2]) > 0.5 and float(by_model["m4"][4]) > 1000
    assert "class='position'" in page
