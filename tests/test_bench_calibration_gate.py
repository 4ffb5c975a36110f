"""bench.calibration_coverage and bench.gate_bench at a tiny size (the synthetic layout),
so that they keep working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import calibration_coverage, gate_bench, sim_cells
from flask_eval.simulator.config import JudgeTraits, SimConfig


def test_the_calibration_bench_runs_at_a_tiny_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "calibration.json"
    args = ["--synthetic", "--samples", "3", "--noises", "0,1", "--out", str(out)]
    assert calibration_coverage.main(args) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["noise"] for r in results] == [0, 1]
    for r in results:
        assert 0 <= r["coverage_raw_judge"] <= r["coverage_calibrated"] <= 1
        assert r["intervals"] == 3 * 24  # samples x (2 models x 12 skills)
    assert results[0]["rho"] > results[1]["rho"]  # a noisier judge agrees less
    assert "| judge | rho |" in capsys.readouterr().out


def test_the_gate_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    args = ["--synthetic", "--trials", "2", "--drop", "1.0", "--noise", "0", "--out", str(out)]
    assert gate_bench.main(args) == 0
    result = json.loads(out.read_text())
    assert result["tests_per_comparison"] > 12
    assert result["results"]["holm"]["power"] == 1.0  # a whole point is always seen
    assert result["mean_effect"] < -0.5


def test_the_cells_are_scored_as_the_simulator_scores() -> None:
    lay = sim_cells.synthetic_layout()
    c = sim_cells.cells(lay, ("m",))
    cfg = SimConfig(seed=1, generators={"m": 3.0}, skill_levels={"m": {c.skills[0]: 2.0}})
    level = sim_cells.levels(c, cfg)
    own = level[c.skill == 0]
    assert len(own) and (level[c.skill != 0] == level[c.skill != 0].round()).all()
    assert abs(own.mean() - (level[c.skill != 0].mean() - 1)) < 0.2
    scores = sim_cells.judge(c, level, "j", JudgeTraits(bias=1), "1")
    assert scores.mean() > level.mean() + 0.5
