"""bench.calibration_real: its figures on a made-up set (known coverage behaviour), and a
short run on Prometheus's data when it is there."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import calibration_real
from bench.calibration_real import Estimand, evaluate
from flask_eval.report.ppi import IN_SAMPLE
from flask_eval.rubrics.protocol import PROMETHEUS_SYSTEM
from flask_eval.simulator.answer import prometheus_score
from flask_eval.simulator.config import SimConfig

DATA = calibration_real.data_dir()


def test_evaluate_on_a_made_up_set() -> None:
    rng = np.random.default_rng(0)
    people = rng.normal(3, 1, 400)
    judge = people + 0.8 + rng.normal(0, 0.3, 400)  # biased, closely correlated
    row = evaluate(Estimand("made up", "mean", "biased", people, judge), 0.1, 200, rng)
    assert (row.items, row.labels, row.samples) == (400, 40, 200)
    assert row.truth == pytest.approx(float(people.mean()))
    assert row.judge_mean == pytest.approx(float(judge.mean()))
    assert not row.judge_covers  # the judge alone is off by its bias
    assert row.coverage >= 0.9 and row.coverage_people >= 0.9
    assert row.width < 0.6 * row.width_people and row.ess > 2 * row.labels
    assert 0.8 < row.pearson <= 1 and 0 < row.lam <= 1 and row.degenerate == 0
    plain = evaluate(Estimand("made up", "mean", "biased", people, judge), 0.1, 50, rng, 1.0)
    assert plain.lam == 1.0
    tuned = evaluate(Estimand("made up", "mean", "biased", people, judge), 0.1, 50, rng, IN_SAMPLE)
    assert 0.5 < tuned.lam <= 1 and tuned.coverage >= 0.8
    assert calibration_real.main(["--samples", "1", "--lam", "in-sample", "--data", "."]) == 0


@pytest.mark.skipif(
    not (DATA / calibration_real.AUTOJ).is_file(), reason=f"no Prometheus data at {DATA}"
)
def test_a_short_run_on_the_real_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "calibration.json"
    assert calibration_real.main(["--samples", "20", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    rows = {(r["set"], r["estimand"], r["judge"]): r for r in result["rows"]}
    shares = [r["truth"] for (s, e, _), r in rows.items() if s == "Auto-J" and "share" in e]
    assert sum(shares) == pytest.approx(1.0) and len(shares) == 3
    records = json.loads((DATA / calibration_real.GRADED["MT-Bench"]).read_text())
    mt = [r for (s, _, _), r in rows.items() if s == "MT-Bench"]
    assert len(mt) == 2 and all(r["labels"] == 16 and r["items"] == 320 for r in mt)
    assert mt[0]["truth"] == pytest.approx(np.mean([r["gpt4_score"][0] for r in records]))
    # the in-process score is the one the simulator answers a Prometheus prompt with
    config = SimConfig()
    for record in records[:20]:
        prompt = f"{PROMETHEUS_SYSTEM}\n{record['instruction']}"
        got = calibration_real.simulator_score(record["instruction"], config)
        assert got == prometheus_score(prompt, calibration_real.SIM_JUDGE, config)
    assert "| Auto-J |" in capsys.readouterr().out
