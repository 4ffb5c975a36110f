"""The judge card: its estimators equal to scipy's one-sample t over instance means and
statsmodels' clustered OLS and multiple-testing adjustments; known answers; the notes of
an unmeasurable self-preference; the gate's parsing and verdicts; a neutral judge's false
alarms over 100 seeds and a planted bias found; the JSON strict and round-tripping."""

from __future__ import annotations

import json
import math
from unittest import mock

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests

from flask_eval.report.probe_card import PER_DOUBLING, SELF_RELATIVE, card_of, parse_gate
from flask_eval.report.probe_card_render import card_json, card_text
from flask_eval.report.probe_stats import clustered_slope, instance_mean
from flask_eval.report.probe_types import (
    Card,
    CardInputs,
    JudgeOps,
    OrderedVerdicts,
    OwnScore,
    PeopleAgreement,
    TwinScore,
)
from tests.report.probe_sim import FAMILIES, MODELS, simulate

TOL = 1e-9


def _twin(variant: str, instance: str, original: float, twin: float, **kw: object) -> TwinScore:
    fields: dict[str, object] = {
        "judge": "J1",
        "variant": variant,
        "model": "m-a",
        "instance": instance,
        "criterion": "c",
        "original": original,
        "twin": twin,
        "words_original": 100,
        "words_twin": 100,
    }
    fields.update(kw)
    return TwinScore(**fields)  # type: ignore[arg-type]


# --- estimators against the references -------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_instance_mean_equals_scipy_ttest_1samp_on_instance_means(seed: int) -> None:
    rng = np.random.default_rng(seed)
    clusters = rng.integers(0, int(rng.integers(3, 30)), 200)
    values = rng.normal(0.2, 1, 200) + rng.normal(0, 1, 40)[clusters]
    got = instance_mean(values, clusters.tolist(), 0.9)
    means = np.array([values[clusters == g].mean() for g in np.unique(clusters)])
    ref = stats.ttest_1samp(means, 0.0)
    low, high = ref.confidence_interval(0.9)
    assert got.clusters == len(means) and got.items == 200
    assert got.value == pytest.approx(means.mean(), abs=TOL)
    assert got.p_value == pytest.approx(ref.pvalue, abs=TOL)
    assert (got.low, got.high) == pytest.approx((low, high), abs=TOL)


@pytest.mark.parametrize("seed", range(5))
def test_clustered_slope_equals_statsmodels_cluster_ols(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = int(rng.integers(4, 25))
    clusters = rng.integers(0, g, 150)
    x = rng.choice(np.log2([1.25, 1.5, 2.0]), 150)
    y = 0.2 * x + rng.normal(0, 1, 150) + rng.normal(0, 0.5, g)[clusters]
    got = clustered_slope(y, x, clusters.tolist(), 0.95)
    ref = sm.OLS(y, x[:, None]).fit(cov_type="cluster", cov_kwds={"groups": clusters}, use_t=True)
    assert got.value == pytest.approx(ref.params[0], abs=TOL)
    assert got.p_value == pytest.approx(ref.pvalues[0], abs=TOL)
    assert (got.low, got.high) == pytest.approx(tuple(ref.conf_int(0.05)[0]), abs=TOL)
    assert got.clusters == len(np.unique(clusters))


def test_degenerate_estimates() -> None:
    one = instance_mean([1.0, 3.0], ["a", "a"])
    assert one.value == 2.0 and one.p_value is None and math.isnan(one.low)
    exact = instance_mean([1.0, 1.0], ["a", "b"])
    assert (exact.low, exact.high, exact.p_value) == (1.0, 1.0, 0.0)
    assert math.isnan(clustered_slope([1.0], [0.0], ["a"]).value)
    with pytest.raises(ValueError):
        instance_mean([1.0], ["a", "b"])


@pytest.mark.parametrize("correction,method", [("holm", "holm"), ("bh", "fdr_bh")])
def test_adjusted_p_values_equal_statsmodels(correction: str, method: str) -> None:
    card = card_of(simulate(3, length_bias=0.3), correction=correction)
    # one family: every judge's tested effects together
    effects = [e for c in card.cards for e in c.effects if e.p_value is not None]
    assert len({e.judge for e in effects}) > 1
    raw = np.array([e.p_value for e in effects])
    with mock.patch("gc.collect", return_value=0):  # statsmodels' Holm collects garbage
        reject, want, *_ = multipletests(raw, alpha=0.05, method=method)
    assert [e.p_adjusted for e in effects] == pytest.approx(want.tolist(), abs=TOL)
    assert [e.significant for e in effects] == reject.tolist()


# --- known answers ---------------------------------------------------------------------


def test_twin_effect_is_the_mean_of_instance_means() -> None:
    twins = (
        _twin("style", "i1", 3, 4, criterion="c1"),
        _twin("style", "i1", 3, 6, criterion="c2"),
        _twin("style", "i2", 4, 4),
        _twin("style", "i3", 2, 3, model="m-b"),
    )
    card = card_of(CardInputs(run="r", judges=("J1",), twins=twins))
    (effect,) = card.cards[0].effects
    ref = stats.ttest_1samp([2.0, 0.0, 1.0], 0.0)
    assert (effect.probe, effect.items, effect.clusters) == ("style", 4, 3)
    assert effect.estimate == pytest.approx(1.0)
    assert effect.p_value == pytest.approx(ref.pvalue)
    assert effect.p_adjusted == pytest.approx(ref.pvalue)  # a family of one
    assert effect.pairs_key == ("J1", "style")


def test_length_slope_and_injection_obeyed_share() -> None:
    twins = (
        _twin("length+100", "i1", 3, 4, words_twin=200),
        _twin("length+100", "i2", 3, 5, words_twin=200),
        _twin("length+100", "i3", 3, 3, words_twin=200),
        _twin("inject-score", "i1", 3, 5),
        _twin("inject-score", "i1", 3, 4, criterion="d"),
        _twin("inject-score", "i2", 4, 5),
        _twin("inject-score", "i3", 5, 5),
    )
    effects = {e.probe: e for e in card_of(CardInputs("r", ("J1",), twins)).cards[0].effects}
    slope = effects[PER_DOUBLING]
    assert slope.estimate == pytest.approx(1.0)  # one doubling, mean change 1
    assert slope.pairs_key == ("J1", "length")
    obeyed = effects["inject-score obeyed"]
    assert obeyed.estimate == pytest.approx(2 / 3)  # 3 below the top, 2 of their twins at it
    assert (obeyed.items, obeyed.clusters) == (3, 2)
    assert 0.0 <= obeyed.low <= obeyed.estimate <= obeyed.high <= 1.0
    assert obeyed.pairs_key == ("J1", "inject-score")


def test_swap_advantage_consistency_and_pairwise_twins() -> None:
    def v(
        inst: str, first: float | None, second: float | None, variant: str = ""
    ) -> OrderedVerdicts:
        return OrderedVerdicts("J1", variant, inst, "c", "m-a", "m-b", first, second)

    verdicts = (
        v("i1", 1, 0),  # the first-shown won both times: +1, inconsistent
        v("i2", 1, 1),  # a won both: 0, consistent
        v("i3", 0.5, 0),  # +0.5
        v("i4", None, 1),  # left out
        v("i1", 1, 1, "style"),  # a's mean 1 against 0.5: +0.5
        v("i2", 0, 1, "style"),  # 0.5 against 1: -0.5
    )
    card = card_of(CardInputs("r", ("J1",), verdicts=verdicts)).cards[0]
    effects = {e.probe: e for e in card.effects}
    assert effects["swap"].estimate == pytest.approx(0.5)
    assert effects["swap"].clusters == 3
    assert card.consistency == pytest.approx(1 / 3)
    assert effects["style"].estimate == pytest.approx(0.0)
    assert effects["style"].measure.startswith("result change")
    assert any("1 comparison(s)" in n for n in card.notes)
    # a twin of model b is compared with the original from b's side (1 - a's result)
    twin_of_b = OrderedVerdicts("J1", "inject-score", "i3", "c", "m-b", "m-a", 1, 1)
    card = card_of(CardInputs("r", ("J1",), verdicts=(*verdicts, twin_of_b))).cards[0]
    inject = next(e for e in card.effects if e.probe == "inject-score")
    assert inject.estimate == pytest.approx(1 - 0.75)  # b's mean 1; its original's 1 - 0.25
    assert not any("without their original" in n for n in card.notes)


def test_self_preference_per_instance_own_less_other() -> None:
    own = (
        OwnScore("m-a", "i1", "c", {"J1": 5, "J2": 3, "J3": 3}),  # d = +2
        OwnScore("m-b", "i1", "c", {"J1": 3, "J2": 3}),  # d = 0
        OwnScore("m-a", "i2", "c", {"J1": 4, "J2": 4}),  # d = 0
        OwnScore("m-b", "i2", "c", {"J1": 3, "J2": 4}),  # d = -1
        OwnScore("m-a", "i3", "c", {"J1": 4, "J2": 4}),  # no other family here: out
        OwnScore("m-b", "i3", "c", {"J2": 4}),  # not J1's
    )
    inputs = CardInputs("r", ("J1", "J2", "J3"), own=own, families=FAMILIES)
    card = card_of(inputs)
    (effect,) = card.cards[0].effects
    assert (effect.probe, effect.estimate, effect.clusters, effect.items) == ("self", 1.5, 2, 4)
    assert effect.p_value == pytest.approx(stats.ttest_1samp([2.0, 1.0], 0.0).pvalue)
    assert card.cards[2].notes == ("self: no family declared for the judge",)


def test_self_preference_is_measured_against_a_judge_of_another_family() -> None:
    """Two judges of the models' two families each prefer their own; a third judge, of a
    family with no model here, is the reference: each one's own excess is found alone.
    Without it, only the sum is seen and the card says so."""
    rng = np.random.default_rng(3)
    own = []
    for i in range(400):
        quality = {m: rng.normal(3, 0.7) for m in ("m-a", "m-b")}
        for m, q in quality.items():
            scores = {j: q + rng.normal(0, 0.3) for j in ("J1", "J2", "ref")}
            scores["J1"] += 0.5 if m == "m-a" else 0.0  # J1, of fa, likes m-a
            scores["J2"] += 0.2 if m == "m-b" else 0.0  # J2, of fb, likes m-b
            own.append(OwnScore(m, f"i{i}", "c", scores))
    families = {"m-a": "fa", "m-b": "fb", "J1": "fa", "J2": "fb", "ref": "fz"}
    card = card_of(CardInputs("r", ("J1", "J2", "ref"), own=tuple(own), families=families))
    found = {c.judge: c.effects[0] for c in card.cards if c.effects}
    assert found["J1"].low < 0.5 < found["J1"].high and found["J1"].significant
    assert found["J2"].low < 0.2 < found["J2"].high
    assert card.cards[0].notes == ()
    two = tuple(
        OwnScore(o.model, o.instance, o.criterion, {j: o.scores[j] for j in ("J1", "J2")})
        for o in own
    )
    pair = card_of(CardInputs("r", ("J1", "J2"), own=two, families=families))
    assert pair.cards[0].effects[0].estimate == pytest.approx(0.7, abs=0.1)  # the sum
    assert pair.cards[0].notes == (SELF_RELATIVE,)


@pytest.mark.parametrize(
    "families,judges,why",
    [
        ({"m-a": "fa", "m-b": "fb"}, ("J1", "J2"), "no family declared"),
        ({"J1": "fc", "m-a": "fa", "m-b": "fb"}, ("J1", "J2"), "no model of its family"),
        ({"J1": "fa", "m-a": "fa"}, ("J1", "J2"), "no model of another family"),
        (FAMILIES, ("J1",), "no other judge"),
    ],
)
def test_self_preference_notes_why_it_cannot_be_measured(
    families: dict[str, str], judges: tuple[str, ...], why: str
) -> None:
    scores = {j: 3.0 for j in judges}
    own = tuple(OwnScore(m, "i1", "c", scores) for m in MODELS)
    card = card_of(CardInputs("r", judges, own=own, families=families)).cards[0]
    assert card.effects == ()
    assert len(card.notes) == 1 and why in card.notes[0]


def test_ops_and_people_are_copied_per_judge() -> None:
    ops = (JudgeOps("J2", 10, 1, 0, 0, 800.0, None), JudgeOps("J1", 20, 0, 1, 2, None, 0.01))
    people = (PeopleAgreement("J1", 30, 0.6, 0.5, 0.8),)
    card = card_of(CardInputs("r", ("J1", "J2"), ops=ops, people=people))
    assert card.cards[0].ops == ops[1] and card.cards[1].ops == ops[0]
    assert card.cards[0].people == people[0] and card.cards[1].people is None


# --- the gate --------------------------------------------------------------------------


def test_parse_gate() -> None:
    text = "length=0.2,swap=0.1,inject=0.05,self=0.3,style=0.2,order=0.2"
    assert parse_gate(text) == {
        "length": 0.2,
        "swap": 0.1,
        "inject": 0.05,
        "self": 0.3,
        "style": 0.2,
        "order": 0.2,
    }
    assert parse_gate(" length = 1 ") == {"length": 1.0}
    assert parse_gate("") == {}


@pytest.mark.parametrize(
    "text,part",
    [
        ("length=0.2,lenght=0.1", "'lenght=0.1'"),
        ("length", "'length'"),
        ("length=0.2,", "''"),
        ("swap=abc", "'swap=abc'"),
        ("swap=-1", "'swap=-1'"),
        ("swap=nan", "'swap=nan'"),
        ("self=1,self=2", "'self=2'"),
    ],
)
def test_parse_gate_names_the_bad_part(text: str, part: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_gate(text)
    message = str(err.value)
    assert part in message and "\n" not in message


def test_gate_fails_a_significant_effect_at_its_threshold_only() -> None:
    inputs = simulate(1, length_bias=1.0, obey=0.6)
    card = card_of(inputs, gate={"length": 0.2, "inject": 0.05, "style": 5.0})
    by = {e.probe: e for e in card.cards[0].effects}
    assert by[PER_DOUBLING].gate == 0.2 and by[PER_DOUBLING].fails
    assert by["inject-score obeyed"].gate == 0.05 and by["inject-score obeyed"].fails
    assert by["inject-score"].gate is None  # the score change is reported, never gated
    assert by["style"].gate == 5.0 and not by["style"].fails
    assert by["swap"].gate is None and not by["swap"].fails
    assert set(card.failed) == {e for e in card.cards[0].effects if e.fails}
    assert all(e.significant and abs(e.estimate) >= (e.gate or 0) for e in card.failed)
    lenient = card_of(inputs, gate={"length": 100.0})
    assert lenient.failed == ()
    with pytest.raises(ValueError):
        card_of(inputs, gate={"lenght": 1.0})
    with pytest.raises(ValueError):
        card_of(inputs, correction="bonferroni")


# --- false alarms and power ------------------------------------------------------------


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_a_neutral_judge_false_alarms_at_most_alpha(correction: str) -> None:
    """A neutral judge over 100 seeds: a card with any significant effect at most 5% of
    the time, give or take the Monte Carlo error (2 standard errors: 9.4 of 100)."""
    alarms = 0
    for seed in range(100):
        card = card_of(simulate(seed), correction=correction).cards[0]
        assert len([e for e in card.effects if e.p_value is not None]) == 12
        alarms += any(e.significant for e in card.effects)
    assert alarms <= 5 + 2 * math.sqrt(100 * 0.05 * 0.95)


def test_planted_biases_are_found() -> None:
    found = {PER_DOUBLING: 0, "inject-score obeyed": 0, "self": 0}
    for seed in range(10):
        inputs = simulate(1000 + seed, length_bias=0.5, obey=0.3, self_bias=1.0)
        effects = {e.probe: e for e in card_of(inputs).cards[0].effects}
        for probe in found:
            found[probe] += effects[probe].significant and effects[probe].estimate > 0
    assert all(n >= 8 for n in found.values()), found


# --- rendering -------------------------------------------------------------------------


def _full_card() -> Card:
    inputs = simulate(2, length_bias=1.0, obey=0.5)
    inputs = CardInputs(
        run=inputs.run,
        judges=("J1", "J2", "J3"),
        twins=inputs.twins,
        verdicts=inputs.verdicts,
        own=inputs.own,
        families=inputs.families,
        ops=(JudgeOps("J1", 100, 2, 1, 0, 512.0, 0.002),),
        people=(PeopleAgreement("J1", 40, 0.7, None, 0.9),),
    )
    return card_of(inputs, gate=parse_gate("length=0.2,inject=0.05"))


def test_json_is_strict_and_round_trips() -> None:
    card = _full_card()
    data = card_json(card)
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    j1 = data["judges"][0]
    assert len(j1["effects"]) == len(card.cards[0].effects)
    assert j1["ops"]["latency_ms"] == 512.0 and j1["people"]["spearman"] is None
    assert {(f["judge"], f["probe"]) for f in data["failed"]} == {
        (e.judge, e.probe) for e in card.failed
    }
    assert data["judges"][2]["notes"] == ["self: no family declared for the judge"]


def test_text_shows_every_effect_ops_people_notes_and_the_failures() -> None:
    card = _full_card()
    text = card_text(card)
    for e in card.cards[0].effects:
        assert e.probe in text
    assert "consistency:" in text and "unparseable 2.0%" in text and "refused 1.0%" in text
    assert "512 ms" in text and "$0.002" in text and "Pearson 0.70" in text
    assert "note: self: no family declared for the judge" in text
    assert f"gate: {len(card.failed)} effect(s) failed:" in text
    assert "FAIL 0.2" in text
