"""Single-thread throughput of the fused kernel at paper size (P=20, H=100, n=300, d=3).

``NUMBA_NUM_THREADS=1 python benchmarks/kernel_micro.py [--repeats 3]``

Reports pairs per CPU-second (``time.process_time``, best of ``--repeats``) for float32 and
float64, ledger on and off, symmetric heads ``D = Z + Z^T`` (the paper's case, fast path)
and non-symmetric heads ``D = Z`` (general path).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnflow.dynamics.numba_backend import fused_field


def inputs(npaths, n, heads, symmetric, seed=0):
    rng = np.random.default_rng(seed)
    axes = np.concatenate([np.eye(3), -np.eye(3)])
    x = axes[rng.integers(0, 6, size=(npaths, n))] + 0.05 * rng.normal(size=(npaths, n, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    z = rng.normal(size=(npaths, heads, 3, 3))
    return x, (z + np.swapaxes(z, -1, -2)) if symmetric else z


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", type=int, default=20)
    parser.add_argument("--only", default="", help="substring filter on the case label")
    args = parser.parse_args(argv)
    npaths, n, heads = args.paths, 300, 100
    pairs = npaths * heads * n * n
    for sym in (True, False):
        x, D = inputs(npaths, n, heads, sym)
        for dt in (np.float32, np.float64):
            xs, Ds = x.astype(dt), D.astype(dt)
            for ledger in (True, False):
                label = f"{'sym' if sym else 'gen'} {np.dtype(dt).name} ledger={'on ' if ledger else 'off'}"
                if args.only and args.only not in label:
                    continue
                fused_field(xs, Ds, None, 1.0, ledger=ledger)
                best = np.inf
                for _ in range(args.repeats):
                    t0 = time.process_time()
                    fused_field(xs, Ds, None, 1.0, ledger=ledger)
                    best = min(best, time.process_time() - t0)
                print(f"{label}: {pairs / best:.3g} pairs/CPU-s ({best:.3f} s)", flush=True)


if __name__ == "__main__":
    main()
