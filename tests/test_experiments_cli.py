"""CLI smoke tests (typer CliRunner): config example/check, run, info, plot, sweep."""

from __future__ import annotations

import yaml
from experiments_helpers import TINY, tiny_file_tokens
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments import load_config, open_run, open_sweep

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


def test_run_errors(tmp_path, monkeypatch):
    bad = _write(tmp_path, {**TINY, "paths": "two"}, "bad.yaml")
    res = runner.invoke(app, ["run", str(bad), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "paths must be a valid integer: got 'two'" in res.output
    # weights that do not fit the tokens: refused when the config is loaded, nothing is run
    misfit = {**TINY, "weights": {"process": "ornstein_uhlenbeck", "F": [[1, 0], [0, 1]]}}
    res = runner.invoke(app, ["run", str(_write(tmp_path, misfit, "f.yaml")), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "weights.F does not fit heads.H = 2 and tokens.d = 3" in res.output
    assert not (tmp_path / "r").exists()
    # the same with file tokens (d known once read): the run fails when built, exit 2, recorded in meta.json
    late = tiny_file_tokens(tmp_path, weights=misfit["weights"])
    res = runner.invoke(app, ["run", str(_write(tmp_path, late, "late.yaml")), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "OU target F has shape (2, 2)" in res.output and "meta.json" in res.output
    res = runner.invoke(app, ["info", str(tmp_path / "r")])
    assert "status: failed" in res.stdout and "OU target F" in res.stdout
    # a failure while running: exit 1 with a pointer to the traceback
    from attnflow.simulation import Simulator

    def boom(self, *args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(Simulator, "advance", boom)
    res = runner.invoke(app, ["run", str(_write(tmp_path)), "--out", str(tmp_path / "r2")])
    assert res.exit_code == 1 and "the run failed: RuntimeError: injected failure" in res.output
    assert "meta.json" in res.output
    res = runner.invoke(app, ["info", str(tmp_path)])
    assert res.exit_code == 2 and "holds nothing attnflow writes" in res.output


def test_sweep_info_plot_2d_cloud(tmp_path):
    # tokens of d = 2 from a file: the 3 x 3 target is valid on load and fails when the runs are built
    cfg = _write(tmp_path, tiny_file_tokens(tmp_path, d=2))
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


def test_sweep_errors_exit_cleanly(tmp_path, monkeypatch):
    import attnflow.experiments.sweep as sweep_mod

    cfg = _write(tmp_path)
    # weights that do not fit tokens.d: every task is refused before anything runs
    res = runner.invoke(
        app, ["sweep", str(cfg), "--grid", "weights.F=[[1,0],[0,1]]", "--out", str(tmp_path / "s")]
    )
    assert (
        res.exit_code == 2 and "invalid sweep grid" in res.output and "weights.F does not fit" in res.output
    )
    res = runner.invoke(app, ["sweep", str(cfg), "--grid", "heads.H=[1,", "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "grid value '[1,' of key 'heads.H' is not valid YAML" in res.output
    # --out is a file: bad input, refused before any work without a traceback
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    res = runner.invoke(app, ["sweep", str(cfg), "--grid", "heads.H=1", "--out", str(blocker), "-q"])
    assert res.exit_code == 2 and f"--out {blocker}: this is a file, not a directory" in res.output
    assert res.exception is not None and isinstance(res.exception, SystemExit)

    def missing(*args, **kwargs):
        raise FileNotFoundError("no such file: tokens.npy")

    monkeypatch.setattr(sweep_mod, "run_sweep", missing)
    res = runner.invoke(app, ["sweep", str(cfg), "--grid", "heads.H=1", "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "error: no such file: tokens.npy" in res.output


def test_reproduce_errors_exit_cleanly(tmp_path, monkeypatch):
    import attnflow.studies.massucco2026 as reproduce_mod

    manifest = tmp_path / "m.yaml"
    manifest.write_text("kind: reproduction\n")
    args = ["reproduce", str(manifest), "--out", str(tmp_path / "o"), "-q"]
    res = runner.invoke(app, ["reproduce", "nonesuch", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "unknown reproduction 'nonesuch'; available:" in res.output
    for exc, code, text in [
        (ValueError("regime 'ou' names no preset"), 2, "error: regime 'ou' names no preset"),
        (FileNotFoundError("preset x.yaml not found"), 2, "error: preset x.yaml not found"),
        (
            RuntimeError("fit diverged"),
            1,
            "the reproduction '" + str(manifest) + "' failed: RuntimeError: fit diverged",
        ),
    ]:

        def fail(*a, _exc=exc, **kw):
            raise _exc

        monkeypatch.setattr(reproduce_mod, "reproduce", fail)
        res = runner.invoke(app, args)
        assert res.exit_code == code, res.output
        assert text in res.output and isinstance(res.exception, SystemExit)
