"""Training runs as experiments (issue 15): config validation, the run directory, bit-for-bit resume after
SIGKILL, the stop on a non-finite loss, the CLI and its figures, and the training tasks themselves."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments.errors import ConfigError
from attnflow.experiments.files import CorruptFileError
from attnflow.experiments.schema import load_yaml
from attnflow.experiments.store import RunConfigMismatchError
from attnflow.experiments.training_config import EXAMPLE_TRAINING_YAML, load_training_config
from attnflow.experiments.training_run import build_trainer, read_training_run, run_training
from attnflow.training import trainer as trainer_module
from attnflow.training.trainer import NonFiniteLossError

torch.set_num_threads(1)

SMALL = {
    "name": "small",
    "seed": 1,
    "model": {"direction": "ascent", "beta": 1.0},
    "flow": {"d": 3, "layers": 2, "heads": 2, "t1": 1.0, "steps_per_layer": 2, "param": "dv"},
    "task": {"kind": "measure", "loss": "mmd", "paths": 8, "n": 8},
    "train": {
        "steps": 60,
        "lr": 0.05,
        "batch": 4,
        "gradient": "adjoint",
        "record_every": 10,
        "checkpoint_every": 2,
    },
}


def _cfg(**changes):
    cfg = copy.deepcopy(SMALL)
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        cfg[section][key] = value
    return cfg


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"train__lr": -0.1}, "train.lr must be greater than 0: got -0.1"),
        ({"train__lr": 0.0}, "train.lr must be greater than 0: got 0.0"),
        ({"flow__layers": 0}, "flow.layers must be greater than or equal to 1: got 0"),
        (
            {"task__loss": "mmdd"},
            "task.loss: got 'mmdd'; allowed values: 'ssw', 'w2', 'mmd' or 'logistic'; did you mean 'mmd'",
        ),
        ({"task__loss": "logistic"}, "the measure task needs a measure loss, got 'logistic'"),
        ({"model__backend": "numba"}, "model.backend: a training run differentiates .* got 'numba'"),
        ({"train__batch": 9}, "train.batch must be at most task.paths = 8: got 9"),
        (
            {"train__gradient": "finite"},
            "train.gradient: got 'finite'; allowed values: 'autograd' or 'adjoint'",
        ),
        ({"flow__param": "qk"}, "flow.param: got 'qk'; allowed values: 'tied', 'dv' or 'qkv'"),
        ({"train__lrr": 1.0}, "unknown key 'lrr' in train; did you mean 'lr'"),
    ],
)
def test_training_config_is_validated_at_load(change, message):
    with pytest.raises(ConfigError, match=message):
        load_training_config(_cfg(**change))


def test_training_config_from_yaml_files(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(EXAMPLE_TRAINING_YAML)
    cfg = load_training_config(path)
    assert cfg.train.lr == 0.03 and cfg.flow.layers == 4 and cfg.task.loss == "mmd"
    with pytest.raises(ConfigError, match="training config file not found"):
        load_training_config(tmp_path / "missing.yaml")
    path.write_text("model: [1, 2\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_training_config(path)


CHILD = textwrap.dedent(
    """
    import json, sys, torch
    from attnflow.experiments.training_run import run_training
    run_training(json.loads(sys.argv[1]), sys.argv[2])
    """
)


def _tensors_equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_tensors_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_tensors_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.slow  # 106 s measured on the shared 2 cores; default tier: tests/test_store_kinds.py
def test_resume_after_sigkill_is_bit_for_bit(tmp_path):
    cfg = _cfg()
    ref = run_training(cfg, tmp_path / "ref")
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(cfg), str(killed)], env=env)
    try:
        deadline = time.monotonic() + 60
        step = 0
        while time.monotonic() < deadline and child.poll() is None:
            meta = killed / "meta.json"
            if meta.is_file():
                try:
                    step = json.loads(meta.read_text()).get("step", 0)
                except json.JSONDecodeError:
                    step = 0
                if step >= 10:
                    break
            time.sleep(0.005)
        assert child.poll() is None, "the child finished before it could be killed: raise train.steps"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    meta = read_training_run(killed)["meta"]
    assert meta["status"] == "running" and 10 <= meta["step"] < 60  # killed, not finished
    resumed = run_training(cfg, killed)
    assert resumed["final"] == ref["final"]
    a = torch.load(tmp_path / "ref" / "checkpoint.pt", weights_only=True)["trainer"]
    b = torch.load(killed / "checkpoint.pt", weights_only=True)["trainer"]
    assert _tensors_equal(a["flow"], b["flow"]) and _tensors_equal(a["optimizer"], b["optimizer"])
    assert torch.equal(a["losses"], b["losses"]) and a["evals"] == b["evals"]
    assert read_training_run(killed)["meta"]["status"] == "done"
    # a finished run is returned as is; another config in the same directory is refused
    assert run_training(cfg, killed) == resumed
    with pytest.raises(RunConfigMismatchError, match="different config.*train.lr"):
        run_training(_cfg(train__lr=0.01), killed)


def test_a_non_finite_loss_stops_the_run_and_keeps_the_checkpoint(tmp_path, monkeypatch):
    real = trainer_module.measure_loss
    calls = {"n": 0}

    def poisoned(name, x, y):
        value = real(name, x, y)
        if torch.is_grad_enabled():  # the training steps, not the evaluations
            calls["n"] += 1
            if calls["n"] == 6:
                return value * float("nan")
        return value

    monkeypatch.setattr(trainer_module, "measure_loss", poisoned)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteLossError, match="not finite at step 5 .*last finite loss: [0-9.]+") as info:
        run_training(_cfg(train__gradient="autograd"), out)
    assert info.value.step == 5 and info.value.last_finite_loss is not None
    meta = read_training_run(out)["meta"]
    assert meta["status"] == "diverged" and meta["step"] == 5
    assert meta["last_finite_loss"] == info.value.last_finite_loss
    state = torch.load(out / "checkpoint.pt", weights_only=True)["trainer"]
    # the periodic checkpoint of step 4 is kept as it was (the steps after it are not written over it)
    assert state["step"] == 4 and len(state["losses"]) == 4
    # a torn checkpoint is reported, not loaded; a directory attnflow did not create is not written into
    (out / "checkpoint.pt").write_bytes(b"torn")
    with pytest.raises(CorruptFileError, match="checkpoint.pt is truncated or unreadable.*start afresh"):
        run_training(_cfg(train__gradient="autograd"), out)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "summary.json").write_text("{}")
    with pytest.raises(RunConfigMismatchError, match="holds summary.json that attnflow did not create"):
        run_training(_cfg(), foreign)
    assert sorted(p.name for p in foreign.iterdir() if p.name != ".attnflow.lock") == ["summary.json"]


def test_cli_trains_writes_figures_and_records_the_torch_path(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["train", "--example"])
    assert res.exit_code == 0 and load_training_config(load_yaml(res.output)).name == "measure-mmd"
    cfg = _cfg(train__steps=20, train__gradient="autograd", task__kind="two_class", task__loss="logistic")
    cfg["task"] = {"kind": "two_class", "loss": "logistic", "paths": 16, "n": 6}
    path = tmp_path / "cls.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    res = runner.invoke(app, ["train", str(path), "--out", str(tmp_path / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    for name in ("loss.png", "clouds.png", "head_law.png", "landscape.png"):
        assert (run / "figures" / name).stat().st_size > 1000
    summary = json.loads((run / "summary.json").read_text())
    assert summary["attrs"]["backend"] == "torch" and summary["attrs"]["grad"] is True
    # the readout of the class token starts at chance and the flow separates the classes
    assert summary["initial"]["test_accuracy"] == 0.5
    assert summary["final"]["test_accuracy"] >= 0.9 and summary["final"]["train_loss"] < 0.5
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(_cfg(train__lr=-1.0)))
    res = runner.invoke(app, ["train", str(bad), "--out", str(tmp_path / "bad")])
    assert res.exit_code == 2 and "train.lr must be greater than 0" in res.output


def test_measure_training_lowers_the_loss_and_records_the_head_law():
    trainer = build_trainer(_cfg(train__gradient="autograd"))
    trainer.train(30)
    first, last = trainer.evals[0], trainer.evals[-1]
    # 30 AdamW steps at lr 0.05 move the clouds towards the target law: the MMD^2 at least halves
    assert last["train_loss"] < 0.5 * first["train_loss"]
    law = trainer.head_law()
    assert law["steps"].tolist() == [0, 10, 20, 30]
    assert law["D"].shape == (4, 2, 2, 3, 3) and not torch.equal(law["D"][0], law["D"][-1])


def test_trainer_and_tasks_refuse_bad_inputs():
    import attnflow as af
    from attnflow.training.flow import TrainableFlow
    from attnflow.training.meanfield import risk_landscape
    from attnflow.training.tasks import MeasureTask, TwoClassTask
    from attnflow.training.trainer import Trainer

    flow = TrainableFlow(af.TransformerModel(direction="ascent"), d=3, layers=1, heads=1, t1=1.0)
    measure = MeasureTask.make(paths=2, n=4, d=3, seed=0)
    classes = TwoClassTask.make(paths=2, n=4, d=3, seed=0)
    with pytest.raises(ValueError, match="measure task takes a measure loss: got loss='logistic'"):
        Trainer(flow, measure, loss="logistic", lr=0.1)
    with pytest.raises(ValueError, match="two-class task takes loss 'logistic': got loss='mmd'"):
        Trainer(flow, classes, loss="mmd", lr=0.1)
    with pytest.raises(ValueError, match="lr \\(the learning rate\\) must be a finite number > 0: got 0"):
        Trainer(flow, measure, loss="mmd", lr=0)
    with pytest.raises(ValueError, match="unknown gradient method 'fd'; valid: autograd, adjoint"):
        Trainer(flow, measure, loss="mmd", lr=0.1, gradient="fd")
    with pytest.raises(ValueError, match="unknown adjoint state 'disk'"):
        Trainer(flow, measure, loss="mmd", lr=0.1, adjoint_state="disk")
    with pytest.raises(ValueError, match="batch must be None or an integer in \\[1, 2\\].*got 3"):
        Trainer(flow, measure, loss="mmd", lr=0.1, batch=3)
    with pytest.raises(ValueError, match="record_every must be an integer >= 1: got 0"):
        Trainer(flow, measure, loss="mmd", lr=0.1, record_every=0)
    with pytest.raises(ValueError, match="kappa must be a finite number > 0: got -1"):
        MeasureTask.make(paths=2, n=4, d=3, kappa=-1.0)
    with pytest.raises(ValueError, match="n must be an integer >= 2: got 1"):
        MeasureTask.make(paths=2, n=1, d=3)
    with pytest.raises(ValueError, match="target_factor must be an integer >= 1: got 0"):
        MeasureTask.make(paths=2, n=4, d=3, target_factor=0)
    with pytest.raises(ValueError, match="spread must be a finite number >= 0: got -0.5"):
        TwoClassTask.make(paths=2, n=4, d=3, spread=-0.5)
    with pytest.raises(ValueError, match="paths must be an integer >= 2: got 1"):
        TwoClassTask.make(paths=1, n=4, d=3)
    with pytest.raises(ValueError, match="points must be an integer >= 2: got 1"):
        risk_landscape(flow, measure.x0, lambda x: x.sum(), 0, points=1)
    with pytest.raises(ValueError, match="thetas must give exactly the flow's head parameters"):
        from attnflow.training.meanfield import risk_first_variation

        risk_first_variation(flow, measure.x0, lambda x: x.sum(), 0, {"D": flow.D[0].detach()})
