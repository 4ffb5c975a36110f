"""`run --human-first`, end to end: a rater's queue serves first the items the run's judges
disagree on, on a run built so that they disagree on 50 known items; `random` serves a
seeded random order instead.

The run: 100 instances and one model whose response to 50 of them is a copy of the
reference answer and to the other 50 unrelated text. Judge ``fixed`` is a simulator that
gives every skill 5; judge ``real`` a normal one, whose score follows how much of the
reference the response covers (``simulator.quality``). Each text is picked (a salt word)
so that ``real`` finds the copies excellent (level 5: scores 4-5) and the unrelated texts
poor (level 1: scores 1-2): the judges then agree within a point on the copies and by
three points or more on the unrelated texts, and the test checks that they did.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from flask_eval.core.errors import Status
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.quality import quality_of
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage import ratings
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from tests.helpers import cli_env, flask_eval

pytestmark = pytest.mark.e2e

J = JUDGMENT.c
MODEL = "m"
ALICE = "human/alice"
N = 100
#: the instances whose response is unrelated text (the others: the reference, copied)
BAD = frozenset(range(1, N + 1, 2))
SKILLS = ("Factuality", "Completeness", "Readability")
REAL = SimConfig()  # the normal judge: the texts are picked for its seed
ANIMALS = ("otter", "heron", "badger", "falcon", "salmon")
PLACES = ("valley", "harbour", "forest", "glacier", "meadow")
GOODS = ("pebbles", "acorns", "feathers", "reeds", "shells")


def _picked(make: Callable[[int], str], level: Callable[[str], int], wanted: int) -> str:
    """The first ``make(salt)`` whose ``level`` is ``wanted``."""
    for salt in itertools.count():
        text = make(salt)
        if level(text) == wanted:
            return text
    raise AssertionError("unreachable")  # pragma: no cover


def _reference(i: int) -> str:
    """Instance ``i``'s reference answer: a copy of it is excellent to the normal judge."""
    animal, place, goods = ANIMALS[i % 5], PLACES[i // 5 % 5], GOODS[i // 25 % 5]
    return _picked(
        lambda s: f"The {animal} of the {place} number{i} gathers {goods} at dawn, tag{s}.",
        lambda text: quality_of(text, text, REAL),
        5,
    )


def _unrelated(i: int, reference: str) -> str:
    """A text sharing no word with ``reference``: poor to the normal judge."""
    return _picked(
        lambda s: f"Quarterly invoices for warehouse unit{i} remain unpaid, ledger code zeta{s}.",
        lambda text: quality_of(text, reference, REAL),
        1,
    )


def dataset(tmp_path: Path) -> list[str]:
    """``--instances`` and ``--responses`` of the run (module docstring)."""
    instances, responses = [], []
    for i in range(1, N + 1):
        reference = _reference(i)
        instances.append(
            {
                "idx": i,
                "instruction": f"What does animal number{i} gather, and when?",
                "answer": reference,
                "skill": list(SKILLS),
                "domain": ["Natural Science"],
                "difficulty": "simple lifestyle knowledge",
            }
        )
        text = _unrelated(i, reference) if i in BAD else reference
        responses.append({"question_id": i, "text": text})
    paths = tmp_path / "instances.jsonl", tmp_path / "responses.jsonl"
    for path, rows in zip(paths, (instances, responses), strict=True):
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return ["--instances", str(paths[0]), "--responses", f"{MODEL}={paths[1]}"]


def judges_file(tmp_path: Path, fixed_url: str, real_url: str) -> Path:
    path = tmp_path / "judges.yaml"
    path.write_text(
        f"- spec: openai/sim-fixed@{fixed_url}\n  name: fixed\n"
        f"- spec: openai/sim-real@{real_url}\n  name: real\n"
        "- spec: human/alice\n"
    )
    return path


def run(env: dict[str, str], args: list[str], judges: Path, name: str, *more: str) -> int:
    """`flask-eval run` of the dataset; the run's id."""
    flask_eval("run", *args, "--judges", str(judges), "--run", name, "--quiet", *more, env=env)
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    try:
        info = store.find_run(name)
        assert info is not None
        return info.id
    finally:
        store.close()


def judge_scores(database_url: str, run_id: int) -> dict[tuple[str, int, str], int]:
    """(judge, instance, skill) -> score of the run's judges, every row of them done."""
    store = Store(database_url)
    stmt = select(J.judge, J.instance_id, J.criterion, J.status, J.score).where(
        J.run_id == run_id, J.judge.in_(("fixed", "real"))
    )
    try:
        with store.engine.connect() as conn:
            rows = list(conn.execute(stmt))
    finally:
        store.close()
    assert {r.status for r in rows} == {Status.DONE.value}
    return {(r.judge, int(r.instance_id), r.criterion): int(r.score) for r in rows}


def disagreement_of(scores: dict[tuple[str, int, str], int], i: int) -> float:
    """The judges' spread on instance ``i``: the mean over skills of the population
    standard deviation of their two scores."""
    return statistics.mean(
        statistics.pstdev([scores[("fixed", i, s)], scores[("real", i, s)]]) for s in SKILLS
    )


def served(database_url: str, run_id: int, count: int | None, submit: bool) -> list[int]:
    """The instances of alice's next ``count`` items (None: until none is left), served one
    after another, each submitted (``submit``) or released before the next."""
    store = Store(database_url)
    out: list[int] = []
    try:
        while count is None or len(out) < count:
            item = ratings.next_item(store, ALICE, "tester", 600.0, run_id)
            if item is None:
                break
            assert (item.model, item.model_b) == (MODEL, "")
            assert set(item.criteria) == set(SKILLS)
            out.append(int(item.instance_id))
            if submit:
                value = json.dumps({"seconds": 1.0, "source": "workspace"})
                done = ratings.submit(store, item.id, ALICE, dict.fromkeys(SKILLS, 3), {}, value)
                assert done
            else:
                assert ratings.release(store, item.id, ALICE, "tester")
    finally:
        store.close()
    return out


def test_disagreement_serves_the_items_the_judges_disagree_on_first(
    database_url: str, tmp_path: Path
) -> None:
    env = cli_env(database_url)
    args = dataset(tmp_path)
    with running_simulator(SimConfig(score=5)) as fixed, running_simulator(REAL) as real:
        judges = judges_file(tmp_path, fixed.openai_base_url, real.openai_base_url)
        run_id = run(env, args, judges, "disagree", "--human-first", "disagreement")

    # the construction holds: the judges agree within a point on the copies of the
    # reference, and differ by three points or more on the unrelated texts
    scores = judge_scores(database_url, run_id)
    assert len(scores) == 2 * N * len(SKILLS)
    assert {v for (judge, _, _), v in scores.items() if judge == "fixed"} == {5}
    real_good = {v for (j, i, _), v in scores.items() if j == "real" and i not in BAD}
    real_bad = {v for (j, i, _), v in scores.items() if j == "real" and i in BAD}
    assert real_good <= {4, 5} and real_bad <= {1, 2}
    spread = {i: disagreement_of(scores, i) for i in range(1, N + 1)}
    assert max(spread[i] for i in range(1, N + 1) if i not in BAD) <= 0.5
    assert min(spread[i] for i in BAD) >= 1.5

    order = served(database_url, run_id, None, submit=True)
    assert sorted(order) == list(range(1, N + 1))  # each item once, then none left
    assert set(order[:50]) == BAD
    # most disagreed first, all along the queue
    assert all(spread[a] >= spread[b] for a, b in itertools.pairwise(order))


def test_random_is_a_seeded_order_blind_to_the_judges(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'random.db'}"
    env = cli_env(database_url)
    args = dataset(tmp_path)
    with running_simulator(SimConfig(score=5)) as fixed, running_simulator(REAL) as real:
        judges = judges_file(tmp_path, fixed.openai_base_url, real.openai_base_url)
        first = run(env, args, judges, "random-1", "--human-first", "random")
        second = run(env, args, judges, "random-2", "--human-first", "random")
        other = run(env, args, judges, "random-3", "--human-first", "random", "--seed", "1")

    # the judges disagree as in the test above (the same answers), yet the queue ignores it
    scores = judge_scores(database_url, first)
    assert min(disagreement_of(scores, i) for i in BAD) >= 1.5
    order = served(database_url, first, 50, submit=False)
    assert len(set(order)) == 50
    assert set(order) & BAD and set(order) - BAD  # disagreed and agreed items mixed
    assert served(database_url, second, 50, submit=False) == order  # the same seed
    assert served(database_url, other, 50, submit=False) != order  # another seed
