"""The critical noise of the uniform state (derived, docs/noisy_tokens.md) and the ``noise_phase`` study.

References: the Funk-Hecke eigenvalues by scipy quadrature of e^{beta t} against the Gegenbauer polynomial
with the weight (1 - t^2)^{(d-3)/2}, modified Bessel functions from scipy (S^1: I_l; S^2: the closed
forms of i_0, i_1), synthetic data with a known critical noise for the fit.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.integrate import quad
from scipy.special import eval_gegenbauer, iv

from attnflow.analysis import critical_token_noise, fit_critical_noise, funk_hecke_eigenvalue, growth_rate
from attnflow.studies import StudyConfigError, get_study
from attnflow.studies.render import markdown, table_from_json


def _eigen_by_quadrature(l: int, beta: float, d: int) -> float:
    """(1/|S^{d-1}|) int e^{beta <x, y>} Y_l(y) dy / Y_l(x) by Funk-Hecke, normalised Gegenbauer P_l."""
    if (
        d == 2
    ):  # t = cos(theta): (1/pi) int_0^pi e^{beta cos theta} cos(l theta) d theta, no endpoint singularity
        return quad(lambda th: math.exp(beta * math.cos(th)) * math.cos(l * th), 0, math.pi)[0] / math.pi
    a = (d - 2) / 2.0
    norm = eval_gegenbauer(l, a, 1.0)

    def f(t):
        p = eval_gegenbauer(l, a, t) / norm
        return math.exp(beta * t) * p * (1 - t * t) ** ((d - 3) / 2.0)

    num = quad(f, -1, 1, limit=200)[0]
    den = quad(lambda t: (1 - t * t) ** ((d - 3) / 2.0), -1, 1, limit=200)[0]
    return num / den


@pytest.mark.parametrize("d", [2, 3, 4])
@pytest.mark.parametrize("beta", [0.3, 1.0, 4.0])
def test_funk_hecke_eigenvalues_match_quadrature(d, beta):
    for l in range(4):
        assert_allclose(funk_hecke_eigenvalue(l, beta, d), _eigen_by_quadrature(l, beta, d), rtol=1e-8)


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0, 4.0, 10.0])
def test_critical_noise_closed_forms_on_s1_and_s2(beta):
    assert_allclose(critical_token_noise(beta, 2, "usa"), iv(1, beta) / beta, rtol=1e-12)
    assert_allclose(critical_token_noise(beta, 2, "softmax"), iv(1, beta) / (beta * iv(0, beta)), rtol=1e-12)
    i0, i1 = math.sinh(beta) / beta, (beta * math.cosh(beta) - math.sinh(beta)) / beta**2
    assert_allclose(critical_token_noise(beta, 3, "usa"), i1 / beta, rtol=1e-10)
    langevin = 1 / math.tanh(beta) - 1 / beta
    assert_allclose(critical_token_noise(beta, 3, "softmax"), langevin / beta, rtol=1e-10)
    assert_allclose(i1 / i0, langevin, rtol=1e-12)


def test_first_mode_destabilises_first_and_descent_is_always_stable():
    for d in (2, 3):
        for kernel in ("usa", "softmax"):
            for beta in (0.5, 3.0):
                ec = critical_token_noise(beta, d, kernel)
                assert_allclose(growth_rate(1, ec, beta, d, kernel), 0.0, atol=1e-12)
                rates = [growth_rate(l, 0.99 * ec, beta, d, kernel) for l in range(1, 6)]
                assert rates[0] > 0 and max(rates[1:]) < 0, rates
                assert growth_rate(1, 1.01 * ec, beta, d, kernel) < 0
                assert growth_rate(1, 0.0, beta, d, kernel, "descent") < 0
            # small beta: the linear kernel 1 + beta <x, y> gives eps_c -> 1/d
            assert_allclose(critical_token_noise(1e-6, d, kernel), 1 / d, rtol=1e-5)


def test_finite_n_prediction_tends_to_the_mean_field():
    for kernel in ("usa", "softmax"):
        mf = critical_token_noise(2.0, 3, kernel)
        vals = [critical_token_noise(2.0, 3, kernel, n=n) for n in (10, 100, 10_000)]
        assert vals[0] < vals[1] < vals[2] < mf and abs(vals[2] - mf) < 1e-3 * mf
    assert_allclose(critical_token_noise(2.0, 3, "usa", n=4), 0.75 * critical_token_noise(2.0, 3, "usa"))
    with pytest.raises(ValueError, match=r"n must be an integer >= 2 tokens or None .* got 1"):
        critical_token_noise(1.0, 3, "usa", n=1)
    with pytest.raises(ValueError, match=r"derived for attention 'usa' and 'softmax': got 'relu'"):
        critical_token_noise(1.0, 3, "relu")
    with pytest.raises(ValueError, match=r"beta must be a finite number > 0: got -1"):
        critical_token_noise(-1, 3, "usa")


def test_fit_recovers_a_known_critical_noise():
    ec = 0.37
    eps = np.array([0.45, 0.55, 0.7, 1.0])
    exact = fit_critical_noise(eps, eps / (eps - ec))
    assert_allclose([exact["eps_c"], exact["intercept"], exact["slope"]], [ec, 1.0, -ec], rtol=1e-12)
    rng = np.random.default_rng(0)
    noisy = eps / (eps - ec) * (1 + 0.03 * rng.standard_normal(eps.size))
    f = fit_critical_noise(eps, noisy)
    assert f["eps_c_ci"][0] < ec < f["eps_c_ci"][1] and abs(f["eps_c"] - ec) < 0.03
    with pytest.raises(ValueError, match="at least 3 noise levels: got 2"):
        fit_critical_noise([0.5, 0.6], [2.0, 3.0])


def test_quick_noise_phase_study(quick_study):
    d, out = quick_study("noise_phase")  # the session's quick run, with figures (tests/conftest.py)
    summary = json.loads((d / "summary.json").read_text())
    case = summary["cases"]["d2_usa_b1"]
    ec = critical_token_noise(1.0, 2, "usa")
    assert_allclose(case["eps_c_predicted"], ec, rtol=1e-12)
    assert_allclose([v["eps"] for v in case["per_ratio"].values()], [r * ec for r in (0.6, 1.5, 2.5, 4.0)])
    assert case["per_ratio"]["2.5"]["predicted_n_m2"] == pytest.approx(2.5 / 1.5)
    for v in case["per_ratio"].values():
        assert v["n_m2"]["mean"] > 0 and 0 <= v["order_parameter"]["mean"] <= 1
    table = (d / "table.md").read_text()
    assert "| S^1 | usa | 1 |" in table and "eps_c fitted" in table
    # rendered from the Table specs of the analysis (issue 30), stored in tables.json
    specs = json.loads((d / "tables.json").read_text())["tables"]
    assert [t["id"] for t in specs] == ["eps_c", "per_ratio"]
    assert table == markdown([table_from_json(t) for t in specs])
    figures = summary["run"]["figures"]  # the runner's record (issue 30)
    assert set(figures) == {"phase", "fluctuations"}
    assert all((d / f).is_file() for f in figures.values())
    assert out is not None
    study = get_study("noise_phase")
    seeds = [c["seed"] for c in study.plan(study.config(quick=True)).values()]
    assert len(set(seeds)) == len(seeds)  # independent noise per run


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"ratios": [0.5, 0.5, 2.0]}, "ratios must be distinct"),
        ({"ratios": [0.5, -1.0, 2.0]}, r"every ratio must be > 0 .* got \[-1.0\]"),
        ({"betas": [0.0]}, r"every beta must be > 0"),
        ({"steps": 40, "records": 7}, r"records must divide steps: got steps = 40, records = 7"),
        ({"dims": [4]}, r"dims.0: must be 2 or 3"),
    ],
)
def test_noise_phase_refuses_bad_parameters(params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study("noise_phase").config(params, quick=True)


def test_cli_prints_the_critical_noise():
    from typer.testing import CliRunner

    from attnflow.cli import app

    res = CliRunner().invoke(
        app, ["critical-noise", "--beta", "1", "--d", "2", "--attention", "usa", "--n", "96"]
    )
    assert res.exit_code == 0, res.output
    assert f"eps_c = {iv(1, 1.0):.6g} (mean field)" in res.output
    assert f"{critical_token_noise(1.0, 2, 'usa', n=96):.6g} (n = 96)" in res.output
    bad = CliRunner().invoke(app, ["critical-noise", "--beta", "1", "--attention", "relu"])
    assert bad.exit_code == 2 and "got 'relu'" in bad.output
