"""Pairwise plans: ``--pairwise all|baseline:NAME``, both orders or one, bad plans refused
in one line, and the rows a dry run counts equal the rows the store plans."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from flask_eval.core.errors import InputError
from flask_eval.core.stored import StoredPairwise
from flask_eval.core.types import Instance, Response, ResponseSet
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.pairs import (
    check_pairs_answered,
    describe_plan,
    pairwise_config,
    parse_pairwise_arg,
    plan_pairs,
    planned_pairwise_rows,
    shared_instances,
)
from flask_eval.storage.store import Store

MODELS = ("m1", "m2", "m3", "m4")


def one_line(exc: pytest.ExceptionInfo[InputError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and exc.value.exit_code == 2
    return text


def test_parse_pairwise_arg() -> None:
    assert parse_pairwise_arg("all") == ("all", None)
    assert parse_pairwise_arg(" baseline:gpt-4o ") == ("baseline", "gpt-4o")
    for bad, says in [
        ("baseline", "needs the baseline model"),
        ("baseline:", "needs the baseline model"),
        ("every", "invalid --pairwise value 'every'"),
        ("ALL", "invalid --pairwise value"),
        ("baseline:no good", "invalid model name"),
    ]:
        with pytest.raises(InputError) as exc:
            parse_pairwise_arg(bad)
        assert says in one_line(exc)


def test_all_pairs_in_both_orders_or_one() -> None:
    both = plan_pairs(MODELS, "all", None, swap=True)
    assert len(both) == len(set(both)) == 4 * 3  # N (N - 1): grows as N^2
    assert set(both) == {(a, b) for a in MODELS for b in MODELS if a != b}
    # each comparison's two orders are next to each other, the first order first
    assert both[:4] == [("m1", "m2"), ("m2", "m1"), ("m1", "m3"), ("m3", "m1")]
    one = plan_pairs(MODELS, "all", None, swap=False)
    assert one == list(combinations(MODELS, 2))
    assert plan_pairs(MODELS, "all", None, swap=True) == both  # deterministic


def test_baseline_pairs() -> None:
    both = plan_pairs(MODELS, "baseline", "m3", swap=True)
    assert both == [
        ("m1", "m3"),
        ("m3", "m1"),
        ("m2", "m3"),
        ("m3", "m2"),
        ("m4", "m3"),
        ("m3", "m4"),
    ]
    assert plan_pairs(MODELS, "baseline", "m3", swap=False) == [
        ("m1", "m3"),
        ("m2", "m3"),
        ("m4", "m3"),
    ]
    assert plan_pairs(["a", "b"], "baseline", "a", swap=False) == [("b", "a")]


@pytest.mark.parametrize(
    ("models", "plan", "baseline", "says"),
    [
        (MODELS, "baseline", "m9", "baseline 'm9' is not among the models: m1, m2, m3, m4"),
        (MODELS, "baseline", "M2", "(did you mean m2?)"),
        (MODELS, "baseline", None, "needs the baseline model"),
        (["m1"], "all", None, "needs at least 2 models, got 1 ('m1')"),
        ([], "all", None, "needs at least 2 models, got none"),
        (["m1"], "baseline", "m1", "needs at least 2 models"),
        (["m1", "m2", "m1"], "all", None, "model 'm1' is given twice"),
        (MODELS, "all", "m1", "--pairwise all takes no baseline"),
        (MODELS, "round-robin", None, "unknown pairwise plan"),
    ],
)
def test_bad_plans_are_one_line(
    models: list[str], plan: str, baseline: str | None, says: str
) -> None:
    with pytest.raises(InputError) as exc:
        plan_pairs(models, plan, baseline, swap=True)
    assert says in one_line(exc)


def make_inputs(answers: dict[str, list[int]], n: int = 4) -> Inputs:
    instances = tuple(
        Instance(str(i), f"q{i}", "", ("overall",) if i % 2 else ("Factuality", "Harmlessness"))
        for i in range(n)
    )
    sets = tuple(
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, str(i), f"{m}:{i}") for i in ids))
        for m, ids in answers.items()
    )
    return Inputs(instances, sets)


def test_a_pair_without_a_shared_instance_is_one_clear_line() -> None:
    inputs = make_inputs({"m1": [0, 1, 2, 3], "m2": [0, 1], "m3": [2, 3], "m4": [3]})
    pairs = plan_pairs(["m1", "m2", "m3", "m4"], "all", None, swap=True)
    shared = shared_instances(inputs, pairs)
    assert shared[frozenset({"m1", "m2"})] == 2 and shared[frozenset({"m3", "m4"})] == 1
    assert shared[frozenset({"m2", "m3"})] == shared[frozenset({"m2", "m4"})] == 0
    with pytest.raises(InputError) as exc:
        check_pairs_answered(inputs, pairs)
    text = one_line(exc)
    assert "pairs m2-m3, m2-m4;" in text and "m1-" not in text and "m3-m4" not in text
    # against a baseline every model shares, the same inputs are fine
    check_pairs_answered(inputs, plan_pairs(["m1", "m2", "m3", "m4"], "baseline", "m1", True))
    with pytest.raises(InputError) as exc:
        check_pairs_answered(inputs, [("m3", "m2")])
    assert "of pair m2-m3;" in one_line(exc)  # named in the models' order
    names = ["x0", "x1", "x2", "x3", "y"]  # y answered nothing: 4 + 6 empty pairs
    many = make_inputs({"x0": [0], "x1": [1], "x2": [2], "x3": [3], "y": []})
    with pytest.raises(InputError) as exc:
        check_pairs_answered(many, plan_pairs(names, "all", None, False))
    assert "x0-x1, x0-x2, x0-x3, x0-y, x1-x2 and 5 more;" in one_line(exc)


def test_planned_rows_equal_the_rows_the_store_plans(sqlite_url: str) -> None:
    inputs = make_inputs({"m1": [0, 1, 2, 3], "m2": [0, 1, 3], "m3": [0, 2]})
    pairs = plan_pairs(["m1", "m2", "m3"], "all", None, swap=True)
    judges = ["memory/j1", "memory/j2"]
    planned = planned_pairwise_rows(inputs, pairs, judges)
    assert all(r.id == 0 and r.model_b and r.model != r.model_b for r in planned)
    key = Counter((r.model, r.model_b, r.instance_id, r.criterion, r.judge) for r in planned)
    assert max(key.values()) == 1
    # m2 and m3 share instance 0 only (2 criteria): 2 orders x 2 criteria x 2 judges
    assert sum(1 for k in key if {k[0], k[1]} == {"m2", "m3"}) == 8
    store = Store(sqlite_url)
    run, _ = store.create_run(
        name="pw",
        fingerprint="x" * 64,
        mode="instance",
        config={},
        instances=inputs.instances,
        response_sets=inputs.response_sets,
        judges=judges,
        pairs=pairs,
    )
    stored = Counter(
        (r.model, r.model_b, r.instance_id, r.criterion, r.judge) for r in store.open_rows(run.id)
    )
    assert stored == key


def test_config_and_description() -> None:
    config = pairwise_config("baseline", "m1", True)
    assert config == {"plan": "baseline", "baseline": "m1", "swap": True}
    pairs = plan_pairs(MODELS, "baseline", "m1", True)
    line = describe_plan(MODELS, StoredPairwise.from_data(config), pairs)
    assert "6 ordered comparisons" in line and "grows as N," in line and "both orders" in line
    config = pairwise_config("all", None, False)
    line = describe_plan(
        MODELS, StoredPairwise.from_data(config), plan_pairs(MODELS, "all", None, False)
    )
    assert "6 ordered comparisons" in line and "all 6 pairs of 4 models: grows as N^2" in line
    assert "one order" in line
