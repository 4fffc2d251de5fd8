"""Peak memory of a gradient through the flow against depth: plain autograd vs the adjoint (issue 15).

``python benchmarks/adjoint_memory.py [--depths 8 16 32 64 128] [--n 128] [--json FILE]``

For each depth N (number of integrator steps: N layers of one projected-Euler step each, T = 1) and each
method (``autograd``; ``adjoint`` with ``state="recomputed"``; ``adjoint`` with ``state="stored"``) a
fresh worker process builds a :class:`attnflow.training.TrainableFlow` (H = 4 heads, d = 3, one cloud of
n tokens), runs one warm-up gradient at depth 2, then computes the gradient of a scalar of the final
tokens with respect to x0 and every head at depth N. It reports

* ``peak_mib``: the rise of the process's peak resident set (``ru_maxrss``) over its resident set just
  before the measured gradient, in MiB (what the gradient itself needed at its worst moment);
* ``saved_mib``: the bytes of the tensors autograd saved for the backward pass of the taped graph
  (``torch.autograd.graph.saved_tensors_hooks``; for the adjoint only x0 and x_N, plus the stored states);
* ``wall_s``: the time of the measured gradient.

Autograd keeps every step's attention matrices (H n^2 numbers per stage) until the backward pass, so its
memory grows linearly with N; the adjoint tapes one step at a time and, with recomputed states, keeps
O(1) states: its memory is flat in N.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(1)
import attnflow as af
from attnflow.training.adjoint import adjoint_flow
from attnflow.training.flow import TrainableFlow

method, state, N, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model = af.TransformerModel(direction="ascent", beta=1.0)


def grad(depth):
    flow = TrainableFlow(model, d=3, layers=depth, heads=4, t1=1.0, steps_per_layer=1, seed=0)
    x0 = af.tokens.uniform(1, n, 3, seed=0).requires_grad_(True)
    saved = [0]

    def pack(t):
        saved[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = flow(x0) if method == "autograd" else adjoint_flow(flow, x0, state=state)
    loss = (out[..., 0] * out[..., 2]).sum()
    gs = torch.autograd.grad(loss, [x0, *flow.parameters()])
    if method == "adjoint" and state == "stored":
        saved[0] += (depth + 1) * x0.numel() * x0.element_size()
    return gs, saved[0]


grad(2)  # warm-up: imports, allocator pools
with open("/proc/self/statm") as fh:
    rss_before = int(fh.read().split()[1]) * resource.getpagesize()
t0 = time.perf_counter()
_, saved = grad(N)
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"peak_mib": max(peak - rss_before, 0) / 2**20, "saved_mib": saved / 2**20, "wall_s": wall}))
"""

METHODS = (("autograd", "-"), ("adjoint", "recomputed"), ("adjoint", "stored"))


def measure(method: str, state: str, depth: int, n: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(
        [sys.executable, "-c", WORKER, method, state, str(depth), str(n)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for depth in args.depths:
        for method, state in METHODS:
            r = measure(method, state, depth, args.n)
            label = method if method == "autograd" else f"adjoint/{state}"
            rows.append({"method": label, "depth": depth, **r})
            print(
                f"{label:<20} N={depth:<4} peak {r['peak_mib']:8.1f} MiB  saved {r['saved_mib']:8.2f} MiB  "
                f"{r['wall_s']:6.2f} s",
                flush=True,
            )
    result = {
        "benchmark": "adjoint_memory",
        "n": args.n,
        "heads": 4,
        "d": 3,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "rows": rows,
    }
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
