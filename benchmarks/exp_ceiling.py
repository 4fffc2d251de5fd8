"""The machine's vectorised ``exp`` throughput: the ceiling for a softmax kernel.

Every token pair of the attention field needs one exponential, so ``exp`` evaluations per
second bound the pair throughput of any implementation that calls a library ``exp``. We
measure ``numpy.exp`` (NumPy's SIMD loops) on large float32 and float64 arrays, on one core
and with ``workers`` threads (NumPy releases the GIL inside ufunc loops, so each thread runs
on its own core) or processes. Arrays are processed with ``out=`` in blocks of
``block`` elements so that allocation and page faults are not timed.

Run ``python benchmarks/exp_ceiling.py`` for a table.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import numpy as np

__all__ = ["exp_throughput"]


def _exp_loop(values: np.ndarray, out: np.ndarray, rounds: int, block: int) -> None:
    for _ in range(rounds):
        for start in range(0, values.size, block):
            np.exp(values[start : start + block], out=out[start : start + block])


def _make(size: int, dtype, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # shifted scores lie in [-2 beta |D|, 0]; the range does not change NumPy's speed
    values = np.random.default_rng(seed).uniform(-10.0, 0.0, size).astype(dtype)
    return values, np.empty_like(values)


def _process_worker(size, dtype, rounds, block, barrier, queue):
    values, out = _make(size, dtype, 1)
    _exp_loop(values, out, 1, block)
    barrier.wait()
    start = time.perf_counter()
    _exp_loop(values, out, rounds, block)
    queue.put(time.perf_counter() - start)


def exp_throughput(
    dtype=np.float32,
    *,
    workers: int = 1,
    mode: str = "threads",
    size: int = 2**22,
    rounds: int = 3,
    repeats: int = 5,
    block: int = 2**16,
) -> float:
    """Median ``exp`` evaluations per second over ``repeats`` measurements.

    Parameters
    ----------
    dtype : numpy float type
    workers : int
        Concurrent workers, each evaluating ``rounds`` passes over its own array of ``size``.
    mode : {"threads", "processes"}
    size, rounds, repeats, block : int
        Elements per worker, passes per measurement, measurements, elements per ufunc call.

    Returns
    -------
    float
        Total exponentials per second of all workers (median over ``repeats``).
    """
    if mode not in ("threads", "processes"):
        raise ValueError(f"mode must be 'threads' or 'processes'; got {mode!r}")
    rates = []
    if mode == "processes":
        ctx = mp.get_context("fork")
        for _ in range(repeats):
            barrier, queue = ctx.Barrier(workers), ctx.Queue()
            procs = [
                ctx.Process(target=_process_worker, args=(size, dtype, rounds, block, barrier, queue))
                for _ in range(workers)
            ]
            for proc in procs:
                proc.start()
            seconds = max(queue.get() for _ in procs)
            for proc in procs:
                proc.join()
            rates.append(workers * size * rounds / seconds)
        return float(np.median(rates))
    arrays = [_make(size, dtype, k) for k in range(workers)]
    for values, out in arrays:
        _exp_loop(values, out, 1, block)
    for _ in range(repeats):
        threads = [
            threading.Thread(target=_exp_loop, args=(values, out, rounds, block)) for values, out in arrays
        ]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rates.append(workers * size * rounds / (time.perf_counter() - start))
    return float(np.median(rates))


if __name__ == "__main__":
    for dtype in (np.float32, np.float64):
        for workers, mode in ((1, "threads"), (2, "threads"), (2, "processes")):
            rate = exp_throughput(dtype, workers=workers, mode=mode)
            print(f"{np.dtype(dtype).name:8s} {workers} {mode:9s} {rate:.3g} exp/s")
