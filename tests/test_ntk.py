"""NTK injectivity features (attnflow.analysis.ntk) against quadrature and closed forms; the quick study."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from numpy.testing import assert_allclose
from scipy import integrate

from attnflow.analysis.ntk import (
    DiscreteLaw,
    GaussianMixtureLaw,
    UniformSphereLaw,
    affine_complement,
    attention_parameters,
    dirac,
    injectivity_curve,
    log_partition_features,
    ntk_singular_values,
    sphere_points,
)
from attnflow.studies import StudyConfigError, get_study

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("v", [np.array([0.3, -1.2]), np.array([2.5, 0.1]), np.array([1e-3, 2e-3])])
def test_uniform_circle_against_quadrature(v):
    # d = 2: (1/2pi) int_0^2pi exp(<v, (cos t, sin t)>) dt by adaptive quadrature
    val, _ = integrate.quad(
        lambda t: math.exp(v[0] * math.cos(t) + v[1] * math.sin(t)), 0, 2 * math.pi, epsabs=0, epsrel=1e-13
    )
    assert_allclose(UniformSphereLaw(2).log_mgf(v), math.log(val / (2 * math.pi)), rtol=1e-11, atol=1e-15)


@pytest.mark.parametrize("r", [1e-6, 5e-5, 1e-4, 2e-4, 0.7, 1.999, 2.0, 2.001, 9.0, 300.0])
def test_uniform_sphere_s2_closed_form(r):
    # d = 3: int exp(<v,y>) dsigma = sinh(r)/r; log written stably as r + log1p(-e^{-2r}) - log(2r)
    ref = r + math.log1p(-math.exp(-2 * r)) - math.log(2 * r) if r > 1e-3 else r * r / 6 - r**4 / 180
    v = np.array([r, 0.0, 0.0]) @ np.linalg.qr(RNG.standard_normal((3, 3)))[0]
    assert_allclose(UniformSphereLaw(3).log_mgf(v), ref, rtol=1e-10, atol=1e-20)


def test_gaussian_mixture_against_gauss_hermite():
    # d = 2, two components: E exp(<v, m + s z>) by a tensor Gauss-Hermite rule (exact for polynomials;
    # 60 nodes resolve exp(s v z) for |s v| <= 2 to ~1e-14)
    means, s, w = np.array([[0.5, -0.3], [-1.0, 0.8]]), 0.7, np.array([0.3, 0.7])
    law = GaussianMixtureLaw(means, s, w)
    z, wz = hermegauss(60)
    wz = wz / wz.sum()
    for v in (np.array([0.4, 1.1]), np.array([-2.0, 0.5])):
        tot = 0.0
        for k in range(2):
            e1 = np.exp(v[0] * (means[k, 0] + s * z)) @ wz
            e2 = np.exp(v[1] * (means[k, 1] + s * z)) @ wz
            tot += w[k] * e1 * e2
        assert_allclose(law.log_mgf(v), math.log(tot), rtol=1e-12)


def test_discrete_law_and_feature_matrix_against_loops():
    atoms = RNG.standard_normal((4, 3))
    law = DiscreteLaw(atoms, np.array([0.1, 0.2, 0.3, 0.4]))
    x, A = RNG.standard_normal((6, 3)), RNG.standard_normal((5, 3, 3))
    F = log_partition_features(x, A, law)
    ref = np.array(
        [
            [
                math.log(sum(w * math.exp(xk @ Ap @ y) for w, y in zip(law.weights, atoms, strict=True)))
                for Ap in A
            ]
            for xk in x
        ]
    )
    assert F.shape == (6, 5)
    assert_allclose(F, ref, rtol=1e-13)


def test_affine_complement_is_orthonormal_and_orthogonal_to_affine():
    x = sphere_points(20, 3, seed=1)
    U = affine_complement(x)
    assert U.shape == (20, 16)
    assert_allclose(U.T @ U, np.eye(16), atol=1e-13)
    assert_allclose(U.T @ np.c_[np.ones(20), x], 0.0, atol=1e-13)


def test_dirac_is_not_injective_and_other_laws_are():
    x = sphere_points(20, 3, seed=2)
    P = [8, 64, 512]
    # a Dirac: features <x, A y0> are linear; after the projection only rounding is left
    d0 = injectivity_curve(dirac([0.0, 0.6, 0.8]), x, P, seed=3, scale=2.0)
    assert not d0["injective"]
    assert max(d0["rel_min"]) < 1e-13 and max(d0["sigma_max"]) < 1e-13
    # a single Gaussian: quadratic features span at most the 5 traceless quadratics on S^2 (dim 16 > 5)
    g1 = injectivity_curve(GaussianMixtureLaw(np.zeros((1, 3)), 0.5), x, P, seed=3, scale=2.0)
    assert not g1["injective"] and g1["rel_min"][-1] < 1e-13
    assert np.sum(np.asarray(g1["sv_last"]) > 1e-12 * g1["sv_last"][0]) == 5
    for law in (
        DiscreteLaw(sphere_points(5, 3, seed=4)),
        UniformSphereLaw(3),
        GaussianMixtureLaw(sphere_points(3, 3, seed=5), 0.5),
    ):
        cv = injectivity_curve(law, x, P, seed=3, scale=2.0)
        assert cv["injective"], law.name
        assert cv["rel_min"][0] == 0.0  # P = 8 < dim = 16: rank-deficient by construction
        assert cv["rel_min"][-1] > 1e-5


def test_sigma_min_converges_with_P():
    # the empirical Gram matrix is a Monte Carlo average: sigma_min^2 at P and 4P agree to O(P^-1/2)
    x = sphere_points(12, 3, seed=6)
    A = attention_parameters(8192, 3, seed=7, scale=2.0)
    law = UniformSphereLaw(3)
    s1 = ntk_singular_values(x, A[:2048], law)["sigma_min"]
    s2 = ntk_singular_values(x, A, law)["sigma_min"]
    assert s1 > 0 and abs(s1**2 / s2**2 - 1) < 0.3


def test_attention_parameters_seeded_and_scaled():
    a, b = attention_parameters(4000, 3, seed=1, scale=2.0), attention_parameters(4000, 3, seed=1, scale=2.0)
    assert np.array_equal(a, b)
    # entries of Q^T K: sum of d products of N(0, s^2/d) pairs -> variance s^4 / d = 16/3
    assert_allclose(a.var(), 16 / 3, rtol=0.05)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: DiscreteLaw(np.zeros(3)), r"atoms must be an array of shape \[k, d\]"),
        (lambda: DiscreteLaw(np.zeros((2, 3)), [0.5, 0.6]), "probability vector"),
        (lambda: GaussianMixtureLaw(np.zeros((2, 3)), -1.0), "sigma must be a finite number > 0"),
        (lambda: UniformSphereLaw(1), "d >= 2"),
        (lambda: affine_complement(np.zeros((4, 3))), r"need N > d \+ 1"),
        (lambda: attention_parameters(0, 3, seed=0), "P must be an integer >= 1"),
        (
            lambda: log_partition_features(np.zeros((3, 2)), np.zeros((1, 3, 3)), UniformSphereLaw(3)),
            r"A must have shape \[P, 2, 2\]",
        ),
        (
            lambda: log_partition_features(np.zeros((3, 2)), np.zeros((1, 2, 2)), UniformSphereLaw(3)),
            "R\\^3 but the points x in R\\^2",
        ),
        (lambda: injectivity_curve(UniformSphereLaw(3), np.zeros((9, 3)), [], seed=0), "non-empty"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_quick_study(quick_study):
    d, s = quick_study("ntk_injectivity")  # the session's quick run, with figures (tests/conftest.py)
    assert s["status"] == "done" and s["verdict"] == "holds"
    rows = {r["law"]: r for r in s["rows"]}
    assert rows["dirac"]["injective"] is False and rows["dirac"]["rel_min_at_Pmax_max"] < 1e-13
    for law in ("discrete", "uniform", "gaussian_mixture"):
        assert rows[law]["injective"] is True and rows[law]["rel_min_at_Pmax_min"] > 1e-5
    assert (d / "ntk_injectivity.png").read_bytes()[:4] == b"\x89PNG"


def test_study_parameters_refused():
    with pytest.raises(StudyConfigError, match="unknown token laws"):
        get_study("ntk_injectivity").config({"laws": ["diract"]})
    with pytest.raises(ValueError, match="N must exceed d"):
        study = get_study("ntk_injectivity")
        study.plan(study.config({"N": 4, "d": 3}))
