"""A protocol's scale is data: a 1-10 protocol is one class, read and drawn on 1-10."""

from __future__ import annotations

import json

import pytest

from flask_eval.report import html, svg
from flask_eval.report.document import Report, ReportRow
from flask_eval.report.metrics import ABILITY, OVERALL, OVERALL_KEY
from flask_eval.rubrics.flask_review import FlaskReviewProtocol
from flask_eval.rubrics.grading import PROTOCOLS, FlaskEvalProtocol, Subject, protocols_scale
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.prometheus import PrometheusProtocol
from flask_eval.rubrics.scale import FIVE_POINT, Scale
from flask_eval.rubrics.skills import Skill

TEN = Scale(1, 10)


class TenPoint(FlaskEvalProtocol):
    """Ours, on a 1-10 scale: the whole of a new protocol."""

    name = "ten-point"
    scale = TEN


HELPFUL = Skill(
    "Helpfulness",
    "Custom",
    "Does the response help the user?",
    {n: f"Level {n} of help." for n in TEN.levels},
    allow_na=False,
)
SUBJECT = Subject("Plan a trip to Rome.", "", "Day 1: the Colosseum. Day 2: the Vatican.")


def test_a_ten_point_protocol_asks_for_and_reads_one_to_ten() -> None:
    proto = TenPoint()
    system, user = (text_of(m) for m in proto.render(SUBJECT, [HELPFUL]))
    assert "1-10 rubric" in system and "using the 1-10 rubric" in user
    assert "- Score 10: Level 10 of help." in user and '"Helpfulness": <1-10>' in user
    assert "integer from 1 to 10" in user and "1-5" not in user + system
    assert proto.read('Helpfulness: good.\n[SCORES] {"Helpfulness": 9}', [HELPFUL]).scores == {
        "Helpfulness": 9
    }
    for bad in (0, 11):
        reading = proto.read(f'[SCORES] {{"Helpfulness": {bad}}}', [HELPFUL])
        assert "out of range" in reading.problems["Helpfulness"]
    reminder = text_of(proto.reminder("?", [HELPFUL], {"Helpfulness": "x"})[-1])
    assert "<1-10>" in reminder and "integer from 1 to 10" in reminder


def test_its_structured_form_follows_the_scale() -> None:
    proto = TenPoint()
    schema = proto.response_schema([HELPFUL])
    assert schema is not None
    assert schema["properties"]["Helpfulness"]["properties"]["score"]["enum"] == list(TEN.levels)
    assert "<1-10>" in text_of(proto.render_structured(SUBJECT, [HELPFUL])[-1])
    answer = json.dumps({"Helpfulness": {"rationale": "Two sights a day.", "score": 8}})
    assert proto.read(answer, [HELPFUL]).scores == {"Helpfulness": 8}


def test_every_reader_reads_the_protocol_scale() -> None:
    class Prometheus10(PrometheusProtocol):
        scale = TEN

    class Flask10(FlaskReviewProtocol):
        scale = TEN

    prom = Prometheus10()
    assert "between 1 and 10" in text_of(prom.render(SUBJECT, [HELPFUL])[-1])
    assert "Score 10: Level 10 of help." in text_of(prom.render(SUBJECT, [HELPFUL])[-1])
    assert prom.read("Good. [RESULT] 9/10", [HELPFUL]).scores == {"Helpfulness": 9}
    assert prom.read("Good. [RESULT] 9/5", [HELPFUL]).problems
    assert PrometheusProtocol().read("Good. [RESULT] 9", [HELPFUL]).problems
    flask = Flask10()
    assert "from 1 to 10" in text_of(flask.render(SUBJECT, [HELPFUL])[-1])
    assert flask.read("Fine.\n{'Helpfulness': 10}", [HELPFUL]).scores == {"Helpfulness": 10}


def test_the_report_draws_a_ten_point_run_without_clipping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(PROTOCOLS, TenPoint.name, TenPoint)
    scale = protocols_scale([TenPoint.name, None, "prometheus"])
    assert scale == TEN and protocols_scale([None, "no-such-protocol"]) == FIVE_POINT
    rows = [
        ReportRow("m1", "j", OVERALL, OVERALL_KEY, 8.5, 10, 0, 0),
        ReportRow("m1", "j", ABILITY, "Custom", 8.5, 10, 0, 0, ci_low=7.9, ci_high=9.2),
    ]
    report = Report(
        run="r", rows=rows, models=["m1"], judges=["j"], abilities=["Custom"], scale=scale
    )
    figure = svg.ability_bars(report, "j")
    # the score axis runs 1 to 10 (a 5-point axis would cut 8.5 off)
    assert ">1</text>" in figure and ">10</text>" in figure and ">6</text>" in figure
    assert "mean 8.50, n 10, interval 7.90–9.20" in figure
    assert "on a 1-10 scale" in html.render(report, [])
    assert "on a 1-5 scale" in html.render(Report(run="r", rows=rows[:1]), [])
