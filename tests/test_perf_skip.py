"""Work skipped when it is zero (issue 12): no Ito sums when the weight noise g is 0, no ledger sums when
the ledger is off; the results are the same, bit for bit.

References: the same computation with the skipped work done (``ito=True``), compared with
``torch.equal``; and the simulator's field calls, recorded by a spy on the numba backend.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnflow as af
from attnflow.dynamics import field, numba_kernel
from attnflow.dynamics.assembly import ledger_rates
from attnflow.simulation import Simulator

NON_ITO = ("velocity", "lse", "energy", "G2", "Ghat2", "grad", "second_moment", "head_mass")


def inputs(seed=0, P=2, n=40, H=3, d=3, symmetric=True, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(P, n, d, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    z = torch.randn(P, H, d, d, generator=g, dtype=torch.float64)
    D = z + z.transpose(-1, -2) if symmetric else z
    return x.to(dtype), D.to(dtype)


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("dtype", [torch.float64])  # float32 runs the same loop code (compile time saved)
def test_field_without_ito_sums_is_identical(backend, symmetric, dtype):
    x, D = inputs(symmetric=symmetric, dtype=dtype)
    model = af.TransformerModel(direction="ascent", beta=1.2, backend=backend)
    with_ito = field.evaluate(model, x, D, None, 0.0, ledger=True, ito=True)
    without = field.evaluate(model, x, D, None, 0.0, ledger=True, ito=False)
    for key in NON_ITO:
        a, b = getattr(with_ito, key), getattr(without, key)
        assert torch.equal(a, b), key
    assert with_ito.ito_moment is not None
    assert without.ito_moment is None and without.ito_full is None


def test_zero_noise_rate_without_ito_factors_is_zero_and_nonzero_noise_refuses():
    x, D = inputs()
    model = af.TransformerModel(direction="ascent", beta=1.0, backend="numba")
    fe = field.evaluate(model, x, D, None, 0.0, ledger=True, ito=False)
    drift = torch.zeros_like(D)
    rates = ledger_rates(
        fe, D, beta=1.0, noise_kind="symmetric", scale=1.0, scale_rate=0.0, drift=drift, g=0.0
    )
    assert torch.equal(rates[1], torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="ito=True"):
        ledger_rates(fe, D, beta=1.0, noise_kind="full", scale=1.0, scale_rate=0.0, drift=drift, g=0.3)


class _Spy:
    def __init__(self, monkeypatch):
        self.calls = []
        inner = numba_kernel.pair_sums

        def spy(*args, **kwargs):
            self.calls.append((kwargs.get("ledger", True), kwargs.get("ito", True)))
            return inner(*args, **kwargs)

        monkeypatch.setattr(numba_kernel, "pair_sums", spy)


def _run(model, ledger, steps=12, force_ito=False):
    x0 = af.tokens.uniform(2, 30, 3, seed=1)
    D0 = af.heads.symmetric_gaussian(1, 2, 3, seed=2)[0]
    # the Python loop, whose field calls go through the kernel's Python wrapper (the spy); the compiled loop
    # of simulation.fused passes the same ito flag to the same compiled kernel (tests/test_fused_loop.py)
    sim = Simulator(model, x0, D0, dt=0.05, seed=7, ledger=ledger, loop="python")
    if force_ito:  # the same run with the Ito sums computed (the path before issue 12)
        sim.field = _ForceIto(sim.field)
    recs = [sim.record()]
    for _ in range(steps):
        sim.step()
        recs.append(sim.record())
    return recs


class _ForceIto:
    """A VectorField wrapper that always asks for the Ito sums."""

    def __init__(self, inner):
        self._inner = inner

    def __call__(self, x, D, t, *, ledger=False, raw=False, ito=True):
        return self._inner(x, D, t, ledger=ledger, raw=raw, ito=True)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.mark.parametrize("weights", ["constant", "ou"])
def test_simulator_skips_ito_sums_only_without_noise_and_results_are_identical(weights, monkeypatch):
    proc = af.Constant() if weights == "constant" else af.OrnsteinUhlenbeck(sigma2=0.5)
    model = af.TransformerModel(direction="ascent", beta=1.0, weights=proc, backend="numba")
    spy = _Spy(monkeypatch)
    skipped = _run(model, ledger=True)
    ledger_calls = [c for c in spy.calls if c[0]]
    assert ledger_calls and all(ito == (weights == "ou") for _, ito in ledger_calls)
    spy.calls.clear()
    reference = _run(model, ledger=True, force_ito=True)
    assert all(ito for led, ito in spy.calls if led)
    for a, b in zip(skipped, reference, strict=True):
        assert torch.equal(a.x, b.x)
        assert a.scalars.keys() == b.scalars.keys()
        for key in a.scalars:
            assert torch.equal(a.scalars[key], b.scalars[key]), key
    if weights == "ou":
        assert float(reference[-1].scalars["dtE_ito"].abs().min()) > 0
    else:
        assert torch.equal(skipped[-1].scalars["dtE_ito"], torch.zeros(2, dtype=torch.float64))


def test_ledger_off_asks_for_no_ledger_sums(monkeypatch):
    model = af.TransformerModel(
        direction="ascent", beta=1.0, weights=af.OrnsteinUhlenbeck(sigma2=0.5), backend="numba"
    )
    spy = _Spy(monkeypatch)
    off = _run(model, ledger=False)
    assert spy.calls and not any(led for led, _ in spy.calls)
    on = _run(model, ledger=True)
    for a, b in zip(off, on, strict=True):  # the trajectory does not depend on the ledger
        assert torch.equal(a.x, b.x)
    assert off[-1].scalars == {} and "energy" in on[-1].scalars
    assert np.isfinite(on[-1].scalars["energy"].numpy()).all()
