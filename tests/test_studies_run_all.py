"""``attnflow study run-all`` (issue 27): every selected study's tasks in one pool, each study analysed when
its own tasks are done, ``DIR/<study>`` the directory ``run_study`` writes; and every study's analysis on one
torch thread.

The computations of the test studies are the module-level functions below (``test_studies_run_all:...``).
The registered studies used are the cheapest quick variants (ntk_injectivity 0.05 s, entropy 0.2 s,
sufficient_condition 0.6 s of CPU); their references are THE quick runs of the session (``quick_study``).
"""

from __future__ import annotations

import json

import pytest
import torch
from test_studies_protocol import _same_summary
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments import sweep
from attnflow.studies import (
    ComputeTask,
    Study,
    StudyConfig,
    StudyResult,
    UnknownStudyError,
    register,
    run_all,
    run_study,
    select_studies,
    study_info,
    unregister,
)
from attnflow.studies.run_all import RUN_ALL_FILE

runner = CliRunner()

CHEAP = ["entropy", "ntk_injectivity", "sufficient_condition"]


def square(x: float) -> dict:
    return {"y": float(x) * float(x)}


def explode(x: float) -> dict:
    raise RuntimeError(f"task exploded at x={x}")


class SquaresStudy(Study):
    name = "squares_run_all_test"
    description = "squares of two numbers (a test study); with explode=True one task raises"

    class Config(StudyConfig):
        explode: bool = False

    def plan(self, config) -> dict:
        bad = "test_studies_run_all:explode" if config.explode else "test_studies_run_all:square"
        return {
            "two": ComputeTask(fn="test_studies_run_all:square", params={"x": 2.0}),
            "three": ComputeTask(fn=bad, params={"x": 3.0}),
        }

    def analyse(self, config, runs, out_dir) -> StudyResult:
        return StudyResult(
            summary={
                "squares": [runs.result(n)["y"] for n in ("two", "three")],
                "threads": torch.get_num_threads(),
            }
        )


@pytest.fixture
def squares():
    """Register :class:`SquaresStudy` for one test (quick variant: explode)."""

    class Exploding(SquaresStudy):
        def quick_params(self) -> dict:
            return {"explode": True}

    study = register(Exploding(), replace=True)
    yield study
    unregister(study.name)


def test_run_all_gives_each_study_the_directory_of_run_study(quick_study, tmp_path):
    record = run_all(tmp_path / "all", only=CHEAP, quick=True, workers=1)
    assert record["status"] == "done" and record["done"] == CHEAP and record["failed"] == []
    assert json.loads((tmp_path / "all" / RUN_ALL_FILE).read_text())["done"] == CHEAP
    for name in CHEAP:
        clean, summary = quick_study(name)
        out = tmp_path / "all" / name
        _same_summary(clean, out, name)  # the numbers, bit for bit (times and figure files excepted)
        row = record["studies"][name]
        assert row["tasks"] == len(summary["run"]["tasks"]) and row["skipped"] == 0
        assert row["done_after_s"] <= record["wall_s"]
        assert sorted(p.name for p in out.iterdir() if p.suffix in (".json", ".md")) == sorted(
            p.name for p in clean.iterdir() if p.suffix in (".json", ".md")
        )
        assert study_info(out)["status"] == "done"
    shown = runner.invoke(app, ["study", "show", str(tmp_path / "all" / "entropy")])
    assert shown.exit_code == 0 and "status: done" in shown.output, shown.output
    # a single-study run on a run-all's study directory resumes: every task found complete, same numbers
    again = run_study(
        "sufficient_condition", tmp_path / "all" / "sufficient_condition", quick=True, workers=1
    )
    assert all(t.get("skipped") for t in again.log["tasks"].values())
    _same_summary(
        quick_study("sufficient_condition")[0],
        tmp_path / "all" / "sufficient_condition",
        "sufficient_condition",
    )


def test_an_interrupted_run_all_resumes_every_study(quick_study, tmp_path, monkeypatch):
    names = ["ntk_injectivity", "sufficient_condition"]
    real, calls = sweep._run_task, []

    def interrupted(*args, **kwargs):
        calls.append(args[1])
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the third task
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "_run_task", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_all(tmp_path / "all", only=names, quick=True, workers=1)
    first = json.loads((tmp_path / "all" / RUN_ALL_FILE).read_text())
    assert first["status"] == "interrupted"
    monkeypatch.setattr(sweep, "_run_task", real)
    record = run_all(tmp_path / "all", only=names, quick=True, workers=1)
    assert record["status"] == "done"
    assert sum(record["studies"][n]["skipped"] for n in names) == 2  # the two tasks finished before Ctrl-C
    for name in names:
        _same_summary(quick_study(name)[0], tmp_path / "all" / name, name)


def test_a_failing_study_leaves_the_others_done_and_is_reported(squares, tmp_path):
    out = tmp_path / "all"
    (out / "ntk_injectivity").mkdir(parents=True)  # a directory holding another study cannot start
    (out / "ntk_injectivity" / "study.json").write_text(json.dumps({"study": "longtime"}))
    names = [squares.name, "ntk_injectivity", "sufficient_condition"]
    res = runner.invoke(
        app, ["study", "run-all", "--out", str(out), "--quick", "--only", ",".join(names), "-j", "1"]
    )
    assert res.exit_code == 1, res.output
    record = json.loads((out / RUN_ALL_FILE).read_text())
    assert record["status"] == "failed" and record["done"] == ["sufficient_condition"]
    rows = record["studies"]
    assert rows[squares.name]["status"] == "failed" and "1 of 2 tasks" in rows[squares.name]["error"]
    assert rows[squares.name]["failed_tasks"] == 1 and rows[squares.name]["tasks"] == 2
    assert rows["ntk_injectivity"]["status"] == "failed"
    assert "cannot start: StudyMismatchError" in rows["ntk_injectivity"]["error"]
    # the table names every study, its status and error, and the total
    assert "task exploded at x=3.0" in (out / squares.name / "runs" / "three" / "meta.json").read_text()
    for text in (squares.name, "ntk_injectivity", "holds the study 'longtime'", "1 of 3 studies done"):
        assert text in res.output
    assert study_info(out / "sufficient_condition")["status"] == "done"


def test_unknown_or_empty_selections_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(
        UnknownStudyError, match=r"only names 'nope', not a registered study; the registered .*longtime"
    ):
        select_studies(only=["nope", "longtime"])
    with pytest.raises(UnknownStudyError, match=r"exclude names 'longtim', not a registered study"):
        select_studies(exclude=["longtim"])
    with pytest.raises(UnknownStudyError, match="no study left to run"):
        select_studies(only=["longtime"], exclude=["longtime"])
    assert select_studies(only=["longtime", "entropy"]) == ["entropy", "longtime"]
    out = tmp_path / "o"
    res = runner.invoke(app, ["study", "run-all", "--out", str(out), "--only", "longtime,nope"])
    assert res.exit_code == 2 and "only names 'nope'" in res.output and "ntk_injectivity" in res.output
    res = runner.invoke(app, ["study", "run-all", "--out", str(out), "--exclude", "longtime,"])
    assert res.exit_code == 2 and "--exclude takes comma-separated study names" in res.output
    res = runner.invoke(app, ["study", "run-all", "--out", str(out), "-j", "2", "--scheduler", "tcp://x:1"])
    assert res.exit_code == 2 and "give --workers or --scheduler, not both" in res.output
    for cmd in (["study", "run-all", "--out", str(out)], ["study", "run", "longtime", "--out", str(out)]):
        res = runner.invoke(app, [*cmd, "--scheduler", "local:0"])
        assert res.exit_code == 2 and "'local:N' with N a whole number of workers >= 1" in res.output
    with pytest.raises(ValueError, match=r"got N = 'x'; e.g. local:2"):
        run_all(out, only=["longtime"], scheduler="local:x")
    assert not out.exists()


def test_the_analysis_runs_torch_on_one_thread_and_restores_the_count(tmp_path):
    study = SquaresStudy()
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        summary = run_study(study, tmp_path / "s", workers=1)
        assert summary["threads"] == 1 and summary["squares"] == [4.0, 9.0]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(saved)


@pytest.mark.slow
def test_run_all_on_two_workers_and_on_dask_gives_the_run_study_summaries(quick_study, tmp_path):
    """The shared pool of local workers, then one local Dask cluster (tens of seconds: slow tier)."""
    from distributed import LocalCluster

    record = run_all(tmp_path / "local", only=CHEAP, quick=True, workers=2)
    assert record["status"] == "done" and record["workers"] == 2
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        on_dask = run_all(tmp_path / "dask", only=CHEAP, quick=True, scheduler=cluster.scheduler_address)
    assert on_dask["status"] == "done" and on_dask["workers"] == "dask"
    for name in CHEAP:
        clean, _ = quick_study(name)
        _same_summary(clean, tmp_path / "local" / name, name)
        _same_summary(clean, tmp_path / "dask" / name, name)
        assert json.loads((tmp_path / "dask" / name / "run_log.json").read_text())["workers"] == "dask"
