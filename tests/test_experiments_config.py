"""Experiment configs: validation messages (key, value, allowed values, suggestions) and build()."""

from __future__ import annotations

import pytest
import torch
import yaml
from experiments_helpers import TINY, tiny_file_tokens, tiny_with

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

_with = tiny_with


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
        ({"precision": "float16"}, r"precision: got 'float16'; allowed values: 'float32' or 'float64'"),
        (
            {"model__beta": -1.0},
            r"model\.beta must be greater than or equal to 2\.2250738585072014e-308: got -1\.0",
        ),
        ({"checkpoint_every": 0}, r"checkpoint_every must be greater than or equal to 1: got 0"),
        (
            {"integrator__dt": 0.03},
            r"integrator\.t1 / integrator\.dt: \(t1 - t0\)/dt must be a whole number of steps: "
            r"got \(0\.2 - 0\)/0\.03 = 6\.66667; choose t1 = 0\.21 or another dt",
        ),
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
    from attnflow.simulation import SimulationSpec

    spec = build(TINY)
    assert isinstance(spec, SimulationSpec)
    model = spec.model
    assert isinstance(model.weights, af.OrnsteinUhlenbeck) and model.weights.sigma2 == 0.5
    assert spec.x0.shape == (2, 8, 3) and spec.heads.shape == (2, 2, 3, 3)
    torch.testing.assert_close(spec.x0, af.tokens.octahedral(2, 8, 3, seed=0), rtol=0, atol=0)
    torch.testing.assert_close(spec.heads, af.heads.symmetric_gaussian(2, 2, 3, seed=0), rtol=0, atol=0)
    assert (spec.dt, spec.t0, spec.t1, spec.n_steps, spec.values) == (0.01, 0.0, 0.2, 20, None)
    assert (spec.integrator, spec.seed, spec.record_every, spec.first_path) == ("euler", 0, 5, 0)
    assert (spec.positions, spec.record_heads, spec.ledger) == (True, False, True)
    assert (spec.dtype, spec.device) == ("float64", "cpu")
    small = build(
        _with(
            tokens={"init": "uniform", "n": 5, "d": 2},
            heads={"init": "identity", "H": 3},
            weights={"process": "oscillating", "forcing": "s1"},
            precision="float32",
        )
    )
    assert small.x0.dtype == torch.float32 and small.heads.shape == (2, 3, 2, 2)


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
    spec = build(cfg)
    x0, D0 = spec.x0, spec.heads
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
    with pytest.raises(ConfigError, match=r"cannot set 'paths\.x': 'paths' is not a section of the config"):
        with_overrides(base, {"paths.x": 1})
    with pytest.raises(ConfigError, match=r"cannot set 'heads\.H\.x': 'heads\.H' is not a section"):
        with_overrides(base, {"heads.H.x": 1})


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


# -- YAML 1.2 floats, finite values, cross-field checks --------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [("1e-3", 1e-3), ("1.0e-3", 1e-3), ("1E-2", 1e-2), (".5", 0.5), ("2.5e+1", 25.0), ("1e0", 1.0)],
)
def test_scientific_notation_in_yaml_files(tmp_path, text, value):
    p = tmp_path / "sci.yaml"
    body = yaml.safe_dump(TINY).replace("dt: 0.01", f"dt: {text}").replace("t1: 0.2", "t1: 1.0e+2")
    p.write_text(body.replace("sigma2: 0.5", f"sigma2: {text}"))
    cfg = load_config(p)
    assert isinstance(cfg.integrator.dt, float) and cfg.integrator.dt == value
    assert cfg.weights.sigma2 == value and cfg.integrator.t1 == 100.0
    p.write_text(body.replace("sigma2: 0.5", "sigma2: -2E+4"))
    with pytest.raises(
        ConfigError, match=r"weights\.sigma2 must be greater than or equal to 0: got -20000\.0"
    ):
        load_config(p)


def test_yaml12_loader_keeps_ints_and_strings():
    from attnflow.experiments.config import load_yaml

    got = load_yaml("a: [10, 1_000, '1e-3', ., 1.5, -.inf, .NaN, 0.01, 1e3]")["a"]
    assert got[:5] == [10, 1000, "1e-3", ".", 1.5] and got[5] == float("-inf") and got[6] != got[6]
    assert got[7:] == [0.01, 1000.0] and isinstance(got[0], int) and isinstance(got[8], float)


def test_scientific_notation_in_grids():
    g = parse_grid(["integrator.dt=1e-3,.5,-2E+4", "weights.sigma2=1.0e-3,1e0", "heads.H=2,10"])
    assert g == {"integrator.dt": [1e-3, 0.5, -2e4], "weights.sigma2": [1e-3, 1.0], "heads.H": [2, 10]}
    assert all(isinstance(v, float) for v in g["integrator.dt"]) and isinstance(g["heads.H"][0], int)
    cfg = with_overrides(TINY, {"integrator.dt": parse_grid(["k=1e-2"])["k"][0]})
    assert cfg.integrator.dt == 0.01
    with pytest.raises(ValueError, match=r"grid value '\[1,' of key 'heads\.H' is not valid YAML"):
        parse_grid(["heads.H=[1,"])


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        # t1 and dt: the one time-grid rule (attnflow.simulation.n_steps_for), prefixed with the key
        ({"integrator__t1": float("inf")}, r"integrator\.t1: t1 must be a finite time > t0 = 0: got inf"),
        ({"integrator__dt": float("inf")}, r"integrator\.dt: dt must be a finite number > 0: got inf"),
        ({"integrator__dt": float("nan")}, r"integrator\.dt: dt must be a finite number > 0: got nan"),
        ({"model__beta": float("nan")}, r"model\.beta must be a finite number: got nan"),
        ({"model__layer_scaling": float("inf")}, r"model\.layer_scaling must be a finite number: got inf"),
        ({"weights__sigma2": float("inf")}, r"weights\.sigma2 must be a finite number: got inf"),
        ({"weights__rate": float("nan")}, r"weights\.rate must be a finite number: got nan"),
        ({"tokens__noise": float("inf")}, r"tokens\.noise must be a finite number: got inf"),
        ({"heads__scale": float("inf")}, r"heads\.scale must be a finite number: got inf"),
        ({"heads__scale": 0.0}, r"heads\.scale must be greater than 0: got 0\.0"),
        ({"heads__scale": -1.0}, r"heads\.scale must be greater than 0: got -1\.0"),
        (
            {"integrator__t1": 1e300, "integrator__dt": 1e-300},
            r"must be at most 1e12 steps: got 1e\+300/1e-300 = inf; choose a larger dt or a smaller t1",
        ),
    ],
)
def test_non_finite_values_are_rejected(changes, match):
    with pytest.raises(ConfigError, match=match):
        load_config(_with(**changes))


def test_infinite_times_in_yaml_name_the_key(tmp_path):
    p = tmp_path / "inf.yaml"
    p.write_text(yaml.safe_dump(TINY).replace("t1: 0.2", "t1: .inf"))
    with pytest.raises(ConfigError, match=r"integrator\.t1: t1 must be a finite time > t0 = 0: got inf"):
        load_config(p)
    p.write_text(yaml.safe_dump(TINY).replace("dt: 0.01", "dt: .inf"))
    with pytest.raises(ConfigError, match=r"integrator\.dt: dt must be a finite number > 0: got inf"):
        load_config(p)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (
            {"weights": {"process": "oscillating", "forcing": "s1"}},
            r"weights\.forcing does not fit heads\.H = 2 and tokens\.d = 3 "
            r"\(weights\.process 'oscillating'\): forcing 's1' is defined for d = 2.*"
            r"use weights\.forcing 's1' for d = 2",
        ),
        (
            {
                "weights": {"process": "oscillating", "forcing": "s2"},
                "tokens": {"init": "uniform", "n": 4, "d": 2},
            },
            r"weights\.forcing does not fit heads\.H = 2 and tokens\.d = 2.*"
            r"forcing 's2' is defined for d = 3",
        ),
        (
            {"weights": {"process": "ornstein_uhlenbeck", "F": [[1, 0], [0, 1]]}},
            r"weights\.F does not fit heads\.H = 2 and tokens\.d = 3.*OU target F has shape \(2, 2\).*"
            r"give weights\.F as 'identity' or a d x d",
        ),
        (
            {"weights": {"process": "ornstein_uhlenbeck", "F": [[[1, 0, 0], [0, 1, 0], [0, 0, 1]]] * 3}},
            r"weights\.F does not fit heads\.H = 2.*OU target F has shape \(3, 3, 3\) but the heads are 2 x",
        ),
        (
            {"weights": {"process": "ornstein_uhlenbeck", "F": [[1, 0, 0], [0, 1, 0]]}},
            r"weights\.F does not fit .*F must be a \(d, d\) or \(H, d, d\) matrix: got shape \(2, 3\)",
        ),
    ],
)
def test_weights_must_fit_tokens_and_heads(changes, match):
    with pytest.raises(ConfigError, match=match):
        load_config({**TINY, **changes})


def test_cross_field_check_in_overrides_and_valid_combinations():
    with pytest.raises(ConfigError, match=r"weights\.forcing does not fit heads\.H = 2 and tokens\.d = 3"):
        with_overrides(TINY, {"weights": {"process": "oscillating", "forcing": "s1"}})
    ok = with_overrides(TINY, {"weights.F": [[[2, 0, 0], [0, 1, 0], [0, 0, 1]]] * 2})
    assert build(ok).model.weights.F.shape == (2, 3, 3)
    assert load_config({**TINY, "weights": {"process": "oscillating"}}).weights.forcing == "s2"


def test_build_errors_are_config_errors(tmp_path):
    missing = _with(tokens={"init": "file", "path": str(tmp_path / "nope.npy")})
    load_config(missing)  # the file is read when the run is built
    with pytest.raises(
        ConfigError,
        match=r"cannot build the experiment from tokens\.path: .*nope\.npy'?: No such file or directory",
    ):
        build(missing)
    # file tokens: their dimension (2) is known only once read, the weights are checked then
    cfg = tiny_file_tokens(tmp_path, d=2, weights={"process": "oscillating", "forcing": "s2"})
    with pytest.raises(
        ConfigError,
        match=r"cannot build the experiment 'tiny': weights\.forcing does not fit heads\.H = 2 and "
        r"the tokens of tokens\.path .* \(d = 2\).*forcing 's2' is defined for d = 3",
    ):
        build(cfg)
    assert build(tiny_file_tokens(tmp_path, d=2)).x0.shape == (2, 8, 2)
    import numpy as np

    np.save(tmp_path / "bad_heads.npy", np.zeros((2, 3, 4)))
    bad_heads = _with(heads={"init": "file", "H": 2, "path": str(tmp_path / "bad_heads.npy")})
    with pytest.raises(ConfigError, match=r"cannot build the experiment from heads\.path: ValueError"):
        build(bad_heads)


# -- simulate() reaches every option of a config ------------------------------------------------------------
#: config key -> the parameter of attnflow.simulate that takes it
CONFIG_TO_SIMULATE = {
    "integrator.method": "integrator",
    "integrator.dt": "dt",
    "integrator.t1": "t1",
    "integrator.tol": "integrator_options",
    "integrator.max_iter": "integrator_options",
    "integrator.loop": "loop",
    "record.every": "record_every",
    "record.positions": "positions",
    "record.heads": "record_heads",
    "record.ledger": "ledger",
    "paths": "paths",
    "seed": "seed",
    "precision": "dtype",
    "device": "device",
}
#: config keys that are not options of one simulation, and why
NOT_SIMULATE_OPTIONS = {
    "name": "a label of the run directory",
    "model": "the TransformerModel passed to simulate",
    "weights": "the weight process of that model",
    "tokens": "the initial tokens x0 (attnflow.tokens builds them)",
    "heads": "the initial heads (attnflow.heads builds them)",
    "init": "how x0 and heads are drawn per path: the arrays passed to simulate",
    "checkpoint_every": "the run store's checkpoints (attnflow run)",
    "allow_large": "the run store's resource check (attnflow run)",
}


def test_simulate_reaches_every_option_of_a_config():
    import inspect

    from attnflow import simulate
    from attnflow.experiments.schema import ExperimentConfig, IntegratorConfig, RecordConfig

    keys = [k for k in ExperimentConfig.model_fields if k not in ("integrator", "record")]
    keys += [f"integrator.{k}" for k in IntegratorConfig.model_fields]
    keys += [f"record.{k}" for k in RecordConfig.model_fields]
    unmapped = [k for k in keys if k not in CONFIG_TO_SIMULATE and k not in NOT_SIMULATE_OPTIONS]
    assert not unmapped, f"config keys that attnflow.simulate cannot take (add a parameter): {unmapped}"
    params = inspect.signature(simulate).parameters
    missing = {k: p for k, p in CONFIG_TO_SIMULATE.items() if p not in params}
    assert not missing, f"simulate lacks the parameters of these config keys: {missing}"
