"""Run store: incremental Zarr data, checkpoints, SIGKILL + resume bit for bit, plain-xarray reading."""

from __future__ import annotations

import json
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
from experiments_helpers import TINY, tiny_file_tokens

from attnflow.experiments import (
    ConfigError,
    RunConfigMismatchError,
    build,
    open_run,
    read_meta,
    run_experiment,
    run_info,
)
from attnflow.simulation import Simulator, simulate_spec

# 60 steps, records every 5, checkpoints every 20 steps (the kill test stops it at step 35)
LONGER = {**TINY, "integrator": {"dt": 0.01, "t1": 0.6}, "checkpoint_every": 20}


def _assert_same(a: xr.Dataset, b: xr.Dataset) -> None:
    """Array for array and bit for bit (NaN == NaN), including coordinates and attributes."""
    xr.testing.assert_identical(a.load(), b.load())
    for name in a.variables:
        np.testing.assert_array_equal(a[name].values, b[name].values, strict=True)


def test_run_equals_simulate_and_writes_the_store(tmp_path):
    out = tmp_path / "run"
    ds = run_experiment(TINY, out)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "checkpoint.pt",
        "config.yaml",
        "data.zarr",
        "meta.json",
    ]
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".attnflow", ".attnflow.lock"]
    ref = simulate_spec(build(TINY))
    _assert_same(ds.drop_attrs(), ref.drop_attrs())
    assert ds.sizes["time"] == 5 and ds.attrs["name"] == "tiny" and ds.attrs["H"] == 2
    meta = read_meta(out)
    assert meta["status"] == "done" and meta["step"] == meta["n_steps"] == 20 and meta["records"] == 5
    assert meta["seeds"]["seed"] == 0 and meta["device"]["name"] == "cpu"
    assert set(meta["libraries"]) >= {"torch", "numpy", "xarray", "zarr", "numba"}
    assert meta["started"] and meta["ended"] and "git_revision" in meta
    assert yaml.safe_load((out / "config.yaml").read_text())["weights"]["sigma2"] == 0.5
    info = run_info(out)
    assert info["status"] == "done" and info["sizes"]["data.zarr"] > 0
    # a finished run with the same config is returned as is (resume is the default)
    mtime = (out / "checkpoint.pt").stat().st_mtime_ns
    _assert_same(run_experiment(TINY, out), ds)
    assert (out / "checkpoint.pt").stat().st_mtime_ns == mtime


def test_final_state_recorded_when_not_a_multiple(tmp_path):
    cfg = {**TINY, "record": {"every": 3}, "checkpoint_every": 4}  # checkpoints every 6 steps
    ds = run_experiment(cfg, tmp_path / "r")
    assert ds["step"].values.tolist() == [0, 3, 6, 9, 12, 15, 18, 20]
    _assert_same(ds.drop_attrs(), simulate_spec(build(cfg)).drop_attrs())


def test_different_config_refuses_to_resume(tmp_path):
    out = tmp_path / "r"
    run_experiment(TINY, out)
    other = {**TINY, "heads": {"H": 3}, "seed": 1}
    with pytest.raises(
        RunConfigMismatchError, match=r"differing keys heads\.H, seed \(heads\.H: 2 -> 3; seed: 0 -> 1\)"
    ):
        run_experiment(other, out)
    ds = run_experiment(other, out, resume=False)  # explicit overwrite
    assert ds.attrs["H"] == 3 and read_meta(out)["status"] == "done"


def test_failed_run_is_recorded(tmp_path):
    # a 2 x 2 OU target with tokens of d = 3 read from a file: valid on load, fails when the run is built
    bad = tiny_file_tokens(tmp_path, d=3, weights={"process": "ornstein_uhlenbeck", "F": [[1, 0], [0, 1]]})
    with pytest.raises(ConfigError, match=r"weights\.F does not fit .*OU target F has shape"):
        run_experiment(bad, tmp_path / "r")
    meta = read_meta(tmp_path / "r")
    assert meta["status"] == "failed" and "OU target F" in meta["error"] and "Traceback" in meta["traceback"]
    # the same mismatch with a known d is refused on load, before the run directory is touched
    with pytest.raises(ConfigError, match=r"weights\.F does not fit heads\.H = 2 and tokens\.d = 3"):
        run_experiment({**TINY, "weights": bad["weights"]}, tmp_path / "r2")
    assert not (tmp_path / "r2").exists()


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from attnflow.simulation import Simulator
    from attnflow.experiments.store import run_experiment

    config, out, marker = sys.argv[1:4]
    original = Simulator.advance

    def advance(self, k, **kwargs):
        # stop for good at step 35: the last checkpoint is at step 20, the data already hold
        # records up to step 35 (flush_every_s=0 appends every record), so resuming must truncate;
        # the driver takes blocks of steps: the one that crosses step 35 is split
        if self.step_index < 35 < self.step_index + k:
            first_part = 35 - self.step_index
            original(self, first_part, **kwargs)
            k -= first_part
        if self.step_index == 35:
            open(marker, "w").close()
            time.sleep(600)
        original(self, k, **kwargs)

    Simulator.advance = advance
    run_experiment(config, out, flush_every_s=0.0)
    """
)


def test_sigkill_then_resume_is_bitwise_identical(tmp_path):
    import torch
    import zarr

    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump(LONGER))
    script = tmp_path / "kill_me.py"
    script.write_text(KILL_SCRIPT)
    out, marker = tmp_path / "killed", tmp_path / "at_step_35"
    proc = subprocess.Popen([sys.executable, str(script), str(cfg_path), str(out), str(marker)])
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, "the run ended before reaching step 35"
            assert time.monotonic() < deadline, "the run did not reach step 35 in time"
            time.sleep(0.05)
        assert (out / "checkpoint.pt").is_file()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert read_meta(out)["status"] == "running"
    assert "interrupted" in run_info(out)["status"]
    # the data run past the checkpoint: 8 records (steps 0..35) against 5 in the checkpoint (steps 0..20)
    assert zarr.open_array(out / "data.zarr", path="step", mode="r").shape == (8,)
    ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
    assert ckpt["records"] == 5 and ckpt["sim"]["step"] == 20 and ckpt["last_record_step"] == 20

    resumed = run_experiment(cfg_path, out)  # resume is the default
    uninterrupted = run_experiment(LONGER, tmp_path / "whole")
    assert resumed["step"].values.tolist() == list(range(0, 61, 5))
    _assert_same(resumed.drop_attrs(), uninterrupted.drop_attrs())
    assert resumed.attrs == uninterrupted.attrs
    meta = read_meta(out)
    assert meta["status"] == "done" and len(meta["resumed"]) == 1 and meta["records"] == 13


def test_opens_with_plain_xarray_without_attnflow(tmp_path):
    out = tmp_path / "r"
    ds = run_experiment(TINY, out).load()
    code = textwrap.dedent(
        f"""
        import sys, warnings
        warnings.simplefilter("error")         # standard, consolidated Zarr: no fallback warning
        sys.modules["attnflow"] = None         # any import of attnflow now fails
        import numpy as np, xarray as xr
        ds = xr.open_zarr({str(out / "data.zarr")!r})
        np.savez({str(tmp_path / "plain.npz")!r}, **{{k: v.values for k, v in ds.variables.items()}})
        print(sorted(ds.attrs))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "config" in res.stdout
    plain = np.load(tmp_path / "plain.npz", allow_pickle=False)
    assert set(plain.files) == set(ds.variables)
    for name in plain.files:
        np.testing.assert_array_equal(plain[name], ds[name].values, strict=True)
    assert json.loads(ds.attrs["model"])["direction"] == "descent"


def test_open_run_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a run directory with data"):
        open_run(tmp_path)
    out = tmp_path / "r"
    run_experiment(TINY, out)
    meta = json.loads((out / "meta.json").read_text())
    meta["status"] = "running"
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="is not finished"):
        open_run(out)
    assert Path(out / "data.zarr" / ".zmetadata").is_file()


def _fail_at(monkeypatch, step_index: int, seen: list | None = None, out: Path | None = None) -> None:
    """Make Simulator.advance raise on reaching ``step_index`` (recording meta.json as it is then, if asked);
    the driver's block that crosses it is split there."""
    original = Simulator.advance

    def advance(self, k, **kwargs):
        if self.step_index < step_index < self.step_index + k:
            first_part = step_index - self.step_index
            original(self, first_part, **kwargs)
            k -= first_part
        if self.step_index == step_index:
            if seen is not None:
                seen.append(read_meta(out))
            raise RuntimeError(f"injected failure at step {step_index}")
        original(self, k, **kwargs)

    monkeypatch.setattr(Simulator, "advance", advance)


def test_failed_run_resumes_with_consistent_meta(tmp_path, monkeypatch):
    import zarr

    out = tmp_path / "r"
    # 60 steps, checkpoint at 20: fail at 35 with the records up to step 35 flushed (8 records)
    _fail_at(monkeypatch, 35)
    with pytest.raises(RuntimeError, match="injected failure at step 35"):
        run_experiment(LONGER, out, flush_every_s=0.0)
    meta = read_meta(out)
    assert meta["status"] == "failed" and meta["records"] == 8 and meta["step"] == 20
    assert zarr.open_array(out / "data.zarr", path="step", mode="r").shape == (8,)
    # resume: truncated to the checkpoint's 5 records; meta.json says so from the start of the attempt
    seen: list = []
    _fail_at(monkeypatch, 21, seen, out)
    with pytest.raises(RuntimeError, match="injected failure at step 21"):
        run_experiment(LONGER, out, flush_every_s=0.0)
    assert seen[0]["status"] == "running" and seen[0]["records"] == 5 and seen[0]["step"] == 20
    meta = read_meta(out)
    n_stored = zarr.open_array(out / "data.zarr", path="step", mode="r").shape[0]
    assert meta["status"] == "failed" and meta["records"] == n_stored == 5 and meta["step"] == 20
    monkeypatch.undo()
    resumed = run_experiment(LONGER, out)
    meta = read_meta(out)
    assert meta["status"] == "done" and meta["records"] == resumed.sizes["time"] == 13 and meta["step"] == 60
    assert len(meta["resumed"]) == 2
    _assert_same(resumed.drop_attrs(), run_experiment(LONGER, tmp_path / "whole").drop_attrs())


def test_truncate_store_refuses_damaged_stores(tmp_path):
    from attnflow.experiments.rundir import truncate_store as _truncate_store

    out = tmp_path / "r"
    run_experiment(TINY, out)  # 5 records, steps 0, 5, 10, 15, 20
    with pytest.raises(
        ValueError,
        match=r"holds 5 records in '.*' but the checkpoint covers 7; the store is damaged; "
        r"rerun with resume=False",
    ):
        _truncate_store(out / "data.zarr", 7, 30)
    with pytest.raises(
        ValueError,
        match=r"record 3 has step 15 but the checkpoint says 10; the store is damaged; rerun with "
        r"resume=False",
    ):
        _truncate_store(out / "data.zarr", 4, 10)


def test_checkpoint_and_meta_are_fsynced_before_replace(tmp_path, monkeypatch):
    import attnflow.experiments.store as store

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync")
        real_fsync(fd)

    def replace(src, dst):
        if Path(dst).name in ("config.yaml", "meta.json", "checkpoint.pt"):  # zarr renames its own files
            events.append(f"replace {Path(dst).name}")
        real_replace(src, dst)

    monkeypatch.setattr(store.os, "fsync", fsync)
    monkeypatch.setattr(store.os, "replace", replace)
    run_experiment(TINY, tmp_path / "r")
    replaces = [i for i, e in enumerate(events) if e.startswith("replace")]
    assert {events[i] for i in replaces} == {
        "replace config.yaml",
        "replace meta.json",
        "replace checkpoint.pt",
    }
    for i in replaces:
        assert events[i - 1] == "fsync"  # the tmp file reached the disk before the rename
        assert events[i + 1] == "fsync"  # and the rename itself (the directory)


def test_unreadable_stored_config_refuses_to_resume(tmp_path):
    # the one rule of every run store (rundir.stored_config_diff): a stored config that does not load
    # is named with its reason and the fix, and nothing is overwritten
    from attnflow.experiments.errors import ConfigError
    from attnflow.experiments.rundir import stored_config_diff

    out = tmp_path / "r"
    run_experiment(TINY, out)
    (out / "config.yaml").write_text("seed: [not, a, config]\n")
    with pytest.raises(
        RunConfigMismatchError, match=r"config\.yaml cannot be read, so the run cannot be resumed"
    ):
        run_experiment(TINY, out)
    assert (out / "config.yaml").read_text() == "seed: [not, a, config]\n"

    def load(path):
        raise ConfigError("first line\nsecond line")

    with pytest.raises(RunConfigMismatchError, match=r"\(first line\); choose another out_dir$"):
        stored_config_diff(load, list, fix="choose another out_dir")(tmp_path / "c.yaml")
    with pytest.raises(
        RunConfigMismatchError, match=r"\(first line\nsecond line\); choose another out_dir or"
    ):
        stored_config_diff(load, list, limit=None)(tmp_path / "c.yaml")
    assert stored_config_diff(lambda p: 1, lambda old: [("k", old, 2)])(tmp_path / "c.yaml") == [("k", 1, 2)]
