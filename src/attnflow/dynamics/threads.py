"""Temporary torch thread counts (restored on exit).

Two OpenMP pools (numba's and torch's) whose idle threads spin fight for the cores when torch works on
small arrays right after a numba pass; on a busy 2-core machine small torch ops also run faster on one
thread (measured: the assembly of the kernel's sums 350 ms with two threads, 20 ms with one, at the
paper's size). Code that knows its arrays are small runs them inside :func:`torch_threads`.

The two pools share OpenMP's thread count: numba's OpenMP threading layer, launched at numba's first
parallel call (or ``numba.set_num_threads``/``get_num_threads``), sets it to ``NUMBA_NUM_THREADS`` and
torch's count with it. A count set before that launch is lost: a pool worker's first task ran its torch
ops on every core while asking for one (noise_phase's first two runs: 46 s of CPU against 6 s for the
same run as the worker's second task, 8000 steps, n = 96; docs/performance.md 10.11).
:func:`launch_numba_threads` launches numba's layer first; :func:`torch_threads` calls it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["launch_numba_threads", "torch_threads"]


def launch_numba_threads() -> None:
    """Launch numba's threading layer now (once per process; later calls return at once), so that its
    launch cannot reset a torch thread count set after this call (see the module's docstring)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return
    numba.get_num_threads()  # launches the layer on its first call


@contextlib.contextmanager
def torch_threads(n: int | None = 1) -> Iterator[int]:
    """Run the enclosed torch ops on ``n`` intra-op threads (None: leave the count as it is), then restore it.

    Yields the thread count in force inside the block.

    Examples
    --------
    >>> with torch_threads(1) as used:
    ...     used
    1
    """
    launch_numba_threads()
    saved = torch.get_num_threads()
    if n is None or n == saved:
        yield saved
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the thread count must be an integer >= 1 or None: got {n!r}")
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(saved)
