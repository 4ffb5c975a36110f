"""Cross-fitted lambda of `report.ppi.ppi_mean`: each labelled instance's lambda is the
in-sample one of the data without it (recomputed here the slow way), the estimate and
standard error follow from those lambdas, the interval keeps more of its coverage than
the in-sample one on a few skewed labels, and with many labels it approaches ppi_py's."""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest

from flask_eval.report.ppi import CROSS_FIT, IN_SAMPLE, ppi_mean

TOL = 1e-9
#: a Likert score piled at the top with a long low tail
LEVELS = np.arange(1.0, 6.0)
SHARES = np.array([0.05, 0.05, 0.1, 0.35, 0.45])


def _slow_lambdas(
    y: np.ndarray,
    f: np.ndarray,
    fu: np.ndarray,
    gl: np.ndarray,
    gu: np.ndarray,
    w: np.ndarray | None,
) -> np.ndarray:
    """Each labelled cell's lambda: the in-sample one without its instance's labels."""
    out = np.zeros(len(y))
    for g in np.unique(gl):
        keep = gl != g
        rest = ppi_mean(
            y[keep],
            f[keep],
            fu,
            lam=IN_SAMPLE,
            groups_labelled=gl[keep],
            groups_unlabelled=gu,
            weights=None if w is None else w[keep],
        )
        out[gl == g] = rest.lam if np.isfinite(rest.lam) else 0.0
    return out


@pytest.mark.parametrize("seed", range(8))
def test_cross_fit_is_leave_one_instance_out(seed: int) -> None:
    """The closed form equals refitting without each instance; the estimate is the labelled
    cells rectified with their own lambda, its variance the sandwich of those terms."""
    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(4, 40)), int(rng.integers(5, 120))
    y = rng.integers(1, 6, n).astype(float)
    f = np.clip(y + rng.integers(-1, 2, n), 1, 5).astype(float)
    fu = rng.integers(1, 6, big_n).astype(float)
    gl = rng.integers(0, max(2, n // 2), n)
    gu = rng.integers(0, n, big_n)  # some instances on both sides
    w = rng.uniform(0.5, 3.0, n) if seed % 2 else None
    got = ppi_mean(y, f, fu, groups_labelled=gl, groups_unlabelled=gu, weights=w)
    assert got == ppi_mean(
        y, f, fu, lam=CROSS_FIT, groups_labelled=gl, groups_unlabelled=gu, weights=w
    )
    lams = _slow_lambdas(y, f, fu, gl, gu, w)
    u = np.ones(n) if w is None else w / w.mean()
    z = y - lams * (f - fu.mean())
    estimate = float(np.dot(u, z) / n)
    assert got.estimate == pytest.approx(estimate, abs=TOL)
    assert got.lam == pytest.approx(float(np.dot(u, lams) / n), abs=TOL)
    codes = np.unique(np.concatenate([gl, gu]), return_inverse=True)[1]
    infl = np.bincount(codes[:n], u * (z - estimate) / n, minlength=codes.max() + 1)
    infl += np.bincount(codes[n:], got.lam * (fu - fu.mean()) / big_n, minlength=len(infl))
    assert got.se == pytest.approx(float(np.sqrt(np.dot(infl, infl))), rel=1e-9)


def _skewed(rng: np.random.Generator, n: int, big_n: int) -> tuple[np.ndarray, ...]:
    y = rng.choice(LEVELS, n + big_n, p=SHARES)
    f = y - 0.5 + rng.normal(0, 0.7, n + big_n)  # a biased judge that tracks people well
    return y[:n], f[:n], f[n:]


def test_cross_fit_keeps_coverage_on_a_few_skewed_labels() -> None:
    """12 labels of a skewed score: the in-sample lambda is tuned on the very labels whose
    variance it minimises and undercovers; the cross-fitted one covers more often, as
    often as the people's own t interval on the same labels within binomial error (the t
    interval's own shortfall on skewed data is the limit neither can pass)."""
    rng = np.random.default_rng(2026)
    truth = float(SHARES @ LEVELS)
    reps = 1500
    covered = {"cross-fit": 0, "in-sample": 0, "people": 0}
    for _ in range(reps):
        y, f, fu = _skewed(rng, 12, 300)
        cross = ppi_mean(y, f, fu)
        tuned = ppi_mean(y, f, fu, lam=IN_SAMPLE)
        covered["cross-fit"] += cross.low <= truth <= cross.high
        covered["in-sample"] += tuned.low <= truth <= tuned.high
        covered["people"] += cross.classical_low <= truth <= cross.classical_high
    error = 3 * np.sqrt(0.95 * 0.05 / reps)
    assert covered["cross-fit"] > covered["in-sample"]
    assert covered["cross-fit"] / reps >= covered["people"] / reps - error


@pytest.mark.parametrize("n", [2000, 8000])
def test_with_many_labels_it_approaches_ppi_py(n: int) -> None:
    """The lambdas left out one label at a time differ from the tuned one by O(1/n), so the
    estimates differ by O(1/n): a vanishing share O(1/sqrt(n)) of the standard error, and
    the standard errors by a relative O(1/n). The bounds allow five times that order (the
    constant is about 1.5 on these data)."""
    rng = np.random.default_rng(n)
    y, f, fu = _skewed(rng, n, 10 * n)
    got = ppi_mean(y, f, fu)
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu))[0])
    tuned = ppi_mean(y, f, fu, lam=IN_SAMPLE)
    assert abs(got.estimate - point) <= 5 * got.se / np.sqrt(n)
    assert abs(got.se / tuned.se - 1) <= 5 / n
    assert abs(got.lam - tuned.lam) <= 5 / n
