"""A torch thread count set before numba's threading layer launches survives the launch.

numba's OpenMP layer sets OpenMP's thread count (torch's with it) to ``NUMBA_NUM_THREADS`` when it launches,
at numba's first parallel call. A pool worker's first task set torch to one thread and then launched numba:
its torch ops ran on every core (noise_phase's first two runs, 46 s of CPU against 6 s;
docs/performance.md 10.11). Each check runs in a fresh interpreter, where numba has not launched yet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")

# the task body: launch numba's layer (what a task's first parallel numba call does), then read torch's count
_RUN_TASK = """
import json, sys, numba, torch
from attnflow.experiments import sweep
seen = []
def execute(*args, **kwargs):
    numba.get_num_threads()  # launches numba's threading layer, as a first parallel call does
    seen.append(torch.get_num_threads())
sweep._execute = execute
out = sweep._run_task({"kind": "compute", "fn": "x", "params": {}}, sys.argv[1], False, THREADS)
print(json.dumps({"status": out["status"], "seen": seen, "layer": numba.threading_layer()}))
"""

_TORCH_THREADS = """
import json, numba, torch
from attnflow.dynamics.threads import torch_threads
with torch_threads(1):
    numba.get_num_threads()
    inside = torch.get_num_threads()
print(json.dumps({"inside": inside, "layer": numba.threading_layer()}))
"""


def _fresh(code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=SRC, NUMBA_NUM_THREADS="2", OMP_NUM_THREADS="2")
    env.pop("ATTNFLOW_PARALLEL_MIN_PAIRS", None)
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_workers_first_task_runs_torch_on_one_thread_after_numba_launches(tmp_path):
    for threads in ("None", "1"):
        got = _fresh(_RUN_TASK.replace("THREADS", threads), str(tmp_path / f"t{threads}"))
        assert got["status"] == "done", got
        # the task's torch count, read after numba's launch inside the task: TASK_TORCH_THREADS, not 2
        assert got["seen"] == [1], (threads, got)


def test_torch_threads_survives_numbas_launch_inside_the_block():
    got = _fresh(_TORCH_THREADS)
    assert got["inside"] == 1, got
