"""Reproduction v2 (issue 11): the ``init`` mode (shared / per-path initial state), deterministic shared
runs computed once, the authors' code-default manifest, Ctrl-C -> ``interrupted`` and a bit-for-bit
resume, checkpoints by wall time."""

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
import torch
import xarray as xr

from attnflow.dynamics.field import evaluate
from attnflow.experiments import (
    ConfigError,
    build,
    estimator,
    paths_computed,
    run_experiment,
    store as store_mod,
)
from attnflow.experiments.reproduce import load_manifest, regime_configs
from attnflow.model import attention as attention_mod, heads as heads_mod, tokens as tokens_mod
from attnflow.model.attention import SinkhornWarning, sinkhorn_log, sinkhorn_solve
from attnflow.model.transformer import TransformerModel
from attnflow.simulation import Simulator, integrate
from attnflow.simulation.driver import MemorySink, RunInterrupted

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _cfg(process: str = "ou", init: str = "shared", paths: int = 3, **over) -> dict:
    weights = (
        {"process": "ornstein_uhlenbeck", "sigma2": 1.0}
        if process == "ou"
        else {"process": "oscillating", "forcing": "s2", "phases": "per_head"}
    )
    cfg = {
        "name": "t",
        "model": {"direction": "descent", "beta": 1.0, "backend": "torch"},
        "weights": weights,
        "tokens": {"init": "octahedral", "n": 12, "d": 3, "noise": 0.05},
        "heads": {"init": "symmetric_gaussian", "H": 3},
        "integrator": {"method": "euler", "dt": 0.01, "t1": 0.2},
        "record": {"every": 5},
        "paths": paths,
        "init": init,
        "seed": 7,
    }
    cfg.update(over)
    return cfg


# -- init: shared / per_path ------------------------------------------------------------------------------
def test_shared_init_copies_one_draw_and_paths_differ_only_through_the_noise():
    shared = build(_cfg(init="shared"))
    per_path = build(_cfg(init="per_path"))
    assert tuple(shared.x0.shape) == (3, 12, 3) and tuple(shared.heads.shape) == (3, 3, 3, 3)
    for p in range(3):  # every path holds the very same x0 and D0 ...
        assert np.array_equal(shared.x0[p].numpy(), shared.x0[0].numpy())
        assert np.array_equal(shared.heads[p].numpy(), shared.heads[0].numpy())
    # ... which is the draw of path 0 of the per-path mode; per-path draws differ between paths
    assert np.array_equal(shared.x0[0].numpy(), per_path.x0[0].numpy())
    assert np.array_equal(shared.heads[0].numpy(), per_path.heads[0].numpy())
    assert np.abs(per_path.x0[1].numpy() - per_path.x0[0].numpy()).max() > 0.1
    # the noise differs: after 5 steps the shared paths have separated, by about sqrt(5 dt) per head entry
    sim = Simulator.from_spec(shared)
    sink = integrate(sim, 5, record_every=5, sink=MemorySink(), with_heads=True)
    D = np.asarray(sink.records[-1].D)
    gap = np.abs(D[1] - D[0]).max()
    assert 0.05 < gap < 2.0, gap


def test_deterministic_shared_run_is_computed_once(tmp_path):
    cfg = _cfg("osc", init="shared", paths=5)
    assert paths_computed(cfg) == 1 and estimator(cfg) == "deterministic"
    assert paths_computed(_cfg("osc", init="per_path", paths=5)) == 5
    assert paths_computed(_cfg("ou", init="shared", paths=5)) == 5 and estimator(_cfg("ou")) == "shared"
    ou0 = _cfg("ou", init="shared", paths=4, weights={"process": "ornstein_uhlenbeck", "sigma2": 0.0})
    assert paths_computed(ou0) == 1  # sigma^2 = 0: no noise, one path
    # Brownian tokens make the paths of a shared start differ even with deterministic heads
    noisy = _cfg("osc", init="shared", paths=5, model={"direction": "descent", "token_noise": 0.1})
    assert paths_computed(noisy) == 5 and estimator(noisy) == "shared"
    ds = run_experiment(cfg, tmp_path / "run")
    assert ds.sizes["path"] == 1
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["paths_requested"] == 5 and meta["paths_computed"] == 1 and meta["init"] == "shared"
    assert "computed once" in meta["estimator"]
    # the one path is the path every path of the shared start would follow: the per-path run's path 0
    ref = run_experiment(_cfg("osc", init="per_path", paths=2), tmp_path / "ref")
    np.testing.assert_array_equal(ds["positions"].isel(path=0).values, ref["positions"].isel(path=0).values)


def test_shared_init_refuses_a_file_with_one_cloud_per_path(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 12, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    np.save(tmp_path / "x.npy", x)
    cfg = _cfg(tokens={"init": "file", "path": str(tmp_path / "x.npy")}, paths=2)
    with pytest.raises(
        ConfigError, match=r"init: shared copies one initial state.*holds 2 paths.*init: per_path"
    ):
        build(cfg)
    assert build({**cfg, "init": "per_path"}).x0.shape[0] == 2


def test_code_default_manifest_and_overrides():
    cfgs = regime_configs(load_manifest("massucco2026_code"))
    assert {k for k, _, _ in cfgs} == {"ou", "osc_shared", "osc_per_head"}
    for _, _, c in cfgs:
        assert c["tokens"]["n"] == 200 and c["integrator"]["dt"] == 0.005 and c["paths"] == 10
        assert c["record"]["every"] == 5 and c["init"] == "shared"
    paper = regime_configs(load_manifest("massucco2026"))
    assert all(c["init"] == "shared" and c["tokens"]["n"] == 300 for _, _, c in paper)
    assert regime_configs(load_manifest("massucco2026"), init="per_path")[0][2]["init"] == "per_path"
    bad = {**load_manifest("massucco2026"), "overrides": {"tokns": 3}}
    with pytest.raises(ValueError, match=r"unknown overrides keys \['tokns'\]"):
        regime_configs(bad)


# -- Ctrl-C -------------------------------------------------------------------------------------------------
def test_integrate_turns_sigint_into_run_interrupted_after_a_whole_step():
    sim = Simulator.from_spec(build(_cfg()))
    # the handler in place before the run: Python's default_int_handler, or SIG_IGN in a process started
    # in the background by a non-interactive shell (which ignores SIGINT for its background jobs)
    before = signal.getsignal(signal.SIGINT)

    class Sink(MemorySink):
        def on_record(self, record):
            super().on_record(record)
            if record.step == 5:  # Ctrl-C arrives once step 5 is done: step 6 never starts
                os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(RunInterrupted, match=r"^interrupted at step 5 of 20; rerun to resume$") as info:
        integrate(sim, 20, record_every=5, sink=Sink())
    assert sim.step_index == 5 and info.value.step == 5
    assert signal.getsignal(signal.SIGINT) is before  # the handler is restored


_CHILD = textwrap.dedent(
    """
    import sys
    from attnflow.experiments import run_experiment
    run_experiment(sys.argv[1], sys.argv[2])
    """
)


def _long_cfg(path: Path) -> Path:
    import yaml

    cfg = _cfg(paths=2, integrator={"method": "euler", "dt": 0.01, "t1": 15.0}, checkpoint_every=1000)
    cfg["tokens"]["n"] = 64
    cfg["record"] = {"every": 10}
    cfg["model"]["backend"] = "numba"  # the kernel in which a plain Ctrl-C used to raise SystemError
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_sigint_in_a_subprocess_leaves_interrupted_and_resumes_bit_for_bit(tmp_path):
    pytest.importorskip("numba")
    cfg = _long_cfg(tmp_path / "cfg.yaml")
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(cfg), str(run)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (run / "checkpoint.pt").is_file():  # the checkpoint of step 0: the run is stepping
            if time.monotonic() > deadline:
                pytest.fail("the child run wrote no checkpoint in 60 s")
            time.sleep(0.02)
        time.sleep(0.2)
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "interrupted", meta.get("error")
    k = meta["step"]
    assert 0 < k < 1500
    assert meta["error"] == f"interrupted at step {k} of 1500; rerun to resume"
    assert "SystemError" not in meta["traceback"]
    # the checkpoint is at the very step reached: nothing is lost
    assert torch.load(run / "checkpoint.pt", weights_only=True)["sim"]["step"] == k
    # resume to the end and compare with an uninterrupted run, array for array, bit for bit
    resumed = run_experiment(cfg, run, checkpoint_every_s=None)
    whole = run_experiment(cfg, tmp_path / "whole", checkpoint_every_s=None)
    for var in ("positions", "energy", "G2", "int_G2", "residual_exact"):
        np.testing.assert_array_equal(resumed[var].values, whole[var].values, err_msg=var)
    assert json.loads((run / "meta.json").read_text())["status"] == "done"


# -- checkpoints by wall time -------------------------------------------------------------------------------
def test_checkpoints_by_wall_time_as_well_as_by_steps(tmp_path, monkeypatch):
    calls = []
    orig = store_mod._Writer.checkpoint

    def counting(self):
        calls.append(self.sim.step_index)
        orig(self)

    monkeypatch.setattr(store_mod._Writer, "checkpoint", counting)
    cfg = _cfg(paths=1, integrator={"method": "euler", "dt": 0.01, "t1": 0.4}, checkpoint_every=1000)
    run_experiment(cfg, tmp_path / "a", checkpoint_every_s=None)
    by_steps = list(calls)
    calls.clear()
    ds_time = run_experiment(cfg, tmp_path / "b", checkpoint_every_s=1e-9)
    assert by_steps == [0, 40]  # the first record and the end only
    assert calls == [0, 5, 10, 15, 20, 25, 30, 35, 40]  # every record, once any time has passed
    ds_steps = xr.open_zarr(tmp_path / "a" / "data.zarr")
    np.testing.assert_array_equal(ds_time["positions"].values, ds_steps["positions"].values)
    with pytest.raises(ValueError, match=r"checkpoint_every_s must be > 0 seconds or None.*got 0"):
        run_experiment(cfg, tmp_path / "c", checkpoint_every_s=0)


# -- Sinkhorn attention: a tolerance, a maximum sweep count, the error reached -------------------------------
def _scores(n: int = 100, beta: float = 5.0) -> torch.Tensor:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    Z = rng.standard_normal((3, 3))
    return torch.as_tensor(beta * x @ (Z + Z.T) @ x.T)


def _numpy_sinkhorn(s: np.ndarray, sweeps: int) -> np.ndarray:
    """Plain multiplicative Sinkhorn (rows, then columns, of K = exp(s - max)), written separately."""
    K = np.exp(s - s.max())
    u, v = np.ones(len(s)), np.ones(len(s))
    for _ in range(sweeps):
        u = 1 / (K @ v)
        v = 1 / (K.T @ u)
    u = 1 / (K @ v)  # end on the rows, as the log-domain version does
    return u[:, None] * K * v[None, :]


def test_sinkhorn_reaches_its_tolerance_and_matches_an_independent_implementation():
    s = _scores()
    res = sinkhorn_solve(s, 5000)
    A = res.weights.numpy()
    col = np.abs(A.sum(0) - 1).max()
    assert res.converged and res.tol == 1e-10 and col < 1e-10  # float64 default: 1e-10
    assert np.abs(A.sum(1) - 1).max() < 1e-13
    assert res.column_error == pytest.approx(col, rel=1e-3, abs=1e-14)  # the reported error is the real one
    assert 50 < res.sweeps < 5000  # 50 sweeps are not enough here, the tolerance stops it long before 5000
    np.testing.assert_allclose(A, _numpy_sinkhorn(s.numpy(), 20000), rtol=1e-8, atol=1e-14)


def test_sinkhorn_says_when_it_misses_its_tolerance(monkeypatch):
    s = _scores()
    monkeypatch.setattr(attention_mod, "_warned", set())  # it warns once per (n, sweeps, tol) and process
    msg = r"maximum of 50 sweeps with a column-sum error of .*above the tolerance 1e-10 \(n = 100\); raise"
    with pytest.warns(SinkhornWarning, match=msg):
        A = sinkhorn_log(s, 50)
    col = float((A.sum(-2) - 1).abs().max())
    assert col > 1e-4  # what 50 fixed sweeps used to leave silently
    assert attention_mod.last_sinkhorn.column_error == pytest.approx(col, rel=1e-6)
    assert attention_mod.last_sinkhorn.sweeps == 50 and not attention_mod.last_sinkhorn.converged
    with pytest.raises(ValueError, match=r"sinkhorn_tol must be None .* or a finite tolerance > 0: got 0"):
        TransformerModel(direction="ascent", attention="sinkhorn", sinkhorn_tol=0)
    # a model's tolerance reaches the weights through the torch backend
    m = TransformerModel(
        direction="ascent", attention="sinkhorn", sinkhorn_iters=5000, sinkhorn_tol=1e-12, backend="torch"
    )
    x = tokens_mod.uniform(1, 20, 3, seed=2)
    evaluate(m, x, heads_mod.symmetric_gaussian(1, 2, 3, seed=2), None, 0.0)
    assert attention_mod.last_sinkhorn.tol == 1e-12 and attention_mod.last_sinkhorn.converged
