"""The one renderer: JSON, CSV and plain-text tables of report rows, and the end-of-run
summary."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import numpy as np
import pytest

from flask_eval.report.agreement import Agreement
from flask_eval.report.document import (
    FIELDS,
    ROW_FIELDS,
    JudgeSettings,
    Report,
    ReportRow,
    as_report,
    level_label,
    ranked_models,
)
from flask_eval.report.intervals import Comparison
from flask_eval.report.metrics import Row
from flask_eval.report.render import (
    agreement_csv,
    comparisons_csv,
    dumps,
    plain,
    rows_csv,
    run_summary,
    to_json,
    to_table,
)
from tests.reference import Record, flask_rows

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
    return flask_rows(records, ABILITY_OF, skill_order=SKILLS)


def to_csv(rows: list[Row]) -> str:
    return rows_csv(rows)


# --------------------------------------------------------------------------- JSON


def test_json_shape_and_keys() -> None:
    rows = as_report(sample_rows()).rows
    data = json.loads(to_json(Report("run-1", rows)))
    assert set(data) == {
        "run",
        "judges",
        "rows",
        "comparisons",
        "agreement",
        "bootstrap",
        "notes",
        "position_patterns",
        "cost",
    }
    assert data["run"] == "run-1"
    assert len(data["rows"]) == len(rows)
    for item in data["rows"]:
        assert list(item) == list(FIELDS)
    assert list(ROW_FIELDS) == [
        "model",
        "judge",
        "dimension",
        "key",
        "mean",
        "n",
        "n_na",
        "n_failed",
    ]
    assert list(FIELDS) == [*ROW_FIELDS, "ci_low", "ci_high"]
    assert data["rows"] == [row.as_dict() for row in rows]
    assert [{k: r[k] for k in ROW_FIELDS} for r in data["rows"]] == [
        row.as_dict() for row in sample_rows()
    ]


def test_json_keeps_full_precision_and_null() -> None:
    data = json.loads(to_json(as_report(sample_rows(), "r")))
    by_key = {(r["model"], r["dimension"], r["key"]): r for r in data["rows"]}
    assert by_key[("alpha-model", "skill", LC)]["mean"] == 11 / 3
    assert by_key[("alpha-model", "skill", RD)]["mean"] is None
    assert by_key[("alpha-model", "skill", RD)]["n_na"] == 1
    assert by_key[("beta-model", "skill", LC)]["n_failed"] == 1


def test_json_empty() -> None:
    assert json.loads(to_json(Report("empty", []))) == {
        "run": "empty",
        "judges": [],
        "rows": [],
        "comparisons": [],
        "agreement": [],
        "bootstrap": {},
        "notes": [],
        "position_patterns": [],
        "cost": [],
    }


# --------------------------------------------------------------------------- CSV


def test_csv_header_and_rows() -> None:
    rows = sample_rows()
    text = to_csv(rows)
    lines = text.splitlines()
    assert lines[0] == "model,judge,dimension,key,mean,n,n_na,n_failed,ci_low,ci_high"
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


def _details(text: str) -> str:
    """The detail blocks of a text report (``details=True``)."""
    return text[text.index("Model: ") :]


def test_table_contains_names_means_and_dashes() -> None:
    text = to_table(sample_rows(), details=True)
    for name in ("alpha-model", "gpt-judge", "beta-model", "claude-judge"):
        assert name in text
    for title in ("Overall", "Abilities", "Skills", "Domains", "Difficulty"):
        assert title in text
    lines = _details(text).splitlines()
    lc_line = next(line for line in lines if line.strip().startswith(LC))
    assert "3.67" in lc_line.split()
    assert lc_line.split()[-4:] == ["3.67", "3", "0", "0"]
    rd_line = next(line for line in lines if line.strip().startswith(RD))
    assert rd_line.split()[-4:] == ["-", "0", "1", "0"]
    assert max(len(line) for line in text.splitlines()) <= 100


def test_table_blocks_per_model_and_judge() -> None:
    text = to_table(sample_rows(), details=True)
    alpha = text.index("Model: alpha-model  |  Judge: gpt-judge")
    beta = text.index("Model: beta-model  |  Judge: claude-judge")
    assert alpha < beta
    # the beta block's failed-only Logical Correctness row shows "-" and 1 failure
    beta_lines = text[beta:].splitlines()
    lc_line = next(line for line in beta_lines if line.strip().startswith(LC))
    assert lc_line.split()[-4:] == ["-", "0", "0", "1"]


def test_table_skill_difficulty_matrix() -> None:
    text = to_table(sample_rows(), details=True)
    assert "Skill x difficulty" in text
    assert "L2" in text


def test_table_empty() -> None:
    assert to_table([]) == ""


def test_csv_and_json_writers_emit_plain_numbers_whatever_the_numeric_type() -> None:
    """numpy 2 reprs its scalars as ``np.float64(2.66)``; every writer must not."""
    # numpy scalars where the dataclasses say float or int: what numpy code hands over
    values: dict[str, Any] = {
        "n_instances": np.int64(12),
        "mean_a": np.float64(8 / 3),
        "mean_b": np.float32(2.5),
        "diff": np.float64(1 / 6),
        "ci_low": np.float64(0.05),
        "ci_high": None,
    }
    comparison = Comparison("j", "a", "b", **values)
    values = {
        "mean": np.float64(11 / 3),
        "n": np.int64(3),
        "n_na": 0,
        "n_failed": 0,
        "ci_low": np.float64(3.0),
        "ci_high": np.float16(4.5),
    }
    row = ReportRow("m", "j", "skill", LC, **values)
    values = {
        "n": np.int32(7),
        "pearson": np.float64(0.5),
        "spearman": None,
        "kendall_tau_b": None,
        "krippendorff_alpha": None,
        "exact": np.float64(0.25),
        "within1": 1.0,
    }
    agreement = Agreement("a", "b", None, **values)
    for text in (comparisons_csv([comparison]), rows_csv([row]), agreement_csv([agreement])):
        assert "np." not in text and "float" not in text and "int" not in text
    (comp,) = csv.DictReader(io.StringIO(comparisons_csv([comparison])))
    assert comp["n_instances"] == "12" and float(comp["mean_a"]) == 8 / 3
    assert float(comp["mean_b"]) == 2.5 and comp["ci_high"] == ""
    (parsed,) = csv.DictReader(io.StringIO(rows_csv([row])))
    assert float(parsed["mean"]) == 11 / 3 and parsed["n"] == "3" and parsed["ci_high"] == "4.5"
    payload = json.loads(
        dumps(
            {
                "rows": [row.as_dict()],
                "c": comparison.as_dict(),
                "nan": np.float64("nan"),
                "array": np.arange(2),
            }
        )
    )
    assert payload["rows"][0]["mean"] == 11 / 3 and payload["rows"][0]["n"] == 3
    assert payload["c"]["n_instances"] == 12 and payload["nan"] is None
    assert payload["array"] == [0, 1]
    assert type(plain(np.float64(1.5))) is float and type(plain(np.int64(2))) is int
    assert plain(np.bool_(True)) is True and plain((np.float64("inf"),)) == [None]


# --------------------------------------------------------------------------- order, names


def ranked_rows() -> list[Row]:
    """Three models whose names sort opposite to their overall means."""
    records = [
        rec("a-model", "j", "A", LC, 1, difficulty=1),
        rec("a-model", "j", "A", RD, 2, difficulty=1),
        rec("b-model", "j", "A", LC, 3, difficulty=1),
        rec("b-model", "j", "A", RD, 3, difficulty=1),
        rec("c-model", "j", "A", LC, 5, difficulty=1),
        rec("c-model", "j", "A", RD, 4, difficulty=1),
    ]
    return flask_rows(records, ABILITY_OF, skill_order=SKILLS)


def test_tables_show_models_best_first_and_keys_in_canonical_order() -> None:
    rows = ranked_rows()
    assert ranked_models(rows) == ["c-model", "b-model", "a-model"]
    text = to_table(rows, details=True)
    starts = [text.index(f"Model: {m}-model") for m in "cba"]
    assert starts == sorted(starts)
    # within a block, skills keep the skill order (LC before RD) whatever their means
    block = text[starts[0] : starts[1]]
    assert block.index(LC) < block.index(RD)
    # the JSON and CSV rows keep their order (by model name)
    assert [r.model for r in rows if r.dimension == "overall"] == ["a-model", "b-model", "c-model"]


def test_difficulty_shows_flask_level_names_but_json_and_csv_keep_the_keys() -> None:
    assert level_label("1") == "1 simple lifestyle knowledge"
    assert level_label("5") == "5 expert level knowledge"
    assert level_label("10") == "10" and level_label("x") == "x"
    rows = sample_rows()  # difficulty 2 everywhere
    text = to_table(rows, details=True)
    assert "  2 advanced lifestyle knowledge  " in text
    assert "L2 advanced lifestyle knowledge" in text  # the skill x difficulty legend
    data = json.loads(to_json(as_report(rows, "r")))
    assert {r["key"] for r in data["rows"] if r["dimension"] == "difficulty"} == {"2"}
    parsed = list(csv.DictReader(io.StringIO(rows_csv(rows))))
    assert {p["key"] for p in parsed if p["dimension"] == "difficulty"} == {"2"}


# --------------------------------------------------------------------------- header, summary


SETTINGS = [
    JudgeSettings("gpt", "openai/gpt-5.4", 1024, 0.0),
    JudgeSettings("claude", "anthropic/claude-3-5", 2048, None),
]


def test_every_format_says_how_each_judge_was_sampled() -> None:
    report = Report("r", as_report(sample_rows()).rows, judge_settings=SETTINGS)
    text = to_table(report, details=True)
    assert "  gpt: openai/gpt-5.4, max_tokens 1024, temperature 0.0" in text
    assert "  claude: anthropic/claude-3-5, max_tokens 2048, temperature provider default" in text
    assert text.index("gpt: openai") < text.index("Model: ")
    data = json.loads(to_json(report))
    assert data["judges"] == [
        {"name": "gpt", "spec": "openai/gpt-5.4", "max_tokens": 1024, "temperature": 0.0},
        {
            "name": "claude",
            "spec": "anthropic/claude-3-5",
            "max_tokens": 2048,
            "temperature": "provider default",
        },
    ]


def summary_report() -> Report:
    rows = [
        ReportRow("weak", "j1", "overall", "all", 2.5, 40, 1, 0, 2.25, 2.75),
        ReportRow("weak", "j1", "skill", LC, 2.5, 40, 1, 0, 2.25, 2.75),
        ReportRow("strong", "j1", "overall", "all", 4.25, 38, 0, 2, 4.0, 4.5),
        ReportRow("strong", "j2", "overall", "all", 4.0, 40, 0, 0, 3.75, 4.25),
    ]
    return Report(
        "my run",
        rows,
        bootstrap={"replicates": 1000, "confidence": 0.95},
        models=["strong", "weak"],
        judges=["j1", "j2"],
    )


def test_run_summary_is_short_and_says_where_to_look_next() -> None:
    text = run_summary(summary_report(), {"parse_error": 3, "timeout": 5, "refused": 0})
    lines = text.splitlines()
    assert len(lines) <= 12
    # the leaderboard: models best first, a column per judge with its interval
    assert "95% CI" in lines[1]
    body = [line.split() for line in lines if line.split()[:1] in (["1"], ["2"])]
    assert [b[:3] for b in body] == [["1", "strong", "4.25"], ["2", "weak", "2.50"]]
    assert "4.25 [4.00, 4.50]  4.00 [3.75, 4.25]" in text
    assert body[1][3:] == ["[2.25,", "2.75]", "-", "40", "1", "0"]  # j2 never judged weak
    assert "Failures: 8 (timeout 5, parse_error 3)" in text and "refused" not in text
    assert "flask-eval report 'my run'" in text
    assert "flask-eval report 'my run' --format html" in text
    assert "flask-eval export 'my run'" in text
    assert LC not in text  # the overall means only, not the full report
    none = run_summary(Report("r", []), {})
    assert "Failures: none" in none and "no finished judgments" in none


@pytest.mark.parametrize("confidence", [0.9, 0.99])
def test_run_summary_names_the_confidence_level(confidence: float) -> None:
    report = summary_report()
    report.bootstrap["confidence"] = confidence
    assert f"{round(confidence * 100)}% CI" in run_summary(report, {})
