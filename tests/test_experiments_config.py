"""Experiment configs: validation messages (key, value, allowed values, suggestions) and build()."""

from __future__ import annotations

import copy

import pytest
import torch
import yaml

from attnflow.experiments import (
    EXAMPLE_YAML,
    ConfigError,
    ExperimentConfig,
    build,
    config_diff,
    dump_config,
    load_config,
    parse_grid,
    with_overrides,
)
from attnflow.experiments.progress import ProgressBar, format_duration

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


def _with(**changes):
    """TINY with dotted-key changes; the value ``...`` deletes the key."""
    d = copy.deepcopy(TINY)
    for dotted, value in changes.items():
        node, parts = d, dotted.split("__")
        for p in parts[:-1]:
            node = node[p]
        if value is ...:
            del node[parts[-1]]
        else:
            node[parts[-1]] = value
    return d


def test_example_is_valid_and_documented():
    cfg = load_config(yaml.safe_load(EXAMPLE_YAML))
    assert isinstance(cfg, ExperimentConfig)
    assert cfg.weights.process == "ornstein_uhlenbeck" and cfg.heads.H == 10 and cfg.paths == 20
    assert EXAMPLE_YAML.count("#") > 20  # every key carries a comment


def test_load_from_file_roundtrip(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(TINY))
    cfg = load_config(p)
    assert load_config(yaml.safe_load(dump_config(cfg))) == cfg
    assert cfg.checkpoint_steps == 10
    assert load_config(_with(checkpoint_every=7)).checkpoint_steps == 10  # rounded up to record.every


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        # unknown keys, with a difflib suggestion
        ({"weights__sigma": 1.0}, r"unknown key 'sigma' in weights; did you mean 'sigma2'\?"),
        ({"sed": 1}, r"unknown key 'sed' in the config; did you mean 'seed'\?"),
        ({"tokens__kappa": 3.0}, r"unknown key 'kappa' in tokens.*allowed keys for init 'octahedral'"),
        ({"model__betta": 2.0}, r"unknown key 'betta' in model; did you mean 'beta'\?"),
        # wrong types: key, value and its type
        ({"tokens__n": "abc"}, r"tokens\.n must be a valid integer: got 'abc' \(str\)"),
        ({"paths": 2.5}, r"paths must be a valid integer: got 2\.5 \(float\)"),
        ({"model__beta": True}, r"model\.beta must be a valid number: got True \(bool\)"),
        # missing keys
        ({"tokens__n": ...}, r"missing required key 'tokens\.n'"),
        ({"model__direction": ...}, r"missing required key 'model\.direction'"),
        ({"weights__process": ...}, r"missing required key 'weights\.process'; allowed values: 'constant'"),
        # bad values: key, value, allowed values
        (
            {"model__attention": "softmx"},
            r"model\.attention: got 'softmx'; allowed values: 'softmax'.*did you mean 'softmax'\?",
        ),
        (
            {"weights__process": "ou"},
            r"weights\.process: got 'ou'; allowed values: 'constant', 'ornstein_uhlenbeck'",
        ),
        ({"precision": "float16"}, r"precision: got 'float16'; allowed values: 'float64' or 'float32'"),
        ({"model__beta": -1.0}, r"model\.beta must be greater than 0: got -1\.0"),
        ({"checkpoint_every": 0}, r"checkpoint_every must be greater than or equal to 1: got 0"),
        ({"integrator__dt": 0.03}, r"whole number of steps: got 0\.2/0\.03"),
        ({"device": "gpu"}, r"device must be 'cpu', 'cuda' or 'cuda:N': got 'gpu'"),
        ({"heads__init": "file"}, r"heads\.path is required for heads\.init 'file'"),
    ],
)
def test_config_errors(changes, match):
    with pytest.raises(ConfigError, match=match):
        load_config(_with(**changes))


def test_config_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(bad)
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping of keys, got list"):
        load_config(bad)


def test_build_matches_core_generators():
    import attnflow as af

    model, x0, D0, kw = build(TINY)
    assert isinstance(model.weights, af.OrnsteinUhlenbeck) and model.weights.sigma2 == 0.5
    assert x0.shape == (2, 8, 3) and D0.shape == (2, 2, 3, 3)
    torch.testing.assert_close(x0, af.tokens.octahedral(2, 8, 3, seed=0), rtol=0, atol=0)
    torch.testing.assert_close(D0, af.heads.symmetric_gaussian(2, 2, 3, seed=0), rtol=0, atol=0)
    assert kw == {
        "dt": 0.01,
        "t1": 0.2,
        "integrator": "euler",
        "seed": 0,
        "record_every": 5,
        "positions": True,
        "record_heads": False,
        "ledger": True,
        "dtype": "float64",
        "device": "cpu",
    }
    _, x0f, D0f, _ = build(
        _with(
            tokens={"init": "uniform", "n": 5, "d": 2},
            heads={"init": "identity", "H": 3},
            weights={"process": "oscillating", "forcing": "s1"},
            precision="float32",
        )
    )
    assert x0f.dtype == torch.float32 and D0f.shape == (2, 3, 2, 2)


def test_build_from_files(tmp_path):
    import numpy as np

    import attnflow as af

    x = af.tokens.uniform(1, 6, 3, seed=1)[0].numpy()
    D = np.stack([np.eye(3), 2 * np.eye(3)])
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "D.npy", D)
    cfg = _with(
        tokens={"init": "file", "path": str(tmp_path / "x.npy")},
        heads={"init": "file", "H": 2, "path": str(tmp_path / "D.npy")},
    )
    _, x0, D0, _ = build(cfg)
    assert x0.shape == (2, 6, 3) and D0.shape == (2, 2, 3, 3)
    with pytest.raises(ConfigError, match="heads.H = 3 but the file"):
        build(_with(tokens=cfg["tokens"], heads={"init": "file", "H": 3, "path": str(tmp_path / "D.npy")}))


def test_overrides_and_diff():
    base = load_config(TINY)
    cfg = with_overrides(base, {"heads.H": 4, "weights.sigma2": 1.5})
    assert cfg.heads.H == 4 and cfg.weights.sigma2 == 1.5
    assert config_diff(base, cfg) == ["heads.H", "weights.sigma2"]
    with pytest.raises(ConfigError, match="unknown key 'sigma' in weights; did you mean 'sigma2'"):
        with_overrides(base, {"weights.sigma": 1.0})
    with pytest.raises(ConfigError, match="'paths' is not a section"):
        with_overrides(base, {"paths.x": 1})


def test_parse_grid():
    g = parse_grid(["heads.H=2,4", "weights.F=identity,[[1,0],[0,1]]", "model.causal=true,false"])
    assert g == {
        "heads.H": [2, 4],
        "weights.F": ["identity", [[1, 0], [0, 1]]],
        "model.causal": [True, False],
    }
    with pytest.raises(ValueError, match="a grid must read key=v1,v2"):
        parse_grid(["heads.H"])
    with pytest.raises(ValueError, match="given twice"):
        parse_grid(["heads.H=1", "heads.H=2"])
    with pytest.raises(ValueError, match="repeated values"):
        parse_grid(["heads.H=1,1"])


def test_progress_bar_text(capsys):
    import io

    s = io.StringIO()
    bar = ProgressBar(10, "run", unit="steps", enabled=True, stream=s)
    for _ in range(10):
        bar(1)
    bar.close()
    out = s.getvalue()
    assert out.startswith("\r") and "10/10 steps" in out and "100%" in out and out.endswith("\n")
    quiet = io.StringIO()  # not a terminal: silent by default
    b2 = ProgressBar(5, "x", stream=quiet)
    b2.update(5)
    b2.close()
    assert quiet.getvalue() == ""
    assert format_duration(3725) == "1:02:05" and format_duration(float("nan")) == "?"
