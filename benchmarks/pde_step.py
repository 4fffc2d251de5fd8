"""One step of the density solver against its spherical-harmonic transform floor (issue 27 part 2).

``python benchmarks/pde_step.py [--L 20,30] [--steps 3] [--rounds 3] [--methods coefficients,numba,numpy]
[--json FILE]`` (per-step times) and ``python benchmarks/pde_step.py --sweep 8,12,16,20 [--L 20,30]
[--json FILE]`` (the coefficient method's difference from the compiled quadrature after the full run) and
``python benchmarks/pde_step.py --study-part quick|full [--quadrature auto|numba] [--json FILE]`` (the S^2 PDE
part of the study as it runs it: L and the reference at 1.5 L, dt / 2, with records; CPU and wall seconds)
and ``python benchmarks/pde_step.py --profile [--L 20,30] [--json FILE]`` (where a coefficient-method step's
CPU time goes: floor transforms, the method's own transforms, the matrix-vector product, the rest).

The case is the ``pde_particles`` study's S^2 part (two symmetric heads of operator norm 1.5, beta = 1,
constant weights, a three-centre von Mises-Fisher mixture, dt = 0.01) at band limits 20 (the study's) and
30 (its self-convergence reference). Per band limit, interleaved over ``--rounds`` rounds (medians):

* ``step_coefficients`` / ``step_numba`` / ``step_numpy``: one Lawson-RK4 step with the kernel sums as
  matrices on spherical-harmonic coefficients (:mod:`attnflow.pde.coefficients`, the default for these
  constant heads), with the compiled quadrature sums (:mod:`attnflow.pde.quadsums`) and with the NumPy
  form (N x N score matrix); ``build_coefficients``: building the coefficient matrices (once per run);
* ``floor_coefficients_1thread``: the transforms of the coefficient method per step, 4 stages x (the floor's
  two + per head one scalar synthesis of m_h and one gradient synthesis at the output band L');
* ``kernel_sums``: the compiled sums of one head at one stage;
* ``floor``: the transforms a step cannot avoid, 4 stages x (one scalar synthesis of u on the grid + one
  spin-1 analysis of the flux for the divergence), timed with ducc0 directly on 1 and 2 threads.

``--sweep``: the full run of the study (t1 = 1, dt = 0.01 at L = 20; dt = 0.005 at L = 30, the study's
self-convergence reference) with the compiled quadrature and with the coefficient method at each output band
L' of the list (plus the default band of :func:`attnflow.pde.coefficients.coefficient_band`): the largest
difference of the final densities on the grid relative to the largest density, and of the coefficients.

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
    ap.add_argument("--methods", default="coefficients,numba,numpy")
    ap.add_argument("--sweep", default=None, help="output bands L' of the full-run comparison")
    ap.add_argument("--study-part", choices=("quick", "full"), default=None)
    ap.add_argument("--quadrature", default="auto", help="method of --study-part")
    ap.add_argument("--profile", action="store_true", help="where a coefficient step's time goes")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    heads, centres = _s2_setup(0)
    model = TransformerModel(direction="ascent", attention="softmax", beta=1.0)
    load0 = os.getloadavg()
    if args.sweep:
        _sweep(args, model, heads, centres, load0)
        return
    if args.study_part:
        _study_part(args, model, load0)
        return
    if args.profile:
        _profile(args, model, heads, centres, load0)
        return
    methods = args.methods.split(",")
    rows = []
    for L in (int(v) for v in args.L.split(",")):
        g = make_grid(3, L)
        u0 = von_mises_fisher_mixture(g, centres, 5.0)
        build = _timed(
            lambda g=g, u0=u0: DensitySolver(model, u0, heads, grid=g, dt=0.01, quadrature="coefficients")
        )
        solvers = {q: DensitySolver(model, u0, heads, grid=g, dt=0.01, quadrature=q) for q in methods}
        assert all(s.quadrature == q for q, s in solvers.items())
        for s in solvers.values():
            s.step()  # compile, warm caches
        u = g.synthesis(u0)
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

                def floor(nth=nth, g=g, L=L, coef=u0, flux=flux):
                    for _ in range(4):
                        ducc0.sht.synthesis_2d(
                            alm=coef[None], spin=0, lmax=L, geometry="GL",
                            ntheta=g.nt, nphi=g.nphi, nthreads=nth,
                        )  # fmt: skip
                        ducc0.sht.analysis_2d(map=flux, spin=1, lmax=L, geometry="GL", nthreads=nth)

                samples.setdefault(f"floor_{nth}thread", []).append(_timed(floor, 10))
            if "coefficients" in solvers:
                Lp = solvers["coefficients"].attrs()["coefficient_band"]
                m_alm = np.zeros((1, (Lp + 1) * (Lp + 2) // 2), dtype=np.complex128)
                m_alm[0, : min(m_alm.shape[1], u0.size)] = u0[: m_alm.shape[1]]

                def floor_coef(g=g, L=L, Lp=Lp, coef=u0, m_alm=m_alm, flux=flux, H=heads.shape[0]):
                    for _ in range(4):
                        ducc0.sht.synthesis_2d(
                            alm=coef[None], spin=0, lmax=L, geometry="GL", ntheta=g.nt, nphi=g.nphi
                        )
                        for _ in range(H):
                            ducc0.sht.synthesis_2d(
                                alm=m_alm, spin=0, lmax=Lp, geometry="GL", ntheta=g.nt, nphi=g.nphi
                            )
                            ducc0.sht.synthesis_2d_deriv1(
                                alm=m_alm, lmax=Lp, geometry="GL", ntheta=g.nt, nphi=g.nphi
                            )
                        ducc0.sht.analysis_2d(map=flux, spin=1, lmax=L, geometry="GL")

                samples.setdefault("floor_coefficients_1thread", []).append(_timed(floor_coef, 10))
        med = {
            k: {
                "wall_ms": 1e3 * float(np.median([v[0] for v in s])),
                "cpu_ms": 1e3 * float(np.median([v[1] for v in s])),
            }
            for k, s in samples.items()
        }
        med["build_coefficients"] = {"wall_ms": 1e3 * build[0], "cpu_ms": 1e3 * build[1]}
        row = {"L": L, "nodes": int(g.points.shape[0]), "H": int(heads.shape[0]), "times": med}
        if "coefficients" in solvers:
            row["coefficient_band"] = solvers["coefficients"].attrs()["coefficient_band"]
        ref = solvers.get("numba")
        for q, s in solvers.items():
            cpu = med[f"step_{q}"]["cpu_ms"]
            row[f"step_over_floor_1thread_cpu_{q}"] = cpu / med["floor_1thread"]["cpu_ms"]
            if q == "coefficients":
                row["step_over_method_floor_cpu_coefficients"] = (
                    cpu / med["floor_coefficients_1thread"]["cpu_ms"]
                )
            if ref is not None and q != "numba":
                # same number of steps taken by every solver (interleaved rounds)
                row[f"max_coef_difference_{q}_vs_numba"] = float(np.abs(s.u - ref.u).max())
                row[f"speedup_{q}_vs_numba_cpu"] = med["step_numba"]["cpu_ms"] / cpu
        rows.append(row)
        print(json.dumps(row), flush=True)
    _write(args, "pde_step", load0, rows)


def _write(args, name: str, load0, rows) -> None:
    out = {
        "benchmark": name,
        "cpus": os.cpu_count(),
        "numba_threads": os.environ.get("NUMBA_NUM_THREADS"),
        "load_before": load0,
        "load_after": os.getloadavg(),
        "rows": rows,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


def _full_run(model, u0, heads, g, dt: float, steps: int, q: str, band: int | None = None):
    """``steps`` steps of a solver of method ``q`` (``band``: the coefficient method with this output band,
    set on the solver's private operator: the solver itself only takes bands >= L from ``coef_tol``)."""
    from attnflow.pde.coefficients import KernelOperator
    from attnflow.pde.solver import DensitySolver

    s = DensitySolver(model, u0, heads, grid=g, dt=dt, quadrature=q)
    if band is not None:
        s._op = KernelOperator(g, s._op.heads, 1.0, band)
        s._fe = None
    c = time.process_time()
    for _ in range(steps):
        s.step()
    return s, time.process_time() - c


def _study_part(args, model, load0) -> None:
    from attnflow.pde import make_grid
    from attnflow.pde.initial import von_mises_fisher_mixture
    from attnflow.pde.solver import DensitySolver, solve_density
    from attnflow.studies.multihead_common import one_thread
    from attnflow.studies.pde_particles import PdeParticlesConfig, PdeParticlesStudy, _s2_setup

    c = PdeParticlesConfig(**(PdeParticlesStudy().quick_params() if args.study_part == "quick" else {}))
    heads, centres = _s2_setup(c.seed)
    rows = []
    with one_thread():  # as pde_task runs it
        for tag, L, dt in (("run", c.s2_L, c.dt_pde), ("reference", (3 * c.s2_L) // 2, c.dt_pde / 2)):
            g = make_grid(3, L)
            steps = round(c.t1 / dt)
            w, cpu = time.perf_counter(), time.process_time()
            s = DensitySolver(model, von_mises_fisher_mixture(g, centres, 5.0), heads, grid=g, dt=dt,
                              quadrature=args.quadrature)  # fmt: skip
            solve_density(s, steps, record_every=max(1, steps // 20) if tag == "run" else 2 * steps)
            row = {"part": tag, "L": L, "steps": steps, "quadrature": s.quadrature,
                   "cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - w}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    _write(args, f"pde_study_part_{args.study_part}", load0, rows)


def _profile(args, model, heads, centres, load0) -> None:
    """Where a coefficient-method step goes: cProfile on the process's CPU clock, BLAS and numba on one
    thread (as a study task runs), ``--rounds`` x ``--steps`` x 20 steps per band limit, by category: the
    floor's transforms (ducc0 called from ``pde/grids.py``), the method's own transforms (ducc0 called from
    ``pde/coefficients.py``: per head a synthesis of m_h and of its gradient), the matrix-vector product of
    the parity blocks, and the rest (NumPy work on the grid, Python, the weights' torch calls)."""
    import cProfile
    import pstats

    import numba
    from threadpoolctl import threadpool_limits

    from attnflow.pde import make_grid
    from attnflow.pde.initial import von_mises_fisher_mixture
    from attnflow.pde.solver import DensitySolver

    numba.set_num_threads(1)
    rows = []
    with threadpool_limits(limits=1):
        for L in (int(v) for v in args.L.split(",")):
            g = make_grid(3, L)
            s = DensitySolver(model, von_mises_fisher_mixture(g, centres, 5.0), heads, grid=g, dt=0.01)
            for _ in range(3):
                s.step()
            n = args.rounds * args.steps * 20
            c0 = time.process_time()
            for _ in range(n):
                s.step()
            plain = (time.process_time() - c0) / n
            pr = cProfile.Profile(time.process_time)
            pr.enable()
            for _ in range(n):
                s.step()
            pr.disable()
            st = pstats.Stats(pr).stats
            cat = {"floor_transforms": 0.0, "method_transforms": 0.0, "matvec": 0.0, "rest": 0.0}
            rest: dict[str, float] = {}
            for (fname, _line, func), (_, _, tt, _, callers) in st.items():
                if "ducc0" in func:
                    for (cf, _, _), (_, _, ctt, _) in callers.items():
                        cat["floor_transforms" if cf.endswith("grids.py") else "method_transforms"] += ctt
                elif fname.endswith("coefficients.py") and func == "__call__":
                    cat["matvec"] += tt
                else:
                    cat["rest"] += tt
                    key = f"{fname.split('/')[-1]}:{func}"
                    rest[key] = rest.get(key, 0.0) + tt
            total = sum(cat.values())
            row = {
                "L": L,
                "step_cpu_ms": 1e3 * plain,
                "profiled_step_cpu_ms": 1e3 * total / n,
                "share": {k: v / total for k, v in cat.items()},
                "ms_per_step_scaled": {k: 1e3 * plain * v / total for k, v in cat.items()},
                "rest_top_share": {k: v / total for k, v in sorted(rest.items(), key=lambda kv: -kv[1])[:10]},
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    _write(args, "pde_step_profile", load0, rows)


def _sweep(args, model, heads, centres, load0) -> None:
    from attnflow.pde import make_grid
    from attnflow.pde.coefficients import coefficient_band
    from attnflow.pde.initial import von_mises_fisher_mixture

    rows = []
    for L in (int(v) for v in args.L.split(",")):
        g = make_grid(3, L)
        u0 = von_mises_fisher_mixture(g, centres, 5.0)
        dt = 0.01 if L <= 20 else 0.005  # the study: L = 20 at dt_pde, its reference L = 30 at dt_pde / 2
        steps = round(1.0 / dt)
        ref, ref_cpu = _full_run(model, u0, heads, g, dt, steps, "numba")
        uref = g.synthesis(ref.u)
        default = coefficient_band(L, heads, 1.0)
        for band in sorted({*(int(v) for v in args.sweep.split(",")), default}):
            s, cpu = _full_run(model, u0, heads, g, dt, steps, "coefficients", band)
            row = {
                "L": L,
                "dt": dt,
                "steps": steps,
                "out_band": band,
                "default_band": band == default,
                "density_rel_diff": float(np.abs(g.synthesis(s.u) - uref).max() / np.abs(uref).max()),
                "coef_max_diff": float(np.abs(s.u - ref.u).max()),
                "ledger_diff": abs(s.ledger_integral - ref.ledger_integral),
                "run_cpu_s": cpu,
                "run_cpu_s_numba": ref_cpu,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    _write(args, "pde_coefficient_band", load0, rows)


if __name__ == "__main__":
    main()
