"""Rendering of report rows: JSON, CSV and plain-text tables."""

from __future__ import annotations

import csv
import io
import json

from report.metrics import Record, Row, aggregate
from report.render import FIELDS, comparison_table, to_csv, to_json, to_table

LC, LE, RD = "Logical Correctness", "Logical Efficiency", "Readability"
ABILITY_OF = {LC: "Logical Thinking", LE: "Logical Thinking", RD: "User Alignment"}
SKILLS = (LC, LE, RD)


def rec(
    model: str,
    judge: str,
    instance: str,
    skill: str,
    score: int | None,
    status: str = "done",
    domains: tuple[str, ...] = ("Math",),
    difficulty: int | None = 2,
) -> Record:
    return Record(model, judge, instance, skill, status, score, domains, difficulty)


def sample_rows() -> list[Row]:
    records = [
        # alpha-model / gpt-judge: LC (4 + 5 + 2) / 3 = 11 / 3 = 3.666.. -> "3.67"
        rec("alpha-model", "gpt-judge", "A", LC, 4),
        rec("alpha-model", "gpt-judge", "B", LC, 5),
        rec("alpha-model", "gpt-judge", "C", LC, 2),
        # Readability only N/A -> mean None -> "-"
        rec("alpha-model", "gpt-judge", "A", RD, None),
        # beta-model / claude-judge: LE 3, LC failed
        rec("beta-model", "claude-judge", "A", LE, 3),
        rec("beta-model", "claude-judge", "A", LC, None, status="failed"),
    ]
    return aggregate(records, ABILITY_OF, skill_order=SKILLS)


# --------------------------------------------------------------------------- JSON


def test_json_shape_and_keys() -> None:
    rows = sample_rows()
    data = json.loads(to_json("run-1", rows))
    assert set(data) == {"run", "rows"}
    assert data["run"] == "run-1"
    assert len(data["rows"]) == len(rows)
    for item in data["rows"]:
        assert list(item) == list(FIELDS)
    assert list(FIELDS) == ["model", "judge", "dimension", "key", "mean", "n", "n_na", "n_failed"]
    assert data["rows"] == [row.as_dict() for row in rows]


def test_json_keeps_full_precision_and_null() -> None:
    data = json.loads(to_json("r", sample_rows()))
    by_key = {(r["model"], r["dimension"], r["key"]): r for r in data["rows"]}
    assert by_key[("alpha-model", "skill", LC)]["mean"] == 11 / 3
    assert by_key[("alpha-model", "skill", RD)]["mean"] is None
    assert by_key[("alpha-model", "skill", RD)]["n_na"] == 1
    assert by_key[("beta-model", "skill", LC)]["n_failed"] == 1


def test_json_empty() -> None:
    assert json.loads(to_json("empty", [])) == {"run": "empty", "rows": []}


# --------------------------------------------------------------------------- CSV


def test_csv_header_and_rows() -> None:
    rows = sample_rows()
    text = to_csv(rows)
    lines = text.splitlines()
    assert lines[0] == "model,judge,dimension,key,mean,n,n_na,n_failed"
    assert len(lines) == len(rows) + 1
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert len(parsed) == len(rows)
    lc = next(p for p in parsed if p["model"] == "alpha-model" and p["key"] == LC)
    assert float(lc["mean"]) == 11 / 3
    assert lc["n"] == "3"
    rd = next(p for p in parsed if p["model"] == "alpha-model" and p["key"] == RD)
    assert rd["mean"] == ""
    assert (rd["n"], rd["n_na"], rd["n_failed"]) == ("0", "1", "0")


def test_csv_empty_has_header_only() -> None:
    assert to_csv([]).splitlines() == [",".join(FIELDS)]


# --------------------------------------------------------------------------- tables


def test_table_contains_names_means_and_dashes() -> None:
    text = to_table(sample_rows())
    for name in ("alpha-model", "gpt-judge", "beta-model", "claude-judge"):
        assert name in text
    for title in ("Overall", "Abilities", "Skills", "Domains", "Difficulty"):
        assert title in text
    lc_line = next(line for line in text.splitlines() if line.strip().startswith(LC))
    assert "3.67" in lc_line.split()
    assert lc_line.split()[-4:] == ["3.67", "3", "0", "0"]
    rd_line = next(line for line in text.splitlines() if line.strip().startswith(RD))
    assert rd_line.split()[-4:] == ["-", "0", "1", "0"]
    assert max(len(line) for line in text.splitlines()) <= 100


def test_table_blocks_per_model_and_judge() -> None:
    text = to_table(sample_rows())
    alpha = text.index("Model: alpha-model  |  Judge: gpt-judge")
    beta = text.index("Model: beta-model  |  Judge: claude-judge")
    assert alpha < beta
    # the beta block's failed-only Logical Correctness row shows "-" and 1 failure
    beta_lines = text[beta:].splitlines()
    lc_line = next(line for line in beta_lines if line.strip().startswith(LC))
    assert lc_line.split()[-4:] == ["-", "0", "0", "1"]


def test_table_skill_difficulty_matrix() -> None:
    text = to_table(sample_rows())
    assert "Skill x difficulty" in text
    assert "L2" in text


def test_table_empty() -> None:
    assert to_table([]) == ""


def test_comparison_table() -> None:
    text = comparison_table(sample_rows(), "skill")
    lines = text.splitlines()
    assert "alpha-model" in lines[1] and "beta-model" in lines[1]
    assert "gpt-judge" in lines[2] and "claude-judge" in lines[2]
    body = {line.split("  ")[1].strip(): line.split()[-2:] for line in lines[4:]}
    # alpha/gpt: LC 3.67, no LE row -> "-", RD only N/A -> "-"
    # beta/claude: LC failed only -> "-", LE 3.00, no RD row -> "-"
    assert body[LC] == ["3.67", "-"]
    assert body[LE] == ["-", "3.00"]
    assert body[RD] == ["-", "-"]


def test_comparison_table_merges_key_orders_of_all_pairs() -> None:
    rows = [Row("m1", "j", "skill", key, 2.0, 1, 0, 0) for key in ("Zeta", LC, RD)] + [
        Row("m2", "j", "skill", key, 4.0, 1, 0, 0) for key in ("Zeta", LC, LE, RD)
    ]
    text = comparison_table(rows, "skill")
    keys = [line.split("  ")[1].strip() for line in text.splitlines()[4:]]
    # LE is missing from the first pair's rows but lands between its neighbours LC and RD
    assert keys == ["Zeta", LC, LE, RD]


def test_comparison_table_key_order_and_unknown_dimension() -> None:
    text = comparison_table(sample_rows(), "skill", key_order=(RD, LC))
    keys = [line.split("  ")[1].strip() for line in text.splitlines()[4:]]
    assert keys == [RD, LC, LE]
    assert comparison_table(sample_rows(), "nonexistent") == ""


def test_comparison_table_splits_wide_tables() -> None:
    rows = [
        Row(f"model-number-{i:02d}", "judge", "overall", "all", float(i % 5 + 1), 1, 0, 0)
        for i in range(12)
    ]
    text = comparison_table(rows, "overall", width=100)
    assert all(len(line) <= 100 for line in text.splitlines())
    for i in range(12):
        assert f"model-number-{i:02d}" in text
    assert text.count("overall (mean)") > 1


def test_comparison_table_difficulty_numeric() -> None:
    rows = [Row("m", "j", "difficulty", level, 3.0, 1, 0, 0) for level in ("10", "2", "1")]
    text = comparison_table(rows, "difficulty")
    keys = [line.split()[0] for line in text.splitlines()[4:]]
    assert keys == ["1", "2", "10"]
