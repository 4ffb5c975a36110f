"""The raters' queue order (app/people_order.py): the items the judges disagree on most
first, then a seeded random order; ``random``: that order alone."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from sqlalchemy import update

from flask_eval.app.people_order import (
    TIEBREAK,
    JudgeScores,
    apply_order,
    disagreement,
    disagreement_ranks,
    random_ranks,
)
from flask_eval.core.errors import Status
from flask_eval.storage.models import JUDGMENT, utcnow
from flask_eval.storage.people_rows import SubjectScores
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from tests.app.test_raters_io import CRITERIA, JUDGES, MODELS, make_run

J = JUDGMENT.c
RATER = "human/alice"


def scores_of(values: list[int]) -> SubjectScores:
    return SubjectScores(
        len(values),
        float(sum(values)),
        float(sum(v * v for v in values)),
        values.count(1),
        values.count(2),
        values.count(3),
    )


def test_absolute_disagreement_is_the_mean_population_sd_over_criteria() -> None:
    scores = JudgeScores.of(
        {
            ("m", "", "1", "a"): scores_of([1, 5]),  # sd 2
            ("m", "", "1", "b"): scores_of([3, 3, 3]),  # sd 0
            ("m", "", "2", "a"): scores_of([2, 4, 4, 2]),  # sd 1
            ("m", "", "3", "a"): scores_of([5]),  # one score: 0
        }
    )
    assert disagreement(("human/x", "m", "", "1"), scores) == pytest.approx(1.0)
    assert disagreement(("human/x", "m", "", "2"), scores) == pytest.approx(1.0)
    assert disagreement(("human/x", "m", "", "3"), scores) == 0.0
    assert disagreement(("human/x", "m", "", "4"), scores) == 0.0  # unjudged


def test_pairwise_disagreement_is_the_share_off_the_majority_in_both_orders() -> None:
    scores = JudgeScores.of(
        {
            ("a", "b", "1", "c"): scores_of([1, 1, 2]),
            ("b", "a", "1", "c"): scores_of([2]),  # "a better", seen from (b, a)
            ("a", "b", "2", "c"): scores_of([3, 3]),
        }
    )
    assert disagreement(("human/x", "a", "b", "1"), scores) == pytest.approx(1 / 4)
    assert disagreement(("human/x", "b", "a", "1"), scores) == pytest.approx(1 / 4)
    assert disagreement(("human/x", "a", "b", "2"), scores) == 0.0


def judge_rows_done(
    store: Store, run_id: int, scores: dict[tuple[str, str, str, str], int]
) -> None:
    """Judge rows (judge, model, instance, criterion) done with their score."""
    with store.engine.begin() as conn:
        for (judge, model, instance_id, criterion), score in scores.items():
            conn.execute(
                update(JUDGMENT)
                .where(
                    J.run_id == run_id,
                    J.judge == judge,
                    J.model == model,
                    J.instance_id == instance_id,
                    J.criterion == criterion,
                )
                .values(status=Status.DONE.value, score=score)
            )


def disagreeing_run(store: Store, n: int) -> tuple[RunInfo, set[tuple[str, str]]]:
    """A run of ``n`` instances (2n items: model x instance) whose two judges agree (3)
    everywhere but on 50 items picked at random, where one says 1 and the other 5 on
    the first criterion."""
    run = make_run(store, n)
    items = [(m, str(i)) for m in MODELS for i in range(n)]
    disagreed = set(random.Random(7).sample(items, 50))
    scores = {}
    for model, instance_id in items:
        for criterion in CRITERIA:
            split = (model, instance_id) in disagreed and criterion == CRITERIA[0]
            scores[(JUDGES[0], model, instance_id, criterion)] = 1 if split else 3
            scores[(JUDGES[1], model, instance_id, criterion)] = 5 if split else 3
    judge_rows_done(store, run.id, scores)
    return run, disagreed


def waiting_rows(store: Store, run_id: int, items: list[tuple[str, str]]) -> None:
    """The rater's waiting rows of ``items`` (model, instance), as the plan writes them."""
    now = utcnow()
    rows = [
        dict(
            run_id=run_id,
            model=model,
            model_b="",
            instance_id=instance_id,
            criterion=criterion,
            judge=RATER,
            status=Status.WAITING.value,
            created_at=now,
            updated_at=now,
        )
        for model, instance_id in items
        for criterion in CRITERIA
    ]
    with store.engine.begin() as conn:
        conn.execute(JUDGMENT.insert(), rows)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'order.db'}")


def test_the_most_disagreed_items_rank_first_then_a_seeded_random_order(
    database_url: str,
) -> None:
    store = Store(database_url)
    run, disagreed = disagreeing_run(store, 60)
    items = [(m, str(i)) for m in MODELS for i in range(60)]
    waiting_rows(store, run.id, items)
    ranks = disagreement_ranks(store, run)
    assert set(ranks) == {(RATER, m, "", i) for m, i in items}
    order = sorted(ranks, key=ranks.__getitem__)
    assert {(m, i) for _, m, _, i in order[:50]} == disagreed
    # each of the 50: -1 (sd 2 on one criterion, 0 on the other) plus the tiebreak
    assert all(-1 <= ranks[k] < -1 + TIEBREAK for k in order[:50])
    rest = order[50:]
    shuffled = random_ranks(store, run)
    assert rest == sorted(rest, key=shuffled.__getitem__)
    assert all(ranks[k] == pytest.approx(shuffled[k] * TIEBREAK) for k in rest)
    assert disagreement_ranks(store, run) == ranks  # seeded
    assert disagreement_ranks(store, run, seed="other") != ranks


def test_every_sample_of_a_judge_counts_and_people_never_do(store: Store) -> None:
    run = make_run(store, 2, judges=(JUDGES[0], f"{JUDGES[0]}#2"))
    judge_rows_done(
        store,
        run.id,
        {
            (JUDGES[0], "alpha", "0", CRITERIA[0]): 2,
            (f"{JUDGES[0]}#2", "alpha", "0", CRITERIA[0]): 4,  # sd 1
            (JUDGES[0], "alpha", "1", CRITERIA[0]): 3,
            (f"{JUDGES[0]}#2", "alpha", "1", CRITERIA[0]): 3,
        },
    )
    waiting_rows(store, run.id, [("alpha", "0"), ("alpha", "1")])
    with store.engine.begin() as conn:  # a rater's done score is no judge's
        conn.execute(
            JUDGMENT.insert().values(
                run_id=run.id,
                model="alpha",
                model_b="",
                instance_id="1",
                criterion=CRITERIA[0],
                judge="human/bob",
                status=Status.DONE.value,
                score=5,
                created_at=utcnow(),
                updated_at=utcnow(),
            )
        )
    ranks = disagreement_ranks(store, run)
    assert ranks[(RATER, "alpha", "", "0")] == pytest.approx(-1.0, abs=2 * TIEBREAK)
    assert ranks[(RATER, "alpha", "", "1")] == pytest.approx(0.0, abs=TIEBREAK)


def test_apply_order_serves_the_50_most_disagreed_items_first(store: Store) -> None:
    ratings = pytest.importorskip("flask_eval.storage.ratings")
    run, disagreed = disagreeing_run(store, 60)
    items = [(m, str(i)) for m in MODELS for i in range(60)]
    ratings.plan_ratings(
        store,
        run.id,
        [ratings.PlannedRating(RATER, m, "", i, CRITERIA, 0.0, False) for m, i in items],
    )
    assert apply_order(store, run, "disagreement") == 120
    served = [
        ratings.next_item(store, RATER, f"holder-{k}", 600.0, run.id) for k in range(len(items))
    ]
    assert None not in served
    assert {(s.model, s.instance_id) for s in served[:50]} == disagreed
    shuffled = random_ranks(store, run)
    rest = [(RATER, s.model, "", s.instance_id) for s in served[50:]]
    assert rest == sorted(rest, key=shuffled.__getitem__)
    assert ratings.next_item(store, RATER, "one-more", 600.0, run.id) is None


def test_random_order_is_seeded(tmp_path: Path) -> None:
    ratings = pytest.importorskip("flask_eval.storage.ratings")
    orders = []
    for copy in ("a", "b"):
        store = Store(f"sqlite:///{tmp_path / copy}.db")
        run, disagreed = disagreeing_run(store, 60)
        items = [(m, str(i)) for m in MODELS for i in range(60)]
        ratings.plan_ratings(
            store,
            run.id,
            [ratings.PlannedRating(RATER, m, "", i, CRITERIA, 0.0, False) for m, i in items],
        )
        assert apply_order(store, run, "random") == 120
        served = [ratings.next_item(store, RATER, f"h{k}", 600.0, run.id) for k in range(120)]
        orders.append([(s.model, s.instance_id) for s in served if s is not None])
        store.close()
    assert orders[0] == orders[1]  # the same seed: the same order
    assert sorted(orders[0]) == sorted(items)
    assert orders[0] != sorted(orders[0]) and set(orders[0][:50]) != disagreed
    with pytest.raises(ValueError, match="unknown order 'loudest'"):
        apply_order(store, run, "loudest")


def test_pairwise_items_rank_by_the_judges_split_verdicts(database_url: str) -> None:
    store = Store(database_url)
    run = make_run(store, 3, pairs=[("alpha", "beta"), ("beta", "alpha")])
    verdicts = {  # (alpha, beta) as the ledger orders it; (beta, alpha) the other order
        ("0", "alpha"): (1, 2),  # alpha, then beta better: split
        ("0", "beta"): (2, 2),  # from (beta, alpha): alpha better twice
        ("1", "alpha"): (3, 3),
        ("1", "beta"): (3, 3),
    }
    with store.engine.begin() as conn:
        for (instance_id, first), pair in verdicts.items():
            for judge, verdict in zip(JUDGES, pair, strict=True):
                conn.execute(
                    update(JUDGMENT)
                    .where(
                        J.run_id == run.id,
                        J.judge == judge,
                        J.model == first,
                        J.instance_id == instance_id,
                        J.criterion == CRITERIA[0],
                    )
                    .values(status=Status.DONE.value, score=verdict)
                )
        now = utcnow()
        conn.execute(
            JUDGMENT.insert(),
            [
                dict(
                    run_id=run.id,
                    model="alpha",
                    model_b="beta",
                    instance_id=i,
                    criterion=CRITERIA[0],
                    judge=RATER,
                    status=Status.WAITING.value,
                    created_at=now,
                    updated_at=now,
                )
                for i in ("0", "1", "2")
            ],
        )
    ranks = disagreement_ranks(store, run)
    # instance 0: alpha better 3 times of 4; 1: tie 4 times; 2: no verdict
    assert ranks[(RATER, "alpha", "beta", "0")] == pytest.approx(-0.25, abs=TIEBREAK)
    assert ranks[(RATER, "alpha", "beta", "1")] == pytest.approx(0.0, abs=TIEBREAK)
    assert ranks[(RATER, "alpha", "beta", "2")] == pytest.approx(0.0, abs=TIEBREAK)
