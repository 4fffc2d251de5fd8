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

import attnflow as af
from attnflow.experiments import RunConfigMismatchError, build, open_run, read_meta, run_experiment, run_info

TINY = {
    "name": "tiny",
    "model": {"direction": "descent", "backend": "torch"},
    "weights": {"process": "ornstein_uhlenbeck", "sigma2": 0.5},
    "tokens": {"init": "octahedral", "n": 8, "d": 3},
    "heads": {"H": 2},
    "integrator": {"dt": 0.01, "t1": 0.2},
    "record": {"every": 5},
    "paths": 2,
    "checkpoint_every": 10,
}
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
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "config.yaml", "data.zarr", "meta.json"]
    model, x0, D0, kw = build(TINY)
    ref = af.simulate(model, x0, D0, **kw)
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
    model, x0, D0, kw = build(cfg)
    _assert_same(ds.drop_attrs(), af.simulate(model, x0, D0, **kw).drop_attrs())


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
    bad = {**TINY, "weights": {"process": "ornstein_uhlenbeck", "F": [[1, 0], [0, 1]]}}  # 2x2 target, d = 3
    with pytest.raises(ValueError, match="OU target F has shape"):
        run_experiment(bad, tmp_path / "r")
    meta = read_meta(tmp_path / "r")
    assert meta["status"] == "failed" and "OU target F" in meta["error"] and "Traceback" in meta["traceback"]


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from attnflow.simulate import Simulator
    from attnflow.experiments.store import run_experiment

    config, out, marker = sys.argv[1:4]
    original = Simulator.step

    def step(self):
        # stop for good at step 35: the last checkpoint is at step 20, the data already hold
        # records up to step 35 (flush_every_s=0 appends every record), so resuming must truncate
        if self.step_index == 35:
            open(marker, "w").close()
            time.sleep(600)
        original(self)

    Simulator.step = step
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
