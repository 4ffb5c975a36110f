"""Replicate sums (``report.instance_sums``): the float32 product is taken only where it is
exact, and then equals the float64 product to the last bit."""

from __future__ import annotations

import numpy as np

from flask_eval.report.bootstrap import instance_weights
from flask_eval.report.instance_sums import Replicates


def _float64(block: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return np.asarray(block.T @ weights, dtype=np.float64)


def test_whole_numbers_give_the_float64_product_exactly() -> None:
    rng = np.random.default_rng(3)
    weights = instance_weights(500, 300, seed=4)
    block = rng.integers(0, 16, size=(500, 40)).astype(np.float64)  # score sums, counts
    w = Replicates.of(weights)
    assert w.small is not None  # resampling counts are whole: the float32 copy is made
    assert np.array_equal(w.sums(block), _float64(block, weights))
    rows = np.flatnonzero(rng.random(500) < 0.6)
    assert np.array_equal(w.sums(block[rows], rows), _float64(block[rows], weights[rows]))


def test_sums_float32_cannot_hold_are_taken_in_float64() -> None:
    """2^23 + 1 twice and 1: a sum of 2^24 + 3, which float32 rounds to 2^24 + 4."""
    block = np.array([[2.0**23 + 1], [2.0**23 + 1], [1.0]])
    weights = np.ones((3, 2))
    got = Replicates.of(weights).sums(block)
    assert got.tolist() == [[2.0**24 + 3, 2.0**24 + 3]]
    small = (block.astype(np.float32).T @ weights.astype(np.float32)).astype(np.float64)
    assert small.tolist() != got.tolist()  # what a float32 product would have given


def test_fractions_are_taken_in_float64() -> None:
    """Means of samples or of an ensemble's judges are not whole: no float32 for them."""
    rng = np.random.default_rng(5)
    weights = instance_weights(200, 100, seed=6)
    block = rng.integers(1, 6, size=(200, 8)) + rng.integers(0, 3, size=(200, 8)) / 3
    assert np.array_equal(Replicates.of(weights).sums(block), _float64(block, weights))
    fractional = weights / 2  # weights that are not counts: no float32 copy at all
    assert Replicates.of(fractional).small is None
    whole = rng.integers(0, 5, size=(200, 8)).astype(np.float64)
    assert np.array_equal(Replicates.of(fractional).sums(whole), _float64(whole, fractional))


def test_no_replicates_and_no_rows() -> None:
    none = Replicates.of(np.zeros((4, 0)))
    assert none.sums(np.ones((4, 3))).shape == (3, 0)
    w = Replicates.of(instance_weights(4, 10, seed=1))
    assert w.sums(np.zeros((0, 3)), np.zeros(0, dtype=np.int64)).tolist() == [[0.0] * 10] * 3
