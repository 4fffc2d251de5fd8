"""What the compiled loop compiles: only the kernel's variant that a run calls (issue 27 part 1).

The kernel (``pair_sums_core``) and the compiled assembly (``assemble_core``) choose their serial or parallel
passes with ``if parallel is None`` on their argument ``parallel``; numba prunes that branch before typing
only when the argument's type decides it (``none``, or a literal such as ``Literal[bool](True)``), never for a
plain ``bool``. The compiled loop is therefore built once per variant with ``parallel`` a constant of its
closure (:func:`attnflow.simulation.fused._compiled_loop`): as an argument of type ``bool`` the main job's
first run compiled both variants (92 specialisations, 64.4 s on an idle machine;
docs/benchmarks/compile-2026-12-03c.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from numba import njit

from attnflow.simulation import fused


def test_each_variant_of_the_loop_holds_parallel_as_a_constant_not_an_argument():
    for key, run in fused._RUN.items():
        code = run.py_func.__code__
        assert "parallel" not in code.co_varnames[: code.co_argcount], key
        cells = dict(zip(code.co_freevars, (c.cell_contents for c in run.py_func.__closure__), strict=True))
        assert cells["parallel"] is key
    assert set(fused._RUN) == {None, True}


@pytest.mark.parametrize("module", ["numba_kernel", "numba_assembly"])
def test_the_python_entry_points_call_a_variant_that_holds_parallel_as_a_constant(module):
    """``pair_sums`` / ``assemble_arrays`` (the numba backend of the Python loop) call ``_CORE[parallel]``:
    with ``parallel`` a plain ``bool`` argument of the core, a parallel call compiled the serial passes
    too."""
    import importlib

    mod = importlib.import_module(f"attnflow.dynamics.{module}")
    assert set(mod._CORE) == {None, True}
    for key, core in mod._CORE.items():
        code = core.py_func.__code__
        assert "parallel" not in code.co_varnames[: code.co_argcount], key
        cells = dict(zip(code.co_freevars, (c.cell_contents for c in core.py_func.__closure__), strict=True))
        assert cells["parallel"] is key


def _toy():
    """Fresh dispatchers (numba keeps compiled signatures per dispatcher object) of the shape the design rests
    on: a callee that branches on ``parallel is None`` between two compiled passes."""
    serial = njit(lambda v: v + 1.0)
    par = njit(lambda v: v * 2.0)

    def core(v, parallel):
        if parallel is None:
            return serial(v)
        return par(v)

    return serial, par, njit(core)


def test_a_closure_constant_prunes_the_other_variant_and_a_bool_argument_does_not():
    serial, par, core = _toy()

    def loop(parallel):
        @njit
        def run(v):
            return core(v, parallel)

        return run

    assert loop(True)(3.0) == 6.0
    assert par.signatures and not serial.signatures  # the serial branch was never typed nor compiled
    serial, par, core = _toy()
    with_argument = njit(lambda v, parallel: core(v, parallel))
    assert with_argument(3.0, True) == 6.0
    assert serial.signatures and par.signatures  # a plain bool: both branches compiled


_PROBE = r"""
import json
from numba.core import event
import attnflow as af
from attnflow.simulation import Simulator

model = af.TransformerModel(direction="descent", attention="softmax", beta=1.0,
                            weights=af.OrnsteinUhlenbeck(sigma2=1.0))
out = {}
for name in ("parallel", "serial"):  # the parallel first: passes compiled before leave no event later
    with event.install_recorder("numba:compile") as rec:
        P = 1 if name == "serial" else 2
        x0 = af.tokens.uniform(paths=P, n=12, d=3, seed=0)
        D0 = af.heads.symmetric_gaussian(paths=P, heads=2, d=3, seed=0)
        sim = Simulator(model, x0, D0, dt=1e-2, seed=0)
        sim.advance(2)
        assert sim.loop == "fused", sim.loop
    out[name] = sorted({ev.data["dispatcher"].py_func.__qualname__ for _, ev in rec.buffer
                        if ev.data and ev.data.get("dispatcher") is not None})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_run_compiles_only_its_own_variant_of_the_kernel_passes(tmp_path):
    # a fresh cache, two numba threads; the threshold puts the 2-path run on the parallel passes and the
    # 1-path run on the serial ones, in one process as a job would (the parallel run first: a pass it
    # compiled needlessly would be compiled already when the serial run asks for it, and leave no event)
    env = {
        **os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_NUM_THREADS": "2",
        "ATTNFLOW_PARALLEL_MIN_PAIRS": str(2 * 2 * 12 * 12), "OMP_NUM_THREADS": "1",
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    serial_passes = {"half_pass_serial", "_token_pass_serial", "_head_pass_serial"}
    parallel_passes = {"half_pass", "_token_pass", "_head_pass"}
    assert parallel_passes <= set(out["parallel"]) and not serial_passes & set(out["parallel"]), out
    # the serial run then compiles the serial passes (not compiled before) and no parallel one
    assert serial_passes <= set(out["serial"]) and not parallel_passes & set(out["serial"]), out
