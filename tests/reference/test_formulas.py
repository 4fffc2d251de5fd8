"""The shared formulas of tests/reference/formulas.py against explicit loops (they never import attnflow)."""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.testing import assert_allclose

from reference.formulas import attention_field, energy, harmonic_mean, head_energies


def _inputs(P=2, n=5, H=3, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(P, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x, rng.normal(size=(P, H, d, d)), rng.normal(size=(P, H, d, d))


def test_energy_and_head_energies_are_the_double_sums() -> None:
    x, D, _ = _inputs()
    P, n, H, beta = x.shape[0], x.shape[1], D.shape[1], 1.7
    loops = np.zeros((P, H))
    for p in range(P):
        for h in range(H):
            for i in range(n):
                for j in range(n):
                    loops[p, h] += math.exp(beta * x[p, i] @ D[p, h] @ x[p, j])
    assert_allclose(head_energies(x, D, beta), loops / (2 * beta * n * n), rtol=1e-14)
    assert_allclose(energy(x, D, beta), loops.sum(1) / (2 * beta * H * n * n), rtol=1e-14)
    assert_allclose(
        energy(torch.from_numpy(x), torch.from_numpy(D), beta).numpy(), energy(x, D, beta), rtol=1e-15
    )


def test_harmonic_mean() -> None:
    assert_allclose(harmonic_mean(np.array([[1.0, 4.0, 4.0]]), axis=1), [2.0], rtol=1e-15)


def test_attention_field_is_the_softmax_average_of_the_heads() -> None:
    x, D, V = _inputs()
    beta = 0.8
    for values in (None, V):
        ref = np.zeros_like(x)
        for p in range(x.shape[0]):
            for h in range(D.shape[1]):
                Vh = D[p, h] if values is None else values[p, h]
                for i in range(x.shape[1]):
                    w = np.array([math.exp(beta * x[p, i] @ D[p, h] @ xj) for xj in x[p]])
                    ref[p, i] += (w / w.sum()) @ (x[p] @ Vh.T) / D.shape[1]
        assert_allclose(attention_field(x, D, values, beta, tangent=False), ref, rtol=1e-13)
        tangent = ref - np.sum(ref * x, -1, keepdims=True) * x
        assert_allclose(attention_field(x, D, values, beta), tangent, rtol=1e-12, atol=1e-15)
        t = attention_field(
            torch.from_numpy(x),
            torch.from_numpy(D),
            None if values is None else torch.from_numpy(values),
            beta,
        )
        assert_allclose(t.numpy(), tangent, rtol=1e-12, atol=1e-15)
