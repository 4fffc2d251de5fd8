"""One run store, three run kinds (issue 30, "One store"): PDE and training runs through the shared store.

* a PDE run and a training run killed at a random step resume from their last checkpoint to the bits of an
  uninterrupted run: in the default tier the run directory is copied at the kill (what SIGKILL leaves on
  disk: ``meta.json`` still says ``running``), in the slow tier a child process sends itself SIGKILL
  (``tests/store_kill_helpers.py`` arms both);
* a hostile PDE or training run directory (a link in the store or in place of a run file, a path leaving
  the directory, an oversize array or checkpoint) is refused with one clear error before anything is read
  through it or allocated for it.

The kill step is drawn from a seeded generator (same seed, same step).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from security.security_helpers import TINY_PDE, TINY_TRAINING
from store_kill_helpers import arm, run

from attnflow.experiments.files import UnsafePathError
from attnflow.experiments.pde_runs import check_pde_resources, open_pde_run, run_pde, verify_pde_run
from attnflow.experiments.resources import training_cost
from attnflow.experiments.rundir import CorruptRunError, RunConfigMismatchError, checkpoint_bound, read_meta
from attnflow.experiments.training_config import load_training_config
from attnflow.experiments.training_run import read_training_run, run_training
from attnflow.pde import DensitySolver
from attnflow.training.trainer import Trainer

torch.set_num_threads(1)

#: TINY_PDE: t1 / dt = 10 steps, records at 0, 3, 6, 9, 10, checkpoints at 4 and 8.
PDE_STEPS = 10
#: TINY_TRAINING with more steps, so that a kill can fall between and after checkpoints (every 2).
TRAINING = {**copy.deepcopy(TINY_TRAINING), "train": {**TINY_TRAINING["train"], "steps": 8}}
#: a child that has not died after this long is stuck (it imports attnflow and runs a tiny run: seconds)
CHILD_TIMEOUT_S = 300
HELPERS = Path(__file__).with_name("store_kill_helpers.py")


def _kill_step(seed: int, low: int, high: int) -> int:
    """The step (in [low, high)) at which the run is killed: drawn from a seeded generator."""
    return int(np.random.default_rng(seed).integers(low, high))


class _Killed(BaseException):
    """Stops the run in the test process once the directory has been copied (not an Exception: no handler
    of the run treats it as its own failure)."""


def _kill_in_process(kind: str, config: dict, out, kill_at: int, monkeypatch):
    """Copy ``out`` as it stands at the kill (what SIGKILL leaves on disk) to its sibling ``killed`` and
    stop the run; returns the copy."""
    killed = out.parent / "killed"

    def snapshot():
        shutil.copytree(out, killed)
        raise _Killed

    with monkeypatch.context() as m:
        if kind == "pde":
            m.setattr(DensitySolver, "step", DensitySolver.step)  # restored when the context ends
        else:
            m.setattr(Trainer, "train", Trainer.train)
        arm(kind, kill_at, snapshot)
        with pytest.raises(_Killed):
            run(kind, copy.deepcopy(config), str(out))
    return killed


def _kill_in_a_child(kind: str, config: dict, out, kill_at: int):
    """Run ``kind`` in a child process that sends itself SIGKILL at ``kill_at``; returns ``out``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run(
        [sys.executable, str(HELPERS), kind, json.dumps(config), str(out), str(kill_at)],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def pde_reference(tmp_path_factory):
    """A finished TINY_PDE run (uninterrupted)."""
    out = tmp_path_factory.mktemp("pde") / "ref"
    run_pde(copy.deepcopy(TINY_PDE), out)
    return out


@pytest.fixture(scope="module")
def training_reference(tmp_path_factory):
    """A finished TRAINING run (uninterrupted) and its summary."""
    out = tmp_path_factory.mktemp("training") / "ref"
    return out, run_training(copy.deepcopy(TRAINING), out)


def _counting(monkeypatch, cls, name) -> dict:
    """Count the calls of ``cls.name`` (the steps a resumed run really takes)."""
    calls = {"n": 0}
    real = getattr(cls, name)

    def counted(self, *a, **k):
        calls["n"] += 1
        return real(self, *a, **k)

    monkeypatch.setattr(cls, name, counted)
    return calls


def _check_pde_resumed(out, kill_at, reference, monkeypatch):
    meta = read_meta(out)
    last = kill_at - 1 - (kill_at - 1) % 4  # the last checkpoint (every 4 steps) or 0
    assert meta["status"] == "running" and meta["step"] == last  # killed: nothing wrote "interrupted"
    assert (out / "checkpoint.pt").is_file() == (kill_at > 4)
    steps = _counting(monkeypatch, DensitySolver, "step")
    run_pde(copy.deepcopy(TINY_PDE), out)
    assert steps["n"] == PDE_STEPS - last  # it went on from the checkpoint, it did not start again
    assert read_meta(out)["status"] == "done" and not (out / "checkpoint.pt").exists()
    got, ref = open_pde_run(out).load(), open_pde_run(reference).load()
    assert list(got.variables) == list(ref.variables)
    for name in ref.variables:
        np.testing.assert_array_equal(got[name].values, ref[name].values, err_msg=name)


def _tensors_equal(a, b) -> bool:
    """Same structure, tensors equal bit for bit (and of one dtype), other values equal."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_tensors_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_tensors_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _check_training_resumed(out, kill_at, reference, monkeypatch):
    meta = read_training_run(out)["meta"]
    last = (kill_at - 1) - (kill_at - 1) % 2  # killed before step kill_at's checkpoint: the one before
    assert meta["status"] == "running" and meta["step"] == last
    steps = _counting(monkeypatch, Trainer, "train_step")
    resumed = run_training(copy.deepcopy(TRAINING), out)
    assert steps["n"] == TRAINING["train"]["steps"] - last  # went on from the checkpoint
    ref_dir, ref = reference
    assert resumed["final"] == ref["final"] and resumed["initial"] == ref["initial"]
    a = torch.load(ref_dir / "checkpoint.pt", weights_only=True)["trainer"]
    b = torch.load(out / "checkpoint.pt", weights_only=True)["trainer"]
    assert _tensors_equal(a, b)
    for name in ("head_law.npz", "clouds.npz"):
        with np.load(ref_dir / name) as za, np.load(out / name) as zb:
            assert sorted(za.files) == sorted(zb.files)
            for k in za.files:
                np.testing.assert_array_equal(za[k], zb[k], err_msg=f"{name}:{k}")
    assert read_training_run(out)["meta"]["status"] == "done"
    # a finished run is returned as is; another config in the same directory is refused
    assert run_training(copy.deepcopy(TRAINING), out) == resumed
    other = copy.deepcopy(TRAINING)
    other["train"]["lr"] = 0.01
    with pytest.raises(RunConfigMismatchError, match="different config.*train.lr"):
        run_training(other, out)


@pytest.mark.parametrize("seed", [0, 1])
def test_pde_run_killed_at_a_random_step_resumes_bit_for_bit(tmp_path, pde_reference, seed, monkeypatch):
    kill_at = _kill_step(seed, 1, PDE_STEPS + 1)  # during step 1..10 (checkpoints after steps 4 and 8)
    killed = _kill_in_process("pde", TINY_PDE, tmp_path / "run", kill_at, monkeypatch)
    _check_pde_resumed(killed, kill_at, pde_reference, monkeypatch)


@pytest.mark.parametrize("seed", [0, 1])
def test_training_run_killed_at_a_random_step_resumes_bit_for_bit(
    tmp_path, training_reference, seed, monkeypatch
):
    kill_at = _kill_step(seed, 1, TRAINING["train"]["steps"] + 1)  # after step 1..8, before its checkpoint
    killed = _kill_in_process("training", TRAINING, tmp_path / "run", kill_at, monkeypatch)
    _check_training_resumed(killed, kill_at, training_reference, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pde", "training"])
def test_a_real_sigkill_at_a_random_step_resumes_bit_for_bit(
    tmp_path, pde_reference, training_reference, kind, monkeypatch
):
    """The same with a real SIGKILL of a child process (slow tier: the child imports attnflow)."""
    config, steps = (TINY_PDE, PDE_STEPS) if kind == "pde" else (TRAINING, TRAINING["train"]["steps"])
    kill_at = _kill_step(2, 1, steps + 1)
    out = _kill_in_a_child(kind, config, tmp_path / "run", kill_at)
    if kind == "pde":
        _check_pde_resumed(out, kill_at, pde_reference, monkeypatch)
    else:
        _check_training_resumed(out, kill_at, training_reference, monkeypatch)


# -- hostile directories -------------------------------------------------------------------------------
def _copy(src, tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst


def _set_status(out, status):
    meta = json.loads((out / "meta.json").read_text())
    meta["status"] = status
    (out / "meta.json").write_text(json.dumps(meta))


def test_pde_store_with_a_link_is_refused(tmp_path, pde_reference):
    run = _copy(pde_reference, tmp_path)
    chunk = next(p for p in sorted((run / "data.zarr" / "density").iterdir()) if not p.name.startswith("."))
    private = tmp_path / "private_chunk"
    shutil.copyfile(chunk, private)
    chunk.unlink()
    chunk.symlink_to(private)
    msg = r"data\.zarr.*density.* in the run's store is a symbolic link \(to .*private_chunk\)"
    with pytest.raises(UnsafePathError, match=msg):
        run_pde(copy.deepcopy(TINY_PDE), run)  # the "done" run is verified before it is returned
    with pytest.raises(UnsafePathError, match=msg):
        open_pde_run(run)


@pytest.mark.parametrize("name", ["meta.json", "config.yaml"])
def test_pde_run_file_leading_out_of_the_directory_is_refused(tmp_path, pde_reference, name):
    run = _copy(pde_reference, tmp_path)
    private = tmp_path / f"private_{name}"
    shutil.copyfile(run / name, private)
    (run / name).unlink()
    (run / name).symlink_to(private)
    if name == "meta.json":
        with pytest.raises(UnsafePathError, match=r"meta\.json.*resolves to .*private_meta\.json, outside"):
            run_pde(copy.deepcopy(TINY_PDE), run)
    else:  # the store's verifier reads no config through a link out of the directory
        with pytest.raises(
            UnsafePathError, match=r"config\.yaml.*resolves to .*private_config\.yaml, outside"
        ):
            open_pde_run(run)
        with pytest.raises(UnsafePathError, match=r"config\.yaml.*outside"):
            verify_pde_run(run)


def test_pde_store_declaring_an_oversize_array_is_refused_before_allocation(tmp_path, pde_reference):
    run = _copy(pde_reference, tmp_path)
    store = run / "data.zarr"
    for meta_file in (store / "density" / ".zarray", store / ".zmetadata"):
        text = meta_file.read_text()
        data = json.loads(text)
        zarray = data if meta_file.name == ".zarray" else data["metadata"]["density/.zarray"]
        zarray["shape"] = [10**9, zarray["shape"][1]]  # 10^9 records of 73 nodes: about 580 GB of float64
        meta_file.write_text(json.dumps(data))
    with pytest.raises(
        CorruptRunError, match=r"the array 'density' declares time = 1000000000, but the config gives 5 "
    ):
        open_pde_run(run)
    with pytest.raises(CorruptRunError, match=r"declares time = 1000000000"):
        run_pde(copy.deepcopy(TINY_PDE), run)


def _interrupted_pde(tmp_path):
    """A TINY_PDE run stopped by Ctrl-C after its checkpoint at step 4."""
    out = tmp_path / "run"
    real = DensitySolver.step
    calls = {"n": 0}

    def stopping(self):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        real(self)

    DensitySolver.step = stopping
    try:
        with pytest.raises(KeyboardInterrupt):
            run_pde(copy.deepcopy(TINY_PDE), out)
    finally:
        DensitySolver.step = real
    assert read_meta(out)["status"] == "interrupted" and (out / "checkpoint.pt").is_file()
    return out


def test_pde_checkpoint_link_or_oversize_is_refused(tmp_path):
    out = _interrupted_pde(tmp_path)
    ck = out / "checkpoint.pt"
    private = tmp_path / "private.pt"
    shutil.copyfile(ck, private)
    ck.unlink()
    ck.symlink_to(private)
    with pytest.raises(UnsafePathError, match=r"checkpoint\.pt is a symbolic link .*reads no checkpoint"):
        run_pde(copy.deepcopy(TINY_PDE), out)
    ck.unlink()
    bound = checkpoint_bound(check_pde_resources(copy.deepcopy(TINY_PDE)).memory_bytes)
    with open(ck, "wb") as fh:  # a sparse file one byte over the bound: nothing is written or read
        fh.truncate(bound + 1)
    with pytest.raises(
        CorruptRunError, match=r"checkpoint\.pt has \d+ bytes, more than the \d+ .*refused unread"
    ):
        run_pde(copy.deepcopy(TINY_PDE), out)


def test_pde_checkpoint_with_records_of_the_wrong_count_is_refused(tmp_path):
    out = _interrupted_pde(tmp_path)
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    rec = state["records"]
    for key in ("t", "u", "density", "heads"):
        rec[key] = rec[key][:1]
    rec["monitors"] = {k: v[:1] for k, v in rec["monitors"].items()}
    torch.save(state, out / "checkpoint.pt")
    with pytest.raises(CorruptRunError, match=r"does not fit this run .*2 records expected at step 4"):
        run_pde(copy.deepcopy(TINY_PDE), out)


def test_hostile_training_directory_is_refused(tmp_path, training_reference):
    ref_dir, _ = training_reference
    run = _copy(ref_dir, tmp_path)
    private = tmp_path / "private_summary.json"
    private.write_text('{"name": "SECRET"}')
    (run / "summary.json").unlink()
    (run / "summary.json").symlink_to(private)
    with pytest.raises(UnsafePathError, match=r"summary\.json.*resolves to .*private_summary\.json, outside"):
        run_training(copy.deepcopy(TRAINING), run)  # a done run's summary is not read through a link
    shutil.rmtree(run)
    run = _copy(ref_dir, tmp_path)
    _set_status(run, "interrupted")
    ck = run / "checkpoint.pt"
    shutil.copyfile(ck, tmp_path / "private.pt")
    ck.unlink()
    ck.symlink_to(tmp_path / "private.pt")
    with pytest.raises(UnsafePathError, match=r"checkpoint\.pt is a symbolic link"):
        run_training(copy.deepcopy(TRAINING), run)
    ck.unlink()
    bound = checkpoint_bound(training_cost(load_training_config(copy.deepcopy(TRAINING))).memory_bytes)
    with open(ck, "wb") as fh:  # a sparse file one byte over the bound
        fh.truncate(bound + 1)
    with pytest.raises(CorruptRunError, match=r"checkpoint\.pt has \d+ bytes, more than the \d+"):
        run_training(copy.deepcopy(TRAINING), run)
