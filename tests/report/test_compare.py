"""The paired comparison of two score tables (report/compare.py) on hand-built tables:
what is aligned and what is dropped, the instance as the unit, the family's correction,
and the gate's verdict."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pytest

from flask_eval.report.compare import (
    IMPROVEMENT,
    NO_CHANGE,
    POOLED,
    REGRESSION,
    SMALL_DROP,
    UNTESTABLE,
    CompareRow,
    CompareSettings,
    Comparison,
    Pair,
    compare,
)
from flask_eval.report.dimensions import Breakdown, Dimension, report_breakdown
from flask_eval.report.metrics import OVERALL
from flask_eval.report.scores import ScoreTable
from tests.reference import Record, from_records

ABILITY = {"Factuality": "Knowledge", "Readability": "Style", "Harmlessness": "Style"}
BREAKDOWN = report_breakdown(ABILITY)
SKILLS = ("Factuality", "Readability")


def records(
    scores: dict[str, list[float]],
    *,
    model: str = "m",
    judges: Iterable[str] = ("j",),
    skills: Iterable[str] = SKILLS,
    status: str = "done",
) -> list[Record]:
    """One judgment per (instance, skill, judge) of ``model``: instance i of skill s
    scored ``scores[s][i]``, the same for every judge."""
    out = []
    for judge in judges:
        for skill in skills:
            for i, value in enumerate(scores[skill]):
                out.append(
                    Record(model, judge, f"i{i}", skill, status, value, ("Humanities",), 1 + i % 3)
                )
    return out


def table(recs: Iterable[Record]) -> ScoreTable:
    return from_records(list(recs))


def rng_scores(seed: int, n: int, shift: float = 0.0) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(2, 4, n)
    return {s: list(np.clip(base + shift + rng.normal(0, 0.3, n), 1, 5)) for s in SKILLS}


def row(result: Comparison, dimension: str, key: str, model: str = "m") -> CompareRow:
    (found,) = [r for r in result.rows if (r.model, r.dimension, r.key) == (model, dimension, key)]
    return found


def test_cells_on_one_side_and_unfinished_judgments_are_counted_apart_never_scored() -> None:
    scores = rng_scores(1, 8)
    base = records(scores, judges=("j", "k"))
    new = records(scores, judges=("j", "k"))
    # NEW lacks instance i7 (both skills); BASE lacks nothing; NEW has an extra instance
    new = [r for r in new if r.instance_id != "i7"]
    new += [Record("m", "j", "i9", "Factuality", "done", 1.0, ("Humanities",), 1)]
    # failures and pending on each side: never low scores
    base = [
        Record(r.model, r.judge, r.instance_id, r.skill, "failed", None, r.domains, r.difficulty)
        if (r.judge, r.instance_id, r.skill) == ("j", "i0", "Factuality")
        else r
        for r in base
    ]
    new = [
        Record(r.model, r.judge, r.instance_id, r.skill, "pending", None, r.domains, r.difficulty)
        if r.judge == "k" and r.instance_id in ("i1", "i2")
        else r
        for r in new
    ]
    new = [
        Record(r.model, r.judge, r.instance_id, r.skill, "done", None, r.domains, r.difficulty)
        if (r.judge, r.instance_id, r.skill) == ("j", "i3", "Readability")
        else r
        for r in new
    ]
    result = compare(table(base), table(new), [Pair("m", "m")], BREAKDOWN)
    (d,) = result.dropped
    assert (d.only_base, d.only_new) == (2, 1)
    assert (d.base_failed, d.base_pending, d.base_na) == (1, 0, 0)
    assert (d.new_failed, d.new_pending, d.new_na) == (0, 4, 1)
    # 7 shared instances x 2 skills x 2 judges, less what either side did not score
    assert d.paired == 7 * 2 * 2 - 1 - 4 - 1
    overall = row(result, "overall", "all")
    assert overall.judgments == d.paired and overall.n == 7
    # the same scores on both sides where both scored: no change at all
    assert overall.effect == pytest.approx(0.0, abs=1e-12)
    assert overall.verdict == NO_CHANGE
    assert any("pending in NEW" in note for note in result.notes)


def test_the_instance_is_the_unit_duplicated_criteria_change_neither_n_nor_se() -> None:
    base_scores, new_scores = rng_scores(2, 12), rng_scores(3, 12, shift=-0.4)
    breakdown = report_breakdown(ABILITY, partial_abilities=True)
    once = compare(
        table(records(base_scores)), table(records(new_scores)), [Pair("m", "m")], breakdown
    )
    # every criterion twice (a copy under another name): as many instances, same means
    skills = (*SKILLS, *(f"{s} copy" for s in SKILLS))
    twice_base = {**base_scores, **{f"{s} copy": base_scores[s] for s in SKILLS}}
    twice_new = {**new_scores, **{f"{s} copy": new_scores[s] for s in SKILLS}}
    twice = compare(
        table(records(twice_base, skills=skills)),
        table(records(twice_new, skills=skills)),
        [Pair("m", "m")],
        breakdown,
    )
    one, many = row(once, "overall", "all"), row(twice, "overall", "all")
    assert many.judgments == 2 * one.judgments  # twice the judgments...
    assert many.n == one.n == 12  # ...the same instances
    assert many.se == pytest.approx(one.se) and many.effect == pytest.approx(one.effect)
    assert many.p_value == pytest.approx(one.p_value)


def test_a_clear_drop_is_a_regression_and_an_equal_run_is_not() -> None:
    base_scores = rng_scores(4, 30)
    drop = compare(
        table(records(base_scores)),
        table(records(rng_scores(4, 30, shift=-0.8))),
        [Pair("m", "m")],
        BREAKDOWN,
    )
    assert drop.gate_failed and row(drop, "overall", "all").verdict == REGRESSION
    assert drop.headline.startswith("REGRESSION")
    same = compare(
        table(records(base_scores)), table(records(base_scores)), [Pair("m", "m")], BREAKDOWN
    )
    assert not same.gate_failed and same.headline.startswith("OK")
    better = compare(
        table(records(base_scores)),
        table(records(rng_scores(4, 30, shift=0.8))),
        [Pair("m", "m")],
        BREAKDOWN,
    )
    assert not better.gate_failed and row(better, "overall", "all").verdict == IMPROVEMENT


def test_min_effect_a_significant_but_small_drop_does_not_fail_the_gate() -> None:
    base_scores = rng_scores(5, 40)
    new_scores = {s: [v - 0.3 for v in vs] for s, vs in base_scores.items()}
    new_scores["Factuality"][0] -= 0.05  # not constant: a finite standard error
    base, new = table(records(base_scores)), table(records(new_scores))
    strict = compare(base, new, [Pair("m", "m")], BREAKDOWN)
    assert row(strict, "overall", "all").verdict == REGRESSION
    lenient = compare(base, new, [Pair("m", "m")], BREAKDOWN, CompareSettings(min_effect=0.5))
    overall = row(lenient, "overall", "all")
    assert overall.verdict == SMALL_DROP and not lenient.gate_failed
    assert overall.p_regression_adjusted > 0.05 and overall.p_adjusted < 0.05


def test_holm_controls_the_family_bh_the_false_discovery_rate() -> None:
    base = table(records(rng_scores(6, 10)))
    new = table(records(rng_scores(7, 10, shift=-0.3)))
    holm = compare(base, new, [Pair("m", "m")], BREAKDOWN)
    bh = compare(base, new, [Pair("m", "m")], BREAKDOWN, CompareSettings(correction="bh"))
    assert holm.tests == bh.tests == len([r for r in holm.rows if r.verdict != UNTESTABLE])
    tested = [(h, b) for h, b in zip(holm.rows, bh.rows, strict=True) if h.verdict != UNTESTABLE]
    ps = [h.p_value for h, _ in tested]
    m = len(ps)
    smallest = min(range(m), key=lambda k: ps[k])
    assert tested[smallest][0].p_adjusted == pytest.approx(min(1.0, ps[smallest] * m))
    ranked = sorted(ps)
    assert tested[smallest][1].p_adjusted == pytest.approx(
        min(1.0, *(p * m / (k + 1) for k, p in enumerate(ranked)))
    )
    for h, b in tested:  # BH never above Holm, neither below the raw p-value
        assert h.p_value <= b.p_adjusted <= h.p_adjusted + 1e-12
    # the MDE at Holm's first step, alpha / m: a family of one at alpha / m has the same
    overall = row(holm, "overall", "all")
    only_overall = Breakdown((Dimension(OVERALL),))
    alone = compare(base, new, [Pair("m", "m")], only_overall)
    assert alone.tests == 1 and row(alone, "overall", "all").mde < overall.mde
    at_level = compare(base, new, [Pair("m", "m")], only_overall, CompareSettings(alpha=0.05 / m))
    assert row(at_level, "overall", "all").mde == pytest.approx(overall.mde)


def test_untestable_keys_a_single_instance_and_no_shared_cells() -> None:
    base = table(records({"Factuality": [3.0], "Readability": [4.0]}))
    new = table(records({"Factuality": [2.0], "Readability": [2.0]}))
    result = compare(base, new, [Pair("m", "m")], BREAKDOWN)
    assert result.tests == 0 and not result.gate_failed
    assert all(r.verdict == UNTESTABLE and r.n == 1 for r in result.rows)
    assert math.isnan(row(result, "overall", "all").p_value)
    assert result.headline.startswith("UNTESTABLE")


def test_two_models_of_one_table_and_per_judge_rows_outside_the_gate() -> None:
    recs = records(rng_scores(8, 20), model="a", judges=("j", "k"))
    recs += records(rng_scores(8, 20, shift=-1.0), model="b", judges=("j", "k"))
    recs += [Record("a", "human/alice", "i0", "Factuality", "done", 1.0, (), 1)]
    t = table(recs)
    result = compare(t, t, [Pair("a", "b")], BREAKDOWN)
    assert result.judges == ("j", "k")  # people are not judges
    assert row(result, "overall", "all", model="a -> b").verdict == REGRESSION
    assert {r.judge for r in result.judge_rows} == {"j", "k"}
    assert all(r.judge == POOLED for r in result.rows)
    assert all(r.dimension == "overall" for r in result.judge_rows)
    with pytest.raises(ValueError, match="'c' is not in NEW"):
        compare(t, t, [Pair("a", "c")], BREAKDOWN)
    with pytest.raises(ValueError, match="judge 'x'"):
        compare(t, t, [Pair("a", "b")], BREAKDOWN, CompareSettings(judges=("x",)))
    only_j = compare(t, t, [Pair("a", "b")], BREAKDOWN, CompareSettings(judges=("j",)))
    assert only_j.judges == ("j",) and not only_j.judge_rows
    assert (
        row(only_j, "overall", "all", "a -> b").judgments * 2
        == row(result, "overall", "all", "a -> b").judgments
    )


@pytest.mark.parametrize(
    "settings", [{"alpha": 0.0}, {"alpha": 1.5}, {"min_effect": -1.0}, {"correction": "bonf"}]
)
def test_settings_out_of_range_are_refused(settings: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        CompareSettings(**settings)  # type: ignore[arg-type]


def test_instances_all_moved_alike_are_judged_by_the_sign_test_not_a_zero_variance() -> None:
    base = table(records({"Factuality": [3.0, 4.0], "Readability": [3.0, 4.0]}))
    new = table(records({"Factuality": [2.5, 3.5], "Readability": [2.5, 3.5]}))
    result = compare(base, new, [Pair("m", "m")], Breakdown((Dimension(OVERALL),)))
    overall = row(result, "overall", "all")
    assert overall.effect == pytest.approx(-0.5) and overall.se == 0
    assert overall.p_regression == pytest.approx(0.25) and overall.p_value == pytest.approx(0.5)
    assert overall.verdict == NO_CHANGE and not result.gate_failed and math.isnan(overall.mde)
    many = [float(v) for v in range(1, 9)]
    base = table(records({"Factuality": many, "Readability": many}))
    new = table(
        records({"Factuality": [v - 1 for v in many], "Readability": [v - 1 for v in many]})
    )
    assert compare(base, new, [Pair("m", "m")], Breakdown((Dimension(OVERALL),))).gate_failed


def test_an_unknown_judge_is_told_apart_from_an_unknown_model() -> None:
    """A judge a table lacks is UnknownJudge (the command says `--judge: ...`); a model a
    table lacks is another error, whatever its name says."""
    from flask_eval.report.compare_align import UnknownJudge, compared_judges

    base = table(records({s: [3.0, 4.0] for s in SKILLS}, judges=("j", "k")))
    new = table(records({s: [3.0, 4.0] for s in SKILLS}, judges=("j",)))
    assert compared_judges(base, new, ["j"]) == ("j",)
    with pytest.raises(UnknownJudge, match="'k' is not among NEW's judges"):
        compared_judges(base, new, ["k"])
    with pytest.raises(ValueError, match="judge-model") as raised:
        compare(base, new, [Pair("judge-model", "m")], BREAKDOWN, CompareSettings())
    assert not isinstance(raised.value, UnknownJudge)
