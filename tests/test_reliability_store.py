"""Run directories under hostile or unlucky use: locks, confined paths, markers, checkpoints, verification.

Each test reproduces one failure of issue 10 (it failed on the code before the fix) and checks the
refusal message names the rule, the value and the fix. Process-level tests (two processes on one
directory, SIGKILL of a sweep) are in ``test_reliability_processes.py``.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr
import zarr
from experiments_helpers import TINY, tiny

from attnflow.experiments.files import (
    CorruptFileError,
    UnsafePathError,
    atomic_write_text,
    confined,
    write_marker,
)
from attnflow.experiments.locking import LOCK_FILE, DirectoryLock, DirectoryLockedError
from attnflow.experiments.store import (
    CorruptRunError,
    open_run,
    read_meta,
    run_experiment,
    verify_run,
)
from attnflow.experiments.sweep import open_sweep, read_index, run_sweep, sweep_info

LONGER = {**TINY, "integrator": {"dt": 0.01, "t1": 0.6}, "checkpoint_every": 20}


def _arrays(store: Path) -> dict:
    g = zarr.open_group(store, mode="r", use_consolidated=False)
    return {name: np.asarray(a[...]) for name, a in g.arrays()}


def _tree(path: Path) -> dict:
    """Every file under ``path`` and its bytes (to prove that nothing changed)."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# -- locks ---------------------------------------------------------------------------------------------
def test_a_locked_run_directory_refuses_a_second_writer(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    with DirectoryLock(out, "run directory"):
        with pytest.raises(
            DirectoryLockedError,
            match=rf"the run directory {out} is in use by process {os.getpid()} on .* since 20.*; wait for "
            "it to finish, stop it, or choose another output directory",
        ):
            run_experiment(TINY, out)
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing was written by the refused run
    run_experiment(TINY, out)  # released: the next run goes
    verify_run(out)


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    # a lock file left by a process that died (a SIGKILL leaves the file, the kernel drops the flock)
    (out / LOCK_FILE).write_text(json.dumps({"pid": 999999999, "host": "gone", "since": "2020"}) + "\n")
    run_experiment(TINY, out)
    holder = json.loads((out / LOCK_FILE).read_text())
    assert holder["pid"] == os.getpid()


def test_a_lock_of_a_dying_holder_is_waited_for_not_refused(tmp_path):
    """A SIGKILLed process drops its flock only when its last thread exits, a few ms after it died."""
    import time

    first = DirectoryLock(tmp_path, "run directory").acquire()
    # the recorded holder is dead (as after a SIGKILL) while the flock is still held
    os.pwrite(first._fd, json.dumps({"pid": 999999999, "host": socket.gethostname()}).ljust(200).encode(), 0)
    threading.Timer(0.3, first.release).start()
    t0 = time.monotonic()
    with DirectoryLock(tmp_path, "run directory"):
        assert 0.2 < time.monotonic() - t0 < 5
    # a live holder is refused at once
    with DirectoryLock(tmp_path, "run directory"):
        t0 = time.monotonic()
        with pytest.raises(DirectoryLockedError):
            DirectoryLock(tmp_path, "run directory").acquire()
        assert time.monotonic() - t0 < 1


def test_a_locked_sweep_directory_refuses_a_second_sweep(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    with DirectoryLock(out, "sweep directory"), pytest.raises(DirectoryLockedError, match="sweep directory"):
        run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    assert not (out / "tasks.json").exists()


def test_a_task_in_use_is_refused_and_reported_not_corrupted(tmp_path):
    out = tmp_path / "s"
    run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    task = out / next(iter(read_index(out)["tasks"]))
    before = _tree(task / "data.zarr")
    with DirectoryLock(task, "task directory"):
        with pytest.raises(DirectoryLockedError, match="task directory"):
            run_sweep(TINY, {"seed": [0, 1]}, out, workers=1, resume=False)  # would delete the task
        summary = run_sweep(TINY, {"seed": [0, 1, 2]}, tmp_path / "s2", workers=1)
    assert summary["done"] == 3
    assert _tree(task / "data.zarr") == before


def test_temporary_files_have_unique_names(tmp_path):
    """Fixed tmp names (``meta.json.tmp``) made two writers replace each other's tmp file."""
    p = tmp_path / "meta.json"
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        try:
            for i in range(200):
                atomic_write_text(p, f"{tag} {i}\n")
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert p.read_text().split()[1] == "199"
    assert [q.name for q in tmp_path.iterdir()] == ["meta.json"]  # no tmp file left behind


# -- nothing deleted that attnflow did not create ------------------------------------------------------
def test_confined_refuses_escapes(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    (tmp_path / "victim").mkdir()
    (root / "link").symlink_to(tmp_path / "victim")
    assert confined(root, "task-0000") == root.resolve() / "task-0000"
    for name in ("../victim", str(tmp_path / "victim"), "a/../../victim", "..", ".", ""):
        with pytest.raises(
            UnsafePathError, match=r"must be a relative name inside .*no '\.\.', not absolute"
        ):
            confined(root, name)
    with pytest.raises(UnsafePathError, match=r"resolves to .*victim, outside .*remove the symlink"):
        confined(root, "link")


@pytest.mark.parametrize("escape", ["../victim", "ABSOLUTE"])
def test_sweep_no_resume_never_deletes_outside_the_sweep(tmp_path, escape):
    out, victim = tmp_path / "s", tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    index = json.loads((out / "tasks.json").read_text())
    name = str(victim) if escape == "ABSOLUTE" else escape
    index["tasks"][name] = {"seed": 0}
    (out / "tasks.json").write_text(json.dumps(index))
    with pytest.raises(UnsafePathError, match=r"must be a relative name inside"):
        run_sweep(TINY, {"seed": [0, 1]}, out, workers=1, resume=False)
    assert (victim / "precious.txt").read_text() == "keep me"
    for reader in (read_index, open_sweep, sweep_info):
        with pytest.raises(UnsafePathError):
            reader(out)


def test_sweep_no_resume_never_deletes_an_unmarked_task_directory(tmp_path):
    out = tmp_path / "s"
    run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    names = list(read_index(out)["tasks"])
    (out / names[0] / ".attnflow").unlink()  # as if someone else's directory had the task's name
    with pytest.raises(UnsafePathError, match=r"was not created by attnflow \(no \.attnflow marker file\)"):
        run_sweep(TINY, {"seed": [0, 1]}, out, workers=1, resume=False)
    assert (out / names[0] / "data.zarr").is_dir() and (out / names[1] / "data.zarr").is_dir()


@pytest.mark.parametrize("resume", [True, False])
def test_run_never_deletes_someone_elses_data(tmp_path, resume):
    out = tmp_path / "theirs"
    xr.Dataset({"v": ("t", np.arange(3.0))}).to_zarr(out / "data.zarr")
    before = _tree(out)
    with pytest.raises(
        UnsafePathError,
        match=r"holds data\.zarr that attnflow did not create \(no \.attnflow marker file\), so nothing "
        "there is overwritten or deleted; move them away or choose another out_dir",
    ):
        run_experiment(TINY, out, resume=resume)
    assert {k: v for k, v in _tree(out).items() if k != LOCK_FILE} == before


def test_a_legacy_run_of_the_same_config_is_adopted(tmp_path):
    out = tmp_path / "r"
    run_experiment(TINY, out)
    (out / ".attnflow").unlink()  # written before markers existed
    run_experiment(TINY, out)  # same config, resume: it is ours
    assert (out / ".attnflow").is_file()
    run_experiment(tiny(seed=3), out, resume=False)  # now marked: it may be cleared
    assert read_meta(out)["seeds"]["seed"] == 3


def test_a_crafted_checkpoint_changes_nothing(tmp_path):
    out = tmp_path / "r"
    run_experiment(LONGER, out)
    meta = read_meta(out)
    meta["status"] = "running"
    (out / "meta.json").write_text(json.dumps(meta))
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    before = _arrays(out / "data.zarr")
    for bad, pattern in [
        ({"records": 0}, r"records=0, .*need records >= 1"),
        ({"records": 99}, r"holds 13 records in .* but the checkpoint covers 99"),
        ({"last_record_step": 40}, r"record 12 has step 60 but the checkpoint says 40"),
        ({"records": "3"}, r"is not a checkpoint of this attnflow version"),
        ({"format": 7}, r"is not a checkpoint of this attnflow version"),
        ({"sim": {"x": 1}}, r"does not fit this run \("),
    ]:
        torch.save({**state, **bad}, out / "checkpoint.pt")
        with pytest.raises(CorruptRunError, match=pattern + r".*rerun with resume=False"):
            run_experiment(LONGER, out)
        after = _arrays(out / "data.zarr")
        assert after.keys() == before.keys()
        for k in before:
            np.testing.assert_array_equal(after[k], before[k])


def test_a_truncated_checkpoint_says_so(tmp_path):
    out = tmp_path / "r"
    run_experiment(LONGER, out)
    meta = read_meta(out)
    meta["status"] = "running"
    (out / "meta.json").write_text(json.dumps(meta))
    blob = (out / "checkpoint.pt").read_bytes()
    (out / "checkpoint.pt").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(
        CorruptRunError,
        match=r"checkpoint\.pt is truncated or unreadable .*; rerun with resume=False to start",
    ):
        run_experiment(LONGER, out)


# -- "done" is verified ------------------------------------------------------------------------------
def _damage(store: Path, name: str = "energy") -> None:
    """Cut the last record of one array (as two concurrent writers left the stores of issue 10)."""
    arr = zarr.open_array(store, path=name, mode="r+")
    ax = list(arr.attrs["_ARRAY_DIMENSIONS"]).index("time")
    shape = list(arr.shape)
    shape[ax] -= 1
    arr.resize(tuple(shape))


def test_a_done_run_with_a_damaged_store_is_not_trusted(tmp_path):
    out = tmp_path / "r"
    run_experiment(TINY, out)
    _damage(out / "data.zarr")
    # the declared-size check (store.particle_store_sizes) refuses it before the record count is compared
    with pytest.raises(CorruptRunError, match=r"'energy' declares time = 4, but the config gives 5"):
        verify_run(out)
    with pytest.raises(CorruptRunError, match=r"rerun with resume=False"):
        run_experiment(TINY, out)
    run_experiment(TINY, out, resume=False)
    verify_run(out)


def test_a_resumed_sweep_reruns_a_done_task_whose_store_is_damaged(tmp_path):
    out = tmp_path / "s"
    run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    good = open_sweep(out).load()
    names = list(read_index(out)["tasks"])
    _damage(out / names[1] / "data.zarr")
    assert sweep_info(out)["tasks"][names[1]]["status"] == "corrupt"
    damaged = open_sweep(out)
    assert damaged["task_status"].values.tolist() == ["done", "corrupt"]
    assert np.isnan(damaged["energy"].isel(seed=1).values).all()
    summary = run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    assert summary["done"] == 2 and summary["tasks"][names[0]].get("skipped")
    assert "store failed verification" in summary["tasks"][names[1]]["rerun"]
    xr.testing.assert_identical(open_sweep(out).load(), good)


def test_corrupt_meta_and_index_files_name_the_file_and_the_fix(tmp_path):
    out = tmp_path / "s"
    run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    name = next(iter(read_index(out)["tasks"]))
    (out / name / "meta.json").write_bytes(b"{\xff")
    with pytest.raises(CorruptFileError, match=r"the run file .*meta\.json is corrupt \(UnicodeDecodeError"):
        read_meta(out / name)
    assert sweep_info(out)["tasks"][name]["status"] == "corrupt"
    with pytest.warns(UserWarning, match="not finished"):
        open_run(out / name)  # meta.json is informative only: the data still open
    (out / "tasks.json").write_text('{"tasks": [1, 2]}')
    with pytest.raises(
        CorruptFileError, match=r"the sweep index .* is corrupt .*rerun the sweep with resume=False"
    ):
        read_index(out)
    summary = run_sweep(TINY, {"seed": [0, 1]}, out, workers=1, resume=False)
    assert summary["done"] == 2
    write_marker(out, "sweep")  # idempotent


def test_run_tasks_refuses_names_outside_its_directory(tmp_path):
    """The engine of sweeps and studies: a manifest regime key ``../../x`` made a run outside ``--out``."""
    from attnflow.experiments.sweep import run_tasks

    out = tmp_path / "study" / "runs"
    for name in ("../../x_H2", str(tmp_path / "abs_H2")):
        with pytest.raises(UnsafePathError, match=r"must be a relative name inside"):
            run_tasks({name: TINY}, out, workers=1)
    assert not (tmp_path / "x_H2").exists() and not (tmp_path / "abs_H2").exists()
