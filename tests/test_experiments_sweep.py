"""Sweeps: local processes and a Dask cluster give the same results; failures are kept; resume skips."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from attnflow.experiments import (
    ConfigError,
    SweepMismatchError,
    SweepShapeError,
    open_run,
    open_sweep,
    read_meta,
    run_sweep,
    sweep_info,
)

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
# weights.F = [[1,0],[0,1]] is a valid config value that fails when the run is built (the OU target is
# 2 x 2 but d = 3): those two tasks fail, the other two must not be lost.
GRID = {"heads.H": [1, 2], "weights.F": ["identity", [[1, 0], [0, 1]]]}


def _check_failures(out, summary):
    st = {name: t["status"] for name, t in summary["tasks"].items()}
    assert sorted(st.values()) == ["done", "done", "failed", "failed"]
    assert summary["done"] == 2 and summary["failed"] == 2
    for name, t in summary["tasks"].items():
        meta = read_meta(out / name)
        if t["params"]["weights.F"] == "identity":
            assert t["status"] == "done" and meta["status"] == "done"
            assert open_run(out / name).sizes["time"] == 5
        else:
            assert t["status"] == "failed" and "OU target F has shape" in t["error"]
            assert "Traceback" in t["traceback"] and "Traceback" in meta["traceback"]
    on_disk = json.loads((out / "sweep.json").read_text())
    assert on_disk["failed"] == 2 and all(
        "traceback" in t for t in on_disk["tasks"].values() if t["status"] == "failed"
    )


def test_local_processes_and_dask_cluster_agree_and_keep_failures(tmp_path):
    from distributed import LocalCluster

    local = run_sweep(TINY, GRID, tmp_path / "local", workers=2)
    _check_failures(tmp_path / "local", local)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = run_sweep(TINY, GRID, tmp_path / "dask", scheduler=cluster.scheduler_address)
    _check_failures(tmp_path / "dask", dask)

    a, b = open_sweep(tmp_path / "local").load(), open_sweep(tmp_path / "dask").load()
    xr.testing.assert_identical(a, b)
    assert a["energy"].dims == ("heads_H", "weights_F", "path", "time")
    assert a["heads_H"].values.tolist() == [1, 2]
    assert a["weights_F"].values.tolist() == ["identity", "[[1, 0], [0, 1]]"]
    assert a["task_status"].values.tolist() == [["done", "failed"], ["done", "failed"]]
    assert np.isnan(a["energy"].sel(weights_F="[[1, 0], [0, 1]]")).all()
    assert np.isfinite(a["energy"].sel(weights_F="identity")).all()
    # each cell is exactly the run of its task
    name = str(a["task"].sel(heads_H=2, weights_F="identity").values)
    one = open_run(tmp_path / "local" / name).load()
    np.testing.assert_array_equal(
        a["positions"].sel(heads_H=2, weights_F="identity").values, one["positions"].values
    )


def test_resumed_sweep_skips_finished_tasks(tmp_path):
    out = tmp_path / "s"
    first = run_sweep(TINY, GRID, out, workers=1)
    _check_failures(out, first)
    done = [n for n, t in first["tasks"].items() if t["status"] == "done"]
    stamps = {n: ((out / n / "checkpoint.pt").stat().st_mtime_ns, read_meta(out / n)["ended"]) for n in done}
    second = run_sweep(TINY, GRID, out, workers=1)
    for n in done:
        assert second["tasks"][n] == {
            "params": first["tasks"][n]["params"],
            "status": "done",
            "skipped": True,
        }
        assert ((out / n / "checkpoint.pt").stat().st_mtime_ns, read_meta(out / n)["ended"]) == stamps[n]
    assert second["failed"] == 2  # failed tasks are retried (and fail again)
    info = sweep_info(out)
    assert info["counts"] == {"done": 2, "failed": 2}
    assert all("OU target" in r["error"] for r in info["tasks"].values() if r["status"] == "failed")
    with pytest.raises(SweepMismatchError, match=r"holds a different sweep \(base config keys seed"):
        run_sweep({**TINY, "seed": 3}, GRID, out, workers=1)


def test_shape_changing_key_is_named(tmp_path):
    out = tmp_path / "n"
    summary = run_sweep(TINY, {"tokens.n": [4, 8]}, out, workers=1)
    assert summary["done"] == 2
    with pytest.raises(
        SweepShapeError, match=r"the swept key\(s\) tokens\.n change the dimension\(s\) token of positions"
    ):
        open_sweep(out)
    ds = open_sweep(out, variables=["energy", "G2"])
    assert ds["energy"].dims == ("tokens_n", "path", "time") and ds["tokens_n"].values.tolist() == [4, 8]


def test_sweep_input_errors(tmp_path):
    with pytest.raises(
        ConfigError, match=r"(?s)invalid sweep grid.*unknown key 'sigma' in weights; did you mean 'sigma2'"
    ):
        run_sweep(TINY, {"weights.sigma": [1.0, 2.0]}, tmp_path / "x")
    with pytest.raises(ValueError, match="the grid is empty"):
        run_sweep(TINY, {}, tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="is not a sweep directory"):
        open_sweep(tmp_path)
