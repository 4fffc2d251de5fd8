"""The parallel passes before and after a source change, interleaved in one run (issue 30, serial twins).

    python benchmarks/twin_speed.py BASE_SRC NEW_SRC [--rounds R] [--reps K]

Each round starts one fresh process per source tree (``PYTHONPATH=<tree>``, alternating, the order swapped
every round) that times ``pair_sums(parallel=True)`` (the kernel's symmetric half pass) and the compiled
assembly's parallel token and head passes (``assemble_core(..., True)``) at the paper's size (n = 300,
H = 100, P = 20, d = 3, float32, ledger, symmetric heads): ``K`` calls each after two warm-up calls, their
median. The medians over rounds are printed per tree. A first process per tree (not counted) fills numba's
cache. On a shared machine compare the two trees of one run, not absolute times across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = r"""
import json, sys, time
import numpy as np
from attnflow.dynamics.assembly import pair_norm
from attnflow.dynamics.numba_assembly import assemble_core
from attnflow.dynamics.numba_kernel import pair_sums

reps = int(sys.argv[1])
rng = np.random.default_rng(0)
P, n, H, d = 20, 300, 100, 3
x = rng.normal(size=(P, n, d))
x /= np.linalg.norm(x, axis=-1, keepdims=True)
z = rng.normal(size=(P, H, d, d))
D = (0.5 * (z + np.swapaxes(z, -1, -2))).astype(np.float32)
x = x.astype(np.float32)
V = np.ascontiguousarray(np.swapaxes(D, -1, -2))

def kernel():
    return pair_sums(x, D, 1.0, parallel=True)

s = kernel()
args = (x, D, V, s["row_shift"].astype(np.float64), s["row_sum"].astype(np.float64),
        s["row_x"].astype(np.float64), s["row_q"].astype(np.float64), True, np.zeros((1, 1)),
        np.zeros((1, 1, 1, 1)), False, 1.0, pair_norm(H, n), True, True, True)

def assembly():
    return assemble_core(*args)

out = {}
for name, f in (("kernel", kernel), ("assembly", assembly)):
    f(); f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); t.append(time.perf_counter() - t0)
    out[name] = float(np.median(t))
print(json.dumps(out))
"""


def _child(src: str, reps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(reps)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"child for {src} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    trees = {"base": a.base, "new": a.new}
    for src in trees.values():
        _child(src, 1)  # fills numba's cache for this tree
    got: dict[str, list[dict]] = {k: [] for k in trees}
    for r in range(a.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for k in order:
            got[k].append(_child(trees[k], a.reps))
            print(k, r, got[k][-1], flush=True)
    summary = {
        k: {part: statistics.median(g[part] for g in runs) * 1e3 for part in ("kernel", "assembly")}
        for k, runs in got.items()
    }
    print(json.dumps({"median_ms": summary, "rounds": a.rounds, "reps": a.reps, "loadavg": os.getloadavg()}))


if __name__ == "__main__":
    main()
