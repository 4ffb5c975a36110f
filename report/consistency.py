"""Repeated judgments (``run --samples K``): a judge's samples merged into the judge, and
how consistent the judge is with itself (pure: numpy only).

The ledger holds sample k of judge J as the judge ``J#k`` (``core.types.sample_name``).
:func:`merge_samples` turns those K columns back into J, scored by the mean of its
samples, so every table, interval, comparison and agreement of the report keeps its
meaning: one column per judge. :func:`self_consistency` says how much the K samples of
one judge agree, over the items (model, instance, criterion) scored in every sample:

- ``all_equal``: the share of items whose K scores are all the same;
- ``mean_sd``: the mean over items of the standard deviation of their K scores (with
  K - 1 degrees of freedom: the unbiased variance of a sample of K);
- ``icc``: the intraclass correlation ICC(1), one-way random effects, single rating
  (Shrout & Fleiss 1979): (MSB - MSW) / (MSB + (K - 1) MSW). The samples are exchangeable
  repetitions of the same judge (no sample is systematically harsher than another), so
  the one-way model is the fitting one; it says what share of the variance of one
  judgment is between items rather than noise between samples (1: the samples always
  agree; 0 or below: the noise is as large as the differences between items). It is
  undefined (None) with fewer than two items or when every score is the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from flask_eval.core.types import STATE_FAILED, STATE_NA, STATE_NONE, STATE_SCORED, sample_of

FloatArray = npt.NDArray[np.float64]
StateArray = npt.NDArray[np.int8]


@dataclass(frozen=True)
class Merged:
    """A pivot's columns with each judge's samples merged into one column: ``groups``
    maps the judge to its samples' columns in the unmerged pivot, sample 1 first."""

    judges: list[str]
    state: StateArray
    score: FloatArray
    groups: dict[str, list[int]]


@dataclass(frozen=True)
class SelfConsistency:
    """How one judge's K samples agree (see the module docstring); ``items`` counts the
    (model, instance, criterion) items scored in every sample, the statistics' base."""

    judge: str
    samples: int
    items: int
    all_equal: float | None
    mean_sd: float | None
    icc: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def sample_groups(judges: Sequence[str]) -> dict[str, list[int]]:
    """Judge -> the columns of its samples, by sample index; a column whose name is no
    sample's is a judge of its own."""
    indexed: dict[str, list[tuple[int, int]]] = {}
    for column, name in enumerate(judges):
        parsed = sample_of(name)
        judge, index = parsed if parsed is not None else (name, 1)
        indexed.setdefault(judge, []).append((index, column))
    return {judge: [c for _, c in sorted(pairs)] for judge, pairs in indexed.items()}


def merge_samples(judges: Sequence[str], state: StateArray, score: FloatArray) -> Merged:
    """Each judge's samples as one column. A cell is scored when any sample scored it,
    with the mean of the samples that did (a sample that failed or is open does not pull
    the mean); else N/A when any sample said N/A; else failed when any failed; else open."""
    groups = sample_groups(judges)
    rows = state.shape[0]
    merged_state = np.full((rows, len(groups)), STATE_NONE, dtype=np.int8)
    merged_score = np.full((rows, len(groups)), np.nan)
    for out, columns in enumerate(groups.values()):
        st = state[:, columns]
        scored = st == STATE_SCORED
        any_scored = scored.any(axis=1)
        total = np.where(scored, score[:, columns], 0.0).sum(axis=1)
        count = scored.sum(axis=1)
        merged_score[any_scored, out] = total[any_scored] / count[any_scored]
        merged_state[any_scored, out] = STATE_SCORED
        for code in (STATE_NA, STATE_FAILED):  # the first that applies wins
            hit = ~any_scored & (merged_state[:, out] == STATE_NONE) & (st == code).any(axis=1)
            merged_state[hit, out] = code
    return Merged(list(groups), merged_state, merged_score, groups)


def self_consistency(judge: str, scores: FloatArray) -> SelfConsistency:
    """The statistics of one judge from its (items, K) scores, NaN where a sample did not
    score the item; only items scored in all K samples count."""
    k = int(scores.shape[1]) if scores.ndim == 2 else 0
    whole = scores[~np.isnan(scores).any(axis=1)] if k else np.zeros((0, 0))
    n = int(whole.shape[0])
    if n == 0 or k < 2:
        return SelfConsistency(judge, k, n, None, None, None)
    all_equal = float(np.mean((whole == whole[:, :1]).all(axis=1)))
    mean_sd = float(np.mean(np.std(whole, axis=1, ddof=1)))
    return SelfConsistency(judge, k, n, all_equal, mean_sd, icc_oneway(whole))


def icc_oneway(scores: FloatArray) -> float | None:
    """ICC(1) of a complete (items, K) matrix (see the module docstring); None when
    undefined."""
    n, k = scores.shape
    if n < 2 or k < 2:
        return None
    item_means = scores.mean(axis=1)
    msb = k * float(np.sum((item_means - scores.mean()) ** 2)) / (n - 1)
    msw = float(np.sum((scores - item_means[:, None]) ** 2)) / (n * (k - 1))
    denominator = msb + (k - 1) * msw
    if denominator <= 0:
        return None
    return float((msb - msw) / denominator)


def consistency_rows(merged: Merged, score: FloatArray, state: StateArray) -> list[SelfConsistency]:
    """:func:`self_consistency` of every judge of ``merged`` that has more than one sample,
    from the unmerged ``score`` and ``state``."""
    out = []
    for judge, columns in merged.groups.items():
        if len(columns) < 2:
            continue
        values = np.where(state[:, columns] == STATE_SCORED, score[:, columns], np.nan)
        out.append(self_consistency(judge, values))
    return out
