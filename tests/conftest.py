"""Shared test set-up.

* ``tests/`` goes on ``sys.path`` so that the independent references import as ``reference.*``
  (they never import attnflow).
* PyTorch and numba run single-threaded (unless NUMBA_NUM_THREADS is set by the caller): the
  arrays in the tests are tiny, and on a small shared machine thread pools only add contention
  (measured per field evaluation, n = 12, on 2 busy cores: torch 70 ms vs 1-3 ms, numba 20-45 ms
  vs 1 ms).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # read when numba is first imported

import torch  # noqa: E402

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

torch.set_num_threads(1)
