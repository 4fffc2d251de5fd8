"""Power-law fit k(H) = a H^b (attnflow.analysis.fits) against exact laws and scipy.stats.linregress."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from attnflow.analysis.fits import fit_power_law, power_law_band


def test_exact_power_law_is_recovered_with_zero_width_intervals():
    H = np.array([1.0, 10.0, 100.0])
    f = fit_power_law(H, 0.373 * H**0.005)
    assert_allclose([f["a"], f["b"]], [0.373, 0.005], rtol=1e-12, atol=1e-14)
    # no scatter about the line: the intervals collapse onto the estimate
    assert_allclose(f["b_ci"], [0.005, 0.005], atol=1e-10)
    assert_allclose(f["a_ci"], [0.373, 0.373], rtol=1e-10)
    assert f["dof"] == 1


def test_three_points_use_t_quantile_with_one_dof():
    f = fit_power_law([1, 10, 100], [1.0, 0.12, 0.009])
    assert_allclose(f["t"], 12.7062047, rtol=1e-6)
    assert f["b_ci"][0] < f["b"] < f["b_ci"][1]


def test_unweighted_fit_matches_linregress():
    rng = np.random.default_rng(0)
    H = np.array([1, 2, 5, 10, 20, 50, 100], float)
    y = 0.4 * H**-0.9 * np.exp(0.1 * rng.standard_normal(H.size))
    f = fit_power_law(H, y)
    lr = stats.linregress(np.log(H), np.log(y))
    assert_allclose(f["b"], lr.slope, rtol=1e-12)
    assert_allclose(np.log(f["a"]), lr.intercept, rtol=1e-12, atol=1e-14)
    assert_allclose(f["b_se"], lr.stderr, rtol=1e-10)
    assert_allclose(f["log_a_se"], lr.intercept_stderr, rtol=1e-10)
    assert_allclose(f["r"], lr.rvalue, rtol=1e-12)
    t = stats.t.ppf(0.975, H.size - 2)
    assert_allclose(f["b_ci"], [lr.slope - t * lr.stderr, lr.slope + t * lr.stderr], rtol=1e-10)


def test_equal_errors_give_the_unweighted_fit_and_weights_pull_the_line():
    H = np.array([1, 10, 100.0])
    y = np.array([1.0, 0.2, 0.009])
    f0, f1 = fit_power_law(H, y), fit_power_law(H, y, y_err=0.05 * y)
    assert_allclose([f1["a"], f1["b"]], [f0["a"], f0["b"]], rtol=1e-12)
    assert_allclose(f1["b_ci"], f0["b_ci"], rtol=1e-10)
    # a point with a tiny error is (almost) interpolated
    fw = fit_power_law(H, y, y_err=y * np.array([1e-6, 1.0, 1.0]))
    assert_allclose(fw["a"], 1.0, rtol=1e-6)


def test_band_brackets_the_fit_and_matches_the_intervals_at_h_1():
    H = np.array([1, 10, 100.0])
    f = fit_power_law(H, [0.5, 0.06, 0.004])
    k, lo, hi = power_law_band(f, H)
    assert np.all(lo < k) and np.all(k < hi)
    assert_allclose(k, f["a"] * H ** f["b"], rtol=1e-12)
    # at H = 1 the band is the interval of a
    assert_allclose([lo[0], hi[0]], f["a_ci"], rtol=1e-12)


@pytest.mark.parametrize(
    ("H", "y", "kw", "match"),
    [
        ([1, 10], [1.0, 0.1], {}, "at least 3 points"),
        ([1, 10, 100], [1.0, -0.1, 0.01], {}, "must be finite and > 0"),
        ([1, 10, 100], [1.0, 0.1], {}, "same length"),
        ([5, 5, 5], [1.0, 0.1, 0.2], {}, "two distinct values"),
        ([1, 10, 100], [1.0, 0.1, 0.01], {"y_err": [0.1, 0.0, 0.1]}, "y_err must be finite"),
        ([1, 10, 100], [1.0, 0.1, 0.01], {"level": 1.5}, "level must lie"),
    ],
)
def test_bad_input_is_rejected(H, y, kw, match):
    with pytest.raises(ValueError, match=match):
        fit_power_law(H, y, **kw)
