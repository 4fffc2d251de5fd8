"""Temporary torch thread counts (restored on exit).

Two OpenMP pools (numba's and torch's) whose idle threads spin fight for the cores when torch works on
small arrays right after a numba pass; on a busy 2-core machine small torch ops also run faster on one
thread (measured: the assembly of the kernel's sums 350 ms with two threads, 20 ms with one, at the
paper's size). Code that knows its arrays are small runs them inside :func:`torch_threads`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["torch_threads"]


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
