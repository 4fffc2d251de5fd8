"""The numba kernel gives the same bits for the same inputs wherever its buffers are allocated.

Before issue 12 the kernel's loops that reduce (row sums) and also add into a column buffer produced
results that differed in the last bit with the heap state (measured on the general path, 4-6 of 60 calls
inside a simulation). The reference is the kernel itself, called again on copies of the same inputs after
allocating arrays of assorted sizes; equality is exact (``np.array_equal``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import attnflow as af
from attnflow.dynamics import numba_kernel
from attnflow.simulation import Simulator


@pytest.mark.parametrize("heads", ["symmetric", "general"])
@pytest.mark.parametrize("ito", [True, False])
def test_kernel_repeats_bit_for_bit_under_heap_churn(heads, ito, monkeypatch):
    inner = numba_kernel.pair_sums
    mismatches, calls = [], []

    def checked(x, D, beta, **kw):
        out = inner(x, D, beta, **kw)
        calls.append(1)
        for r in range(4):
            junk = [np.empty(13 * k + 1) for k in range(7 * r)]  # move the allocator's next addresses
            again = inner(x.copy(), D.copy(), beta, **kw)
            del junk
            for key, value in out.items():
                if value is not None and not np.array_equal(value, again[key]):
                    mismatches.append((len(calls), r, key))
        return out

    monkeypatch.setattr(numba_kernel, "pair_sums", checked)
    if heads == "symmetric":
        D0 = af.heads.symmetric_gaussian(1, 2, 3, seed=2)[0]
    else:
        D0 = torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    proc = af.OrnsteinUhlenbeck(sigma2=0.5) if ito else af.Constant()
    model = af.TransformerModel(direction="ascent", beta=1.0, weights=proc, backend="numba")
    x0 = af.tokens.uniform(2, 30, 3, seed=1)
    sim = Simulator(model, x0, D0, dt=0.05, seed=7, ledger=True, loop="python")  # calls through the wrapper
    for _ in range(12):
        sim.step()
    assert len(calls) >= 12
    assert not mismatches, f"(call, churn round, key) with different bits: {mismatches[:5]}"


_SUMS = """
import hashlib, json

import numpy as np
from attnflow.dynamics import numba_kernel as nk
out = {}
CASES, PARALLEL = {CASES}, {PARALLEL}
for dtype, d, H in CASES:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 300, d)); x /= np.linalg.norm(x, axis=-1, keepdims=True)
    z = rng.normal(size=(20, H, d, d))
    x, D = x.astype(dtype), (z + np.swapaxes(z, -1, -2)).astype(dtype)
    # the kernel compiled with its symmetric half pass only (ordered=None, the compiled loop's first variant:
    # half the kernel's compile time); pair_sums runs the same half pass on these inputs
    half = nk.work_items(20, H, 300, True)
    code, _, *sums = nk.pair_sums_core(
        x, D, 1.0, nk.bound_range(dtype), False, True, True, False, False, False, *half, *half, None, PARALLEL
    )
    assert nk.PASSES[code] == "half", code
    for key, value in zip(("row_shift", "row_sum", "row_x", "row_q"), sums):
        out[f"{dtype}-d{d}-{key}"] = hashlib.sha256(value.tobytes()).hexdigest()
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "cases, parallel",
    [
        # the default tier: float64 and the serial passes (parallel=None) only, ~14 s CPU instead of ~50:
        # with the old Ito loop put back, this case alone differs in float64-d3-row_q (checked 2026-12-03),
        # as float32 and the parallel passes do
        pytest.param((("float64", 3, 2),), None, id="float64-serial"),
        pytest.param(
            (("float32", 3, 1), ("float64", 3, 2)), True, id="both-parallel", marks=pytest.mark.slow
        ),
    ],
)
def test_a_process_that_compiles_the_kernel_gives_the_bits_of_one_that_loads_it(tmp_path, cases, parallel):
    # a fresh numba cache: the first process compiles the kernel (and writes the cache), the second loads
    # it. Before the Ito loop of the d = 3 half pass was split (a loop that added into the column buffer and
    # reduced), their Ito sums differed in the last bits (row_q, rows of 32 pairs and more; float32 and
    # float64, the serial and the parallel passes). The any-d tiles still differ (d = 5 row sums, float32):
    # not covered here, see numba_passes' docstring
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_NUM_THREADS": "1"}
    code = _SUMS.replace("{CASES}", repr(cases)).replace("{PARALLEL}", repr(parallel))
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert any((tmp_path / "cache").rglob("*.nbi")), "the first process wrote no cache: nothing was compared"
    differ = sorted(k for k in runs[0] if runs[0][k] != runs[1][k])
    assert not differ, f"compiled and cache-loaded kernels differ in {differ}"
