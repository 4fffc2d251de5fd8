"""Issue 13, study 1 (``longtime``): the Gaussian W2 of |Theta'| in law, the quick study, bad parameters.

References: the Bures formula against the closed form of commuting covariances and against exact OT
(POT) between large samples; the pathwise length of a Brownian head path against its known scaling
in the record spacing (exponent -1/2); the frozen regime has zero length exactly.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from attnflow.analysis.theorems import (
    fit_rate,
    gaussian_wasserstein2,
    head_cloud_wasserstein2,
    head_metric_derivative,
)
from attnflow.studies import StudyConfigError, get_study
from attnflow.studies.render import markdown, table_from_json


def test_gaussian_w2_commuting_covariances_closed_form():
    # diagonal covariances: W2^2 = |m1 - m2|^2 + sum (sqrt(s1) - sqrt(s2))^2
    m1, m2 = np.array([0.0, 1.0, 2.0]), np.array([1.0, -1.0, 0.5])
    s1, s2 = np.array([1.0, 4.0, 0.0]), np.array([9.0, 1.0, 2.0])
    exact = math.sqrt(np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(s1) - np.sqrt(s2)) ** 2))
    assert_allclose(gaussian_wasserstein2(m1, np.diag(s1), m2, np.diag(s2)), exact, rtol=1e-12)


def test_gaussian_w2_against_exact_ot_of_samples():
    # two correlated 2-d Gaussians: exact OT between 600-point samples approaches the Bures value
    rng = np.random.default_rng(0)
    A = np.array([[1.0, 0.6], [0.6, 0.8]])
    B = np.array([[0.5, -0.2], [-0.2, 1.5]])
    m1, m2 = np.zeros(2), np.array([0.5, -0.3])
    x = rng.multivariate_normal(m1, A, 600).reshape(600, 1, 2)
    y = rng.multivariate_normal(m2, B, 600).reshape(600, 1, 2)
    # a head "cloud" of 1 x 2 matrices is a point cloud in R^2
    emp = head_cloud_wasserstein2(x, y)
    assert_allclose(emp, gaussian_wasserstein2(m1, A, m2, B), rtol=0.15)  # finite-sample bias ~ n^{-1/2}


def test_gaussian_w2_refuses_bad_shapes():
    with pytest.raises(ValueError, match="k x k covariances"):
        gaussian_wasserstein2(np.zeros(2), np.eye(3), np.zeros(2), np.eye(2))


def test_brownian_heads_have_length_exponent_minus_half():
    # D_h(t) = W_h(t) (a Brownian head cloud): the polygon length at spacing Delta grows like Delta^{-1/2},
    # the signature of an infinite pathwise length that the study fits for OU
    rng = np.random.default_rng(1)
    dt, K = 0.01, 801
    W = np.cumsum(rng.normal(scale=math.sqrt(dt), size=(K, 4, 2, 2)), axis=0)
    t = dt * np.arange(K)
    sp, L = [], []
    for s in (1, 2, 4, 8):
        idx = np.arange(0, K, s)
        sp.append(s * dt)
        L.append(head_metric_derivative(W[idx], t[idx])[1][-1])
    f = fit_rate(sp, L)
    assert abs(f["b"] + 0.5) < 0.08, f  # 800 increments x 4 heads: the relative noise of each L is ~1%


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"regimes": []}, "regimes: List should have at least 1 item"),
        ({"regimes": ["ou", "sinusoid"]}, "regimes.1"),
        ({"spacings": [1, 2]}, "spacings: List should have at least 3 items"),
        ({"spacings": [1, 1, 2]}, "spacings must be distinct"),
        ({"t1": 1.0, "dt": 0.3}, "whole number of steps.*choose dt"),
        ({"t1": 0.4, "dt": 0.02, "record_every": 2, "spacings": [1, 2, 4]}, "at least 4 x max"),
        ({"paths": 1}, "paths: must be greater than or equal to 2; got 1"),
    ],
)
def test_longtime_refuses_bad_parameters(params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study("longtime").config(params, quick=True)


def test_longtime_quick_study(quick_study):
    out, s = quick_study("longtime")  # the session's quick run (tests/conftest.py)
    r = s["regimes"]
    # frozen heads: the head law does not move, exactly
    assert r["frozen"]["length_pathwise_T"]["mean"] == 0.0 and r["frozen"]["length_in_law_T"] == 0.0
    assert r["frozen"]["int_dtE_T"]["mean"] == 0.0
    # OU: a rough path, length exponent near -1/2; oscillating: rectifiable, exponent near 0
    assert -0.7 < r["ou"]["fit_length_vs_spacing"]["b"] < -0.3
    assert abs(r["osc_shared"]["fit_length_vs_spacing"]["b"]) < 0.15
    for reg in r.values():
        assert set(reg["stationarity"]) and len(reg["G2_quarters"]) == 4
    assert "limit law Theta-bar" in (out / "table.md").read_text()
    # table.md is the one renderer's Markdown of the Table specs kept in tables.json
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert markdown([table_from_json(t) for t in specs]) == (out / "table.md").read_text()
    lengths = next(t for t in specs if t["id"] == "lengths")
    assert [row["regime"] for row in lengths["rows"]] == list(r)
    assert lengths["rows"][0]["b"] == r["ou"]["fit_length_vs_spacing"]["b"]


def test_ou_law_length_matches_gaussian_w2_of_the_exact_moments():
    # independent route: sum the Bures distances between the exact Gaussian laws at fine times
    from attnflow.analysis.theorems import ou_law_length

    d, s2 = 3, 1.0
    P = np.zeros((9, 9))  # covariance of vec((Z + Z^T)/2)
    for a in range(3):
        for b in range(3):
            P[3 * a + b, 3 * a + b] = 1.0 if a == b else 0.5
            P[3 * a + b, 3 * b + a] = 1.0 if a == b else 0.5
    t = np.linspace(0, 6, 6001)
    m = [(1 - math.exp(-u)) * np.eye(d).ravel() for u in t]
    s = [s2 + (4 - s2) * math.exp(-2 * u) for u in t]
    steps = [gaussian_wasserstein2(m[k], s[k] * P, m[k + 1], s[k + 1] * P) for k in range(len(t) - 1)]
    assert_allclose(ou_law_length([0.0, 6.0])[-1], np.sum(steps), rtol=1e-5)
    assert ou_law_length([0.0, 60.0])[-1] - ou_law_length([0.0, 30.0])[-1] < 1e-9  # finite in law
