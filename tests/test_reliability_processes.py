"""Processes that collide or die: two writers on one directory, SIGKILL of a sweep's main process and of
one of its workers. Each reproduces a failure of issue 10 on the code before the fix.

The scripts patch ``Simulator.step`` at module level to pause at step 35 (between the checkpoints at
steps 20 and 40, so a resume must truncate the store): the ``spawn`` workers of a local sweep import
the main script too (as ``__mp_main__``), so the pause also happens inside the workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from experiments_helpers import TINY
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments.store import read_meta, run_experiment, verify_run
from attnflow.experiments.sweep import open_sweep, read_index, run_sweep

LONGER = {**TINY, "integrator": {"dt": 0.01, "t1": 0.6}, "checkpoint_every": 20}
GRID = {"seed": [0, 1, 2, 3]}
WAIT_S = 180  # generous bound of every wait: spawning workers on 2 busy cores takes seconds

SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from attnflow.simulation import Simulator

    MARKS = Path(os.environ["ATTNFLOW_TEST_MARKS"])
    PAUSE = float(os.environ.get("ATTNFLOW_TEST_PAUSE", "0"))
    ONLY_FIRST = os.environ.get("ATTNFLOW_TEST_ONLY_FIRST") == "1"
    _advance = Simulator.advance

    def advance(self, k, **kwargs):
        # the driver takes blocks of steps: split the one that crosses step 35 so that the hook sees it
        if self.step_index < 35 < self.step_index + k:
            first_part = 35 - self.step_index
            _advance(self, first_part, **kwargs)
            k -= first_part
        if self.step_index == 35 and PAUSE:
            first = MARKS / "first"
            try:
                fd = os.open(first, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                is_first = True
            except FileExistsError:
                is_first = False
            (MARKS / f"at35-{os.getpid()}").touch()
            if is_first or not ONLY_FIRST:
                time.sleep(PAUSE)
        return _advance(self, k, **kwargs)

    Simulator.advance = advance

    CONFIG_DELAY = float(os.environ.get("ATTNFLOW_TEST_CONFIG_DELAY", "0"))
    if CONFIG_DELAY:
        # widen the window between "no config.yaml yet" and writing it, where two runs used to race
        import attnflow.experiments.store as store

        _write = store.atomic_write_text

        def write(path, text):
            if Path(path).name == "config.yaml":
                time.sleep(CONFIG_DELAY)
            return _write(path, text)

        store.atomic_write_text = write

    if __name__ == "__main__":
        from attnflow.cli import main
        sys.argv = ["attnflow", *sys.argv[1:]]
        main()
    """
)


def _start(
    tmp_path: Path,
    args: list[str],
    marks: Path,
    pause: float,
    only_first: bool = False,
    config_delay: float = 0,
):
    script = tmp_path / "attnflow_paused.py"
    script.write_text(SCRIPT)
    marks.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "ATTNFLOW_TEST_MARKS": str(marks),
        "ATTNFLOW_TEST_PAUSE": str(pause),
        "ATTNFLOW_TEST_ONLY_FIRST": "1" if only_first else "0",
        "ATTNFLOW_TEST_CONFIG_DELAY": str(config_delay),
    }
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(pred, what: str, procs=()) -> None:
    deadline = time.monotonic() + WAIT_S
    while not pred():
        for p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                pytest.fail(f"process ended (rc {p.returncode}) before {what}: {out}\n{err}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie whose every thread has exited counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks]
    except OSError:
        return False
    return not all(state in "ZX" for state in states)


def _same(a: xr.Dataset, b: xr.Dataset) -> None:
    xr.testing.assert_identical(a.load(), b.load())
    for name in a.variables:
        np.testing.assert_array_equal(a[name].values, b[name].values, strict=True)


@pytest.fixture(scope="module")
def whole_sweep(tmp_path_factory) -> xr.Dataset:
    """The uninterrupted sweep the interrupted ones must equal, bit for bit."""
    out = tmp_path_factory.mktemp("whole") / "sweep"
    run_sweep(LONGER, GRID, out, workers=1)
    return open_sweep(out).drop_attrs().load()


def _cfg(tmp_path: Path, cfg: dict, name: str) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg))
    return p


# -- two processes, one directory -----------------------------------------------------------------------
def test_a_second_run_on_a_busy_directory_is_refused_and_the_store_stays_intact(tmp_path):
    cfg = _cfg(tmp_path, LONGER, "c.yaml")
    out, marks = tmp_path / "run", tmp_path / "marks"
    first = _start(tmp_path, ["run", str(cfg), "--out", str(out), "-q"], marks, pause=600)
    try:
        _wait(lambda: (marks / "first").exists(), "the first run to reach step 35", [first])
        # the second one starts while the first steps (issue 10: 3 of 3 stores left corrupt)
        second = subprocess.run(
            [sys.executable, "-m", "attnflow.cli", "run", str(cfg), "--out", str(out), "-q"],
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        assert second.returncode == 1, second.stderr
        assert f"is in use by process {first.pid} on " in second.stderr
        assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
        assert read_meta(out)["pid"] == first.pid  # the refused run wrote nothing
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=WAIT_S)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    resumed = run_experiment(cfg, out)  # the dead holder's lock is taken over
    verify_run(out)
    _same(resumed.drop_attrs(), run_experiment(LONGER, tmp_path / "whole").drop_attrs())


def test_two_runs_started_at_once_leave_one_consistent_run(tmp_path):
    """Seeds 0 and 1 into one directory at the same moment: exactly one runs, the other is refused."""
    out, marks = tmp_path / "run", tmp_path / "marks"
    cfgs = [_cfg(tmp_path, {**LONGER, "seed": s}, f"seed{s}.yaml") for s in (0, 1)]
    # each run waits 2 s before writing config.yaml and pauses 2 s at step 35, so the two overlap whatever
    # their start-up times (before the lock, both passed the "no config yet" check and both ran)
    procs = [
        _start(tmp_path, ["run", str(c), "--out", str(out), "-q"], marks, pause=2.0, config_delay=2.0)
        for c in cfgs
    ]
    results = [p.communicate(timeout=WAIT_S) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 1], results
    winner, loser = codes.index(0), codes.index(1)
    assert "is in use by process" in results[loser][1] or "different config" in results[loser][1]
    seed = (0, 1)[winner]
    verify_run(out)
    assert yaml.safe_load((out / "config.yaml").read_text())["seed"] == seed
    expected = run_experiment({**LONGER, "seed": seed}, tmp_path / "ref")
    _same(run_experiment(cfgs[winner], out).drop_attrs(), expected.drop_attrs())
    # the loser's config now meets a finished run of another seed: refused, never "done" with wrong data
    again = CliRunner().invoke(app, ["run", str(cfgs[loser]), "--out", str(out), "-q"])
    assert again.exit_code == 1 and "holds a run with a different config" in again.output


# -- sweeps and dead processes ----------------------------------------------------------------------------
def test_sigkill_of_the_sweep_main_process_kills_its_workers_and_resume_is_bitwise(tmp_path, whole_sweep):
    cfg = _cfg(tmp_path, LONGER, "c.yaml")
    out, marks = tmp_path / "sweep", tmp_path / "marks"
    args = ["sweep", str(cfg), "--grid", "seed=0,1,2,3", "--out", str(out), "-j", "2", "-q"]
    main = _start(tmp_path, args, marks, pause=600)
    try:
        _wait(lambda: len(list(marks.glob("at35-*"))) == 2, "both workers to reach step 35", [main])
        workers = [int(p.name.split("-")[1]) for p in marks.glob("at35-*")]
        assert main.pid not in workers
        os.kill(main.pid, signal.SIGKILL)
        main.wait(timeout=WAIT_S)
        # issue 10: the orphans went on (and took queued tasks); now they exit within a poll period
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers):
            assert time.monotonic() < deadline, f"orphan workers still alive: {workers}"
            time.sleep(0.1)
    finally:
        if main.poll() is None:
            main.kill()
            main.wait()
    summary = run_sweep(cfg, GRID, out, workers=1)  # resume: the default
    failures = {k: t.get("error") for k, t in summary["tasks"].items() if t["status"] != "done"}
    assert summary["done"] == 4 and summary["failed"] == 0, failures
    _same(open_sweep(out).drop_attrs(), whole_sweep)
    for name in read_index(out)["tasks"]:
        verify_run(out / name)


def test_sigkill_of_one_worker_fails_no_task_and_the_sweep_completes(tmp_path, whole_sweep):
    cfg = _cfg(tmp_path, LONGER, "c.yaml")
    out, marks = tmp_path / "sweep", tmp_path / "marks"
    args = ["sweep", str(cfg), "--grid", "seed=0,1,2,3", "--out", str(out), "-j", "2", "-q"]
    main = _start(tmp_path, args, marks, pause=600, only_first=True)
    try:
        _wait(lambda: (marks / "first").exists(), "a worker to reach step 35", [main])
        victim = int((marks / "first").read_text())
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = main.communicate(timeout=WAIT_S)
    finally:
        if main.poll() is None:
            main.kill()
            main.wait()
    # issue 10: all 4 tasks were marked failed, 2 of them never started
    assert main.returncode == 0, stderr
    index = read_index(out)
    statuses = {name: read_meta(out / name)["status"] for name in index["tasks"]}
    assert set(statuses.values()) == {"done"}, statuses
    _same(open_sweep(out).drop_attrs(), whole_sweep)
