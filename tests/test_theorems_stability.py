"""Issue 13, study 2 (``stability_input``): perturbations, the Gronwall fit, the quick study, bad parameters.

References: the Gronwall fit on a linear ODE with a known rate (two solutions of x' = a x differ by
e^{a t}, integrated by scipy's solve_ivp at tight tolerance); the perturbation radius measured by exact
OT (POT) against eta; the weight noise shared by the perturbed and the base run (same seed, same path).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from scipy.integrate import solve_ivp

from attnflow.analysis.theorems import draw_heads, fit_gronwall, perturb_tokens
from attnflow.model import tokens as tokens_mod
from attnflow.observables import wasserstein2
from attnflow.studies import StudyConfigError, get_study, run_study


def test_gronwall_fit_recovers_the_rate_of_a_linear_ode():
    # x' = A x with A = [[0.3, 1], [0, 0.3]]: the difference of two solutions grows like (1 + t) e^{0.3 t};
    # on a diagonal A = 0.7 I exactly like e^{0.7 t}: C2 = 0.7, C1 = 1
    A = 0.7 * np.eye(2)
    t = np.linspace(0, 3, 31)
    sol = [
        solve_ivp(lambda s, x: A @ x, (0, 3), x0, t_eval=t, rtol=1e-12, atol=1e-14).y
        for x0 in ([1, 0], [1, 1e-3])
    ]
    W = np.linalg.norm(sol[0] - sol[1], axis=0)
    f = fit_gronwall(t, W)
    assert_allclose(f["C2"], 0.7, rtol=1e-6)
    assert_allclose(f["C1"], 1.0, rtol=1e-6)
    assert f["C2_ci"][1] - f["C2_ci"][0] < 1e-6 and f["range"] == [0.0, 3.0]  # an exact exponential
    # a Jordan block: the fit is the best exponential, and max_ratio says what C1 makes the bound hold
    J = np.array([[0.3, 1.0], [0.0, 0.3]])
    sol = [
        solve_ivp(lambda s, x: J @ x, (0, 3), x0, t_eval=t, rtol=1e-12, atol=1e-14).y
        for x0 in ([0, 0], [0, 1e-3])
    ]
    W = np.linalg.norm(sol[0] - sol[1], axis=0)
    g = fit_gronwall(t, W)
    assert g["C2"] > 0.3 and np.all(W <= g["max_ratio"] * W[0] * np.exp(g["C2"] * t) * (1 + 1e-12))


def test_gronwall_fit_refuses_zero_distances():
    with pytest.raises(ValueError, match="finite and > 0"):
        fit_gronwall([0, 1, 2], [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="length >= 3"):
        fit_gronwall([0, 1], [1.0, 1.0])


@pytest.mark.parametrize("shape", ["random", "eigen", "one_token"])
@pytest.mark.parametrize("eta", [1e-6, 1e-3, 1e-1])
def test_perturbation_lies_in_the_w2_ball(shape, eta):
    x = tokens_mod.octahedral(1, 24, 3, seed=0)[0].numpy()
    D = draw_heads("symmetric_gaussian", 1, 3, 3, seed=1)[0]
    y = perturb_tokens(x, eta, shape, seed=2, D=D)
    assert_allclose(np.linalg.norm(y, axis=1), 1.0, atol=1e-14)
    w = wasserstein2(torch.as_tensor(y), torch.as_tensor(x)).item()
    assert w <= eta * (1 + 1e-9)
    if shape != "one_token":  # every token moved by eta: small balls are transported by the identity
        assert w >= 0.5 * eta


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"eta": 0.0, "shape": "random"}, "eta must be a finite radius > 0"),
        ({"eta": 0.1, "shape": "swirl"}, "shape must be one of"),
        ({"eta": 0.1, "shape": "eigen"}, "needs the heads D"),
    ],
)
def test_perturb_tokens_refuses_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        perturb_tokens(np.eye(3), **kw)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"etas": [0.0, 1e-3]}, r"every eta must be a radius > 0.*got \[0.0\]"),
        ({"etas": [-1e-3, 1e-3]}, "eta = 0 is no perturbation"),
        ({"etas": [1e-3]}, "etas: List should have at least 2 items"),
        ({"shapes": ["swirl"]}, "shapes.0"),
        ({"t1": 1.0, "dt": 0.3}, "whole number of steps"),
        ({"t1": 0.1, "dt": 0.05, "record_every": 1}, "at least 3 records"),
    ],
)
def test_stability_input_refuses_bad_parameters(params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study("stability_input").config(params, quick=True)


def _written_inside(out, s):
    """The checks of a study's own directory ``out`` (its quick run, ``quick_study``, which also checks that
    nothing was written to the system temp dir): the token and head arrays are in the run directories
    (issue 30), and table.md is the rendering of its Table specs (tables.json)."""
    import json

    from attnflow.studies.render import markdown, table_from_json

    inputs = sorted((out / "runs").glob("*/inputs/*.npy"))
    assert inputs, "the runs read their token and head arrays from their own directories"
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert (out / "table.md").read_text() == markdown([table_from_json(t) for t in specs])
    return s


def test_stability_input_quick_study(quick_study):
    # the session's quick run (tests/conftest.py; shared with the protocol checks): etas 1e-5, 1e-3, 1e-1
    out, s = quick_study("stability_input")
    s = _written_inside(out, s)
    for key, v in s["variants"].items():
        rows = v["rows"]
        r = rows["random_eta1em05"]
        assert_allclose(r["W2_0"]["mean"], 1e-5, rtol=1e-6)
        assert math.isfinite(r["C2"]) and r["C2_ci"][0] <= r["C2"] <= r["C2_ci"][1]
        lo, hi = r["Wm2_band_T"]
        assert 0 < lo <= hi  # sqrt(min b) W2 <= sqrt(max b) W2
        # linear response: the amplification at T converges as eta -> 0 (change O(eta))
        assert v["linear_response"]["random"]["relative_change"][0] < 0.05, key
    # the OU runs of base and perturbed clouds share the weight noise: identical recorded heads
    from attnflow.experiments import open_run

    a = open_run(out / "runs" / "ascent_ou_base").heads.values
    b = open_run(out / "runs" / "ascent_ou_random_eta1em05").heads.values
    assert_allclose(a, b, rtol=0, atol=0)


# -- stability_weights (study 3) --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilons": [0.0, 1e-3, 1e-2]}, r"every eps must be > 0.*got \[0.0\]"),
        ({"epsilons": [1e-3, 1e-2]}, "epsilons: List should have at least 3 items"),
        ({"epsilons": [1e-3, 1e-3, 1e-2]}, "epsilons must be distinct"),
        ({"kinds": ["bias"]}, "kinds.0"),
        ({"t1": 1.0, "dt": 0.3}, "whole number of steps"),
    ],
)
def test_stability_weights_refuses_bad_parameters(params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study("stability_weights").config(params, quick=True)


def test_stability_weights_quick_study_has_linear_rates(quick_study):
    out, s = quick_study("stability_weights")  # the session's quick run (tests/conftest.py)
    s = _written_inside(out, s)
    for kind in ("heads", "noise"):
        f = s["kinds"][kind]["fits"]
        for q in ("abs_dE_T", "W2_T"):
            # eps in [1e-3, 1e-1] at T = 0.5: the linear term dominates, b within 0.1 of 1
            assert abs(f[q]["b"] - 1) < 0.1, (kind, q, f[q]["b"])
    # frozen heads: no weight-driven change of the energy
    assert all(v["abs_d_dtE_T"]["mean"] == 0 for v in s["kinds"]["heads"]["per_eps"].values())


def test_stability_input_with_layer_scaling_uses_the_effective_heads(tmp_path):
    # frozen heads, c(t) = 1/((t0 + t) sqrt H): M_theta(T) = mean|D|^2 (1/t0 - 1/(t0 + T)) / H (trapezoid)
    params = {"etas": [1e-5, 1e-3], "shapes": ["random"], "regimes": ["frozen"], "layer_scaling": 0.5}
    s = run_study("stability_input", tmp_path / "sl", quick=True, params=params)
    v = s["variants"]["ascent_frozen"]
    D = draw_heads("symmetric_gaussian", 1, 2, 3, seed=11)[0]  # the study's heads (seed + 11, H = 2)
    ms = np.mean(np.sum(D**2, axis=(1, 2)))
    t = np.array(v["times"])
    f = ms / ((0.5 + t) ** 2 * 2)  # |c D|^2 averaged over heads, H = 2
    assert_allclose(v["M_T"], np.sum(0.5 * (f[1:] + f[:-1]) * np.diff(t)), rtol=1e-10)
    # the trapezoid over 5 records overestimates the convex integrand by ~6%
    assert_allclose(v["M_T"], ms * (1 / 0.5 - 1 / 1.5) / 2, rtol=0.08)
    assert s["sizes"]["layer_scaling"] == 0.5
