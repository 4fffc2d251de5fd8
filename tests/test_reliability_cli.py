"""Every CLI bad input of issue 10 ends in one error line and exit status 2 (input) or 1 (run), never a
Python traceback; the message names the file and the fix in command-line words (``--no-resume``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from experiments_helpers import TINY
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments.locking import DirectoryLock
from attnflow.experiments.store import run_experiment
from attnflow.experiments.sweep import run_sweep

runner = CliRunner()
LONGER = {**TINY, "integrator": {"dt": 0.01, "t1": 0.6}, "checkpoint_every": 20}


def _clean_failure(res, code: int, *needles: str) -> str:
    """Exit status ``code``, no traceback, one ``error:`` line (a config error lists its problems after)."""
    out = res.output
    assert res.exit_code == code, out
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    for needle in needles:
        assert needle in out, out
    return out


@pytest.fixture(scope="module")
def done_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "run"
    run_experiment(LONGER, out)
    return out


@pytest.fixture(scope="module")
def done_sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "sweep"
    run_sweep(TINY, {"seed": [0, 1]}, out, workers=1)
    return out


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_invalid_utf8_config(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"name: \xff\n")
    want = "is not UTF-8 text: byte 0xff at offset 6"
    _clean_failure(runner.invoke(app, ["config", "check", str(bad)]), 2, want)
    _clean_failure(runner.invoke(app, ["run", str(bad), "--out", str(tmp_path / "r")]), 2, want)
    _clean_failure(
        runner.invoke(app, ["sweep", str(bad), "-g", "seed=0", "--out", str(tmp_path / "s")]), 2, want
    )


def test_corrupt_meta_json(tmp_path, done_run):
    run = _copy(done_run, tmp_path / "r")
    (run / "meta.json").write_bytes(b'{"status": "do')
    _clean_failure(runner.invoke(app, ["info", str(run)]), 1, "meta.json is corrupt", "attnflow run CONFIG")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(LONGER))
    res = runner.invoke(app, ["run", str(cfg), "--out", str(run), "-q"])  # informative only: rewritten
    assert res.exit_code == 0, res.output
    assert json.loads((run / "meta.json").read_text())["status"] == "done"


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"tasks": {"../x": {}}}'])
def test_corrupt_tasks_json(tmp_path, done_sweep, content):
    sweep = _copy(done_sweep, tmp_path / "s")
    (sweep / "tasks.json").write_bytes(content)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    for args in (
        ["info", str(sweep)],
        ["plot", str(sweep)],
        ["sweep", str(cfg), "-g", "seed=0,1", "--out", str(sweep), "-q"],
    ):
        _clean_failure(runner.invoke(app, args), 1, "tasks.json")


def test_corrupt_sweep_json(tmp_path, done_sweep):
    sweep = _copy(done_sweep, tmp_path / "s")
    (sweep / "sweep.json").write_bytes(b"\x00\xff")
    _clean_failure(runner.invoke(app, ["info", str(sweep)]), 1, "sweep.json is corrupt", "rerun the sweep")


def test_invalid_config_yaml_in_info(tmp_path, done_run):
    run = _copy(done_run, tmp_path / "r")
    (run / "config.yaml").write_text("model: [1\n")
    _clean_failure(runner.invoke(app, ["info", str(run)]), 2, "config.yaml", "is not valid YAML")


def test_truncated_zarr_chunk_in_plot(tmp_path, done_run):
    run = _copy(done_run, tmp_path / "r")
    chunk = next((run / "data.zarr" / "energy").glob("0*"))
    chunk.write_bytes(chunk.read_bytes()[:7])
    _clean_failure(runner.invoke(app, ["plot", str(run)]), 1, "cannot plot", "rerun the run with --no-resume")


def test_plot_output_into_a_missing_directory(tmp_path, done_run):
    target = tmp_path / "nope" / "fig.png"
    _clean_failure(
        runner.invoke(app, ["plot", str(done_run), "--output", str(target)]),
        2,
        "--output",
        "does not exist; create it first",
    )


def test_check_edi_json_into_a_missing_directory_fails_before_the_audit(tmp_path, monkeypatch):
    import attnflow.analysis.edi as edi

    def never(*args, **kwargs):
        raise AssertionError("the audit ran before the output directory was checked")

    monkeypatch.setattr(edi, "run_audit", never)
    target = tmp_path / "nope" / "edi.json"
    _clean_failure(runner.invoke(app, ["check-edi", "--quick", "--json", str(target)]), 2, "--json")


def test_truncated_checkpoint_says_rerun_with_no_resume(tmp_path, done_run):
    run = _copy(done_run, tmp_path / "r")
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "status": "running"}))
    blob = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(blob[:100])
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(LONGER))
    out = _clean_failure(
        runner.invoke(app, ["run", str(cfg), "--out", str(run), "-q"]),
        1,
        "checkpoint.pt is truncated or unreadable",
        "rerun with --no-resume to start afresh",
    )
    assert "resume=False" not in out
    res = runner.invoke(app, ["run", str(cfg), "--out", str(run), "-q", "--no-resume"])
    assert res.exit_code == 0, res.output


def test_unreachable_scheduler_is_not_a_directory_error(tmp_path):
    import dask

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        res = runner.invoke(
            app,
            [
                "sweep",
                str(cfg),
                "-g",
                "seed=0",
                "--out",
                str(tmp_path / "s"),
                "--scheduler",
                "tcp://127.0.0.1:9",
            ],
        )
    out = _clean_failure(res, 1, "cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'")
    # the fix in the command line's words: no Python argument (issue 31)
    assert "cannot write the sweep directory" not in out and "scheduler=None" not in out
    assert "leave out --scheduler" in out


def test_foreign_data_and_busy_directories(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    theirs = tmp_path / "theirs"
    (theirs / "data.zarr").mkdir(parents=True)
    (theirs / "data.zarr" / "x").write_text("precious")
    for flag in ("--resume", "--no-resume"):
        _clean_failure(
            runner.invoke(app, ["run", str(cfg), "--out", str(theirs), flag, "-q"]),
            1,
            "that attnflow did not create",
            "choose another --out",
        )
    assert (theirs / "data.zarr" / "x").read_text() == "precious"
    busy = tmp_path / "busy"
    busy.mkdir()
    with DirectoryLock(busy, "run directory"):
        _clean_failure(
            runner.invoke(app, ["run", str(cfg), "--out", str(busy), "-q"]), 1, "is in use by process"
        )
        _clean_failure(
            runner.invoke(app, ["sweep", str(cfg), "-g", "seed=0", "--out", str(busy), "-q"]), 1, "is in use"
        )
