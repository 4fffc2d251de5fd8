"""Whole jobs: independent runs split across processes with one thread each, against one process whose
numba kernel uses all threads.

``python benchmarks/jobs.py --json FILE [--runs 4] [--steps 30] [--rounds 3]``

A job is ``--runs`` independent simulations (the runs of a sweep or of the reproduction: OU weights,
the paper's n = 300 on S^2, float32, ledger on, ``--heads`` heads, ``--paths`` paths, ``--steps`` steps).
Two ways to run it, interleaved over ``--rounds`` rounds, wall-clock medians reported:

* ``threads``: one after the other in this process, the numba kernel on all ``os.cpu_count()`` threads
  (torch on one thread, as the field's assembly runs);
* ``processes``: a pool of ``os.cpu_count()`` spawned worker processes, each with one numba and one torch
  thread, one run per task. The pool is started and warmed up (imports, compiled kernels from the
  cache) once, outside the timing; its start-up time is reported separately.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _init_worker(threads: int) -> None:
    import numba
    import torch

    numba.set_num_threads(threads)
    torch.set_num_threads(1)


def one_run(spec: dict) -> float:
    """One simulation; returns its wall time in seconds."""
    import attnflow as af
    from attnflow.simulation import Simulator

    start = time.perf_counter()
    model = af.TransformerModel(
        direction="ascent", beta=1.0, weights=af.OrnsteinUhlenbeck(sigma2=0.5), backend="numba"
    )
    x0 = af.tokens.uniform(spec["paths"], spec["n"], 3, seed=spec["seed"])
    D0 = af.heads.symmetric_gaussian(spec["paths"], spec["heads"], 3, seed=spec["seed"])
    sim = Simulator(model, x0, D0, dt=0.05, seed=spec["seed"], ledger=True, dtype="float32")
    for _ in range(spec["steps"]):
        sim.step()
    sim.record()
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--heads", type=int, default=20)
    parser.add_argument("--paths", type=int, default=5)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import numba
    import torch
    from run import cpu_info

    cores = os.cpu_count() or 1
    specs = [
        {"n": args.n, "heads": args.heads, "paths": args.paths, "steps": args.steps, "seed": k}
        for k in range(args.runs)
    ]
    numba.set_num_threads(cores)
    torch.set_num_threads(1)
    one_run({**specs[0], "steps": 1})  # warm-up: compile or load the kernels
    t0 = time.perf_counter()
    pool = ProcessPoolExecutor(
        cores, mp_context=mp.get_context("spawn"), initializer=_init_worker, initargs=(1,)
    )
    list(pool.map(one_run, [{**s, "steps": 1} for s in specs[:cores]]))
    startup = time.perf_counter() - t0
    walls = {"threads": [], "processes": []}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        t = time.perf_counter()
        for s in specs:
            one_run(s)
        walls["threads"].append(time.perf_counter() - t)
        t = time.perf_counter()
        list(pool.map(one_run, specs))
        walls["processes"].append(time.perf_counter() - t)
    pool.shutdown()
    med = {k: statistics.median(v) for k, v in walls.items()}
    out = {
        "cpu": cpu_info(),
        "settings": vars(args) | {"json": str(args.json), "cores": cores},
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "pool_startup_s": startup,
        "walls_s": walls,
        "median_s": med,
        "processes_speedup": med["threads"] / med["processes"],
    }
    print(json.dumps({k: out[k] for k in ("median_s", "processes_speedup", "pool_startup_s", "load_before")}))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
