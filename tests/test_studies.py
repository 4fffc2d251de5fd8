"""The study layer: registry, validated parameters, runs on the run store that resume, the CLI.

A tiny registered study (two runs of the experiments-layer TINY config, a fraction of a second each)
goes through ``attnflow study run / show``; reuse is observed on the run directories (``meta.json``
start times and checkpoint mtimes unchanged), not by recomputing equal numbers.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from experiments_helpers import tiny, tiny_file_tokens
from numpy.testing import assert_allclose
from pydantic import Field, PositiveInt
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments import open_run, read_meta
from attnflow.plot import figures_for, register_figures
from attnflow.studies import (
    Column,
    NotAStudyDirectoryError,
    Study,
    StudyConfig,
    StudyConfigError,
    StudyMismatchError,
    StudyResult,
    StudyRunError,
    Table,
    UnknownStudyError,
    available_studies,
    get_study,
    register,
    run_study,
    study_info,
    unregister,
    validate_params,
)

runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n"


class TinyConfig(StudyConfig):
    H: list[PositiveInt] = Field([1, 2, 3], min_length=1, description="the head counts", examples=[[1, 2]])
    paths: PositiveInt = Field(3, description="the number of paths", examples=[2])
    fail_file: str | None = Field(None, description="file tokens of d = 3 (the runs then fail)")


class TinyStudy(Study):
    """Final energy against H on TINY runs: one run per head count."""

    name = "tiny_study"
    description = "final energy of TINY runs against H (a test study)"
    Config = TinyConfig

    def quick_params(self) -> dict:
        return {"H": [1, 2], "paths": 2}

    def plan(self, config: TinyConfig) -> dict:
        extra = {} if config.fail_file is None else {"tokens": {"init": "file", "path": config.fail_file}}
        return {
            f"H{h}": tiny(
                name=f"tiny_H{h}",
                heads={"H": h},
                paths=config.paths,
                weights={
                    "process": "ornstein_uhlenbeck",
                    "sigma2": 0.5,
                    **({"F": [[1, 0], [0, 1]]} if extra else {}),
                },
                **extra,
            )
            for h in config.H
        }

    def analyse(self, config, runs, out_dir) -> StudyResult:
        energy = {name: float(runs.open(name).energy.isel(time=-1).mean()) for name in runs.configs}
        rows = [{"run": k, "E_T": v} for k, v in energy.items()]
        table = Table(columns=[Column("run"), Column("E_T", fmt=".6g")], rows=rows)
        return StudyResult(summary={"energy_T": energy}, tables=[table], figure_data=energy)


def tiny_figures(energy: dict, out_dir: Path) -> dict:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    fig.add_subplot().plot(list(energy.values()), "o")
    fig.savefig(out_dir / "energy.png", dpi=50)
    return {"energy": "energy.png"}


@pytest.fixture
def tiny_study():
    study = register(TinyStudy(), replace=True)
    register_figures(study.name, tiny_figures)
    yield study
    unregister(study.name)


def _stamps(out: Path) -> dict:
    return {
        p.name: (read_meta(p)["started"], (p / "checkpoint.pt").stat().st_mtime_ns)
        for p in sorted((out / "runs").iterdir())
    }


# -- registry ----------------------------------------------------------------------------------------
def test_registry_lists_the_reproduction_and_refuses_bad_names():
    assert "massucco2026" in available_studies()
    assert "S^2" in available_studies()["massucco2026"]
    assert get_study("massucco2026").name == "massucco2026"
    with pytest.raises(
        UnknownStudyError, match=r"unknown study 'masucco2026'; did you mean 'massucco2026'\?"
    ):
        get_study("masucco2026")
    with pytest.raises(
        TypeError,
        match=r"register\(\) takes a Study instance: got the class TinyStudy; .* register\(MyStudy\(\)\)",
    ):
        register(TinyStudy)
    with pytest.raises(ValueError, match="already registered; pass replace=True"):
        register(get_study("massucco2026"))

    class Bad(TinyStudy):
        name = "bad name!"

    with pytest.raises(ValueError, match="letters, digits and underscores .* got 'bad name!'"):
        register(Bad())
    with pytest.raises(TypeError, match="figures must be callable: got int"):
        register_figures("x", 3)
    res = runner.invoke(app, ["study", "list"])
    assert (
        res.exit_code == 0 and "\nmassucco2026 " in "\n" + res.output
    )  # sorted: other studies may come first


def test_bad_parameters_name_the_rule_the_value_and_the_fix(tiny_study):
    with pytest.raises(
        StudyConfigError,
        match=r"(?s)invalid parameters of study 'tiny_study':\n  unknown parameter 'path'; did you mean "
        r"'paths'\?.*\n  H: List should have at least 1 item after validation, not 0; got \[\]; H is the "
        r"head counts; e.g. H=\[1, 2\]",
    ):
        tiny_study.config({"path": 2, "H": []})
    with pytest.raises(StudyConfigError, match="paths: must be greater than 0; got 0;.* e.g. paths=2"):
        tiny_study.config({"paths": 0}, quick=True)
    with pytest.raises(StudyConfigError, match="must be a mapping of keys: got list"):
        validate_params(TinyConfig, [1, 2], "tiny_study")
    # the quick variant, overridden by explicit parameters
    assert tiny_study.config(quick=True).H == [1, 2]
    assert tiny_study.config({"H": [3]}, quick=True).model_dump() == {"H": [3], "paths": 2, "fail_file": None}
    # the reproduction's own rules, before anything runs
    with pytest.raises(StudyConfigError, match="H: the head counts must be distinct; got \\[1, 1\\]"):
        get_study("massucco2026").config({"H": [1, 1]})
    with pytest.raises(
        StudyConfigError, match=r"window must satisfy 0 <= t_a < t_b <= T = 1: got \(0.5, 2.0\)"
    ):
        get_study("massucco2026").plan(get_study("massucco2026").config({"window": [0.5, 2]}, quick=True))


def test_cli_refuses_bad_names_and_parameters(tmp_path, tiny_study):
    res = runner.invoke(app, ["study", "run", "nonesuch", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "error: unknown study 'nonesuch'" in res.output
    res = runner.invoke(
        app, ["study", "run", "tiny_study", "--out", str(tmp_path / "o"), "--set", "paths=-1"]
    )
    assert res.exit_code == 2 and "paths: must be greater than 0; got -1" in res.output
    res = runner.invoke(app, ["study", "run", "tiny_study", "--out", str(tmp_path / "o"), "--set", "paths"])
    assert res.exit_code == 2 and "a study parameter must read key=value: got 'paths'" in res.output
    res = runner.invoke(app, ["study", "run", "tiny_study", "--out", str(tmp_path / "o"), "--set", "H=[1,"])
    assert res.exit_code == 2 and "the value of study parameter 'H' is not valid YAML" in res.output
    assert not (tmp_path / "o").exists()  # nothing was written
    res = runner.invoke(app, ["study", "show", str(tmp_path)])
    assert res.exit_code == 2 and "is not a study directory: study.json not found" in res.output
    assert "write one with `attnflow study run NAME --out DIR` (`attnflow study list` names" in res.output
    with pytest.raises(NotAStudyDirectoryError, match=r"no such directory\); write one with run_study\(name"):
        study_info(tmp_path / "absent")


# -- running, resuming, showing ----------------------------------------------------------------------
def test_study_runs_resumes_and_shows_through_the_cli(tmp_path, tiny_study):
    out = tmp_path / "s"
    res = runner.invoke(app, ["study", "run", "tiny_study", "--out", str(out), "--quick", "-j", "1", "-q"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"energy_T", "run"}  # the study's keys, the runner's record under "run"
    rec = summary["run"]
    assert rec["study"] == "tiny_study" and rec["status"] == "done" and rec["quick"] is True
    assert rec["config"] == {"H": [1, 2], "paths": 2, "fail_file": None}
    assert rec["attnflow_version"] and json.loads((out / "run_log.json").read_text())["wall_time_s"] > 0
    assert {k: v["status"] for k, v in rec["tasks"].items()} == {"H1": "done", "H2": "done"}
    assert rec["figures"] == {"energy": "energy.png"}
    assert (out / "energy.png").read_bytes()[:8] == PNG
    # the numbers are those of the stored runs
    for name in ("H1", "H2"):
        e = float(open_run(out / "runs" / name).energy.isel(time=-1).mean())
        assert summary["energy_T"][name] == e
        assert f"| {name} | {e:.6g} |" in (out / "table.md").read_text()

    stamps = _stamps(out)
    res = runner.invoke(app, ["study", "run", "tiny_study", "--out", str(out), "--quick"])
    assert res.exit_code == 0, res.output
    assert "task 1/2 H1: already complete, skipped" in res.output
    assert _stamps(out) == stamps  # reused: neither restarted nor rewritten
    again = json.loads((out / "run_log.json").read_text())
    assert all(r["skipped"] for r in again["tasks"].values())
    assert (out / "summary.json").read_text() == json.dumps(summary, indent=1)  # the same bytes

    res = runner.invoke(app, ["study", "show", str(out)])
    assert res.exit_code == 0, res.output
    assert "study tiny_study" in res.output and "status: done (2 done" in res.output
    assert "  H1: done\n  H2: done\n" in res.output
    assert (out / "table.md").read_text() in res.output


def test_a_killed_study_resumes_only_what_is_missing(tmp_path, tiny_study):
    out = tmp_path / "k"
    run_study("tiny_study", out, workers=1)
    stamps = _stamps(out)
    # as if killed during the last run: its directory holds an unfinished run, no summary yet
    (out / "summary.json").unlink()
    meta = read_meta(out / "runs" / "H3")
    meta["status"] = "running"
    (out / "runs" / "H3" / "meta.json").write_text(json.dumps(meta))
    info = study_info(out)
    assert info["status"] == "incomplete" and info["table"] is not None
    assert info["runs"]["H3"].startswith("running (step ")  # the step reached is shown
    shutil.rmtree(out / "runs" / "H2")  # and killed before the second run started
    assert study_info(out)["runs"]["H2"] == "pending"
    res = runner.invoke(app, ["study", "show", str(out)])
    assert "status: incomplete" in res.output

    summary = run_study("tiny_study", out, workers=1)
    assert summary["run"]["status"] == "done"
    assert summary["runs"]["H1"]["skipped"] and not summary["runs"]["H2"].get("skipped")  # legacy view
    now = _stamps(out)
    assert now["H1"] == stamps["H1"]
    assert now["H2"] != stamps["H2"]
    assert study_info(out)["status"] == "done"


def test_other_parameters_are_refused_before_running_unless_no_resume(tmp_path, tiny_study):
    out = tmp_path / "m"
    run_study("tiny_study", out, quick=True, workers=1)
    stamps = _stamps(out)
    with pytest.raises(StudyMismatchError, match=r"holds runs of other configs .*\(H1, H2 differ in paths\)"):
        run_study("tiny_study", out, params={"paths": 3}, quick=True)
    assert _stamps(out) == stamps
    with pytest.raises(StudyMismatchError, match=r"holds the study 'tiny_study', not 'massucco2026'"):
        run_study("massucco2026", out, quick=True)
    summary = run_study("tiny_study", out, params={"paths": 3}, quick=True, resume=False, workers=1)
    assert summary["run"]["config"]["paths"] == 3
    assert open_run(out / "runs" / "H1").sizes["path"] == 3


def test_failed_runs_are_reported_and_recorded(tmp_path, tiny_study):
    bad = tiny_file_tokens(tmp_path)["tokens"]["path"]
    out = tmp_path / "f"
    with pytest.raises(
        StudyRunError, match=r"(?s)2 of 2 tasks of study 'tiny_study' failed:\n  H1: ConfigError"
    ):
        run_study("tiny_study", out, params={"fail_file": bad}, quick=True, workers=1)
    rec = json.loads((out / "summary.json").read_text())["run"]
    assert rec["status"] == "failed" and rec["tasks"]["H1"]["status"] == "failed"
    assert "weights.F does not fit" in rec["tasks"]["H1"]["error"]
    res = runner.invoke(
        app,
        ["study", "run", "tiny_study", "--out", str(out), "--quick", "-j", "1", "--set", f"fail_file={bad}"],
    )
    assert res.exit_code == 1 and "2 of 2 tasks of study 'tiny_study' failed" in res.output
    assert study_info(out)["status"] == "failed"


@pytest.mark.slow  # the default tier's Dask check runs every registered study on one cluster and compares
# its summary bit for bit, checking that the runs ran in the workers (tests/test_studies_protocol.py::
# test_studies_on_dask_give_the_local_summary); this one adds a second cluster for a test study
def test_dask_cluster_gives_the_local_numbers(tmp_path, tiny_study):
    from distributed import Client, LocalCluster

    local = run_study("tiny_study", tmp_path / "local", quick=True, workers=1)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = run_study("tiny_study", tmp_path / "dask", quick=True, scheduler=cluster.scheduler_address)
        with Client(cluster) as client:
            worker_pids = set(client.run(os.getpid).values())
    # the runs ran in the cluster's worker process, not here
    assert {read_meta(tmp_path / "dask" / "runs" / n)["pid"] for n in ("H1", "H2")} <= worker_pids
    assert os.getpid() not in worker_pids
    assert dask["run"]["status"] == "done" and not any(r.get("skipped") for r in dask["runs"].values())
    assert dask["energy_T"] == local["energy_T"]
    assert (tmp_path / "dask" / "summary.json").read_bytes() == (
        tmp_path / "local" / "summary.json"
    ).read_bytes()
    for name in ("H1", "H2"):
        a, b = open_run(tmp_path / "local" / "runs" / name), open_run(tmp_path / "dask" / "runs" / name)
        np.testing.assert_array_equal(a.positions.values, b.positions.values)


def test_the_reproduction_has_figures_in_the_plot_layer():
    from attnflow.plot import plot_all

    assert figures_for("massucco2026") is plot_all and figures_for("tiny_unknown") is None
    cfg = get_study("massucco2026").config(quick=True)
    plan = get_study("massucco2026").plan(cfg)
    assert list(plan)[:3] == ["ou_H1", "ou_H10", "ou_H100"] and len(plan) == 9
    assert_allclose([c["integrator"]["t1"] for c in plan.values()], 1.0)


def test_committed_results_show_and_their_table_is_the_summarys():
    from attnflow.studies import markdown_tables

    docs = Path(__file__).resolve().parents[1] / "docs" / "studies" / "massucco2026"
    summary = json.loads((docs / "summary.json").read_text())
    assert (docs / "table.md").read_text() == markdown_tables(summary)
    info = study_info(docs)
    assert info["status"] == "done" and info["study"] == "massucco2026" and not info["quick"]
    assert set(info["runs"].values()) == {"done (run directory not stored)"}
    res = runner.invoke(app, ["study", "show", str(docs)])
    assert res.exit_code == 0 and "| oscillating, shared forcing | 0.379 | 0.366, 0.393 |" in res.output


def test_a_failing_analysis_leaves_the_directory_incomplete_not_done(tmp_path, tiny_study):
    out = tmp_path / "a"
    run_study("tiny_study", out, quick=True, workers=1)
    assert study_info(out)["status"] == "done"

    def boom(energy, out_dir):
        raise RuntimeError("no display")

    with pytest.raises(RuntimeError, match="no display"):
        run_study("tiny_study", out, quick=True, workers=1, figures=boom)
    info = study_info(out)
    assert info["status"] == "incomplete" and info["table"] is None
    assert set(info["runs"].values()) == {"done"}
