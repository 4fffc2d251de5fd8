"""``device: cuda`` is checked when a config loads and ``--device`` before anything runs (issue 12).

On this CPU-only torch build every CUDA request must be refused with the issue's message and exit code 2,
leaving no run directory behind; ``cpu`` keeps working. (Where CUDA exists the refusal tests are skipped.)
"""

from __future__ import annotations

import pytest
import torch
import yaml
from experiments_helpers import TINY
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments import ConfigError, load_config, open_run
from attnflow.experiments.schema import check_device, with_device

runner = CliRunner()
MESSAGE = "CUDA requested but this torch build has none; install a CUDA build or use device: cpu"
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


@no_cuda
def test_config_with_cuda_is_refused_at_load():
    with pytest.raises(ConfigError, match="CUDA requested but this torch build has none"):
        load_config({**TINY, "device": "cuda"})
    with pytest.raises(ValueError, match="got device: cuda:1"):
        check_device("cuda:1")


def test_device_names_and_override():
    assert check_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or 'cuda:N': got 'gpu'"):
        check_device("gpu")
    cfg = load_config(TINY)
    assert with_device(cfg, None) is cfg
    assert with_device(cfg, "cpu").device == "cpu"


@no_cuda
@pytest.mark.parametrize(
    "args",
    [
        ["run", "{cfg}", "--out", "{out}"],
        ["reproduce", "massucco2026", "--quick", "--out", "{out}"],
        ["study", "run", "longtime", "--quick", "--out", "{out}"],
        ["check-edi", "--quick", "--json", "{out}/edi.json"],
    ],
    ids=["run", "reproduce", "study-run", "check-edi"],
)
def test_cli_device_cuda_is_refused_before_anything_runs(tmp_path, args):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    argv = [a.format(cfg=cfg, out=out) for a in args] + ["--device", "cuda"]
    if args[0] == "check-edi":
        out.mkdir()
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert MESSAGE in " ".join(res.output.split())
    assert not out.exists() or not any(p.name != "edi.json" and p.is_file() for p in out.rglob("*"))
    assert not (out / "edi.json").exists()


def test_cli_run_device_cpu_runs(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    res = runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "r"), "--quiet", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert open_run(tmp_path / "r").sizes["time"] == 5
