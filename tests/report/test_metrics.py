"""FLASK aggregation math: hand-computed expectations (arithmetic in the comments).

Every expectation is checked on the production path (a score table through
``report.breakdown``, see ``flask_rows``) and on the pure reference of
``tests/reference.py`` (a loop over judgment records).
"""

from __future__ import annotations

import random
import statistics

import pytest

from flask_eval.report.breakdown import Aggregation, flask_breakdown
from flask_eval.report.metrics import DIMENSIONS, Row
from tests.reference import (
    Cell,
    Cells,
    Record,
    aggregate,
    cells_from_records,
    flask_rows,
    from_records,
    point_cells,
    rows_from_cells,
)

LR, LC, LE = "Logical Robustness", "Logical Correctness", "Logical Efficiency"
FA, CU = "Factuality", "Commonsense Understanding"
CP, IN, CM, MC = "Comprehension", "Insightfulness", "Completeness", "Metacognition"
CN, RD, HA = "Conciseness", "Readability", "Harmlessness"

LT, BK, PH, UA = "Logical Thinking", "Background Knowledge", "Problem Handling", "User Alignment"

ABILITY_OF: dict[str, str] = {
    LR: LT,
    LC: LT,
    LE: LT,
    FA: BK,
    CU: BK,
    CP: PH,
    IN: PH,
    CM: PH,
    MC: PH,
    CN: UA,
    RD: UA,
    HA: UA,
}
SKILLS = tuple(ABILITY_OF)
ABILITIES = (LT, BK, PH, UA)


def rec(
    instance: str,
    skill: str,
    score: int | None,
    status: str = "done",
    domains: tuple[str, ...] = (),
    difficulty: int | None = None,
    model: str = "m",
    judge: str = "j",
) -> Record:
    return Record(model, judge, instance, skill, status, score, domains, difficulty)


def find(rows: list[Row], dimension: str, key: str, model: str = "m", judge: str = "j") -> Row:
    hits = [
        r for r in rows if (r.model, r.judge, r.dimension, r.key) == (model, judge, dimension, key)
    ]
    assert len(hits) == 1, (dimension, key, hits)
    return hits[0]


def keys(rows: list[Row], dimension: str, model: str = "m", judge: str = "j") -> list[str]:
    return [r.key for r in rows if (r.model, r.judge, r.dimension) == (model, judge, dimension)]


def stats(row: Row) -> tuple[float | None, int, int, int]:
    return (row.mean, row.n, row.n_na, row.n_failed)


# --------------------------------------------------------------------------- Cell


def test_cell_addition_and_mean() -> None:
    a = Cell(total=7.0, n=2, n_na=1, n_failed=0)
    b = Cell(total=3.0, n=1, n_na=0, n_failed=2)
    # totals 7+3=10, n 2+1=3, n_na 1+0=1, n_failed 0+2=2
    assert a + b == Cell(total=10.0, n=3, n_na=1, n_failed=2)
    assert (a + b).mean == pytest.approx(10 / 3)
    assert a + Cell() == a
    assert Cell().mean is None
    assert Cell(n_na=2, n_failed=1).mean is None
    assert a.mean == 3.5  # 7 / 2
    with pytest.raises(TypeError):
        _ = a + 1  # type: ignore[operator]


# --------------------------------------------------------------------------- rules


def test_micro_average_differs_from_macro() -> None:
    records = [
        rec("A", LC, 5),
        rec("A", LR, 5),
        rec("A", RD, 2),
        rec("B", RD, 1),
    ]
    rows = flask_rows(records, ABILITY_OF)
    # micro: (5 + 5 + 2 + 1) / 4 = 13 / 4 = 3.25
    # (macro would be mean(mean(5,5,2)=4, 1) = 2.5)
    assert stats(find(rows, "overall", "all")) == (3.25, 4, 0, 0)
    # Readability: (2 + 1) / 2 = 1.5 ; Logical Correctness: 5 / 1
    assert stats(find(rows, "skill", RD)) == (1.5, 2, 0, 0)
    assert stats(find(rows, "skill", LC)) == (5.0, 1, 0, 0)
    # Logical Thinking = LC 5 + LR 5 -> 10 / 2 = 5 ; User Alignment = RD 2 + RD 1 -> 3 / 2
    assert stats(find(rows, "ability", LT)) == (5.0, 2, 0, 0)
    assert stats(find(rows, "ability", UA)) == (1.5, 2, 0, 0)


def test_na_excluded_from_mean_but_counted() -> None:
    records = [rec("A", LC, 4), rec("A", RD, None), rec("B", LC, 2)]
    rows = flask_rows(records, ABILITY_OF)
    # scored pairs 4 and 2 -> 6 / 2 = 3.0 ; one N/A
    assert stats(find(rows, "overall", "all")) == (3.0, 2, 1, 0)
    # Readability has only an N/A: the row exists, mean None
    assert stats(find(rows, "skill", RD)) == (None, 0, 1, 0)
    assert stats(find(rows, "ability", UA)) == (None, 0, 1, 0)


def test_failures_excluded_and_counted() -> None:
    records = [
        rec("A", LC, 4),
        rec("B", LC, None, status="failed"),
        rec("C", LC, 1, status="failed"),  # a stray score on a failure is not used
    ]
    rows = flask_rows(records, ABILITY_OF)
    # only the 4 is scored -> 4 / 1 ; two failures
    assert stats(find(rows, "overall", "all")) == (4.0, 1, 0, 2)
    assert stats(find(rows, "skill", LC)) == (4.0, 1, 0, 2)


def test_pending_and_running_ignored() -> None:
    records = [
        rec("A", LC, 4),
        rec("B", LC, 1, status="pending"),
        rec("C", RD, 1, status="running", domains=("Math",), difficulty=5),
        rec("A", LC, 1, status="pending", model="other"),
    ]
    rows = flask_rows(records, ABILITY_OF)
    # only A/LC = 4 counts
    assert stats(find(rows, "overall", "all")) == (4.0, 1, 0, 0)
    assert keys(rows, "skill") == [LC]
    assert keys(rows, "domain") == []
    assert keys(rows, "difficulty") == []
    # a model with nothing but pending judgments has no rows at all
    assert {r.model for r in rows} == {"m"}


def test_only_failures_gives_mean_none() -> None:
    records = [rec("A", LC, None, status="failed"), rec("B", LC, None, status="failed")]
    rows = flask_rows(records, ABILITY_OF)
    assert stats(find(rows, "overall", "all")) == (None, 0, 0, 2)
    assert stats(find(rows, "skill", LC)) == (None, 0, 0, 2)
    assert stats(find(rows, "ability", LT)) == (None, 0, 0, 2)


def test_multi_domain_instance_counts_in_each_domain() -> None:
    records = [
        rec("A", LC, 4, domains=("Math", "Coding")),
        rec("A", RD, 2, domains=("Math", "Coding")),
        rec("B", LC, 5, domains=("Math",)),
    ]
    rows = flask_rows(records, ABILITY_OF)
    # Math: (4 + 2 + 5) / 3 = 11 / 3 ; Coding: (4 + 2) / 2 = 3.0
    assert stats(find(rows, "domain", "Math")) == (11 / 3, 3, 0, 0)
    assert stats(find(rows, "domain", "Coding")) == (3.0, 2, 0, 0)
    # overall is not double counted: (4 + 2 + 5) / 3, n = 3
    assert stats(find(rows, "overall", "all")) == (11 / 3, 3, 0, 0)


def test_repeated_domain_counts_once() -> None:
    rows = flask_rows([rec("A", LC, 4, domains=("Math", "Math"))], ABILITY_OF)
    assert stats(find(rows, "domain", "Math")) == (4.0, 1, 0, 0)


def test_unknown_domain_excluded_only_from_domain_rows() -> None:
    records = [
        rec("A", LC, 1, domains=(), difficulty=2),
        rec("B", LC, 5, domains=("Math",), difficulty=2),
    ]
    rows = flask_rows(records, ABILITY_OF)
    # everything but domain sees both: (1 + 5) / 2 = 3.0
    assert stats(find(rows, "overall", "all")) == (3.0, 2, 0, 0)
    assert stats(find(rows, "skill", LC)) == (3.0, 2, 0, 0)
    assert stats(find(rows, "ability", LT)) == (3.0, 2, 0, 0)
    assert stats(find(rows, "difficulty", "2")) == (3.0, 2, 0, 0)
    assert stats(find(rows, "skill_difficulty", f"{LC}|2")) == (3.0, 2, 0, 0)
    # domain sees only B: 5 / 1
    assert keys(rows, "domain") == ["Math"]
    assert stats(find(rows, "domain", "Math")) == (5.0, 1, 0, 0)


def test_unknown_difficulty_excluded_only_from_difficulty_rows() -> None:
    records = [
        rec("A", LC, 1, domains=("Math",), difficulty=None),
        rec("B", LC, 4, domains=("Math",), difficulty=3),
        rec("C", LC, None, status="failed", domains=("Math",), difficulty=None),
    ]
    rows = flask_rows(records, ABILITY_OF)
    # overall / skill / domain see A and B: (1 + 4) / 2 = 2.5, plus C's failure
    assert stats(find(rows, "overall", "all")) == (2.5, 2, 0, 1)
    assert stats(find(rows, "skill", LC)) == (2.5, 2, 0, 1)
    assert stats(find(rows, "domain", "Math")) == (2.5, 2, 0, 1)
    # difficulty dimensions see only B: 4 / 1
    assert keys(rows, "difficulty") == ["3"]
    assert stats(find(rows, "difficulty", "3")) == (4.0, 1, 0, 0)
    assert keys(rows, "skill_difficulty") == [f"{LC}|3"]
    assert stats(find(rows, "skill_difficulty", f"{LC}|3")) == (4.0, 1, 0, 0)


def test_ability_is_micro_average_over_its_skills() -> None:
    records = [
        rec("A", CP, 5),
        rec("B", CP, 1),
        rec("C", CP, 3),
        rec("A", CM, 5),
        rec("B", IN, None),
        rec("C", MC, None, status="failed"),
        rec("A", FA, 2),  # another ability: must not leak into Problem Handling
    ]
    rows = flask_rows(records, ABILITY_OF)
    # Comprehension (5 + 1 + 3) / 3 = 3.0 ; Completeness 5 / 1 = 5.0
    assert stats(find(rows, "skill", CP)) == (3.0, 3, 0, 0)
    assert stats(find(rows, "skill", CM)) == (5.0, 1, 0, 0)
    # Problem Handling micro: (5 + 1 + 3 + 5) / 4 = 14 / 4 = 3.5
    # (mean of skill means would be (3 + 5) / 2 = 4.0); Insightfulness N/A and
    # Metacognition failure are counted
    assert stats(find(rows, "ability", PH)) == (3.5, 4, 1, 1)
    assert stats(find(rows, "ability", BK)) == (2.0, 1, 0, 0)
    # overall: (5 + 1 + 3 + 5 + 2) / 5 = 16 / 5 = 3.2
    assert stats(find(rows, "overall", "all")) == (3.2, 5, 1, 1)


def test_models_and_judges_kept_apart() -> None:
    records = [
        rec("A", LC, 5, model="m1", judge="j1"),
        rec("B", LC, 4, model="m1", judge="j1"),
        rec("A", LC, 3, model="m1", judge="j2"),
        rec("A", LC, 1, model="m2", judge="j1"),
        rec("A", LC, None, status="failed", model="m2", judge="j2"),
    ]
    rows = flask_rows(records, ABILITY_OF)
    # m1/j1: (5 + 4) / 2 = 4.5 ; m1/j2: 3 ; m2/j1: 1 ; m2/j2: only a failure
    assert stats(find(rows, "overall", "all", "m1", "j1")) == (4.5, 2, 0, 0)
    assert stats(find(rows, "overall", "all", "m1", "j2")) == (3.0, 1, 0, 0)
    assert stats(find(rows, "overall", "all", "m2", "j1")) == (1.0, 1, 0, 0)
    assert stats(find(rows, "overall", "all", "m2", "j2")) == (None, 0, 0, 1)
    pairs = list(dict.fromkeys((r.model, r.judge) for r in rows))
    assert pairs == [("m1", "j1"), ("m1", "j2"), ("m2", "j1"), ("m2", "j2")]


# --------------------------------------------------------------------------- ordering


def test_row_ordering() -> None:
    records = [
        # one instance each: a table keeps domains and difficulty per instance
        rec("B1", RD, 3, domains=("Zeta", "Math"), difficulty=5, model="b"),
        rec("B2", "Made Up", 2, domains=("Coding",), difficulty=1, model="b"),
        rec("B3", LC, 4, domains=("Alpha",), difficulty=3, model="b"),
        rec("A", LC, 4, model="a", judge="z"),
        rec("A", LC, 4, model="a", judge="y"),
    ]
    ability_of = {**ABILITY_OF, "Made Up": "Mystery"}
    rows = flask_rows(
        records,
        ability_of,
        skill_order=SKILLS,
        ability_order=ABILITIES,
        domain_order=("Math", "Coding"),
    )
    got = [(r.model, r.judge, r.dimension, r.key) for r in rows]
    b = [
        ("b", "j", "overall", "all"),
        # skills in skill_order (LC before RD), unknown skill after
        ("b", "j", "skill", LC),
        ("b", "j", "skill", RD),
        ("b", "j", "skill", "Made Up"),
        ("b", "j", "ability", LT),
        ("b", "j", "ability", UA),
        ("b", "j", "ability", "Mystery"),
        # given domains first, unknown ones alphabetically
        ("b", "j", "domain", "Math"),
        ("b", "j", "domain", "Coding"),
        ("b", "j", "domain", "Alpha"),
        ("b", "j", "domain", "Zeta"),
        ("b", "j", "difficulty", "1"),
        ("b", "j", "difficulty", "3"),
        ("b", "j", "difficulty", "5"),
        # by skill order, then level
        ("b", "j", "skill_difficulty", f"{LC}|3"),
        ("b", "j", "skill_difficulty", f"{RD}|5"),
        ("b", "j", "skill_difficulty", "Made Up|1"),
    ]
    a = [
        ("a", "y", "overall", "all"),
        ("a", "y", "skill", LC),
        ("a", "y", "ability", LT),
        ("a", "z", "overall", "all"),
        ("a", "z", "skill", LC),
        ("a", "z", "ability", LT),
    ]
    assert got == a + b
    assert [r.dimension for r in rows[len(a) :]] == sorted(
        (r.dimension for r in rows[len(a) :]), key=DIMENSIONS.index
    )


def test_unknown_keys_sorted_alphabetically_without_orders() -> None:
    records = [rec("A", RD, 3), rec("A", LC, 4), rec("A", CP, 2)]
    rows = flask_rows(records, ABILITY_OF)
    assert keys(rows, "skill") == sorted([RD, LC, CP])
    assert keys(rows, "ability") == sorted([UA, LT, PH])


def test_difficulty_keys_sort_numerically() -> None:
    cells = Cells(
        skill={("m", "j", LC): Cell(total=8.0, n=2)},
        difficulty={("m", "j", 10): Cell(total=3.0, n=1), ("m", "j", 2): Cell(total=5.0, n=1)},
        skill_difficulty={
            ("m", "j", LC, 10): Cell(total=3.0, n=1),
            ("m", "j", LC, 2): Cell(total=5.0, n=1),
        },
    )
    rows = rows_from_cells(cells, ABILITY_OF)
    assert keys(rows, "difficulty") == ["2", "10"]
    assert keys(rows, "skill_difficulty") == [f"{LC}|2", f"{LC}|10"]
    # the same judgments on the production path
    rows = flask_rows([rec("A", LC, 3, difficulty=10), rec("B", LC, 5, difficulty=2)], ABILITY_OF)
    assert keys(rows, "difficulty") == ["2", "10"]
    assert keys(rows, "skill_difficulty") == [f"{LC}|2", f"{LC}|10"]


# --------------------------------------------------------------------------- cells contract


def test_rows_from_sql_style_cells_match_records() -> None:
    records = [
        rec("A", LC, 4, domains=("Math",), difficulty=2),
        rec("A", RD, None, domains=("Math",), difficulty=2),
        rec("B", LC, 2, domains=(), difficulty=None),
        rec("C", RD, None, status="failed", domains=("Coding",), difficulty=4),
    ]
    cells = cells_from_records(records)
    # what GROUP BY (model, judge, skill) would give: SUM, COUNT(score), #N/A, #failed
    assert cells.skill == {
        ("m", "j", LC): Cell(total=6.0, n=2),  # 4 + 2
        ("m", "j", RD): Cell(n_na=1, n_failed=1),
    }
    assert cells.domain == {
        ("m", "j", "Math"): Cell(total=4.0, n=1, n_na=1),
        ("m", "j", "Coding"): Cell(n_failed=1),
    }
    assert cells.difficulty == {
        ("m", "j", 2): Cell(total=4.0, n=1, n_na=1),
        ("m", "j", 4): Cell(n_failed=1),
    }
    assert cells.skill_difficulty == {
        ("m", "j", LC, 2): Cell(total=4.0, n=1),
        ("m", "j", RD, 2): Cell(n_na=1),
        ("m", "j", RD, 4): Cell(n_failed=1),
    }
    hand_made = Cells(
        skill=dict(cells.skill),
        domain=dict(cells.domain),
        difficulty=dict(cells.difficulty),
        skill_difficulty=dict(cells.skill_difficulty),
    )
    assert rows_from_cells(hand_made, ABILITY_OF) == aggregate(records, ABILITY_OF)
    # the production sums of a table of the same judgments are these cells
    assert point_cells(from_records(records)) == cells
    assert flask_rows(records, ABILITY_OF) == aggregate(records, ABILITY_OF)


def test_empty_cells_produce_no_rows() -> None:
    cells = Cells(
        skill={("m", "j", LC): Cell(total=4.0, n=1), ("m", "j", RD): Cell()},
        domain={("m", "j", "Math"): Cell()},
    )
    rows = rows_from_cells(cells, ABILITY_OF)
    assert keys(rows, "skill") == [LC]
    assert keys(rows, "ability") == [LT]
    assert keys(rows, "domain") == []
    assert rows_from_cells(Cells(), ABILITY_OF) == []
    assert aggregate([], ABILITY_OF) == []
    assert flask_rows([], ABILITY_OF) == []
    # production: cells with no finished judgment make no rows either
    pending = [rec("A", LC, 4), rec("B", RD, 3, status="pending", domains=("Math",))]
    rows = flask_rows(pending, ABILITY_OF)
    assert keys(rows, "skill") == [LC]
    assert keys(rows, "ability") == [LT]
    assert keys(rows, "domain") == []


def test_skill_without_ability_is_an_error() -> None:
    with pytest.raises(ValueError, match="Made Up"):
        aggregate([rec("A", "Made Up", 3)], ABILITY_OF)
    table = from_records([rec("A", "Made Up", 3)])
    with pytest.raises(ValueError, match="Made Up"):
        Aggregation(table, flask_breakdown(ABILITY_OF))


def test_row_as_dict_keys() -> None:
    row = Row("m", "j", "skill", LC, 3.5, 2, 1, 0)
    assert row.as_dict() == {
        "model": "m",
        "judge": "j",
        "dimension": "skill",
        "key": LC,
        "mean": 3.5,
        "n": 2,
        "n_na": 1,
        "n_failed": 0,
    }


# --------------------------------------------------------------------------- property


def random_records(rng: random.Random) -> list[Record]:
    domains = ("Math", "Coding", "History", "Health")
    records: list[Record] = []
    for i in range(rng.randint(1, 60)):
        skills = rng.sample(SKILLS, rng.randint(1, 3))
        inst_domains = tuple(rng.sample(domains, rng.randint(0, 2)))
        difficulty = rng.choice([None, 1, 2, 3, 4, 5])
        for model in ("m1", "m2"):
            for judge in ("j1", "j2"):
                for skill in skills:
                    status = rng.choice(["done"] * 6 + ["failed", "pending", "running"])
                    score = rng.choice([None, 1, 2, 3, 4, 5]) if status == "done" else None
                    records.append(
                        Record(
                            model, judge, f"i{i}", skill, status, score, inst_domains, difficulty
                        )
                    )
    return records


@pytest.mark.parametrize("seed", range(25))
def test_random_records_overall_is_plain_mean(seed: int) -> None:
    rng = random.Random(seed)
    records = random_records(rng)
    rows = flask_rows(records, ABILITY_OF, skill_order=SKILLS, ability_order=ABILITIES)
    judged = {(r.model, r.judge) for r in records if r.status in ("done", "failed")}
    assert {(r.model, r.judge) for r in rows} == judged
    for model, judge in {(r.model, r.judge) for r in rows}:
        mine = [r for r in records if (r.model, r.judge) == (model, judge)]
        scored = [r.score for r in mine if r.status == "done" and r.score is not None]
        n_na = sum(1 for r in mine if r.status == "done" and r.score is None)
        n_failed = sum(1 for r in mine if r.status == "failed")
        overall = find(rows, "overall", "all", model, judge)
        assert overall.n == len(scored)
        assert overall.n_na == n_na
        assert overall.n_failed == n_failed
        if scored:
            assert overall.mean == pytest.approx(statistics.fmean(scored))
        else:
            assert overall.mean is None
        for dimension in ("skill", "ability"):
            part = [r for r in rows if (r.model, r.judge, r.dimension) == (model, judge, dimension)]
            assert sum(r.n for r in part) == overall.n
            assert sum(r.n_na for r in part) == overall.n_na
            assert sum(r.n_failed for r in part) == overall.n_failed
            total = sum(r.mean * r.n for r in part if r.mean is not None)
            assert total == pytest.approx(sum(scored))
        known = [r for r in mine if r.difficulty is not None]
        levels = [
            r for r in rows if (r.model, r.judge, r.dimension) == (model, judge, "difficulty")
        ]
        assert sum(r.n for r in levels) == sum(
            1 for r in known if r.status == "done" and r.score is not None
        )
        assert all(r.mean is None or 1 <= r.mean <= 5 for r in rows)


@pytest.mark.parametrize("seed", range(5))
def test_members_are_the_cells_each_mean_covers(seed: int) -> None:
    """Aggregation.members: a key's cells, averaged per model and judge, give its row's
    mean (the one membership the cell-by-cell statistics read)."""
    import numpy as np

    from flask_eval.report.scores import SCORED

    records = random_records(random.Random(seed))
    table = from_records(records)
    aggregation = Aggregation(table, flask_breakdown(ABILITY_OF))
    rows = {(r.model, r.judge, r.dimension, r.key): r for r in aggregation.rows()}
    seen = 0
    for dimension, key, cells in aggregation.members():
        for m, model in enumerate(table.models):
            for j, judge in enumerate(table.judges):
                mine = cells[table.model[cells] == m]
                scored = mine[table.state[mine, j] == SCORED]
                row = rows.get((model, judge, dimension, key))
                if row is None or row.mean is None:
                    assert len(scored) == 0
                    continue
                seen += 1
                assert row.n == len(scored)
                assert row.mean == pytest.approx(float(np.mean(table.score[scored, j])))
    assert seen >= len({(r.model, r.judge) for r in rows.values()})
