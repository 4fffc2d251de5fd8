"""Before/after timing of two attnflow source trees in one run, interleaved (for refactors).

``python benchmarks/compare_revisions.py OLD_SRC NEW_SRC [--rounds 7] [--json FILE]``

``OLD_SRC`` and ``NEW_SRC`` are ``src`` directories of two checkouts (e.g. ``git worktree add /tmp/old
REV`` then ``/tmp/old/src``). One worker process per tree imports attnflow from it and times, on request,

* ``kernel``: one field evaluation with the ledger through the numba path at the paper's size
  (n = 300, H = 100, P = ``--paths`` (default 4), ``--dtype`` (default float64), symmetric heads;
  ``fused_field`` of whichever module the tree has);
* ``step``: 10 steps of :class:`attnflow.Simulator` (OU weights, ledger on, projected Euler) at the same
  size, i.e. kernel plus assembly, ledger and noise.

Rounds alternate the two workers (and the order within a round), so load drift on a shared machine hits
both alike; the report gives per-case medians and the ratio new/old (< 1: the new tree is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import sys, time, json, warnings
warnings.simplefilter("ignore")
import numpy as np, torch
import attnflow as af
try:
    from attnflow.dynamics.numba_backend import fused_field
except ImportError:
    from attnflow.dynamics._numba_kernel import fused_field
import os
P, n, H = int(os.environ["AF_PATHS"]), 300, 100
DT = os.environ["AF_DTYPE"]
rng = np.random.default_rng(0)
x = rng.normal(size=(P, n, 3)); x /= np.linalg.norm(x, axis=-1, keepdims=True)
z = rng.normal(size=(P, H, 3, 3)); D = z + np.swapaxes(z, -1, -2)
x, D = x.astype(DT), D.astype(DT)
fused_field(x, D, None, 1.0)
model = af.TransformerModel(direction="descent", weights=af.OrnsteinUhlenbeck())
x0 = af.tokens.octahedral(P, n, 3, seed=0); D0 = af.heads.symmetric_gaussian(P, H, 3, seed=0)
sim = af.Simulator(model, x0, D0, dt=0.01, seed=0, dtype=DT)
sim.step()
print("ready", flush=True)
for line in sys.stdin:
    case = line.strip()
    t0 = time.perf_counter()
    if case == "kernel":
        fused_field(x, D, None, 1.0, ledger=True)
    elif case == "step":
        for _ in range(10):
            sim.step()
            sim.record()
    print(json.dumps({"case": case, "seconds": time.perf_counter() - t0}), flush=True)
"""


def _start(src: str, paths: int, dtype: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": src, "AF_PATHS": str(paths), "AF_DTYPE": dtype}
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the worker for {src} did not start")
    return proc


def _time(proc: subprocess.Popen, case: str) -> float:
    proc.stdin.write(case + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old_src")
    parser.add_argument("new_src")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--paths", type=int, default=4, help="paths P (default 4; the paper: 20)")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    args = parser.parse_args()
    for src in (args.old_src, args.new_src):
        if not (Path(src) / "attnflow" / "__init__.py").is_file():
            parser.error(f"{src} is not a src directory holding attnflow/__init__.py")
    workers = {
        w: _start(src, args.paths, args.dtype) for w, src in (("old", args.old_src), ("new", args.new_src))
    }
    times: dict[str, dict[str, list[float]]] = {k: {"kernel": [], "step": []} for k in workers}
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for case in ("kernel", "step"):
            for who in order:
                times[who][case].append(_time(workers[who], case))
    for proc in workers.values():
        proc.stdin.close()
        proc.wait()
    report = {
        "sizes": f"n=300, H=100, P={args.paths}, d=3, {args.dtype}; kernel: one evaluation (ledger on); "
        "step: 10 steps + records",
        "rounds": args.rounds,
        "median_seconds": {w: {c: statistics.median(v) for c, v in t.items()} for w, t in times.items()},
        "times": times,
    }
    report["ratio_new_over_old"] = {
        c: report["median_seconds"]["new"][c] / report["median_seconds"]["old"][c] for c in ("kernel", "step")
    }
    print(json.dumps({k: v for k, v in report.items() if k != "times"}, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
