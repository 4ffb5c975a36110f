"""A run comparison rendered (report/compare_render.py): JUnit XML valid against the
Jenkins xUnit plugin's JUnit schema with one failure per regression, Markdown with the
regressions first, JSON without NaN, and the text table."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flask_eval.report import compare_render
from flask_eval.report.compare import REGRESSION, UNTESTABLE, Comparison, Pair, compare
from tests.report.test_compare import BREAKDOWN, records, rng_scores, table

SCHEMA = Path(__file__).parents[1] / "data" / "junit-10.xsd"


def comparison(shift: float) -> Comparison:
    """BASE against NEW shifted by ``shift``, for two models (one unchanged)."""
    base = records(rng_scores(11, 25), model="a") + records(rng_scores(12, 25), model="b")
    new = records(rng_scores(11, 25, shift=shift), model="a")
    new += records(rng_scores(12, 25), model="b")
    return compare(
        table(base), table(new), [Pair("a", "a"), Pair("b", "b")], BREAKDOWN, names=("v1", "v2")
    )


def test_junit_is_valid_and_fails_exactly_the_regressions() -> None:
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(str(SCHEMA))
    failing: dict[float, set[tuple[str | None, str | None]]] = {}
    for shift in (-1.0, 0.0):
        c = comparison(shift)
        xml = compare_render.junit(c)
        schema.validate(xml)
        suite = ET.fromstring(xml)
        cases = suite.findall("testcase")
        assert len(cases) == len(c.rows) == int(suite.get("tests", "-1"))
        failed = {
            (case.get("classname"), case.get("name"))
            for case in cases
            if case.find("failure") is not None
        }
        assert failed == {(f"{r.model}.{r.dimension}", r.key) for r in c.regressions}
        assert int(suite.get("failures", "-1")) == len(failed)
        skipped = sum(1 for case in cases if case.find("skipped") is not None)
        assert skipped == sum(1 for r in c.rows if r.verdict == UNTESTABLE)
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["correction"] == "holm" and props["family_tests"] == str(c.tests)
        assert all(case.find("system-out") is not None for case in cases)
        failing[shift] = failed
    assert ("a.overall", "all") in failing[-1.0] and not failing[0.0]
    assert not any(cls.startswith("b.") for cls, _ in failing[-1.0] if cls)


def test_markdown_puts_the_headline_and_regressions_first() -> None:
    c = comparison(-1.0)
    assert c.gate_failed
    md = compare_render.markdown(c, limit=5)
    lines = md.splitlines()
    assert lines[0] == f"### :x: {c.headline}"
    first_table_row = lines[lines.index("**Regressions**") + 4]
    assert REGRESSION in first_table_row and "| a |" in first_table_row
    # the unchanged model b never appears among the regressions
    regressions = lines[lines.index("**Regressions**") : lines.index("**Other tested keys**")]
    assert not any(line.startswith("| b |") for line in regressions)
    others = sum(1 for r in c.rows if r.verdict not in (REGRESSION, UNTESTABLE))
    if others > 5:
        assert f"{others - 5} more tested keys" in md
    ok = compare_render.markdown(comparison(0.0))
    assert ok.startswith("### :white_check_mark: OK") and "**Regressions**" not in ok


def test_json_has_every_row_and_no_nan() -> None:
    c = comparison(-1.0)
    data = json.loads(compare_render.json_text(c))  # strict JSON: NaN would not parse back
    assert data["gate_failed"] is True and data["regressions"] == len(c.regressions)
    assert len(data["rows"]) == len(c.rows) and data["settings"]["alpha"] == 0.05
    untestable = [r for r in data["rows"] if r["verdict"] == UNTESTABLE]
    assert all(r["p_value"] is None for r in untestable)
    assert {d["pair"] for d in data["dropped"]} == {"a", "b"}
    assert math.isclose(data["rows"][0]["effect"], c.rows[0].effect)


def test_text_has_the_headline_and_one_line_per_row() -> None:
    c = comparison(-1.0)
    text = compare_render.text(c)
    lines = text.splitlines()
    assert lines[0] == c.headline and lines[3].split()[:3] == ["model", "dimension", "key"]
    assert sum(1 for line in lines if line.startswith(("a ", "b "))) == len(c.rows)
    assert compare_render.render(c, "text") == text
