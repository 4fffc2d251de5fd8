"""The study protocol's reproducibility checks (issue 30), on the quick variants:

* killed by SIGKILL at a random moment and resumed, a study gives the summary.json of an uninterrupted
  run, bit for bit (the keys a study declares in ``timing_keys``, wall-clock times, excepted);
* on a local Dask cluster it gives the summary.json of a local run.

A representative subset runs here, to keep the checks near two minutes on a small machine:
``ntk_injectivity`` (computation tasks whose results are JSON) and ``stability_weights`` (particle runs
from input arrays, killed inside a run: resumed from its checkpoint). ``pde_particles`` (computation
tasks with arrays) and the other registered studies with a plan run with ``-m slow``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnflow.studies import get_study, run_study

ROOT = Path(__file__).resolve().parents[1]
SUBSET = ["ntk_injectivity", "stability_weights"]
SLOW = ["pde_particles", "jko_stability", "layer_scaling", "longtime", "mean_field_heads", "noise_phase"]


def _strip(data, keys: tuple[str, ...]):
    if isinstance(data, dict):
        return {k: _strip(v, keys) for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [_strip(v, keys) for v in data]
    return data


def _same_summary(a: Path, b: Path, study: str) -> None:
    keys = get_study(study).timing_keys
    ra, rb = (a / "summary.json").read_bytes(), (b / "summary.json").read_bytes()
    if not keys:
        assert ra == rb, f"{study}: the resumed summary.json differs from the uninterrupted one"
    else:
        assert _strip(json.loads(ra), keys) == _strip(json.loads(rb), keys), study


def _finished(out: Path) -> int:
    n = 0
    for meta in (out / "runs").glob("*/meta.json"):
        try:
            n += json.loads(meta.read_text()).get("status") == "done"
        except ValueError:  # being written
            pass
    return n


def _kill_and_resume(study: str, tmp_path: Path, rng: random.Random) -> None:
    clean = tmp_path / "clean"
    run_study(study, clean, quick=True, workers=1)
    n_tasks = len(json.loads((clean / "study.json").read_text())["runs"])
    out = tmp_path / "killed"
    code = (
        f"from attnflow.studies import run_study; run_study({study!r}, {str(out)!r}, quick=True, workers=1)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    target = rng.randrange(n_tasks)  # kill once this many tasks are done, plus a random moment
    try:
        deadline = time.monotonic() + 300
        while _finished(out) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.5))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    print(f"{study}: killed={killed} after {_finished(out)} of {n_tasks} tasks (target {target})")
    resumed = run_study(study, out, quick=True, workers=1)
    assert resumed["run"]["status"] == "done"
    _same_summary(clean, out, study)


@pytest.mark.parametrize("study", SUBSET)
def test_a_killed_study_resumes_to_the_same_summary(study, tmp_path):
    seed = random.randrange(2**32)
    print(f"kill seed {seed}")  # a failure is replayed with this seed
    _kill_and_resume(study, tmp_path, random.Random(seed))


@pytest.mark.slow
@pytest.mark.parametrize("study", SLOW)
def test_a_killed_study_resumes_to_the_same_summary_slow(study, tmp_path):
    _kill_and_resume(study, tmp_path, random.Random(0))


def test_a_study_on_dask_gives_the_local_summary(tmp_path):
    from distributed import LocalCluster

    run_study("ntk_injectivity", tmp_path / "local", quick=True, workers=1)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        run_study("ntk_injectivity", tmp_path / "dask", quick=True, scheduler=cluster.scheduler_address)
    assert (tmp_path / "dask" / "summary.json").read_bytes() == (
        tmp_path / "local" / "summary.json"
    ).read_bytes()
    log = json.loads((tmp_path / "dask" / "run_log.json").read_text())
    assert log["workers"] == "dask"
