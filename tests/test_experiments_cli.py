"""CLI smoke tests (typer CliRunner): config example/check, run, info, plot, sweep."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments import load_config, open_run, open_sweep

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
runner = CliRunner()


def _write(tmp_path, cfg=TINY, name="c.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_config_example_and_check(tmp_path):
    res = runner.invoke(app, ["config", "example"])
    assert res.exit_code == 0
    assert "# attnflow experiment config" in res.stdout
    ex = tmp_path / "ex.yaml"
    ex.write_text(res.stdout)
    assert load_config(ex).name == "ou_H10"
    res = runner.invoke(app, ["config", "check", str(ex)])
    assert res.exit_code == 0 and "checkpoint_every: 200" in res.stdout
    bad = _write(tmp_path, {**TINY, "weights": {"process": "ornstein_uhlenbeck", "sigma": 1}}, "bad.yaml")
    res = runner.invoke(app, ["config", "check", str(bad)])
    assert res.exit_code == 2 and "did you mean 'sigma2'?" in res.output


def test_run_info_plot(tmp_path):
    cfg, out = _write(tmp_path), tmp_path / "run"
    res = runner.invoke(app, ["run", str(cfg), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert open_run(out).sizes["time"] == 5
    res = runner.invoke(app, ["run", str(cfg), "--out", str(out)])  # finished: returned as is
    assert res.exit_code == 0 and "done:" in res.stdout and "5 records" in res.stdout
    res = runner.invoke(app, ["info", str(out)])
    assert res.exit_code == 0, res.output
    for text in ("status: done", "step 20/20 (100%)", "H=2", "data.zarr", "ornstein_uhlenbeck"):
        assert text in res.stdout
    res = runner.invoke(app, ["plot", str(out)])
    assert res.exit_code == 0, res.output
    png = out / "summary.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = _write(tmp_path, {**TINY, "seed": 5}, "other.yaml")
    res = runner.invoke(app, ["run", str(other), "--out", str(out)])
    assert res.exit_code == 1 and "differing keys seed" in res.output
    res = runner.invoke(app, ["run", str(other), "--out", str(out), "--no-resume", "-q"])
    assert res.exit_code == 0 and open_run(out).attrs["seed"] == 5


def test_run_errors(tmp_path):
    bad = _write(tmp_path, {**TINY, "paths": "two"}, "bad.yaml")
    res = runner.invoke(app, ["run", str(bad), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "paths must be a valid integer: got 'two'" in res.output
    fails = _write(
        tmp_path, {**TINY, "weights": {"process": "ornstein_uhlenbeck", "F": [[1, 0], [0, 1]]}}, "f.yaml"
    )
    res = runner.invoke(app, ["run", str(fails), "--out", str(tmp_path / "r")])
    assert res.exit_code == 1 and "the run failed" in res.output and "meta.json" in res.output
    res = runner.invoke(app, ["info", str(tmp_path / "r")])
    assert "status: failed" in res.stdout and "OU target F" in res.stdout
    res = runner.invoke(app, ["info", str(tmp_path)])
    assert res.exit_code == 2 and "neither a run directory" in res.output


def test_sweep_info_plot_2d_cloud(tmp_path):
    cfg = _write(tmp_path, {**TINY, "tokens": {"init": "uniform", "n": 8, "d": 2}})
    out = tmp_path / "sweep"
    args = [
        "sweep",
        str(cfg),
        "--grid",
        "heads.H=1,2",
        "--grid",
        "weights.F=identity,[[1,0,0],[0,1,0],[0,0,1]]",
        "--out",
        str(out),
        "--workers",
        "1",
        "--quiet",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 1  # the 3 x 3 target does not fit d = 2: two tasks fail and are reported
    assert res.output.count("failed: task-") == 2 and "OU target F has shape" in res.output
    ds = open_sweep(out)
    assert ds["energy"].dims == ("heads_H", "weights_F", "path", "time")
    res = runner.invoke(app, ["info", str(out)])
    assert res.exit_code == 0 and "2 done, 2 failed" in res.stdout and "heads.H" in res.stdout
    res = runner.invoke(app, ["plot", str(out)])
    assert res.exit_code == 0, res.output
    assert len([p for p in out.glob("task-*/summary.png")]) == 2
    res = runner.invoke(app, ["sweep", str(cfg), "--grid", "heads.H", "--out", str(out)])
    assert res.exit_code == 2 and "a grid must read key=v1,v2" in res.output
