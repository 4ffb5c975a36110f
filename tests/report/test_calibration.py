"""Judge scores calibrated to people (report/calibration.py) on hand-built tables: a biased
judge corrected, panels averaged, N/A and failed cells excluded, instances clustered,
weights used; pairwise win rates; the suggested labels' probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from flask_eval.report.breakdown import Aggregation, flask_breakdown
from flask_eval.report.calibration import (
    ASSUMPTION,
    CalibratedRow,
    CalibrationSettings,
    calibrate,
    calibrate_pairs,
    people_labels,
)
from flask_eval.report.calibration_render import html_section, text
from flask_eval.report.calibration_suggest import expected_gain, suggest, template_csv
from flask_eval.report.scores import ScoreTable
from tests.reference import DONE, FAILED, Record, from_records

SKILLS = ("Factuality", "Readability")


def biased_table(
    instances: int = 120,
    labelled_every: int = 4,
    seed: int = 3,
    raters: tuple[str, ...] = ("human/a",),
) -> tuple[ScoreTable, float]:
    """A judge scoring 1 point above the truth with noise; people scoring the truth on
    every ``labelled_every``-th instance. Returns the table and the people's true mean."""
    rng = np.random.default_rng(seed)
    records, truth = [], []
    for i in range(instances):
        for skill in SKILLS:
            y = float(rng.integers(1, 5))
            truth.append(y)
            records.append(
                Record("m", "judge", f"i{i}", skill, DONE, min(5.0, y + 1 + rng.normal(0, 0.3)))
            )
            if i % labelled_every == 0:
                for rater in raters:
                    records.append(Record("m", rater, f"i{i}", skill, DONE, y))
    return from_records(records), float(np.mean(truth))


def members(table: ScoreTable) -> list[tuple[str, str, np.ndarray]]:
    return list(Aggregation(table, flask_breakdown({s: "Logical" for s in SKILLS})).members())


def overall(calibration_rows: list[CalibratedRow], judge: str = "judge") -> CalibratedRow:
    return next(r for r in calibration_rows if r.dimension == "overall" and r.judge == judge)


def test_a_biased_judge_is_corrected() -> None:
    table, truth = biased_table()
    out = calibrate(table, ["human/a"], ["judge"], members(table))
    row = overall(out.rows)
    assert row.raw > truth + 0.7  # the judge alone is off by about a point
    assert row.low <= truth <= row.high
    assert abs(row.estimate - truth) < 0.25
    assert row.labelled == 60 and row.unlabelled == 180
    assert row.gain > 1  # the judge's scores are worth more labels than there are
    assert row.high - row.low < row.people_high - row.people_low


def test_panels_are_averaged_per_cell() -> None:
    records = [
        Record("m", "judge", "i1", "Factuality", DONE, 3.0),
        Record("m", "human/a", "i1", "Factuality", DONE, 2.0),
        Record("m", "human/b", "i1", "Factuality", DONE, 4.0),
        Record("m", "judge", "i2", "Factuality", DONE, 3.0),
        Record("m", "human/a", "i2", "Factuality", DONE, 5.0),
        Record("m", "human/b", "i2", "Factuality", DONE, None),  # N/A: not a label
    ]
    table = from_records(records)
    labelled, labels = people_labels(table, ["human/a", "human/b"])
    assert labelled.all()
    assert sorted(labels.tolist()) == [3.0, 5.0]


def test_na_and_failed_cells_are_excluded() -> None:
    table, _ = biased_table(instances=40)
    extra = [
        Record("m", "judge", "x1", "Factuality", FAILED, None),
        Record("m", "human/a", "x1", "Factuality", DONE, 1.0),
        Record("m", "judge", "x2", "Factuality", DONE, None),  # the judge's N/A
        Record("m", "human/a", "x3", "Factuality", FAILED, None),  # flagged by the rater
        Record("m", "judge", "x3", "Factuality", DONE, 4.0),
    ]
    base, _ = biased_table(instances=40)
    records_table = from_records([*_records_of(base), *extra])
    out = calibrate(records_table, ["human/a"], ["judge"], members(records_table))
    plain = calibrate(table, ["human/a"], ["judge"], members(table))
    row, before = overall(out.rows), overall(plain.rows)
    assert row.labelled == before.labelled  # x1: the judge failed; no label on x3
    assert row.unlabelled == before.unlabelled + 1  # x3 counts as unlabelled


def _records_of(table: ScoreTable) -> list[Record]:
    out = []
    for c in range(table.n_cells):
        for j, judge in enumerate(table.judges):
            if table.state[c, j] == 0:
                continue
            score = float(table.score[c, j]) if np.isfinite(table.score[c, j]) else None
            out.append(
                Record(
                    table.models[table.model[c]],
                    judge,
                    table.instances[table.instance[c]],
                    table.skills[table.skill[c]],
                    DONE,
                    score,
                )
            )
    return out


def test_instances_are_clusters() -> None:
    """Two skills of an instance with the same people's error: clustered, the interval
    is wider than if the cells were independent."""
    rng = np.random.default_rng(5)
    records = []
    for i in range(60):
        shift = float(rng.normal(0, 1))
        for skill in SKILLS:
            records.append(Record("m", "judge", f"i{i}", skill, DONE, 3.0 + rng.normal(0, 0.2)))
            if i % 2 == 0:
                records.append(Record("m", "human/a", f"i{i}", skill, DONE, 3.0 + shift))
    table = from_records(records)
    row = overall(calibrate(table, ["human/a"], ["judge"], members(table)).rows)
    unclustered = ScoreTable(
        **{
            **vars(table),
            "instance": np.arange(table.n_cells, dtype=np.int64) % len(table.instances),
        }
    )
    free = overall(calibrate(unclustered, ["human/a"], ["judge"], members(unclustered)).rows)
    assert row.high - row.low > 1.2 * (free.high - free.low)


def test_weights_undo_an_unequal_draw() -> None:
    """Labels drawn far more often where people score high: unweighted, the people-only
    mean is biased upward; weighed by 1 / probability, the calibrated one is not."""
    rng = np.random.default_rng(11)
    records, probability, truth = [], {}, []
    for i in range(400):
        y = float(rng.integers(1, 6))
        truth.append(y)
        records.append(Record("m", "judge", f"i{i}", "Factuality", DONE, y + rng.normal(0, 1.5)))
        p = 0.6 if y >= 4 else 0.1
        if rng.random() < p:
            records.append(Record("m", "human/a", f"i{i}", "Factuality", DONE, y))
            probability[f"i{i}"] = p
    table = from_records(records)
    weights = np.array([1 / probability.get(table.instances[i], 1.0) for i in table.instance])
    plain = overall(calibrate(table, ["human/a"], ["judge"], members(table)).rows)
    weighed = overall(
        calibrate(table, ["human/a"], ["judge"], members(table), weights=weights).rows
    )
    mean = float(np.mean(truth))
    assert plain.people > mean + 0.5
    assert abs(weighed.estimate - mean) < abs(plain.estimate - mean)
    assert weighed.low <= mean <= weighed.high
    # the judge's own mean is the same whatever the weights: every cell counted once
    assert weighed.raw == pytest.approx(plain.raw)
    assert weighed.unlabelled == plain.unlabelled


def test_keys_with_too_few_labels_are_skipped_and_said() -> None:
    records = [
        Record("m", "judge", "i1", "Factuality", DONE, 3.0),
        Record("m", "human/a", "i1", "Factuality", DONE, 2.0),
        Record("m", "judge", "i2", "Factuality", DONE, 4.0),
    ]
    table = from_records(records)
    out = calibrate(
        table, ["human/a"], ["judge"], members(table), CalibrationSettings(min_labels=2)
    )
    assert out.rows == []
    assert any("1 label(s)" in s for s in out.skipped)


def test_section_renders_in_text_json_and_html() -> None:
    table, _ = biased_table(instances=40)
    out = calibrate(table, ["human/a"], ["judge"], members(table))
    out.notes = [ASSUMPTION]
    lines = "\n".join(text(out))
    assert "Calibrated to human/a" in lines and "judge on m:" in lines
    assert "uniform random sample" in lines
    assert "domain" not in lines  # compact by default
    assert "domain" in "\n".join(text(out, details=True)) or not any(
        r.dimension == "domain" for r in out.rows
    )
    data = out.as_dict()
    assert data["rows"][0]["gain"] == pytest.approx(
        data["rows"][0]["ess"] / data["rows"][0]["labelled"]
    )
    assert "<table id='calibration'>" in html_section(out)


def test_pairwise_win_rates_are_calibrated() -> None:
    """A judge favouring model a: its raw win rate is high, the calibrated one near the
    people's."""
    rng = np.random.default_rng(2)
    rows, truth = [], []
    for i in range(200):
        people = 1 if rng.random() < 0.4 else 2  # a wins 40%
        truth.append(1.0 if people == 1 else 0.0)
        judge = 1 if (people == 1 or rng.random() < 0.5) else 2
        rows.append((f"i{i}", "a", "b", "overall", "judge", judge))
        if i % 3 == 0:
            rows.append((f"i{i}", "a", "b", "overall", "human/x", people))
    out = calibrate_pairs(rows, ["human/x"])
    (row,) = out.rows
    assert row.model == "a vs b"
    assert row.raw > 0.6
    assert row.low <= 0.4 <= row.high or row.low <= np.mean(truth) <= row.high
    assert any("not calibrated" in n for n in out.notes)


def test_suggestions_have_known_probabilities_favouring_disagreement() -> None:
    rng = np.random.default_rng(4)
    records = []
    for i in range(200):
        spread = 2.0 if i < 20 else 0.0
        records.append(Record("m", "j1", f"i{i}", "Factuality", DONE, 3.0 + spread))
        records.append(
            Record("m", "j2", f"i{i}", "Factuality", DONE, 3.0 - spread + rng.normal(0, 0.1))
        )
    table = from_records(records)
    gain = expected_gain(table, [], ["j1", "j2"])
    disputed = np.array([int(table.instances[i][1:]) < 20 for i in table.instance])
    assert gain[disputed].min() > gain[~disputed].max()
    assert gain.min() > 0  # floored: every cell has a chance
    picked = suggest(table, [], ["j1", "j2"], 30, seed=1)
    assert 10 < len(picked) < 60
    assert all(0 < s.probability <= 1 for s in picked)
    assert template_csv(picked).splitlines()[0] == "model,instance_id,skill,score,probability"


def test_a_key_with_few_labelled_instances_is_flagged_in_every_form() -> None:
    """Below FEW_INSTANCES labelled instances a row is marked (text *, JSON few_labels,
    the note that says why); at or above it, not."""
    from flask_eval.report.calibration import FEW_INSTANCES, CalibratedRow, Calibration
    from flask_eval.report.calibration_render import FEW, html_section, text

    def row(instances: int) -> CalibratedRow:
        return CalibratedRow(
            "j", "m", "overall", "all", 3.0, 2.5, 3.5, 3.4, 3.1, 2.4, 3.8,
            instances * 2, 50, 0.5, instances * 3.0, instances=instances,
        )  # fmt: skip

    few, enough = row(FEW_INSTANCES - 1), row(FEW_INSTANCES)
    assert few.few and not enough.few
    assert few.as_dict()["few_labels"] is True and enough.as_dict()["few_labels"] is False
    for rows, flagged in (([few], True), ([enough], False)):
        section = Calibration("human/alice", ("human/alice",), 0.95, rows=rows)
        lines = "\n".join(text(section))
        assert ("all *" in lines) is flagged
        assert (FEW.split(";")[0] in lines.replace("\n    ", " ")) is flagged
        assert (html_section(section).count("all *") == 1) is flagged
