"""CPU seconds of the full ``pde_particles`` study by phase (issue 27 part 2), on one thread as its tasks run.

``python benchmarks/pde_particles_phases.py --part s1|s2|checks --json FILE [--reps K] [--step-frac F]``

Follows :func:`attnflow.studies.pde_particles._manifold` phase by phase with the full config: the PDE run,
its refined self-convergence run, per particle count n one particle system (``--reps``: replicates timed
per n, default 1; the study's count multiplies), the smoothed L2 distances and the W2 computations, the
particles' dt check, the density snapshots; ``checks`` times the closed forms, the ledger order and the
ducc0 bench. ``--step-frac F`` runs the particle systems for the fraction F of the study's time t1 (same
dt) for n >= ``--frac-min-n``, and scales their time by 1/F (said in the output: ``scaled``). CPU time
(``time.process_time``) of this process: on a shared machine the wall clock measures the other users.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from attnflow.model.transformer import TransformerModel
from attnflow.observables.density import smoothed_l2_distance, wasserstein2_to_density
from attnflow.pde import DensitySolver, make_grid, sample_density, solve_density, von_mises_fisher_mixture
from attnflow.studies import pde_particles as pp
from attnflow.studies.common import whole_steps
from attnflow.studies.multihead_common import one_thread

#: the backend of the particle systems below the fast summation's n (torch before this branch's change)
_SMALL_BACKEND = "numba" if hasattr(pp, "FASTSUM_MIN_N") else "torch"


def _t(fn, *a, **k):
    c0 = time.process_time()
    out = fn(*a, **k)
    return out, time.process_time() - c0


def manifold(part: str, reps: int, frac: float, frac_min_n: int, only_n: list[int] | None) -> dict:
    c = pp.PdeParticlesConfig()
    if part == "s1":
        model, _ = pp._s1_model(c)
        heads = np.array(pp._S1_HEADS)
        u0_fn = lambda g: von_mises_fisher_mixture(g, pp._s1_centres(), 6.0, [0.5, 0.3, 0.2])  # noqa: E731
        d, ns, R, L, w2max = 2, c.s1_n, c.s1_replicates, c.s1_L, 0
    else:
        heads, cen = pp._s2_setup(c.seed)
        model = TransformerModel(direction="ascent", attention="softmax", beta=1.0)
        u0_fn = lambda g: von_mises_fisher_mixture(g, cen, 5.0)  # noqa: E731
        d, ns, R, L, w2max = 3, c.s2_n, c.s2_replicates, c.s2_L, c.s2_w2_max_n
    out: dict = {"part": part, "phases": {}, "per_n": []}
    ph = out["phases"]
    grid = make_grid(d, L)
    u0 = u0_fn(grid)
    steps = whole_steps(c.t1, c.dt_pde)
    ds, ph["pde_run"] = _t(
        solve_density,
        DensitySolver(model, u0, heads, grid=grid, dt=c.dt_pde),
        steps,
        record_every=max(1, steps // 20),
    )
    uT = pp._coef(ds)
    Lr = (3 * L) // 2
    gr = make_grid(d, Lr)
    ref, ph["pde_refined_run"] = _t(
        solve_density,
        DensitySolver(model, u0_fn(gr), heads, grid=gr, dt=c.dt_pde / 2),
        2 * steps,
        record_every=4 * steps,
    )
    fine = 16 if d == 2 else 2
    (p0, w0, v0), a = _t(grid.fine, u0, fine)
    (pT, wT, vT), b = _t(grid.fine, uT, fine)
    ph["fine_grids"] = a + b
    out["fine_nodes"] = int(p0.shape[0])
    for n, Rn in zip(ns, R, strict=True):
        if only_n and n not in only_n:
            continue
        f = frac if n >= frac_min_n else 1.0
        t1 = c.t1 * f
        row = {"n": n, "replicates_in_study": Rn, "reps_timed": min(reps, Rn), "step_frac": f}
        acc = {"sample": 0.0, "particles": 0.0, "l2": 0.0, "w2": 0.0}
        for r in range(min(reps, Rn)):
            x0, s = _t(sample_density, grid, u0, n, seed=c.seed + 1000 * r + n)
            acc["sample"] += s
            xT, s = _t(pp._particles, model, x0, heads, t1, c.dt_particles)
            acc["particles"] += s / f
            _, s1 = _t(smoothed_l2_distance, x0, grid, u0, c.kappa_smooth)
            _, s2 = _t(smoothed_l2_distance, xT, grid, uT, c.kappa_smooth)
            acc["l2"] += s1 + s2
            if d == 2 or n <= w2max:
                _, s1 = _t(wasserstein2_to_density, x0, p0, w0, v0)
                _, s2 = _t(wasserstein2_to_density, xT, pT, wT, vT)
                acc["w2"] += s1 + s2
        k = min(reps, Rn)
        row["per_replicate_s"] = {key: v / k for key, v in acc.items()}
        row["study_s"] = {key: v / k * Rn for key, v in acc.items()}
        row["backend"] = "fastsum" if n >= getattr(pp, "FASTSUM_MIN_N", 3000) else _SMALL_BACKEND
        out["per_n"].append(row)
        print(json.dumps(row), flush=True)
    n_mid = ns[len(ns) // 2]
    if not only_n or n_mid in only_n:
        x0 = sample_density(grid, u0, n_mid, seed=c.seed + n_mid)
        _, a = _t(pp._particles, model, x0, heads, c.t1, c.dt_particles)
        _, b = _t(pp._particles, model, x0, heads, c.t1, c.dt_particles / 2)
        ph["particle_dt_check"] = a + b
    res = {"_ds": ds, "_grid": grid}
    _, ph["density_snapshots"] = _t(pp._densities, part, res)
    return out


def checks() -> dict:
    c = pp.PdeParticlesConfig()
    ph = {}
    _, ph["closed_forms"] = _t(pp._closed_forms, c)
    _, ph["ledger_order"] = _t(pp._ledger_order, c, pp._s1_model(c)[1])
    _, ph["sht_ducc0"] = _t(pp._sht_bench)
    return {"part": "checks", "phases": ph}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("s1", "s2", "checks"), required=True)
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--step-frac", type=float, default=1.0)
    ap.add_argument("--frac-min-n", type=int, default=30000)
    ap.add_argument("--only-n", type=str, default="")
    a = ap.parse_args()
    only = [int(s) for s in a.only_n.split(",") if s]
    w0 = time.perf_counter()
    with one_thread():
        out = checks() if a.part == "checks" else manifold(a.part, a.reps, a.step_frac, a.frac_min_n, only)
    out["wall_s"] = time.perf_counter() - w0
    out["cpu_s"] = time.process_time()
    out["commit"] = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    out["machine"] = platform.node()
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(out, indent=1))
    print(json.dumps(out["phases"], indent=1))


if __name__ == "__main__":
    main()
