"""Fast summation (``attnflow.dynamics.fastsum``) against the direct kernel: time and error vs n.

``python benchmarks/fastsum.py --json docs/benchmarks/fastsum-....json [--quick]``

Inputs as in ``benchmarks/run.py``: d = 3, one path, one head, octahedral tokens with N(0, 0.05^2) noise
and the head Z + Z^T (seed 0), beta = 1; also the non-symmetric head (0.5 added to entry (0, 1)), which
needs the column sums. For each n one field evaluation is timed:

* ``fast_field``: :func:`pair_sums_fastsum` (ledger off) + :func:`assemble` (on one torch thread, as
  ``evaluate_numba`` does) + :func:`energy_from_lse` (velocity, lse, energy), at the truncation degree
  the rule picks for ``--tol``;
* ``fast_ledger``: the same with the whole ledger (row_q, column sums, G^2, Ghat^2, ...);
* ``direct``: the fused numba kernel :func:`attnflow.dynamics.numba_backend.fused_field` (float64,
  ledger on), only while its predicted time (from the previous n, scaled by n^2) is under
  ``--max-direct`` seconds; otherwise ``"skipped"`` (nothing is extrapolated).

Errors against the direct kernel where it ran: velocity and grad (max-norm, relative to the largest
entry), lse (absolute = relative error of exp(lse)), energy, G2, Ghat2 (relative). Where the direct
kernel is skipped, the lse and the velocity of 2000 random rows are computed exactly in O(2000 n)
(``subset_*`` errors; the energy's relative error is at most the largest relative error of exp(lse_i)).
Times are medians over ``--repeats`` interleaved rounds; the load average is recorded before and after.
An L sweep at fixed n gives the cost per token and squared degree, for the ``auto`` rule.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from attnflow.dynamics import fastsum_kernel  # noqa: E402
from attnflow.dynamics.assembly import assemble, energy_from_lse  # noqa: E402
from attnflow.dynamics.fastsum import (  # noqa: E402
    pair_sums_fastsum,
    relative_error_bound,
    truncation_degree,
)
from attnflow.dynamics.numba_backend import fused_field  # noqa: E402
from attnflow.dynamics.threads import torch_threads  # noqa: E402
from attnflow.geometry import Sphere  # noqa: E402

SPHERE = Sphere()


def make_inputs(n: int, symmetric: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Octahedral tokens with N(0, 0.05^2) noise and the head Z + Z^T (as benchmarks/run.py), float64."""
    rng = np.random.default_rng(seed)
    axes = np.concatenate([np.eye(3), -np.eye(3)])
    x = axes[rng.integers(0, 6, size=(1, n))] + 0.05 * rng.normal(size=(1, n, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    z = np.random.default_rng(seed + 1).normal(size=(1, 1, 3, 3))
    D = z + np.swapaxes(z, -1, -2)
    if not symmetric:
        D[..., 0, 1] += 0.5
    return x, D


def fast_eval(x: torch.Tensor, D: torch.Tensor, beta: float, tol: float, ledger: bool):
    sums = pair_sums_fastsum(x, D, beta, tol=tol, ledger=ledger, geometry=SPHERE)
    with torch_threads(1):  # as evaluate_numba does: O(n) assembly, no thread contention
        fe = assemble(sums, x, D, D, beta, SPHERE, ledger=ledger)
    if not ledger:
        fe.energy = energy_from_lse(fe.lse, beta)
    return fe


def rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def subset_reference(x: torch.Tensor, D: torch.Tensor, beta: float, rows: np.ndarray, chunk: int = 16):
    """Exact lse and velocity of the given rows, O(len(rows) n), chunked (one head, V = D)."""
    xp, Dh = x[0], beta * D[0, 0]
    keys = xp @ Dh.T  # s_ij = x_i^T (beta D) x_j = <x_i, keys_j>
    lse, vel = [], []
    for s in range(0, len(rows), chunk):
        xi = xp[rows[s : s + chunk]]
        sc = xi @ keys.T
        m = sc.amax(-1, keepdim=True)
        e = torch.exp(sc - m)
        tot = e.sum(-1, keepdim=True)
        lse.append((m + torch.log(tot))[:, 0])
        mean = (e @ xp) / tot
        raw = mean @ D[0, 0].T
        vel.append(raw - (raw * xi).sum(-1, keepdim=True) * xi)
    return torch.cat(lse), torch.cat(vel)


MINS: dict[str, float] = {}


def timed(repeats: int, key: str | None, fn, *fargs, **fkw) -> tuple[float, object]:
    """Median wall time over ``repeats`` calls (the minimum is kept in MINS[key]: on a loaded machine it is
    the best estimate of the unloaded time, the median the honest one)."""
    ts, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(*fargs, **fkw)
        ts.append(time.perf_counter() - t0)
    if key is not None:
        MINS[key] = min(ts)
    return statistics.median(ts), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-direct", type=float, default=120.0)
    ap.add_argument("--ns", type=str, default=None, help="comma-separated n (default 1e3,1e4,1e5,1e6)")
    ap.add_argument("--only-sphere", action="store_true", help="skip the S^1 cells and the L sweep")
    args = ap.parse_args()
    torch.set_num_threads(2)
    ns = [1000, 10000] if args.quick else [1000, 10000, 100000, 1000000]
    if args.ns:
        ns = [int(float(v)) for v in args.ns.split(",")]
    beta = args.beta
    out = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "numba_threads": int(os.environ.get("NUMBA_NUM_THREADS", "0")) or None,
            "loadavg_before": os.getloadavg(),
        },
        "settings": {"beta": beta, "tol": args.tol, "repeats": args.repeats, "max_direct_s": args.max_direct},
        "cells": [],
    }
    try:
        out["machine"]["cpu"] = next(
            ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    # compile the kernels once, outside the timings
    xw, Dw = make_inputs(500, False)
    fast_eval(torch.from_numpy(xw), torch.from_numpy(Dw), beta, args.tol, True)
    fused_field(xw, Dw, None, beta)
    xc, Dc = make_inputs(2000, True)
    t0 = time.perf_counter()
    fused_field(xc, Dc, None, beta)
    calibration_rate = (time.perf_counter() - t0) / 2000**2  # seconds per pair, to predict the first n

    for symmetric in (True, False):
        direct_rate = calibration_rate  # seconds per pair of the last direct run
        for n in ns:
            x_np, D_np = make_inputs(n, symmetric)
            x, D = torch.from_numpy(x_np), torch.from_numpy(D_np)
            r_max = float(torch.linalg.vector_norm(x[:, None] @ (beta * D), dim=-1).max())
            if not symmetric:
                r_max = max(r_max, float(torch.linalg.vector_norm(x[:, None] @ (beta * D.mT), dim=-1).max()))
            L = truncation_degree(r_max, args.tol, 3)
            cell = {
                "n": n,
                "symmetric": symmetric,
                "r_max": r_max,
                "L": L,
                "bound": relative_error_bound(L, r_max, 3),
            }
            reps = args.repeats if n < 10**6 else max(3, args.repeats)
            cell["fast_field_s"], fe = timed(reps, "f", fast_eval, x, D, beta, args.tol, False)
            cell["fast_ledger_s"], fl = timed(reps, "l", fast_eval, x, D, beta, args.tol, True)
            cell["fast_field_min_s"], cell["fast_ledger_min_s"] = MINS["f"], MINS["l"]
            predicted = direct_rate * n * n
            if predicted <= args.max_direct:
                t0 = time.perf_counter()
                ref = fused_field(x_np, D_np, None, beta)
                cell["direct_s"] = time.perf_counter() - t0
                direct_rate = cell["direct_s"] / (n * n)
                cell["err"] = {
                    "velocity": rel(fe.velocity, ref["velocity"]),
                    "lse_abs": float(np.abs(fe.lse.numpy() - ref["lse"]).max()),
                    "energy": rel(fe.energy, ref["energy"]),
                    "ledger_velocity": rel(fl.velocity, ref["velocity"]),
                    "grad": rel(fl.grad, ref["grad"]),
                    "energy_ledger": rel(fl.energy, ref["energy"]),
                    "G2": rel(fl.G2, ref["G2"]),
                    "Ghat2": rel(fl.Ghat2, ref["Ghat2"]),
                }
            else:
                cell["direct_s"] = (
                    f"skipped (predicted {predicted:.0f} s > --max-direct {args.max_direct:g} s)"
                )
            if n >= 10**5:
                rows = np.sort(np.random.default_rng(1).choice(n, size=2000, replace=False))
                t0 = time.perf_counter()
                lse_ref, vel_ref = subset_reference(x, D, beta, rows)
                cell["subset_reference_s"] = time.perf_counter() - t0
                cell["subset_err"] = {
                    "rows": 2000,
                    "lse_abs": float((fe.lse[0, 0, rows] - lse_ref).abs().max()),
                    "velocity": rel(fe.velocity[0, rows], vel_ref),
                }
            if n == 10**6:  # where the time goes: the two kernel passes alone
                xp = x[0].contiguous()
                tabs = fastsum_kernel.legendre_tables(L)
                G = torch.cat([torch.ones_like(xp[:, :1]), xp], dim=1)  # g = 1, x (ledger off)
                cell["profile_s"] = {}
                cell["profile_s"]["moments"], mu = timed(
                    3, None, fastsum_kernel.moments, xp.numpy(), G.numpy(), L, *tabs, 8
                )
                q = (xp @ (beta * D[0, 0])).contiguous().numpy()
                cell["profile_s"]["evaluate"], _ = timed(3, None, fastsum_kernel.evaluate, q, mu, L, *tabs)
            print(json.dumps(cell), flush=True)
            out["cells"].append(cell)

    if args.only_sphere:
        out["machine"]["loadavg_after"] = os.getloadavg()
        args.json.write_text(json.dumps(out, indent=1) + "\n")
        return
    # S^1 (d = 2, the PyTorch path of the expansion, O(nL)): first two coordinates of the same clouds
    circle = []
    for n in [1000, 10000] if args.quick else [1000, 10000, 100000]:
        x_np, D_np = make_inputs(n, True)
        x_np = np.ascontiguousarray(x_np[..., :2] / np.linalg.norm(x_np[..., :2], axis=-1, keepdims=True))
        D_np = np.ascontiguousarray(D_np[..., :2, :2])
        x, D = torch.from_numpy(x_np), torch.from_numpy(D_np)
        r_max = float(torch.linalg.vector_norm(x[:, None] @ (beta * D), dim=-1).max())
        cell = {"n": n, "d": 2, "r_max": r_max, "L": truncation_degree(r_max, args.tol, 2)}
        cell["fast_field_s"], fe = timed(args.repeats, "f", fast_eval, x, D, beta, args.tol, False)
        cell["fast_field_min_s"] = MINS["f"]
        t0 = time.perf_counter()
        ref = fused_field(x_np, D_np, None, beta)
        cell["direct_s"] = time.perf_counter() - t0
        cell["err"] = {"velocity": rel(fe.velocity, ref["velocity"]), "energy": rel(fe.energy, ref["energy"])}
        print(json.dumps(cell), flush=True)
        circle.append(cell)
    out["circle"] = circle

    # L sweep at n = 1e5 (symmetric head): cost per token and squared degree
    n = 10**4 if args.quick else 10**5
    x_np, D_np = make_inputs(n, True)
    x, D = torch.from_numpy(x_np), torch.from_numpy(D_np)
    sweep = []
    for L in (8, 12, 16, 24, 32, 48):
        t, _ = timed(args.repeats, "s", pair_sums_fastsum, x, D, beta, ledger=False, geometry=SPHERE, L=L)
        sweep.append(
            {
                "L": L,
                "n": n,
                "pair_sums_s": t,
                "pair_sums_min_s": MINS["s"],
                "s_per_token_L2": t / (n * L * L),
            }
        )
        print(json.dumps(sweep[-1]), flush=True)
    out["L_sweep"] = sweep
    out["machine"]["loadavg_after"] = os.getloadavg()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
