"""One run store, three run kinds (issue 30, "One store"): PDE and training runs through the shared store.

* a PDE run and a training run killed by SIGKILL at a random step (a forked child kills itself: no handler
  runs, ``meta.json`` still says ``running``) resume from their last checkpoint to the bits of an
  uninterrupted run;
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
import time

import numpy as np
import pytest
import torch
from security.security_helpers import TINY_PDE, TINY_TRAINING

from attnflow.experiments.files import UnsafePathError
from attnflow.experiments.pde_runs import check_pde_resources, open_pde_run, run_pde, verify_pde_run
from attnflow.experiments.resources import training_cost
from attnflow.experiments.rundir import CorruptRunError, checkpoint_bound, read_meta
from attnflow.experiments.training_config import load_training_config
from attnflow.experiments.training_run import read_training_run, run_training
from attnflow.pde import DensitySolver
from attnflow.training.trainer import Trainer

torch.set_num_threads(1)

#: TINY_PDE: t1 / dt = 10 steps, records at 0, 3, 6, 9, 10, checkpoints at 4 and 8.
PDE_STEPS = 10
#: TINY_TRAINING with more steps, so that a kill can fall between and after checkpoints (every 2).
TRAINING = {**copy.deepcopy(TINY_TRAINING), "train": {**TINY_TRAINING["train"], "steps": 8}}
#: a forked child that has not exited after this long is stuck (a tiny run takes well under a second)
CHILD_TIMEOUT_S = 120


def _kill_step(seed: int, low: int, high: int) -> int:
    """The step (in [low, high)) at which the child kills itself: drawn from a seeded generator."""
    return int(np.random.default_rng(seed).integers(low, high))


def _fork_and_die(target, patch) -> int:
    """Run ``target()`` in a forked child after ``patch()`` (which arranges the SIGKILL); returns the signal
    that ended the child (0 if it exited)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            patch()
            target()
        except BaseException:  # noqa: BLE001 - a child must not unwind into the parent's test
            code = 3
        os._exit(code)
    deadline = CHILD_TIMEOUT_S
    t0 = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)
        if time.monotonic() - t0 > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child did not finish in {deadline} s")
        time.sleep(0.01)


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


@pytest.mark.parametrize("seed", [0, 1])
def test_pde_run_killed_at_a_random_step_resumes_bit_for_bit(tmp_path, pde_reference, seed):
    kill_at = _kill_step(seed, 1, PDE_STEPS)  # the step during which the child dies (1..9)
    out = tmp_path / "killed"
    real = DensitySolver.step

    def patch():
        def dying(self):
            if self.step_index + 1 == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            real(self)

        DensitySolver.step = dying

    assert _fork_and_die(lambda: run_pde(copy.deepcopy(TINY_PDE), out), patch) == signal.SIGKILL
    meta = read_meta(out)
    assert meta["status"] == "running"  # SIGKILL: nothing could write "interrupted"
    assert (out / "checkpoint.pt").is_file() == (kill_at > 4)  # checkpoints at steps 4 and 8
    run_pde(copy.deepcopy(TINY_PDE), out)
    assert read_meta(out)["status"] == "done" and not (out / "checkpoint.pt").exists()
    got, ref = open_pde_run(out).load(), open_pde_run(pde_reference).load()
    assert list(got.data_vars) == list(ref.data_vars)
    for name in ref.variables:
        np.testing.assert_array_equal(got[name].values, ref[name].values, err_msg=name)


@pytest.mark.parametrize("seed", [0, 1])
def test_training_run_killed_at_a_random_step_resumes_bit_for_bit(tmp_path, training_reference, seed):
    steps = TRAINING["train"]["steps"]
    kill_at = _kill_step(seed, 1, steps)  # the child dies after this many steps (before a checkpoint)
    out = tmp_path / "killed"
    real = Trainer.train

    def patch():
        def dying(self, n, on_step=None):
            def hook(tr):
                if tr.step_count == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                on_step(tr)

            real(self, n, hook)

        Trainer.train = dying

    assert _fork_and_die(lambda: run_training(copy.deepcopy(TRAINING), out), patch) == signal.SIGKILL
    meta = read_training_run(out)["meta"]
    assert meta["status"] == "running" and meta["step"] == kill_at - kill_at % 2  # the last checkpoint
    resumed = run_training(copy.deepcopy(TRAINING), out)
    ref_dir, ref = training_reference
    assert resumed["final"] == ref["final"] and resumed["initial"] == ref["initial"]
    a = torch.load(ref_dir / "checkpoint.pt", weights_only=True)["trainer"]
    b = torch.load(out / "checkpoint.pt", weights_only=True)["trainer"]
    for key in ("flow", "optimizer"):
        fa, fb = torch.utils._pytree.tree_flatten(a[key])[0], torch.utils._pytree.tree_flatten(b[key])[0]
        assert len(fa) == len(fb)
        for x, y in zip(fa, fb, strict=True):
            assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
    assert torch.equal(a["losses"], b["losses"]) and a["evals"] == b["evals"]
    for name in ("head_law.npz", "clouds.npz"):
        with np.load(ref_dir / name) as za, np.load(out / name) as zb:
            assert sorted(za.files) == sorted(zb.files)
            for k in za.files:
                np.testing.assert_array_equal(za[k], zb[k], err_msg=f"{name}:{k}")


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
    else:  # a linked config is never read as the stored config; the verifier refuses to read through it
        with pytest.raises(CorruptRunError, match=r"config\.yaml cannot be read"):
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
