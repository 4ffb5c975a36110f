"""People in a judges file (``spec: human/NAME``, panels) and how their items are dealt."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.core.people import Panel, People
from flask_eval.producer.judge_args import combine, combine_workers
from flask_eval.producer.judges_file import load_judges_file
from flask_eval.producer.people_plan import Item, assign, people_items
from flask_eval.workers.judge import spec_of

pytestmark = pytest.mark.unit


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "judges.yaml"
    path.write_text(text)
    return str(path)


def test_a_judges_file_holds_judges_and_people(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "- spec: openai/gpt-5.4-mini\n"
        "- spec: human/alice\n"
        "  sample: 10\n"
        "- spec: human/panel\n"
        "  name: experts\n"
        "  raters: [bob, carol, dave]\n"
        "  per_item: 2\n"
        "  overlap: 5\n"
        "  limit: 40\n"
        "  protocol: flask\n",
    )
    judges, panels = combine_workers([], [path], spec_of)
    assert [j.name for j in judges] == ["openai/gpt-5.4-mini"]
    assert panels == [
        Panel("human/alice", ("alice",), sample=10),
        Panel("experts", ("bob", "carol", "dave"), 2, 5, None, 40, "flask"),
    ]
    assert People(tuple(panels)).judges == (
        "human/alice",
        "human/bob",
        "human/carol",
        "human/dave",
    )
    # the flag form: one rater
    _, flagged = combine_workers(["human/erin"], [], spec_of)
    assert flagged == [Panel("human/erin", ("erin",))]


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("- spec: human/panel\n", 1, "`raters` must be a non-empty list"),
        ("- spec: human/panel\n  raters: [a, A]\n", 2, "listed twice"),
        ("- spec: human/alice\n  raters: [bob]\n", 2, "goes with `spec: human/panel`"),
        ("- spec: human/bad name\n", 1, "invalid rater name"),
        ("- spec: human/panel\n  raters: [a]\n  per_item: 2\n", 3, "the panel has 1 rater"),
        ("- spec: human/alice\n  sample: 3\n  limit: 4\n", 3, "not both"),
        ("- spec: human/alice\n  lease: 5\n", 2, "unknown key 'lease' for people"),
        ("- spec: human/alice\n  rpm: 5\n", 2, "unknown key 'rpm' for people"),
        ("- spec: human/alice\n  protocol: nope\n", 2, "unknown `protocol`"),
        (
            "- spec: human/alice\n- spec: human/panel\n  raters: [alice, bob]\n",
            2,
            "rater 'alice' is in two people's entries",
        ),
        (
            "- spec: openai/gpt-5.4-mini\n  name: human/x\n",
            2,
            "names starting with 'human/' are people's",
        ),
        (
            "- spec: openai/gpt-5.4-mini\n  name: Human/x\n",
            2,
            "names starting with 'human/' are people's",
        ),
    ],
)
def test_bad_people_entries_name_their_line(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(InputError) as info:
        combine_workers([], [path], spec_of)
    assert info.value.line == line
    assert says in str(info.value)


def test_people_are_refused_where_only_judges_work(tmp_path: Path) -> None:
    path = _file(tmp_path, "- spec: human/alice\n")
    with pytest.raises(InputError, match="rate the responses of a judgment run"):
        load_judges_file(path, spec_of)
    with pytest.raises(InputError, match="rate the responses of a judgment run"):
        combine(["human/alice"], [], spec_of)


def _items(n: int, pairwise: bool = False) -> list[Item]:
    if pairwise:
        subjects = [
            (a, b, f"i{k}", ("overall",)) for k in range(n) for a, b in (("m1", "m2"), ("m2", "m1"))
        ]
        return people_items(subjects)
    return people_items((f"m{k % 2}", "", f"i{k}", ("a", "b", "c")) for k in range(n))


def test_a_panel_deals_overlap_to_all_and_the_rest_evenly() -> None:
    items = _items(60)
    panel = Panel("p", ("alice", "bob"), per_item=1, overlap=30)
    ratings = assign(items, People((panel,), seed=7))
    per = Counter(r.judge for r in ratings)
    assert per == {"human/alice": 45, "human/bob": 45}
    by_item = Counter((r.item.model, r.item.instance_id) for r in ratings)
    assert len(by_item) == 60
    assert sorted(Counter(by_item.values()).items()) == [(1, 30), (2, 30)]
    # each rater once per item, ranks 0..n-1 per rater
    assert len({(r.judge, r.item) for r in ratings}) == len(ratings)
    for judge in per:
        assert sorted(r.rank for r in ratings if r.judge == judge) == [float(k) for k in range(45)]
    # the same seed deals the same; another seed another order
    assert assign(items, People((panel,), seed=7)) == ratings
    assert assign(items, People((panel,), seed=8)) != ratings


def test_per_item_raters_are_distinct_and_balanced() -> None:
    items = _items(31)
    panel = Panel("p", ("a", "b", "c"), per_item=2)
    ratings = assign(items, People((panel,)))
    by_item: dict[Item, list[str]] = {}
    for r in ratings:
        by_item.setdefault(r.item, []).append(r.judge)
    assert all(len(set(v)) == 2 == len(v) for v in by_item.values())
    loads = Counter(r.judge for r in ratings).values()
    assert max(loads) - min(loads) <= 1


def test_sample_and_limit_pick_items() -> None:
    items = _items(50)
    first = assign(items, People((Panel("p", ("a",), limit=10),)))
    assert {r.item for r in first} == set(items[:10])
    sampled = assign(items, People((Panel("p", ("a",), sample=10),), seed=3))
    assert len(sampled) == 10 and {r.item for r in sampled} != set(items[:10])


def test_a_pair_planned_in_both_orders_is_shown_once_sides_drawn_per_item() -> None:
    items = _items(200, pairwise=True)
    assert len(items) == 200
    assert all((i.model, i.model_b) == ("m1", "m2") for i in items)
    ratings = assign(items, People((Panel("p", ("a",)),)))
    swapped = sum(r.swapped for r in ratings)
    assert 60 < swapped < 140  # about half shows the second model first
    absolute = assign(_items(20), People((Panel("p", ("a",)),)))
    assert not any(r.swapped for r in absolute)


def test_a_dry_run_says_what_each_rater_would_rate(tmp_path: Path) -> None:
    from tests.conftest import EXAMPLES
    from tests.helpers import cli_env, flask_eval

    judges = _file(tmp_path, "- spec: human/panel\n  raters: [alice, bob]\n  overlap: 2\n")
    db = tmp_path / "store.db"
    result = flask_eval(
        "run",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"a={EXAMPLES / 'model_a.jsonl'}",
        "--judges",
        judges,
        "--limit",
        "6",
        "--dry-run",
        env=cli_env(f"sqlite:///{db}"),
    )
    # 6 items: 2 to both, the other 4 dealt two and two
    assert "human/alice: 4 items" in result.stdout and "human/bob: 4 items" in result.stdout
    assert not db.exists()
