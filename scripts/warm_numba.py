"""Compile the numba kernels into the on-disk numba cache before the tests: ``python scripts/warm_numba.py``.

The first call of each compiled specialisation (kernel x dtype x variant) compiles it, 5-60 s each on one
core; ``cache=True`` keeps the result on disk (``__pycache__`` next to the sources, or ``NUMBA_CACHE_DIR``)
and every later process loads it in a fraction of a second. Without this step the compiles land in
whichever test first needs each specialisation, and both pytest-xdist workers may compile the same one at
the same time (a core wasted). Here the specialisations the test suite uses are compiled once, through the
public entry points on tiny inputs (so the types are exactly those of the tests), split over ``--jobs``
processes (default 2, the CI machine's cores).

The step only saves time: a job that fails is reported (its name and the error) and the script exits with
status 1 only under ``--strict`` (``tests/test_warm_numba.py`` runs every job); the tests still pass with a
cold cache, each compiling what it needs.

    python scripts/warm_numba.py [--jobs N] [--only NAME ...] [--list] [--strict]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback

os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # as in tests/conftest.py (read when numba is imported)


def _tokens(P, n, d, dtype, seed):
    import numpy as np

    x = np.random.default_rng(seed).normal(size=(P, n, d))
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(dtype)


def _heads(P, H, d, dtype, seed, symmetric):
    import numpy as np

    z = np.random.default_rng(seed).normal(size=(P, H, d, d))
    return ((z + np.swapaxes(z, -1, -2)) / 2 if symmetric else z).astype(dtype)


def kernel(dtype):
    """The kernel's public entry (every pass: half, ordered, exact row maxima)."""
    from attnflow.dynamics import numba_kernel

    x, D = _tokens(1, 40, 3, dtype, 0), _heads(1, 2, 3, dtype, 1, False)
    numba_kernel.pair_sums(x, D, 1.0)


def simulation(dtype, loop, symmetric, process):
    """A few steps of the simulator on the numba backend (the compiled loop, or the Python loop with the
    kernel and the compiled assembly); general heads make the compiled loop switch to its ordered-pair
    variant."""
    import torch

    import attnflow as af
    from attnflow.simulation import Simulator

    proc = {"ou": af.OrnsteinUhlenbeck(sigma2=0.5), "constant": af.Constant()}[process]
    model = af.TransformerModel(direction="ascent", beta=1.0, weights=proc, backend="numba")
    x0 = torch.from_numpy(_tokens(2, 12, 3, "float64", 2)[0])[None].repeat(2, 1, 1)
    D0 = torch.from_numpy(_heads(1, 2, 3, "float64", 3, symmetric)[0])
    sim = Simulator(model, x0, D0, dt=0.05, seed=7, ledger=True, loop=loop, dtype=dtype)
    for _ in range(3):
        sim.step()


def pde_sums():
    """The quadrature sums of the mean-field PDE (one float64 specialisation)."""
    import numpy as np

    from attnflow.pde.quadsums import quadrature_sums

    x = _tokens(1, 30, 3, "float64", 4)[0]
    quadrature_sums(x, np.full(30, 1 / 30), np.eye(3), 1.0)


def fastsum():
    """The fast summation's numba kernels (moments and evaluation on S^2)."""
    import torch

    from attnflow.dynamics.fastsum import pair_sums_fastsum
    from attnflow.geometry import Sphere

    x = torch.from_numpy(_tokens(1, 50, 3, "float64", 5))
    D = torch.from_numpy(_heads(1, 2, 3, "float64", 6, True))
    pair_sums_fastsum(x, D, 1.0, geometry=Sphere(), impl="numba")


#: name -> (callable, arguments); ordered by cost (the longest compiles first), so that the split over the
#: processes balances. The specialisations are those a cold-cache run of the default tier compiled
#: (listed from its numba cache index): the compiled loop in float64 with both kernel variants (symmetric
#: heads: half pass only; general heads: every pass), in float32 with the half pass only
JOBS = {
    "fused-float64-general": (simulation, ("float64", "fused", False, "ou")),
    "fused-float32-symmetric": (simulation, ("float32", "fused", True, "constant")),
    "kernel-float64": (kernel, ("float64",)),
    "kernel-float32": (kernel, ("float32",)),
    "python-loop-float64": (simulation, ("float64", "python", False, "ou")),
    "python-loop-float32": (simulation, ("float32", "python", False, "ou")),
    "fused-float64-symmetric": (simulation, ("float64", "fused", True, "constant")),
    "fastsum": (fastsum, ()),
    "pde-sums": (pde_sums, ()),
}


def run_jobs(names: list[str]) -> list[tuple[str, float, str | None]]:
    """Run the named jobs in this process: ``[(name, seconds, error or None)]``."""
    out = []
    for name in names:
        fn, args = JOBS[name]
        t0 = time.perf_counter()
        try:
            fn(*args)
            err = None
        except Exception:  # noqa: BLE001 - reported by name; the tests compile what is missing
            err = traceback.format_exc(limit=3)
        out.append((name, time.perf_counter() - t0, err))
    return out


def split(names: list[str], jobs: int) -> list[list[str]]:
    """Deal the jobs (ordered longest first) to ``jobs`` processes in turn."""
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1; got {jobs}. Give the number of cores to use.")
    parts = [names[k::jobs] for k in range(jobs)]
    return [p for p in parts if p]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run these jobs only (see --list)")
    ap.add_argument("--list", action="store_true", help="print the jobs and exit")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a job fails")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)  # internal: run these jobs here
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(JOBS))
        return 0
    if args.worker:
        failed = 0
        for name, seconds, err in run_jobs(args.worker):
            print(f"warm-up: {name} {seconds:.1f} s" + (f" FAILED\n{err}" if err else ""), flush=True)
            failed += err is not None
        return 1 if failed else 0
    names = list(JOBS)
    if args.only:
        unknown = [n for n in args.only if n not in JOBS]
        if unknown:
            ap.error(f"unknown job(s) {unknown}; valid: {', '.join(JOBS)}")
        names = [n for n in names if n in args.only]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", *part])
        for part in split(names, args.jobs)
    ]
    failed = sum(p.wait() != 0 for p in procs)
    print(
        f"warm-up: numba kernels compiled into the cache in {time.perf_counter() - t0:.0f} s "
        f"({len(names)} jobs, {len(procs)} processes{f', {failed} failed' if failed else ''})",
        flush=True,
    )
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
