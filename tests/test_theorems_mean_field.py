"""Issue 13, study 4 (``mean_field_heads``) and the pure functions of ``attnflow.analysis.theorems``.

References are independent of the code under test: OT between head clouds against a brute-force
assignment over permutations; the metric derivative against closed forms (a translation and a
dilation of a head cloud); the H^{-1/2} rate on a toy mean of i.i.d. heads; the derived 1/H law of G^2
at frozen tokens against a direct Monte Carlo mean of the core's G^2.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from attnflow.analysis.theorems import (
    draw_heads,
    fit_rate,
    gradient_mc_decomposition,
    head_cloud_wasserstein2,
    head_metric_derivative,
    per_head_velocities,
)
from attnflow.model import tokens as tokens_mod
from attnflow.observables import mobility, strong_upper_gradient_sq
from attnflow.observables.inputs import field_eval
from attnflow.studies import StudyConfigError, get_study
from attnflow.studies.render import markdown, table_from_json


# -- OT between head clouds ----------------------------------------------------------------------------
@pytest.mark.parametrize("H", [1, 3, 6])
def test_head_cloud_w2_matches_brute_force_assignment(H):
    # equal uniform masses: the optimal plan is a permutation (Birkhoff), so brute force is exact
    rng = np.random.default_rng(H)
    A, B = rng.normal(size=(H, 3, 3)), rng.normal(size=(H, 3, 3))
    costs = [
        np.mean([np.sum((A[i] - B[s[i]]) ** 2) for i in range(H)]) for s in itertools.permutations(range(H))
    ]
    assert_allclose(head_cloud_wasserstein2(A, B), math.sqrt(min(costs)), rtol=1e-10)


def test_head_cloud_w2_refuses_mismatched_sizes():
    with pytest.raises(ValueError, match="matrices of one size"):
        head_cloud_wasserstein2(np.zeros((2, 3, 3)), np.zeros((2, 2, 2)))


# -- metric derivative ------------------------------------------------------------------------------------
def test_metric_derivative_of_a_translation_is_its_speed():
    # D_h(t) = D_h(0) + t C: every coupling but the identity costs more, W2(t, s) = |t - s| |C|_F
    rng = np.random.default_rng(0)
    D0, C = rng.normal(size=(7, 3, 3)), rng.normal(size=(3, 3))
    t = np.array([0.0, 0.3, 0.7, 1.5, 2.0])
    speed, length = head_metric_derivative(D0[None] + t[:, None, None, None] * C, t)
    assert_allclose(speed, np.linalg.norm(C), rtol=1e-9)
    assert_allclose(length, t * np.linalg.norm(C), rtol=1e-9, atol=1e-12)


def test_metric_derivative_of_a_dilation_integrates_in_closed_form():
    # D_h(t) = e^{-t} D_h(0) (the deterministic OU drift towards 0): the identity coupling is optimal
    # (the gradient of a convex function), W2(t, s) = |e^{-t} - e^{-s}| rms(D0), length(T) = (1 - e^{-T}) rms
    rng = np.random.default_rng(1)
    D0 = rng.normal(size=(5, 2, 2))
    rms = math.sqrt(np.mean(np.sum(D0**2, axis=(1, 2))))
    t = np.linspace(0, 3, 31)
    speed, length = head_metric_derivative(np.exp(-t)[:, None, None, None] * D0, t)
    assert_allclose(length[-1], (1 - math.exp(-3)) * rms, rtol=1e-9)
    mid = 0.5 * (t[1:] + t[:-1])
    assert_allclose(speed, np.exp(-mid) * rms, rtol=1e-2)  # difference quotient vs derivative: O(dt^2)


@pytest.mark.parametrize(
    ("heads", "times", "match"),
    [
        (np.zeros((3, 2, 2, 2)), [0.0, 1.0], "K = len"),
        (np.zeros((2, 2, 2, 2)), [1.0, 1.0], "increase strictly"),
    ],
)
def test_metric_derivative_refuses_bad_input(heads, times, match):
    with pytest.raises(ValueError, match=match):
        head_metric_derivative(heads, times)


# -- head laws ----------------------------------------------------------------------------------------
def test_ou_stationary_law_has_the_stated_moments():
    # NOTES.md §2: D = I + S, Var S_aa = sigma^2, Var S_ab = sigma^2 / 2
    D = draw_heads("ou_stationary", 1, 200_000, 3, seed=3, sigma2=2.0)[0]
    assert_allclose(D.mean(0), np.eye(3), atol=0.02)
    var = D.var(0)
    assert_allclose(np.diag(var), 2.0, rtol=0.02)
    assert_allclose(var[0, 1], 1.0, rtol=0.02)
    assert_allclose(D, np.swapaxes(D, -1, -2))


def test_two_point_law_frequencies_and_points():
    D = draw_heads("two_point", 2, 50_000, 3, seed=0, p=0.3)
    first = np.all(D == 2 * np.eye(3), axis=(-1, -2))
    assert_allclose(first.mean(), 0.3, atol=0.01)
    assert np.all(first | np.all(D == D[~first][0], axis=(-1, -2)))


def test_same_seed_same_heads():
    a = draw_heads("symmetric_gaussian", 2, 3, 3, seed=5)
    assert_allclose(a, draw_heads("symmetric_gaussian", 2, 3, 3, seed=5), rtol=0, atol=0)
    assert not np.allclose(a, draw_heads("symmetric_gaussian", 2, 3, 3, seed=6))


@pytest.mark.parametrize(
    ("law", "kw", "match"),
    [
        ("cauchy", {}, "law must be one of"),
        ("two_point", {"p": 1.5}, r"p must lie in \[0, 1\]"),
        ("ou_stationary", {"sigma2": -1.0}, "sigma2 must be >= 0"),
        ("symmetric_gaussian", {"scale": 0.0}, "scale must be > 0"),
        ("two_point", {"points": (np.eye(2), np.eye(2))}, "must be 3 x 3"),
    ],
)
def test_draw_heads_refuses_what_is_not_a_law(law, kw, match):
    with pytest.raises(ValueError, match=match):
        draw_heads(law, 1, 2, 3, seed=0, **kw)


# -- rates in H ----------------------------------------------------------------------------------------
def test_toy_mean_of_iid_heads_converges_at_rate_h_minus_half():
    # |mean of H iid heads - E D|_F, averaged over 400 draws: E|.| = c H^{-1/2} exactly in distribution
    rng = np.random.default_rng(0)
    Hs = np.array([1, 4, 16, 64, 256])
    err = [np.linalg.norm(rng.normal(size=(400, H, 3, 3)).mean(1), axis=(1, 2)).mean() for H in Hs]
    f = fit_rate(Hs, err)
    assert f["b_ci"][0] < -0.5 < f["b_ci"][1]
    assert abs(f["b"] + 0.5) < 0.03  # 400 draws: the relative error of each mean is ~1.8%
    assert f["range"] == [1.0, 256.0] and f["points"] == 5


def test_fit_rate_range_and_too_few_points():
    f = fit_rate([1, 2, 4, 8], [1, 0.5, 0.25, 0.125], hi=4)
    assert f["range"] == [1.0, 4.0]
    assert_allclose(f["b"], -1.0)
    assert "error" in fit_rate([1, 2, 4], [1, 0.5, -1])


def test_per_head_velocities_average_to_the_field():
    x = tokens_mod.uniform(1, 9, 3, seed=0)[0]
    D = torch.as_tensor(draw_heads("symmetric_gaussian", 1, 5, 3, seed=1)[0])
    V = per_head_velocities(x, D)
    v = field_eval(x[None], D[None], ledger=False)[2].velocity[0]
    torch.testing.assert_close(V.mean(0), v)


def test_decomposition_equals_its_parts_bit_for_bit():
    # the decomposition takes the mobilities from the velocities' own field evaluation (one evaluation
    # per chunk of heads, not two): the same numbers as the separate public functions, bit for bit, over
    # more heads than one chunk (256) so that the chunking is exercised
    x = tokens_mod.uniform(1, 12, 3, seed=4)[0]
    D = torch.as_tensor(draw_heads("ou_stationary", 1, 300, 3, seed=5)[0])
    V = per_head_velocities(x, D).double()
    m = mobility(x[None], D[None])[0]
    b = 1.0 / (1.0 / m).mean(0)
    sample = float((b * (V.mean(0) ** 2).sum(-1)).mean())
    c = float((b * V.var(0, unbiased=True).sum(-1)).mean())
    dec = gradient_mc_decomposition(x, D)
    assert (dec["G2_sample"], dec["c"], dec["G2_mean_field"]) == (sample, c, sample - c / 300)


def test_g2_excess_at_frozen_tokens_is_c_over_h():
    # derived: E G^2(mu; Theta^H) = G2_inf + c/H (up to the fluctuation of b); check against a direct
    # Monte Carlo mean of the core's G^2 over 400 draws per H
    x = tokens_mod.uniform(1, 10, 3, seed=2)[0]
    big = torch.as_tensor(draw_heads("ou_stationary", 1, 20_000, 3, seed=7)[0])
    dec = gradient_mc_decomposition(x, big)
    assert dec["c"] > 0 and abs(dec["G2_sample"] - dec["G2_mean_field"] - dec["c"] / 20_000) < 1e-12
    for H in (4, 16, 64):
        D = torch.as_tensor(draw_heads("ou_stationary", 400, H, 3, seed=100 + H))
        g = strong_upper_gradient_sq(x.expand(400, -1, -1), D).numpy()
        pred = dec["G2_mean_field"] + dec["c"] / H
        # 400 draws: standard error of the mean ~ 5% here; the b-fluctuation bias is O(1/H^2)
        assert abs(g.mean() - pred) < 4 * g.std() / 20 + 0.05 * pred, (H, g.mean(), pred)


def test_decomposition_needs_two_heads():
    with pytest.raises(ValueError, match="at least 2 heads"):
        gradient_mc_decomposition(tokens_mod.uniform(1, 4, 3, seed=0)[0], torch.eye(3)[None].double())


# -- the study: parameters refused at load ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"H": []}, r"H: List should have at least 1 item"),
        ({"H": [1, 1, 2]}, "head counts must be distinct"),
        ({"H": [1, 8], "H_ref": 8}, "H_ref must exceed every H.*got H_ref = 8"),
        ({"laws": [{"kind": "two_point", "p": 1.5}]}, r"p = 1.5 is not a law.*e.g."),
        ({"laws": [{"kind": "ou_stationary", "sigma2": -1}]}, r"sigma2.*greater than or equal to 0"),
        ({"laws": [{"kind": "cauchy"}]}, "laws.0"),
        ({"t1": 1.0, "dt": 0.3}, "whole number of steps.*choose dt"),
        ({"fit_margin": 0.5}, "fit_margin"),
    ],
)
def test_mean_field_study_refuses_bad_parameters(params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study("mean_field_heads").config(params, quick=True)


def test_mean_field_quick_study(quick_study):
    # the session's quick run (tests/conftest.py); its resume (killed at a random moment, resumed to the same
    # summary.json) is checked by tests/test_studies_protocol.py
    out, s = quick_study("mean_field_heads")
    assert s["status"] == "done"
    assert set(s["laws"]) == {"symmetric_gaussian", "ou_stationary", "two_point"}
    for part in s["laws"].values():
        for H in ("1", "2", "4"):
            assert part["per_H"][H]["W2_T"]["mean"] > 0
        assert "b" in part["fits"]["W2_T"] and part["fits"]["W2_T"]["range"] == [1.0, 4.0]
        fr = part["frozen_tokens_G2"]["initial"]
        assert fr["c"] > 0 and len(fr["G2_mean"]) == 3
    assert set(s["sec6_ou"]["per_H"]) == {"1", "2", "4"}
    table = (out / "table.md").read_text()
    assert "W2(mu^H_T, mu^ref_T) exact" in table and "Sec. 6 OU regime" in table
    # table.md is the one renderer's Markdown of the Table specs kept in tables.json
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert [t["id"] for t in specs] == ["rates", "per_H", "sec6", "sec6_fits"]
    assert markdown([table_from_json(t) for t in specs]) == table
    assert specs[1]["rows"][0]["W2_T"] == s["laws"]["symmetric_gaussian"]["per_H"]["1"]["W2_T"]
