"""Valid-looking numeric extremes end in a clear error naming the bound, never a bare ZeroDivisionError,
OverflowError or an infinite energy (issue 10); complex inputs are refused, not silently cast."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch
from experiments_helpers import tiny_with

import attnflow as af
from attnflow.experiments.config import ConfigError, load_config
from attnflow.experiments.store import run_experiment
from attnflow.model import heads, tokens, transformer


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"model__layer_scaling": 1e-300},
            r"model.layer_scaling must be greater than or equal to 1e-150: got 1e-300",
        ),
        (
            {"model__layer_scaling": 1e300},
            r"model.layer_scaling must be less than or equal to 1e\+150: got 1e\+300",
        ),
        (
            {"model__beta": 5e-324},
            r"model.beta must be greater than or equal to 2.2250738585072014e-308: got 5e-324",
        ),
        ({"heads__scale": 1e300}, r"heads.scale must be less than or equal to 1e\+150: got 1e\+300"),
        ({"tokens__noise": 1e300}, r"tokens.noise must be less than or equal to 1e\+150: got 1e\+300"),
        (
            {"tokens": {"init": "von_mises_fisher", "n": 8, "d": 3, "kappa": 1e300}},
            r"tokens.kappa must be less than or equal to 1e\+10: got 1e\+300",
        ),
        (
            {"tokens": {"init": "von_mises_fisher", "n": 8, "d": 3, "kappa": 1e16}},
            r"tokens.kappa must be less than or equal to 1e\+10: got 1e\+16",
        ),
    ],
)
def test_config_extremes_are_rejected_with_the_bound(changes, message):
    with pytest.raises(ConfigError, match=message):
        load_config(tiny_with(**changes))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beta": 5e-324}, r"beta must be a finite number in \[2.23e-308, 10000\] \(a normal float64"),
        ({"layer_scaling": 1e-300}, r"layer_scaling must be None or an offset t0 in \[1e-150, 1e\+150\]"),
        ({"layer_scaling": 1e300}, r"got 1e\+300; choose t0 of the order of the time step or larger"),
    ],
)
def test_core_model_bounds(kwargs, message):
    with pytest.raises(ValueError, match=message):
        af.TransformerModel(direction="descent", **kwargs)


def test_bounds_are_what_float64_carries():
    assert transformer.BETA_MIN == sys.float_info.min
    assert np.isfinite(1 / (2 * transformer.BETA_MIN))
    assert transformer.LAYER_SCALING_MIN**2 >= sys.float_info.min
    assert np.isfinite(transformer.LAYER_SCALING_MAX**2 * 1e4)
    assert np.isfinite((10 * heads.SCALE_MAX) ** 2) and np.isfinite((2 * tokens.NOISE_MAX) ** 2)
    model = af.TransformerModel(direction="descent", layer_scaling=transformer.LAYER_SCALING_MAX)
    assert model.head_scale_rate(1e300, 4) == 0.0  # (t0 + t)^2 overflows: the rate is below any float
    model = af.TransformerModel(direction="descent", layer_scaling=transformer.LAYER_SCALING_MIN)
    assert np.isfinite(model.head_scale_rate(0.0, 4)) and np.isfinite(model.head_scale(0.0, 4))


@pytest.mark.parametrize("d", [2, 3, 16, 64])
def test_vmf_at_the_kappa_bound_is_finite_and_tight(d):
    x = af.tokens.von_mises_fisher(2, 50, d, seed=0, clusters=1, kappa=tokens.KAPPA_MAX)
    assert torch.isfinite(x).all()
    spread = 1 - (x @ x[:, :1].transpose(1, 2)).min()
    assert spread < 1e-6
    with pytest.raises(ValueError, match=r"kappa must be a number in \(0, 1e\+10\]"):
        af.tokens.von_mises_fisher(1, 5, d, seed=0, kappa=1e300)


def test_head_scale_and_noise_bounds_in_the_core():
    with pytest.raises(ValueError, match=r"scale must be a number in \(0, 1e\+150\] .*got 1e\+300"):
        af.heads.gaussian(1, 2, 3, seed=0, scale=1e300)
    with pytest.raises(ValueError, match=r"scale must be a number in \(0, 1e\+150\] .*got nan"):
        af.heads.identity(1, 2, 3, scale=float("nan"))
    with pytest.raises(ValueError, match=r"noise must be a number in \[0, 1e\+150\] .*got 1e\+300"):
        af.tokens.octahedral(1, 4, 3, seed=0, noise=1e300)


def test_complex_inputs_are_refused():
    x = np.array([[1 + 1j, 0], [0, 1]])
    with pytest.raises(
        ValueError, match=r"tokens must be real-valued: got a complex array; pass its real part"
    ):
        af.tokens.from_array(x)
    with pytest.raises(ValueError, match=r"tokens must be real-valued"):
        af.tokens.from_array(torch.tensor(x))
    with pytest.raises(ValueError, match=r"heads must be real-valued: got a complex array"):
        af.heads.from_array(np.eye(2) * (1 + 0j), paths=1, d=2)


def test_file_tokens_that_are_complex_are_a_config_error(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.array([[1 + 0j, 0, 0], [0, 1, 0]]))
    cfg = tiny_with(tokens={"init": "file", "path": str(path)})
    with pytest.raises(ConfigError, match=r"real-valued"):
        run_experiment(cfg, tmp_path / "r")


def test_at_the_scale_bound_both_backends_end_without_a_bare_arithmetic_error(tmp_path):
    """The largest head scale allowed: the scores leave float64 (beta <x, D x> >> 709).

    The torch path keeps the state finite (log-sum-exp softmax) and reports the infinite energy with a
    warning; "auto" takes the same path (the numba kernel's score range, SCORE_MAX, is exceeded), and a forced
    "numba" backend is refused with a clear error before the first step. Nothing ends in a bare
    ZeroDivisionError or OverflowError.
    """
    for backend in ("torch", "auto"):
        cfg = tiny_with(heads__scale=heads.SCALE_MAX, model__backend=backend)
        with pytest.warns(RuntimeWarning, match=r"the energy ledger left float64"):
            ds = run_experiment(cfg, tmp_path / backend)
        assert np.isinf(ds["energy"].values).all() and np.isfinite(ds["positions"].values).all()
    cfg = tiny_with(heads__scale=heads.SCALE_MAX, model__backend="numba")
    with warnings.catch_warnings(), pytest.raises(ValueError, match=r"backend='numba' takes scores up to"):
        warnings.simplefilter("ignore")
        run_experiment(cfg, tmp_path / "numba")


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_the_smallest_beta_gives_a_finite_energy(tmp_path, backend):
    cfg = tiny_with(model__beta=transformer.BETA_MIN, model__backend=backend)
    ds = run_experiment(cfg, tmp_path / "small-beta")
    assert np.isfinite(ds["energy"].values).all()
