"""One step of the density solver against its spherical-harmonic transform floor (issue 27 part 2).

``python benchmarks/pde_step.py [--L 20,30] [--steps 3] [--rounds 3] [--json FILE]``

The case is the ``pde_particles`` study's S^2 part (two symmetric heads of operator norm 1.5, beta = 1,
constant weights, a three-centre von Mises-Fisher mixture, dt = 0.01) at band limits 20 (the study's) and
30 (its self-convergence reference). Per band limit, interleaved over ``--rounds`` rounds (medians):

* ``step_numba`` / ``step_numpy``: one Lawson-RK4 step with the compiled quadrature sums
  (:mod:`attnflow.pde.quadsums`, the default) and with the NumPy form (N x N score matrix, the code before);
* ``kernel_sums``: the compiled sums of one head at one stage;
* ``floor``: the transforms a step cannot avoid, 4 stages x (one scalar synthesis of u on the grid + one
  spin-1 analysis of the flux for the divergence), timed with ducc0 directly on 1 and 2 threads.

Wall time and CPU time of the process (``time.process_time``) are both recorded: on a shared machine the CPU
time is the steadier measure. numba runs on ``NUMBA_NUM_THREADS`` threads (the study runs its tasks with
one torch thread; numba's pool is not limited by it).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _timed(fn, reps: int = 1) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - w) / reps, (time.process_time() - c) / reps


def main(argv=None) -> None:
    import ducc0

    from attnflow.model.transformer import TransformerModel
    from attnflow.pde import make_grid
    from attnflow.pde.initial import von_mises_fisher_mixture
    from attnflow.pde.quadsums import quadrature_sums
    from attnflow.pde.solver import DensitySolver
    from attnflow.studies.pde_particles import _s2_setup

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--L", default="20,30")
    ap.add_argument("--steps", type=int, default=3, help="steps per timed call")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    heads, centres = _s2_setup(0)
    model = TransformerModel(direction="ascent", attention="softmax", beta=1.0)
    load0 = os.getloadavg()
    rows = []
    for L in (int(v) for v in args.L.split(",")):
        g = make_grid(3, L)
        u0 = von_mises_fisher_mixture(g, centres, 5.0)
        solvers = {
            q: DensitySolver(model, u0, heads, grid=g, dt=0.01, quadrature=q) for q in ("numba", "numpy")
        }
        for s in solvers.values():
            s.step()  # compile, warm caches
        u = g.synthesis(solvers["numba"].u)
        flux = np.random.default_rng(0).normal(size=(2, g.nt, g.nphi))
        samples: dict[str, list] = {}
        for _ in range(args.rounds):
            for q, s in solvers.items():
                w, c = _timed(s.step, args.steps)
                samples.setdefault(f"step_{q}", []).append((w, c))
            samples.setdefault("kernel_sums", []).append(
                _timed(lambda g=g, u=u: quadrature_sums(g.points, g.weights * u, heads[0], 1.0), 5)
            )
            for nth in (1, 2):

                def floor(nth=nth, g=g, L=L, coef=solvers["numba"].u, flux=flux):
                    for _ in range(4):
                        ducc0.sht.synthesis_2d(
                            alm=coef[None], spin=0, lmax=L, geometry="GL",
                            ntheta=g.nt, nphi=g.nphi, nthreads=nth,
                        )  # fmt: skip
                        ducc0.sht.analysis_2d(map=flux, spin=1, lmax=L, geometry="GL", nthreads=nth)

                samples.setdefault(f"floor_{nth}thread", []).append(_timed(floor, 10))
        med = {
            k: {
                "wall_ms": 1e3 * float(np.median([v[0] for v in s])),
                "cpu_ms": 1e3 * float(np.median([v[1] for v in s])),
            }
            for k, s in samples.items()
        }
        diff = float(np.abs(solvers["numba"].u - solvers["numpy"].u).max())
        row = {
            "L": L,
            "nodes": int(g.points.shape[0]),
            "H": int(heads.shape[0]),
            "times": med,
            "max_coef_difference_numba_vs_numpy": diff,
            "step_over_floor_1thread_cpu": med["step_numba"]["cpu_ms"] / med["floor_1thread"]["cpu_ms"],
            "speedup_numba_vs_numpy_cpu": med["step_numpy"]["cpu_ms"] / med["step_numba"]["cpu_ms"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {
        "benchmark": "pde_step",
        "cpus": os.cpu_count(),
        "numba_threads": os.environ.get("NUMBA_NUM_THREADS"),
        "load_before": load0,
        "load_after": os.getloadavg(),
        "rows": rows,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
