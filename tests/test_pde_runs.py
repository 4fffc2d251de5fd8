"""Density runs as experiments (``model: pde`` configs): load-time refusals, the run store, resume after a
kill (same data as an uninterrupted run), the CLI branch of ``attnflow run`` and ``attnflow pde-plot``."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments.errors import ConfigError
from attnflow.experiments.pde_runs import build_pde, is_pde_config, load_pde_config, run_pde
from attnflow.experiments.store import open_run, read_meta
from attnflow.pde import DensitySolver

BASE = {
    "name": "pde_s1",
    "model": "pde",
    "dynamics": {"direction": "ascent", "attention": "softmax", "beta": 1.0},
    "weights": {"process": "oscillating", "forcing": "s1"},
    "heads": {"init": "identity", "H": 2, "scale": 1.0},
    "density": {"init": "von_mises_fisher", "d": 2, "centres": [[1.0, 0.0], [0.0, 1.0]], "kappa": 6.0},
    "pde": {"band_limit": 24},
    "integrator": {"dt": 0.02, "t1": 0.2},
    "record": {"every": 3},
    "checkpoint_every": 4,
}


def _cfg(**over):
    c = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for k, v in over.items():
        c[k] = {**c[k], **v} if isinstance(v, dict) and isinstance(c.get(k), dict) else v
    return c


def test_run_store_and_resume_after_a_kill(tmp_path, monkeypatch):
    ref = open_run(run_pde(_cfg(), tmp_path / "ref")).load()
    assert read_meta(tmp_path / "ref")["status"] == "done"
    assert ref.time.size == 5  # t = 0, 3, 6, 9 steps and the last (10)
    np.testing.assert_allclose(ref.mass.values, 1.0, atol=1e-13)
    calls = {"n": 0}
    real = DensitySolver.step

    def dying(self):
        calls["n"] += 1
        if calls["n"] == 7:  # after the checkpoint of step 4
            raise KeyboardInterrupt
        real(self)

    monkeypatch.setattr(DensitySolver, "step", dying)
    with pytest.raises(KeyboardInterrupt):
        run_pde(_cfg(), tmp_path / "cut")
    assert read_meta(tmp_path / "cut")["status"] == "interrupted"
    assert (tmp_path / "cut" / "checkpoint.pt").is_file()
    monkeypatch.setattr(DensitySolver, "step", real)
    got = open_run(run_pde(_cfg(), tmp_path / "cut")).load()
    for var in ("density", "coefficients", "heads", "energy", "residual"):
        np.testing.assert_array_equal(got[var].values, ref[var].values)
    with pytest.raises(
        ValueError, match=r"holds a PDE run with a different config.*pde\.band_limit: 24 -> 30"
    ):
        run_pde(_cfg(pde={"band_limit": 30}), tmp_path / "cut")


def test_yaml_marker_and_sphere_run(tmp_path):
    p = tmp_path / "c.yaml"
    c = _cfg(heads={"H": 1}, pde={"band_limit": 10}, dynamics={"beta": 0.5})
    c["density"], c["weights"] = {"init": "uniform", "d": 3}, {"process": "constant"}
    p.write_text(yaml.safe_dump(c))
    assert is_pde_config(p) and not is_pde_config({"model": {"direction": "ascent"}})
    ds = open_run(run_pde(p, tmp_path / "s2")).load()
    np.testing.assert_allclose(ds.density.values[-1], 1 / (4 * np.pi), atol=1e-14)  # uniform is stationary


@pytest.mark.parametrize(
    "over,match",
    [
        ({"pde": {"band_limit": 4}}, "band limit L = 4 is too small .* needs L >= 8"),
        ({"pde": {"eps": -0.5}}, "pde.eps .* must be >= 0: got -0.5"),
        ({"integrator": {"dt": 0.03, "t1": 0.2}}, "integrator.t1 / integrator.dt"),
        ({"model": "particles"}, "model"),
        ({"density": {"init": "vmf"}}, "density"),
        ({"weights": {"forcing": "s2"}}, "weights.forcing does not fit"),
    ],
)
def test_config_refusals(over, match):
    with pytest.raises(ConfigError, match=match):
        build_pde(load_pde_config(_cfg(**over)))


def test_cli_run_and_pde_plot(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(_cfg()))
    r = CliRunner().invoke(app, ["run", str(p), "--out", str(tmp_path / "run"), "--quiet"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["pde-plot", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "run" / "fig_density_s1.png").is_file()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_cfg(pde={"band_limit": 3})))
    r = CliRunner().invoke(app, ["run", str(bad), "--out", str(tmp_path / "bad")])
    assert r.exit_code == 2 and "needs L >= 8" in r.output
