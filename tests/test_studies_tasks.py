"""The study protocol (issue 30): tasks on the run store, typed results, one registration, user files.

The computations of these tests are the module-level functions below (``test_studies_tasks:...``):
importable by name, pure, cheap.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from experiments_helpers import tiny
from typer.testing import CliRunner

from attnflow.analysis.verdicts import Criterion, record_test
from attnflow.cli import app
from attnflow.experiments.compute import (
    ComputeMismatchError,
    ComputeResultError,
    read_compute,
    run_compute,
)
from attnflow.experiments.errors import ConfigError
from attnflow.experiments.files import CorruptFileError
from attnflow.experiments.sweep import run_tasks
from attnflow.studies import (
    Column,
    ComputeTask,
    ParticleRun,
    PdeRun,
    Study,
    StudyConfig,
    StudyMismatchError,
    StudyPlanError,
    StudyResult,
    StudyResultError,
    Table,
    TrainingRun,
    UnknownStudyError,
    get_study,
    run_study,
    study,
    study_info,
    unregister,
)
from attnflow.studies.render import html, markdown, table_from_json
from attnflow.studies.tasks import PARALLEL_MIN_S, choose_workers

runner = CliRunner()
CALLS = {"n": 0}


def draws(seed: int, n: int) -> dict:
    """A pure computation: n normal draws of ``seed`` and their mean."""
    CALLS["n"] += 1
    x = np.random.default_rng(seed).normal(size=n)
    return {"x": x, "mean": float(x.mean()), "label": f"seed {seed}", "ints": np.arange(3)}


def not_a_mapping(seed: int) -> list:
    return [seed]


def object_array() -> dict:
    return {"bad": np.array([{"a": 1}], dtype=object)}


class DrawsConfig(StudyConfig):
    seeds: list[int] = [0, 1, 2]
    n: int = 50
    threshold: float = 0.5
    extra_key: str | None = None


class DrawsStudy(Study):
    name = "draws_test"
    description = "sample means of normal draws are small (a test study)"
    Config = DrawsConfig

    def quick_params(self) -> dict:
        return {"seeds": [0, 1]}

    def plan(self, config) -> dict:
        return {
            f"seed{s}": ComputeTask(fn="test_studies_tasks:draws", params={"seed": s, "n": config.n})
            for s in config.seeds
        }

    def analyse(self, config, runs, out_dir) -> StudyResult:
        means = [runs.result(f"seed{s}")["mean"] for s in config.seeds]
        summary = {"means": means, "config": "a study key named config", "status": "mine"}
        if config.extra_key:
            summary[config.extra_key] = 1
        crit = Criterion(
            quantity="max |mean|", op="<", threshold=config.threshold, declared_in="config: threshold"
        )
        rec = record_test(
            id="small-means",
            statement="the sample means are below the threshold",
            source="derived: docs/architecture.md#studies",
            criterion=crit,
            value=max(abs(m) for m in means),
            samples=len(means),
            method="none: deterministic",
        )
        rows = [{"seed": s, "mean": m} for s, m in zip(config.seeds, means, strict=True)]
        table = Table(
            columns=[Column("seed"), Column("mean", "sample mean", ".4f")], rows=rows, title="Means"
        )
        return StudyResult(summary=summary, verdicts=[rec], tables=[table])


# -- computations on the store ------------------------------------------------------------------------
def test_a_computation_is_stored_exactly_and_resumed_not_recomputed(tmp_path):
    out = tmp_path / "c"
    CALLS["n"] = 0
    run_compute("test_studies_tasks:draws", {"seed": 3, "n": 7}, out)
    res = read_compute(out)
    np.testing.assert_array_equal(res["x"], np.random.default_rng(3).normal(size=7))  # the same bits
    assert res["mean"] == float(np.random.default_rng(3).normal(size=7).mean()) and res["label"] == "seed 3"
    assert res["ints"].dtype == np.int64
    run_compute("test_studies_tasks:draws", {"seed": 3, "n": 7}, out)
    assert CALLS["n"] == 1  # finished: skipped
    with pytest.raises(ComputeMismatchError, match=r"holds the computation .* other parameters"):
        run_compute("test_studies_tasks:draws", {"seed": 4, "n": 7}, out)
    # a result file that no longer matches its sha256 is computed again
    (out / "values.json").write_text('{"mean": 0.0}')
    with pytest.raises(CorruptFileError, match="values.json does not match the sha256"):
        read_compute(out)
    run_compute("test_studies_tasks:draws", {"seed": 3, "n": 7}, out)
    assert CALLS["n"] == 2 and read_compute(out)["mean"] == res["mean"]


def test_a_computation_refuses_what_cannot_be_stored_without_pickle(tmp_path):
    with pytest.raises(ComputeResultError, match="must return a mapping of names"):
        run_compute("test_studies_tasks:not_a_mapping", {"seed": 1}, tmp_path / "a")
    with pytest.raises(ComputeResultError, match="dtype object: only numeric and bool arrays are stored"):
        run_compute("test_studies_tasks:object_array", {}, tmp_path / "b")
    with pytest.raises(ValueError, match="must name an importable function as 'package.module:function'"):
        run_compute("draws", {}, tmp_path / "c")
    with pytest.raises(ValueError, match="cannot import the module 'no_such_module_xyz'"):
        run_compute("no_such_module_xyz:f", {}, tmp_path / "d")
    with pytest.raises(ComputeResultError, match="must be JSON data"):
        run_compute("test_studies_tasks:draws", {"seed": {1, 2}}, tmp_path / "e")
    with pytest.raises(CorruptFileError, match="holds no finished computation \\(status failed"):
        read_compute(tmp_path / "a")


def test_run_tasks_refuses_an_unknown_kind(tmp_path):
    with pytest.raises(
        ConfigError, match="unknown task kind 'magic'; valid: particle, pde, training, compute"
    ):
        run_tasks({"a": {"kind": "magic"}}, tmp_path)


# -- the runner ------------------------------------------------------------------------------------
def test_a_study_of_computations_runs_resumes_and_keeps_its_own_keys(tmp_path):
    out = tmp_path / "s"
    s = run_study(DrawsStudy(), out, quick=True)
    on_disk = json.loads((out / "summary.json").read_text())
    # the study's own "config" and "status" are not overwritten: the runner's record is under "run"
    assert on_disk["config"] == "a study key named config" and on_disk["status"] == "mine"
    assert on_disk["run"]["status"] == "done" and on_disk["run"]["config"]["seeds"] == [0, 1]
    assert on_disk["run"]["tasks"]["seed0"] == {"dir": "runs/seed0", "kind": "compute", "status": "done"}
    assert on_disk["verdicts"][0]["id"] == "small-means" and on_disk["verdicts"][0]["verdict"] == "holds"
    assert on_disk["means"] == [float(np.random.default_rng(k).normal(size=50).mean()) for k in (0, 1)]
    assert (out / "table.md").read_text().startswith("### Means\n\n| seed | sample mean |\n|---|---|\n| 0 |")
    spec = json.loads((out / "tables.json").read_text())["tables"][0]
    assert markdown([table_from_json(spec)]) == (out / "table.md").read_text()
    assert s["wall_time_s"] > 0 and json.loads((out / "run_log.json").read_text())["workers"] == 1
    before = (out / "summary.json").read_bytes()
    CALLS["n"] = 0
    again = run_study(DrawsStudy(), out, quick=True)
    assert CALLS["n"] == 0 and all(r["skipped"] for r in again["runs"].values())
    assert (out / "summary.json").read_bytes() == before
    info = study_info(out)
    assert info["status"] == "done" and info["runs"] == {"seed0": "done", "seed1": "done"}
    with pytest.raises(StudyMismatchError, match=r"seed0, seed1 differ in params n"):
        run_study(DrawsStudy(), out, quick=True, params={"n": 5})


def test_a_resumed_study_writes_the_same_bytes_whatever_order_its_tasks_finish(tmp_path):
    out = tmp_path / "o"
    run_study(DrawsStudy(), out, params={"seeds": [0, 1, 2]})
    before = (out / "summary.json").read_bytes()
    shutil.rmtree(out / "runs" / "seed0")  # the first task is lost: it reruns after the skipped ones
    again = run_study(DrawsStudy(), out, params={"seeds": [0, 1, 2]})
    assert [k for k, r in again["runs"].items() if not r.get("skipped")] == ["seed0"]
    assert (out / "summary.json").read_bytes() == before


def test_the_reserved_key_and_an_empty_plan_are_refused(tmp_path):
    with pytest.raises(StudyResultError, match="uses the key 'run', which the runner reserves"):
        run_study(DrawsStudy(), tmp_path / "r", quick=True, params={"extra_key": "run"})

    class Empty(DrawsStudy):
        name = "empty_test"

        def plan(self, config):
            return {}

    with pytest.raises(
        StudyPlanError, match=r"plans no task: .*The rule: all the work of a study runs as tasks"
    ):
        run_study(Empty(), tmp_path / "e", quick=True)

    class Legacy(DrawsStudy):
        def analyse(self, config, runs, out_dir):
            return {"means": []}

    with pytest.raises(StudyResultError, match="must return a StudyResult: got dict"):
        run_study(Legacy(), tmp_path / "l", quick=True)


def test_workers_are_chosen_by_the_work():
    assert choose_workers({"a": 0.5, "b": 0.5}, None) == 1  # a small study stays in this process
    assert choose_workers({"a": PARALLEL_MIN_S}, None) == 1  # one task: nothing to share
    many = {f"t{i}": 20.0 for i in range(8)}
    assert 1 < choose_workers(many, None) <= 8 or (choose_workers(many, None) == 1 and _one_cpu())
    assert choose_workers({"a": 0.1}, 3) == 3  # an explicit request wins


def test_workers_follow_the_longest_task(monkeypatch):
    import os

    from attnflow.studies.tasks import WORKER_START_S

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    # one task holds the work: a second process cannot shorten it (wall = longest either way)
    assert choose_workers({"big": 300.0, "small": 5.0}, None) == 1
    # two equal halves: 150 s + the pool's start on 2 processes against 300 s on one
    assert choose_workers({"a": 150.0, "b": 150.0}, None) == 2
    # shared work only just worth a pool: 2 workers when total / 2 + start < total
    t = 2 * WORKER_START_S + 2.0
    assert choose_workers({"a": t / 2, "b": t / 2}, None) == (2 if t >= PARALLEL_MIN_S else 1)
    assert choose_workers({f"t{i}": 4.0 for i in range(20)}, None) == 2  # 80 s of small tasks: both cores


def _one_cpu() -> bool:
    import os

    return (os.cpu_count() or 1) == 1


# -- registration, user files, entry points ------------------------------------------------------------
USER_STUDY = """
from attnflow.studies import Column, ComputeTask, Study, StudyConfig, StudyResult, Table, study


def square(x: float) -> dict:
    return {"y": x * x}


class Config(StudyConfig):
    xs: list[float] = [1.0, 2.0, 3.0]


class Squares(Study):
    name, description, Config = "squares_user", "squares of a few numbers (a user's study)", Config

    def plan(self, config):
        fn = "{module}:square"
        return {f"x{i}": ComputeTask(fn=fn, params={{"x": x}}) for i, x in enumerate(config.xs)}

    def analyse(self, config, runs, out_dir):
        rows = [{{"x": x, "y": runs.result(f"x{i}")["y"]}} for i, x in enumerate(config.xs)]
        table = Table(columns=[Column("x"), Column("y")], rows=rows)
        return StudyResult(summary={{"rows": rows}}, tables=[table])
"""


def _user_file(folder: Path, module: str) -> Path:
    path = folder / f"{module}.py"
    text = textwrap.dedent(USER_STUDY).replace("{module}", module)
    path.write_text(text.replace("{{", "{").replace("}}", "}"))
    return path


def test_a_users_study_file_runs_from_python_and_the_cli(tmp_path):
    path = _user_file(tmp_path, "squares_study_a")
    s = run_study(f"{path}:Squares", tmp_path / "py")
    assert s["rows"] == [{"x": 1.0, "y": 1.0}, {"x": 2.0, "y": 4.0}, {"x": 3.0, "y": 9.0}]
    res = runner.invoke(app, ["study", "run", f"{path}:Squares", "--out", str(tmp_path / "cli"), "-q"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cli" / "summary.json").read_bytes() == (tmp_path / "py" / "summary.json").read_bytes()
    with pytest.raises(UnknownStudyError, match="defines no study class 'Nope'.*its study classes: Squares"):
        get_study(f"{path}:Nope")
    with pytest.raises(UnknownStudyError, match="no study file"):
        get_study(f"{tmp_path}/missing.py:Squares")
    bad = tmp_path / "my-study.py"
    bad.write_text("")
    with pytest.raises(UnknownStudyError, match="must be named like a Python module.*e.g. my_study.py"):
        get_study(f"{bad}:Squares")


def test_one_decorator_registers_and_entry_points_are_found(monkeypatch):
    @study
    class Decorated(DrawsStudy):
        name = "decorated_test"

    try:
        assert isinstance(get_study("decorated_test"), Decorated)
    finally:
        unregister("decorated_test")
    with pytest.raises(TypeError, match="@study decorates a subclass of attnflow.studies.Study"):
        study(object)

    from importlib import metadata

    class EP:
        name, value = "ep_test", "test_studies_tasks:DrawsStudy"

        def load(self):
            return DrawsStudy

    def eps(group=None):
        return [EP()] if group == "attnflow.studies" else []

    monkeypatch.setattr(metadata, "entry_points", eps)
    try:
        assert get_study("draws_test").name == "draws_test"  # found through the entry point
    finally:
        unregister("draws_test")


# -- the renderer --------------------------------------------------------------------------------------
def test_the_renderer_formats_and_escapes_and_refuses_bad_tables():
    t = Table(
        columns=[Column("a"), Column("b", "b<sub>", ".2f"), Column("ok")],
        rows=[{"a": "x|y", "b": 1.23456, "ok": True}, {"a": None, "b": float("nan"), "ok": False}],
    )
    assert markdown([t]) == "| a | b<sub> | ok |\n|---|---|---|\n| x\\|y | 1.23 | yes |\n|  | nan | no |\n"
    assert "<th>b&lt;sub&gt;</th>" in html([t]) and "<td>x|y</td>" in html([t])
    with pytest.raises(ValueError, match=r"row 0 has no value for columns \['b'\]"):
        Table(columns=[Column("a"), Column("b")], rows=[{"a": 1}])
    with pytest.raises(ValueError, match="column keys must be distinct"):
        Table(columns=[Column("a"), Column("a")], rows=[])
    with pytest.raises(ValueError, match="has no column"):
        Table(columns=[], rows=[])


# -- a PDE run as a task --------------------------------------------------------------------------------
PDE = {
    "name": "pde_s1",
    "model": "pde",
    "dynamics": {"direction": "ascent", "attention": "softmax", "beta": 1.0},
    "weights": {"process": "constant"},
    "heads": {"init": "identity", "H": 2, "scale": 1.0},
    "density": {"init": "von_mises_fisher", "d": 2, "centres": [[1.0, 0.0], [0.0, 1.0]], "kappa": 6.0},
    "pde": {"band_limit": 16},
    "integrator": {"dt": 0.05, "t1": 0.2},
    "record": {"every": 2},
}


class PdeStudy(DrawsStudy):
    name = "pde_task_test"

    def plan(self, config):
        return {
            "density": PdeRun(PDE),
            "draws": ComputeTask(fn="test_studies_tasks:draws", params={"seed": 0, "n": 3}),
        }

    def analyse(self, config, runs, out_dir):
        ds = runs.open("density")
        mass = float(ds.mass.isel(time=-1)) if "mass" in ds else float(ds.time.size)
        return StudyResult(
            summary={"times": ds.time.values.tolist(), "mass": mass, "kind": runs.kind("density")}
        )


def test_a_pde_run_is_a_task_of_the_store(tmp_path):
    s = run_study(PdeStudy(), tmp_path / "p", quick=True)
    assert s["kind"] == "pde" and s["times"] == pytest.approx([0.0, 0.1, 0.2])
    assert s["run"]["tasks"]["density"]["kind"] == "pde"
    again = run_study(PdeStudy(), tmp_path / "p", quick=True)
    assert again["runs"]["density"]["skipped"] and again["times"] == s["times"]
    with pytest.raises(KeyError, match="task 'density' is a pde run, not a computation"):
        _runs_of(tmp_path / "p").result("density")


def _runs_of(out: Path):
    from attnflow.studies import StudyRuns
    from attnflow.studies.tasks import normalise_plan

    specs, _ = normalise_plan(PdeStudy().plan(None), "pde_task_test")
    return StudyRuns(out / "runs", {}, {}, specs)


# -- a particle run from input arrays ---------------------------------------------------------------------
class InputsStudy(DrawsStudy):
    name = "inputs_task_test"

    def plan(self, config):
        x0 = np.random.default_rng(config.n).normal(size=(8, 3))
        x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
        cfg = tiny(tokens={"init": "file", "path": "(written by the task)"}, weights={"process": "constant"})
        return {"run": ParticleRun(cfg, inputs={"tokens.path": x0})}

    def analyse(self, config, runs, out_dir):
        ds = runs.open("run")
        return StudyResult(summary={"x0": ds.positions.isel(time=0, path=0).values.tolist()})


def test_a_particle_run_writes_its_input_arrays_in_its_own_directory(tmp_path):
    out = tmp_path / "i"
    s = run_study(InputsStudy(), out, params={"n": 5})
    x0 = np.random.default_rng(5).normal(size=(8, 3))
    np.testing.assert_allclose(s["x0"], x0 / np.linalg.norm(x0, axis=1, keepdims=True), rtol=0, atol=1e-15)
    files = list((out / "runs" / "run" / "inputs").glob("*.npy"))
    assert len(files) == 1 and read_config_path(out) == str(files[0])
    again = run_study(InputsStudy(), out, params={"n": 5})
    assert again["runs"]["run"]["skipped"]
    with pytest.raises(StudyMismatchError, match=r"run differ in tokens.path"):  # other arrays, other run
        run_study(InputsStudy(), out, params={"n": 6})


def read_config_path(out: Path) -> str:
    import yaml

    return yaml.safe_load((out / "runs" / "run" / "config.yaml").read_text())["tokens"]["path"]


# -- a training run as a task -----------------------------------------------------------------------------
TRAIN = {
    "name": "small",
    "seed": 1,
    "model": {"direction": "ascent", "beta": 1.0},
    "flow": {"d": 3, "layers": 2, "heads": 2, "t1": 1.0, "steps_per_layer": 2, "param": "dv"},
    "task": {"kind": "measure", "loss": "mmd", "paths": 8, "n": 8},
    "train": {
        "steps": 6,
        "lr": 0.05,
        "batch": 4,
        "gradient": "adjoint",
        "record_every": 2,
        "checkpoint_every": 2,
    },
}


class TrainStudy(DrawsStudy):
    name = "training_task_test"

    def plan(self, config):
        return {"train": TrainingRun(TRAIN)}

    def analyse(self, config, runs, out_dir):
        from attnflow.experiments.training_run import read_training_run

        run = read_training_run(runs.path("train"))
        return StudyResult(summary={"status": run["meta"]["status"], "kind": runs.kind("train")})


def test_a_training_run_is_a_task_of_the_store(tmp_path):
    s = run_study(TrainStudy(), tmp_path / "t")
    assert s["status"] == "done" and s["kind"] == "training" and s["run"]["status"] == "done"
    again = run_study(TrainStudy(), tmp_path / "t")
    assert again["runs"]["train"]["skipped"] and (tmp_path / "t" / "summary.json").read_text() == json.dumps(
        dict(s), indent=1
    )
