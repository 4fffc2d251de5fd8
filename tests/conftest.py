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

import pytest  # noqa: E402
import torch  # noqa: E402

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

torch.set_num_threads(1)


# -- one quick run of each study per test session (issue 30) ----------------------------------------------
#: studies whose cached quick run also draws the figures (their default-tier tests check the figures of the
#: quick run); the others draw none (the protocol checks compare summaries without ``run.figures``)
QUICK_FIGURES = frozenset(
    {
        "depth_limit",
        "entropy",
        "jko_stability",
        "massucco2026",
        "monotonicity",
        "noise_phase",
        "ntk_injectivity",
        "pde_particles",
        "real_model",
        "sufficient_condition",
    }
)


@pytest.fixture(scope="session")
def quick_study(tmp_path_factory):
    """``quick_study(name) -> (out_dir, summary)``: THE uninterrupted quick run of a registered study, run
    once per test session and shared by every test that needs exactly that run: the reference of the
    protocol checks (tests/test_studies_protocol.py: kill + resume, Dask) and the study's own tests.

    ``run_study(name, out_dir, quick=True, workers=1)``, with the plot layer's figures for the studies in
    :data:`QUICK_FIGURES`. Each run has the system temp dir redirected to a directory of its own, which
    must be empty afterwards: no study writes outside its output directory (issue 30; mean_field_heads
    once wrote its arrays to the temp dir). The runs live in a directory shared by the pytest-xdist
    workers of the session; a lock per study makes the first worker that asks run it and the others wait
    for it, so each quick variant runs once per session, not once per worker. The summary is read from
    ``summary.json`` (a fresh dict per call). The directory is shared: a test that writes into a study
    directory copies it first (``shutil.copytree``).
    """
    import fcntl
    import json
    import shutil
    import tempfile

    from attnflow.studies import run_study
    from attnflow.studies.runner import StudySummary

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "quick_studies"
    root.mkdir(parents=True, exist_ok=True)

    def get(name: str) -> tuple[Path, StudySummary]:
        out = root / name
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not (root / f"{name}.ok").is_file():
                shutil.rmtree(out, ignore_errors=True)  # a run that failed in an earlier test starts over
                figures = None
                if name in QUICK_FIGURES:
                    from attnflow.plot import figures_for

                    figures = figures_for(name)
                sys_tmp = root / f"{name}.tmp"
                shutil.rmtree(sys_tmp, ignore_errors=True)
                sys_tmp.mkdir()
                saved = tempfile.tempdir
                tempfile.tempdir = str(sys_tmp)  # what tempfile.gettempdir() and mkstemp() use
                try:
                    run_study(name, out, quick=True, workers=1, figures=figures)
                finally:
                    tempfile.tempdir = saved
                # torch's compile cache (torchinductor_USER, made by torch on first use in a process) is the
                # library's, not the study's
                left = sorted(p.name for p in sys_tmp.iterdir() if not p.name.startswith("torchinductor_"))
                assert not left, f"the quick run of {name} left {left} in the system temp dir"
                (root / f"{name}.ok").write_text("done\n")
        summary = json.loads((out / "summary.json").read_text())
        return out, StudySummary(summary, json.loads((out / "run_log.json").read_text()))

    return get


def load_script(path: Path, name: str | None = None):
    """The Python file ``path`` (a script under ``scripts/`` or ``docs/``) loaded as a module named ``name``
    (default: the file's stem), for the tests that call its functions."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- the longest test files first (pytest-xdist) --------------------------------------------------------
#: ``tests/durations.json``: ``{file: CPU seconds}`` of the test files (and the modules of docstring examples)
#: in a measured run of the default tier (``scripts/test_times.py DIR --table tests/durations.json``). Under
#: pytest-xdist the collected tests are ordered file by file, the files with the most CPU time first (the
#: tests of a file stay together and in pytest's order; files not in the table come last, in pytest's
#: order), and scripts/test.sh hands out whole files in that order (``--dist loadfile
#: --no-loadscope-reorder``): a worker that finishes a file takes the next, and the run ends on the cheap
#: files instead of one worker idle while the other runs a long test it was handed last. The order is a pure
#: function of the collection and the table, the same on every worker (pytest-xdist requires it).
DURATIONS = Path(__file__).resolve().parent / "durations.json"


@pytest.hookimpl(trylast=True)  # after pytest's own reordering (fixtures of higher scopes)
def pytest_collection_modifyitems(session, config, items):
    if not hasattr(config, "workerinput") or not DURATIONS.is_file():  # only in a pytest-xdist worker
        return
    import json

    cpu = json.loads(DURATIONS.read_text())
    items.sort(key=lambda item: -float(cpu.get(item.nodeid.split("::")[0], 0.0)))  # stable sort


# -- per-test CPU time (scripts/test_times.py reads it) ---------------------------------------------------
#: ``ATTNFLOW_TEST_TIMES=DIR``: each process (every pytest-xdist worker, or the one process) appends one JSON
#: line per test to ``DIR/<worker>.jsonl``: its id, the worker, wall start and end (``time.time()``), and the
#: CPU seconds of setup + call + teardown, of this process and of the child processes it waited for. Wall
#: times on a shared machine are noisy; CPU time is what the test costs.
_TIMES_DIR = os.environ.get("ATTNFLOW_TEST_TIMES")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _TIMES_DIR:
        yield
        return
    import json
    import resource
    import time

    def children() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    t0, c0, k0 = time.time(), time.process_time(), children()
    yield
    t1, c1, k1 = time.time(), time.process_time(), children()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(_TIMES_DIR).mkdir(parents=True, exist_ok=True)
    row = {
        "id": item.nodeid,
        "worker": worker,
        "start": t0,
        "end": t1,
        "cpu": c1 - c0,
        "cpu_children": k1 - k0,
    }
    with open(Path(_TIMES_DIR) / f"{worker}.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
