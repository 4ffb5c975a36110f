"""Simulated judge probe runs for the judge card's tests: a neutral judge with noise, or
one with planted biases (pure, in-process)."""

from __future__ import annotations

import math

import numpy as np

from flask_eval.core.probes import VARIANTS, length_percent
from flask_eval.report.probe_types import CardInputs, OrderedVerdicts, OwnScore, TwinScore

MODELS = ("m-a", "m-b")
CRITERIA = ("c1", "c2", "c3")
FAMILIES = {"m-a": "fa", "m-b": "fb", "J1": "fa", "J2": "fb"}


def simulate(
    seed: int,
    *,
    instances: int = 20,
    length_bias: float = 0.0,
    obey: float = 0.0,
    self_bias: float = 0.0,
) -> CardInputs:
    """A two-judge probe run on integer 1-5 scores: instance and item effects, each
    judgment with its own noise; ``length_bias`` points per doubling of words, ``obey`` the
    chance an injected twin gets the top, ``self_bias`` J1's points on its family's model
    (``m-a``). J1 is neutral when all three are 0."""
    rng = np.random.default_rng(seed)
    shape = (instances, len(MODELS), len(CRITERIA))
    quality = 3 + rng.normal(0, 0.7, (instances, 1, 1)) + rng.normal(0, 0.5, shape)

    def score(q: np.ndarray) -> np.ndarray:
        return np.clip(np.round(q + rng.normal(0, 0.8, q.shape)), 1, 5)

    doublings = np.array([math.log2(1 + _percent(v) / 100) for v in VARIANTS])
    original = score(np.repeat(quality[..., None], len(VARIANTS), -1))
    twin = score(quality[..., None] + length_bias * doublings)
    injected = np.array([v.startswith("inject") for v in VARIANTS])
    twin[(rng.random(twin.shape) < obey) & injected] = 5.0
    words = rng.integers(80, 300, shape)
    twins = [
        TwinScore(
            "J1",
            v,
            MODELS[m],
            f"i{i}",
            CRITERIA[c],
            float(original[i, m, c, k]),
            float(twin[i, m, c, k]),
            int(words[i, m, c]),
            round(int(words[i, m, c]) * (1 + _percent(v) / 100)),
        )
        for i, m, c in np.ndindex(shape)
        for k, v in enumerate(VARIANTS)
    ]
    j1 = score(quality + self_bias * (np.arange(len(MODELS)) == 0)[None, :, None])
    j2 = score(quality)
    own = [
        OwnScore(
            MODELS[m], f"i{i}", CRITERIA[c], {"J1": float(j1[i, m, c]), "J2": float(j2[i, m, c])}
        )
        for i, m, c in np.ndindex(shape)
    ]
    win = 1 / (1 + np.exp(quality[:, 1] - quality[:, 0]))  # m-a against m-b
    draws = rng.random((2, instances, len(CRITERIA)))
    results = np.where(draws < 0.8 * win, 1.0, np.where(draws < 0.8 * win + 0.2, 0.5, 0.0))
    verdicts = [
        OrderedVerdicts(
            "J1",
            "",
            f"i{i}",
            CRITERIA[c],
            "m-a",
            "m-b",
            float(results[0, i, c]),
            float(results[1, i, c]),
        )
        for i, c in np.ndindex((instances, len(CRITERIA)))
    ]
    return CardInputs(
        run="sim",
        judges=("J1", "J2"),
        twins=tuple(twins),
        verdicts=tuple(verdicts),
        own=tuple(own),
        families=FAMILIES,
    )


def _percent(variant: str) -> int:
    return length_percent(variant) or 0
