"""The compiled assembly of the numba backend against :func:`attnflow.dynamics.assembly.assemble`.

Both take the same pair sums; every output of the compiled one must equal the PyTorch assembly's (the one
home of the formulas) to round-off: float64 ledger quantities to 1e-13 relative to their largest entry, the
velocity and lse within an ulp of the working precision. Cases: symmetric and general heads (column
sums), d = 2, 3 (the scalar d = 3 loop) and 5, sphere and flat space, ledger and Ito sums on and off, and
row masses beyond float64's comfortable range (the log-space harmonic mean).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnflow.dynamics.assembly import assemble
from attnflow.dynamics.numba_assembly import assemble_arrays, assemble_numba
from attnflow.dynamics.numba_kernel import pair_sums
from attnflow.dynamics.pairsums import PairSums
from attnflow.geometry import get_geometry

LEDGER_KEYS = ("energy", "G2", "Ghat2", "grad", "second_moment", "head_mass", "ito_moment", "ito_full")


def _inputs(P, n, H, d, symmetric, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(P, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    z = rng.normal(size=(P, H, d, d))
    D = z + np.swapaxes(z, -1, -2) if symmetric else z
    V = rng.normal(size=(P, H, d, d))
    return x.astype(dtype), D.astype(dtype), V.astype(dtype)


def _as_pairsums(s: dict) -> PairSums:
    keys = ("row_shift", "row_sum", "row_x", "row_q", "col_shift", "col_x")
    return PairSums(**{k: None if s.get(k) is None else torch.from_numpy(s[k]) for k in keys})


def _compare(ref, got, dtype, ledger, ito_expected):
    # Both assemblies take the same pair sums (no scores, no exponentials: nothing here amplifies
    # round-off): the velocity and lse are a few multiplications, one division and length-d sums per
    # entry, so they agree to a few ulp of the working precision (u = 6e-8 / 1.1e-16; 2e-7 and 1e-14 are
    # ~4 and ~90 u). The float64 ledger sums O(n H) such terms per path in a different order: O(n H) u
    # relative to the largest entry, <= 210 u = 2.3e-14 for n = 70, H = 3, below 1e-13.
    ulp = 2e-7 if dtype == np.float32 else 1e-14
    for key in ("velocity", "lse", "raw_velocity"):
        a, b = getattr(ref, key), getattr(got, key)
        assert a.dtype == b.dtype and a.shape == b.shape, key
        err = float((a.double() - b.double()).abs().max() / a.double().abs().max())
        assert err <= ulp, f"{key}: relative error {err:.2e} > {ulp:g}"
    if not ledger:
        assert all(getattr(got, k) is None for k in LEDGER_KEYS)
        return
    for key in LEDGER_KEYS:
        a, b = getattr(ref, key), getattr(got, key)
        if key in ("ito_moment", "ito_full") and not ito_expected:
            assert a is None and b is None, key
            continue
        assert b is not None and b.dtype == torch.float64 and a.shape == b.shape, key
        err = float((a - b).abs().max() / a.abs().max())
        assert err <= 1e-13, f"{key}: relative error {err:.2e} > 1e-13"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "general"])
@pytest.mark.parametrize("d", [3, 2, 5])
@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_compiled_assembly_equals_torch_assembly(dtype, symmetric, d, geometry):
    x, D, V = _inputs(2, 70, 3, d, symmetric, dtype)
    s = pair_sums(x, D, 1.3, ledger=True, ito=True)
    xt, Dt, Vt = torch.from_numpy(x), torch.from_numpy(D), torch.from_numpy(V)
    geo = get_geometry(geometry)
    ref = assemble(_as_pairsums(s), xt, Dt, Vt, 1.3, geo, ledger=True, raw=True)
    got = assemble_numba(s, xt, Dt, Vt, 1.3, geo, ledger=True, raw=True)
    # off the sphere the kernel has no |x_j|^2 sums: neither assembly gives Ito factors
    _compare(ref, got, dtype, True, geometry == "sphere")


@pytest.mark.parametrize("ledger, ito", [(False, False), (True, False)])
def test_without_ledger_or_ito_sums(ledger, ito):
    x, D, V = _inputs(3, 40, 4, 3, True, np.float64, seed=1)
    s = pair_sums(x, D, 0.7, ledger=ledger, ito=ito)
    xt, Dt, Vt = torch.from_numpy(x), torch.from_numpy(D), torch.from_numpy(V)
    geo = get_geometry("sphere")
    ref = assemble(_as_pairsums(s), xt, Dt, Vt, 0.7, geo, ledger=ledger, raw=True)
    got = assemble_numba(s, xt, Dt, Vt, 0.7, geo, ledger=ledger, raw=True)
    _compare(ref, got, np.float64, ledger, False)


def test_row_masses_outside_float64_take_the_log_space_harmonic_mean():
    # row masses exp(lse) of 1e-300 and 1e300 (shifts of -700 and +690): 1/m would lose or overflow,
    # the log-space branch must still give b(x_i) = ((1/H) sum_h 1/m_h)^{-1} of the PyTorch assembly
    rng = np.random.default_rng(3)
    P, n, H, d = 2, 9, 3, 3
    x, D, V = _inputs(P, n, H, d, False, np.float64, seed=3)
    shift = rng.choice([-700.0, 0.0, 690.0], size=(P, H, n))
    sums = {
        "row_shift": shift,
        "row_sum": rng.uniform(0.5, 2.0, size=(P, H, n)),
        "row_x": rng.normal(size=(P, H, n, d)),
        "row_q": rng.uniform(0.1, 1.0, size=(P, H, n)),
        "col_shift": None,
        "col_x": None,
    }
    xt, Dt, Vt = torch.from_numpy(x), torch.from_numpy(D), torch.from_numpy(V)
    geo = get_geometry("sphere")
    ref = assemble(_as_pairsums(sums), xt, Dt, Vt, 1.0, geo)
    got = assemble_numba(sums, xt, Dt, Vt, 1.0, geo)
    assert torch.isfinite(ref.G2).all()
    # the log-space harmonic mean of H = 3 row masses and a sum over n = 9 tokens: O(n H) u ~ 3e-15 relative
    err = float(((ref.G2 - got.G2).abs() / ref.G2.abs()).max())
    assert err <= 1e-13, f"G2 with extreme row masses: relative error {err:.2e}"


def test_same_inputs_same_bits():
    x, D, V = _inputs(4, 130, 5, 3, False, np.float32, seed=4)
    s = pair_sums(x, D, 1.0)
    a = assemble_arrays(s, x, D, V, 1.0, sphere=True)
    junk = [np.empty(17 * k + 3) for k in range(20)]  # move the allocator
    b = assemble_arrays(
        {k: None if v is None else np.copy(v) for k, v in s.items()}, x.copy(), D, V, 1.0, sphere=True
    )
    del junk
    for key, value in a.items():
        if value is not None:
            assert np.array_equal(value, b[key]), key


def test_unknown_geometry_is_refused():
    x, D, V = _inputs(1, 5, 1, 3, True, np.float64)
    s = pair_sums(x, D, 1.0)

    class Other:
        name = "hyperbolic"

    with pytest.raises(ValueError, match="sphere and flat space: got geometry 'hyperbolic'"):
        assemble_numba(s, torch.from_numpy(x), torch.from_numpy(D), torch.from_numpy(V), 1.0, Other())


def test_mobility_and_drift_moment_rows_have_one_definition_both_assemblies_call():
    # issue 30: b(x_i) (eq. (36)) and the rows y = e^M row_x of C_h (eq. (147)) are defined once in
    # dynamics/assembly.py; the PyTorch assembly calls them by name and the compiled one compiles them
    import math

    from attnflow.dynamics import assembly, numba_assembly

    for name in ("harmonic_mobility", "row_moment"):
        assert name in assembly.assemble.__code__.co_names, name
        assert getattr(numba_assembly, f"_{name}").py_func is getattr(assembly, name)
    # the home against the definition: H = 3 heads of masses m_h = exp(lse_h)/n, b = harmonic mean of m_h
    n, lse = 7, [0.3, -1.2, 2.5]
    m = [math.exp(v) / n for v in lse]
    harmonic = 3 / sum(1 / mh for mh in m)
    # a few float64 operations on O(1) numbers: 1e-15 relative
    assert math.isclose(
        assembly.harmonic_mobility(sum(math.exp(-v) for v in lse), 3, n), harmonic, rel_tol=1e-15
    )
    assert assembly.row_moment(2.0, 0.25) == 0.5
