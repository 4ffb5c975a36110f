"""Repeated judgments merged into their judge, and the judge's self-consistency, against
hand counts (report/consistency.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flask_eval.core.types import STATE_FAILED, STATE_NA, STATE_NONE, STATE_SCORED
from flask_eval.report.consistency import (
    icc_oneway,
    merge_samples,
    sample_groups,
    self_consistency,
)
from flask_eval.report.document import Report
from flask_eval.report.textblocks import self_consistency_table
from flask_eval.report.textgrid import fmt

S, N, F, P = STATE_SCORED, STATE_NA, STATE_FAILED, STATE_NONE


def test_samples_are_grouped_under_their_judge_in_sample_order() -> None:
    names = ["a#2", "b", "a#1", "a#3", "c#x"]
    assert sample_groups(names) == {"a": [2, 0, 3], "b": [1], "c#x": [4]}


def test_a_merged_cell_is_the_mean_of_the_samples_that_scored_it() -> None:
    judges = ["j#1", "j#2", "j#3"]
    state = np.array(
        [[S, S, S], [S, F, S], [N, S, P], [N, F, P], [F, P, P], [P, P, P]], dtype=np.int8
    )
    score = np.array(
        [[1, 2, 4], [3, 0, 4], [0, 5, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=np.float64
    )
    merged = merge_samples(judges, state, score)
    assert merged.judges == ["j"]
    assert merged.state[:, 0].tolist() == [S, S, S, N, F, P]
    assert merged.score[:3, 0].tolist() == pytest.approx([7 / 3, 3.5, 5.0])
    assert np.isnan(merged.score[3:, 0]).all()


def test_self_consistency_by_hand() -> None:
    # four items, three samples each; the last item misses a sample and does not count
    scores = np.array([[3, 3, 3], [2, 4, 3], [5, 5, 4], [1, np.nan, 1]], dtype=np.float64)
    got = self_consistency("j", scores)
    assert (got.samples, got.items) == (3, 3)
    assert got.all_equal == pytest.approx(1 / 3)
    # item standard deviations (ddof 1): 0, 1, sqrt(1/3)
    assert got.mean_sd == pytest.approx((0 + 1 + math.sqrt(1 / 3)) / 3)
    # ICC(1): item means 3, 3, 14/3, grand 32/9; MSB = 3 * SS(means) / 2; MSW = SSW / 6
    means = [3, 3, 14 / 3]
    grand = sum(means) / 3
    msb = 3 * sum((m - grand) ** 2 for m in means) / 2
    ssw = 0 + (1 + 1 + 0) + ((1 / 3) ** 2 * 2 + (2 / 3) ** 2)
    msw = ssw / 6
    assert got.icc == pytest.approx((msb - msw) / (msb + 2 * msw))


def test_icc_is_one_when_the_samples_always_agree_and_undefined_without_spread() -> None:
    assert icc_oneway(np.array([[1.0, 1.0], [4.0, 4.0], [2.0, 2.0]])) == pytest.approx(1.0)
    assert icc_oneway(np.full((3, 2), 3.0)) is None
    assert icc_oneway(np.array([[1.0, 2.0]])) is None
    # pure noise between samples, none between items: at most 0
    noisy = icc_oneway(np.array([[1.0, 5.0], [5.0, 1.0], [1.0, 5.0], [5.0, 1.0]]))
    assert noisy is not None and noisy < 0


def test_nothing_to_compare_gives_no_statistics() -> None:
    got = self_consistency("j", np.array([[np.nan, 2.0]]))
    assert (got.items, got.all_equal, got.mean_sd, got.icc) == (0, None, None, None)


def test_the_text_and_json_reports_show_the_section_only_when_there_is_one() -> None:
    row = self_consistency("judge-a", np.array([[3.0, 3.0], [2.0, 4.0]]))
    assert Report(run="r", rows=[], self_consistency=[row]).as_dict()["self_consistency"] == [
        {
            "judge": "judge-a",
            "samples": 2,
            "items": 2,
            "all_equal": 0.5,
            "mean_sd": pytest.approx(math.sqrt(2) / 2),
            "icc": row.icc,
        }
    ]
    assert "self_consistency" not in Report(run="r", rows=[]).as_dict()
    lines = self_consistency_table([row])
    assert lines[0].startswith("Self-consistency")
    assert lines[-1].split() == ["judge-a", "2", "2", "0.500", "0.707", fmt(row.icc, 3)]
    assert self_consistency_table([]) == []
