"""Sweeps: local processes and a Dask cluster give the same results; failures are kept; resume skips."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr
import yaml
from experiments_helpers import TINY, tiny, tiny_file_tokens

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

# weights.F = [[1,0],[0,1]] with tokens of d = 3 read from a file is a valid config that fails when the
# run is built (the dimension of file tokens is known only then): those two tasks fail, the other two
# must not be lost.
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
            assert t["error"].startswith(
                "ConfigError: cannot build the experiment 'tiny': weights.F does not fit"
            )
            assert "Traceback" in t["traceback"] and "Traceback" in meta["traceback"]
    on_disk = json.loads((out / "sweep.json").read_text())
    assert on_disk["failed"] == 2 and all(
        "traceback" in t for t in on_disk["tasks"].values() if t["status"] == "failed"
    )


def test_local_processes_and_dask_cluster_agree_and_keep_failures(tmp_path):
    from distributed import LocalCluster

    base = tiny_file_tokens(tmp_path)
    local = run_sweep(base, GRID, tmp_path / "local", workers=2)
    _check_failures(tmp_path / "local", local)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = run_sweep(base, GRID, tmp_path / "dask", scheduler=cluster.scheduler_address)
    _check_failures(tmp_path / "dask", dask)

    # scheduler="local:2": the sweep starts (and closes) its own Dask cluster on this machine
    own = run_sweep(base, GRID, tmp_path / "own", scheduler="local:2")
    _check_failures(tmp_path / "own", own)

    a, b = open_sweep(tmp_path / "local").load(), open_sweep(tmp_path / "dask").load()
    xr.testing.assert_identical(a, b)
    xr.testing.assert_identical(a, open_sweep(tmp_path / "own").load())
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
    out, base = tmp_path / "s", tiny_file_tokens(tmp_path)
    first = run_sweep(base, GRID, out, workers=1)
    _check_failures(out, first)
    done = [n for n, t in first["tasks"].items() if t["status"] == "done"]
    stamps = {n: ((out / n / "checkpoint.pt").stat().st_mtime_ns, read_meta(out / n)["ended"]) for n in done}
    second = run_sweep(base, GRID, out, workers=1)
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
        run_sweep({**base, "seed": 3}, GRID, out, workers=1)


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


def test_open_sweep_without_finished_task(tmp_path):
    missing = tiny(tokens={"init": "file", "path": str(tmp_path / "nope.npy")})  # every run fails when built
    summary = run_sweep(missing, {"heads.H": [1, 2]}, tmp_path / "s", workers=1)
    assert summary["failed"] == 2 and all("tokens.path" in t["error"] for t in summary["tasks"].values())
    with pytest.raises(ValueError, match=r"no finished task in the sweep .*s; statuses: \['failed'\]"):
        open_sweep(tmp_path / "s")


def test_grid_in_scientific_notation(tmp_path):
    from attnflow.experiments import parse_grid

    summary = run_sweep(TINY, parse_grid(["weights.sigma2=5e-1,1E-1"]), tmp_path / "s", workers=1)
    assert summary["done"] == 2
    ds = open_sweep(tmp_path / "s")
    assert ds["weights_sigma2"].values.tolist() == [0.5, 0.1]
    task = str(ds["task"].sel(weights_sigma2=0.1).values)
    assert read_meta(tmp_path / "s" / task)["status"] == "done"
    assert yaml.safe_load((tmp_path / "s" / task / "config.yaml").read_text())["weights"]["sigma2"] == 0.1


def test_a_task_runs_numpy_blas_on_one_thread_wherever_it_runs(monkeypatch, tmp_path):
    """The blocking of a BLAS product depends on its thread count: a task runs BLAS on one thread so that a
    study's numbers do not depend on the executor (a Dask worker's nanny sets OPENBLAS_NUM_THREADS=1;
    pde_particles differed by 4e-9 relative between a local run and Dask)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from attnflow.experiments import sweep

    seen = []
    monkeypatch.setattr(
        sweep, "_execute", lambda *a, **k: seen.append([p["num_threads"] for p in threadpool_info()
                                                         if p["user_api"] == "blas"])
    )  # fmt: skip
    with threadpool_limits(limits=2, user_api="blas"):  # the caller's setting, as in a local run on 2 cores
        out = sweep._run_task({"kind": "compute", "fn": "x", "params": {}}, str(tmp_path / "t"), False, None)
    assert out["status"] == "done", out
    assert seen and seen[0] and all(n == 1 for n in seen[0]), seen


@pytest.mark.parametrize("bad", ["local:0", "local:two", "local:", "local:-1", "local:²"])
def test_malformed_local_scheduler_is_refused_before_anything_runs(tmp_path, bad):
    out = tmp_path / "s"
    with pytest.raises(ValueError, match=r"'local:N' with N a whole number of workers >= 1"):
        run_sweep(TINY, {"heads.H": [1]}, out, scheduler=bad)
    assert not out.exists()


def test_local_scheduler_sizes():
    from attnflow.experiments.sweep import local_cluster_size

    assert local_cluster_size("local") == max(1, os.cpu_count() or 1)
    assert local_cluster_size("local:5") == 5
    assert local_cluster_size("tcp://127.0.0.1:8786") is None
    assert local_cluster_size("localhost:8786") is None  # a host named local... is an address
    assert local_cluster_size(None) is None
