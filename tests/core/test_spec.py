"""The run spec (core/spec.py) and the stored configuration (core/stored.py): one decoder
each, plain data in and out unchanged, every older stored shape read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.core.spec import RunSpec, SpecError, dump_spec, load_spec, run_spec
from flask_eval.core.stored import STORED_VERSION, StoredConfig, StoredPairwise
from flask_eval.core.types import JudgeConfig, Price


def test_a_spec_of_flat_names_round_trips_through_its_yaml(tmp_path: Path) -> None:
    spec = run_spec(
        instances="i.jsonl",
        responses=["a=a.jsonl", "b=b.jsonl"],
        judges=["openai/j"],
        run_name="r",
        pairwise="baseline:a",
        swap=False,
        sample=5,
        seed=3,
        max_cost=2,
        reference=False,
    )
    assert spec.inputs.responses == ("a=a.jsonl", "b=b.jsonl")
    assert spec.pairwise.against == "baseline:a" and spec.pairwise.swap is False
    assert spec.budget.max_cost == 2.0 and spec.name == "r"
    path = tmp_path / "s.yaml"
    path.write_text(dump_spec(spec))
    assert load_spec(str(path)) == spec
    assert RunSpec.from_data(spec.to_data()) == spec
    data = spec.to_data()
    assert "options" not in data and "protocol" not in data  # at their defaults


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"judge": ["x"]}, "unknown key 'judge'"),
        ({"workers": {"judge": ["x"]}}, "unknown key 'workers.judge'"),
        ({"sampling": {"seed": 1.5}}, "sampling.seed: expected a whole number"),
        ({"sampling": {"samples": 21}}, "sampling.samples: 21 must be at least 1"),
        ({"budget": {"max_cost": -1}}, "budget.max_cost"),
        ({"inputs": {"reference": "no"}}, "inputs.reference: expected true or false"),
        ({"protocol": {"mode": "pair"}}, "protocol.mode"),
        ({"kind": "generation"}, "kind: 'generation'"),
        ({"version": 2}, "not a spec version"),
        ([], "expected a mapping"),
    ],
)
def test_the_decoder_refuses_naming_the_key(data: object, says: str) -> None:
    with pytest.raises(SpecError) as info:
        RunSpec.from_data(data)
    assert says in str(info.value)


def test_an_unknown_flat_name_is_refused() -> None:
    with pytest.raises(InputError, match="unknown option 'judge'"):
        run_spec(judge=["openai/j"])


def test_a_spec_file_error_names_the_line_of_the_key(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 1\nworkers:\n  judges: [openai/j]\nsampling:\n  limit: 0\n")
    with pytest.raises(InputError) as info:
        load_spec(str(path))
    assert str(info.value).startswith(f"{path}:5: sampling.limit: 0 must be at least 1")


#: a configuration as `run` stores it today (keys sorted by the store)
TODAY = {
    "version": 2,
    "coverage": {"a": [3, 3]},
    "instances_path": "i.jsonl",
    "judges": [JudgeConfig("j", "openai/j", price=Price(1.0, 2.0)).to_data()],
    "mode": "instance",
    "models": ["a"],
    "reference": True,
    "responses": {"a": "a.jsonl"},
    "skills": [],
}


def test_the_stored_data_comes_back_unchanged() -> None:
    for data in (TODAY, {**TODAY, "pairwise": {"plan": "all", "baseline": None, "swap": True}}):
        config = StoredConfig.from_data(data)
        assert config.to_data() == data
        assert config.to_text() == json.dumps(data, sort_keys=True)


def test_every_older_shape_is_read_with_its_defaults() -> None:
    oldest = StoredConfig.from_data(
        {"judges": ["openai/j", {"name": "k", "spec": "openai/k"}], "mode": "instance"}
    )
    assert oldest.judge_names == ("openai/j", "k")
    assert [j.name for j in oldest.judges] == ["k"]  # a bare name has no stored settings
    assert [j.spec for j in oldest.every_judge()] == ["openai/j", "openai/k"]
    assert oldest.version == 1  # no version key: written by 0.2.0 or before
    assert StoredConfig.from_data(TODAY).version == STORED_VERSION == 2
    assert oldest.reference is True and oldest.samples == 1 and oldest.kind == "judgment"
    assert oldest.pairwise is None and oldest.max_cost is None and oldest.dispatched is None
    assert oldest.to_data() == {
        "judges": ["openai/j", {"name": "k", "spec": "openai/k"}],
        "mode": "instance",
    }
    unordered = StoredConfig.from_data({**TODAY, "models": [], "responses": {"b": "", "a": ""}})
    assert unordered.models == ("b", "a")
    no_swap = StoredConfig.from_data({**TODAY, "pairwise": {"plan": "baseline", "baseline": "a"}})
    assert no_swap.pairwise == StoredPairwise("baseline", "a", True)


def test_updates_change_only_their_key() -> None:
    config = StoredConfig.from_data(TODAY)
    budgeted = config.with_max_cost(4.0).with_queue("q")
    assert budgeted.to_data() == {**TODAY, "max_cost": 4.0, "dispatched": "q"}
    assert budgeted.max_cost == 4.0 and budgeted.dispatched == "q"
    assert budgeted.without_queue().to_data() == {**TODAY, "max_cost": 4.0}
    faster = JudgeConfig("j", "openai/j", rpm=60.0)
    updated, changed = config.with_judge_settings([faster], ("rpm", "price"))
    assert changed == ["j: rpm None -> 60.0"]  # a price not given again stays
    assert updated.judges[0].rpm == 60.0 and updated.judges[0].price == Price(1.0, 2.0)
