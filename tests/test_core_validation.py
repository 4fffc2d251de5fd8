"""Bad input at the public boundary (STYLE rules 10-11): one ``pytest.raises(..., match=...)`` per raise.

Covers every ``raise`` in attnflow.geometry, attnflow.model, attnflow.dynamics (field dispatch),
attnflow.integrators, attnflow.simulate and attnflow.random. Messages must state the rule and the
value received; unknown options must list the valid ones.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnflow as af
from attnflow.dynamics import evaluate
from attnflow.geometry import check_on_sphere
from attnflow.integrators import get_integrator
from attnflow.model import heads, tokens
from attnflow.model.attention import attention_weights, check_attention_kind
from attnflow.random import path_generator, path_seed
from attnflow.simulation import NonFiniteStateError, Simulator, n_steps_for, simulate

P, H, N, DIM = 2, 2, 5, 3


@pytest.fixture(scope="module")
def x0() -> torch.Tensor:
    return tokens.uniform(P, N, DIM, seed=0)


@pytest.fixture(scope="module")
def D0() -> torch.Tensor:
    return heads.symmetric_gaussian(P, H, DIM, seed=0)


def _model(**kw) -> af.TransformerModel:
    return af.TransformerModel(**{"direction": "descent", "backend": "torch", **kw})


# ------------------------------------------------------------------------------------------
# geometry
# ------------------------------------------------------------------------------------------
def test_check_on_sphere_rejects_off_sphere_and_non_finite() -> None:
    x = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.03, 0.0]], dtype=torch.float64)
    with pytest.raises(
        ValueError, match=r"x must lie on S\^\{d-1\}: max \| \|x_i\| - 1 \| = 0\.03 > 1e-06.*project"
    ):
        check_on_sphere(x)
    x[1, 1] = math.nan
    with pytest.raises(ValueError, match="x must be finite: found 1 non-finite entries"):
        check_on_sphere(x)
    check_on_sphere(x[:1])  # on the sphere: no error


# ------------------------------------------------------------------------------------------
# attention kinds
# ------------------------------------------------------------------------------------------
def test_unknown_attention_kind_lists_valid_kinds() -> None:
    valid = "valid kinds: softmax, usa, relu, sigmoid, sinkhorn"
    with pytest.raises(ValueError, match=f"unknown attention kind 'linear'; {valid}"):
        check_attention_kind("linear")
    with pytest.raises(ValueError, match=f"unknown attention kind 'linear'; {valid}"):
        _model(attention="linear")
    s = torch.zeros(1, 3, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=f"unknown attention kind 'cosine'; {valid}"):
        attention_weights(s, torch.logsumexp(s, -1), "cosine")


# ------------------------------------------------------------------------------------------
# TransformerModel
# ------------------------------------------------------------------------------------------
def test_direction_is_required_and_checked() -> None:
    with pytest.raises(TypeError, match="direction"):
        af.TransformerModel()  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"direction must be 'ascent'.*or 'descent'.*got 'up'"):
        _model(direction="up")


@pytest.mark.parametrize("beta", [0.0, -1.0, 1e4 * 1.0001, math.inf, math.nan, True, "1"])
def test_beta_out_of_range(beta) -> None:
    with pytest.raises(
        ValueError, match=r"beta must be a finite number in \[2.23e-308, 10000\] \(a normal float64.*\): got"
    ):
        _model(beta=beta)


def test_beta_bounds_accepted() -> None:
    assert _model(beta=1e4).beta == 1e4
    assert _model(beta=1e-8).beta == 1e-8


def test_model_options_rejected_with_valid_list() -> None:
    with pytest.raises(ValueError, match="unknown geometry 'torus'; valid: sphere, flat"):
        _model(geometry="torus")
    with pytest.raises(ValueError, match="weights must be a WeightProcess.*got dict"):
        _model(weights={"process": "constant"})
    with pytest.raises(ValueError, match="unknown backend 'jax'; valid: auto, torch, numba"):
        _model(backend="jax")


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_layer_scaling_must_be_positive_offset(value) -> None:
    with pytest.raises(
        ValueError, match=r"layer_scaling must be None or an offset t0 in \[1e-150, 1e\+150\] .*: got"
    ):
        _model(layer_scaling=value)


@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_sinkhorn_iters_must_be_positive_integer(value) -> None:
    with pytest.raises(ValueError, match=r"sinkhorn_iters must be an integer >= 1: got"):
        _model(sinkhorn_iters=value)


def test_numba_backend_refuses_ineligible_model(x0, D0) -> None:
    model = _model(attention="usa", backend="numba")
    with pytest.raises(
        ValueError, match=r"backend='numba' needs CPU tensors, attention='softmax'.*attention='usa'"
    ):
        evaluate(model, x0, D0, None, 0.0)
    # the printed scheme's unprojected velocity is assembled from the kernel's sums as well
    raw_numba = evaluate(_model(backend="numba"), x0, D0, None, 0.0, raw=True).raw_velocity
    raw_torch = evaluate(_model(backend="torch"), x0, D0, None, 0.0, raw=True).raw_velocity
    torch.testing.assert_close(raw_numba, raw_torch, rtol=1e-12, atol=1e-13)
    with pytest.raises(
        ValueError, match="sphere geometry when the ledger is on.*geometry='flat', ledger=True"
    ):
        evaluate(_model(backend="numba", geometry="flat"), x0, D0, None, 0.0, ledger=True)


# ------------------------------------------------------------------------------------------
# weight processes
# ------------------------------------------------------------------------------------------
def test_ornstein_uhlenbeck_validation() -> None:
    with pytest.raises(ValueError, match="unknown noise kind 'diagonal'; valid: symmetric, full"):
        af.OrnsteinUhlenbeck(noise="diagonal")
    for bad in (-0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="sigma2 must be a finite number >= 0: got"):
            af.OrnsteinUhlenbeck(sigma2=bad)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="rate must be a finite number > 0: got"):
            af.OrnsteinUhlenbeck(rate=bad)
    with pytest.raises(ValueError, match=r"F must be a \(d, d\) or \(H, d, d\) matrix: got shape \(3, 2\)"):
        af.OrnsteinUhlenbeck(F=np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"F must be a \(d, d\) or \(H, d, d\) matrix: got shape \(3,\)"):
        af.OrnsteinUhlenbeck(F=np.zeros(3))
    with pytest.raises(ValueError, match="F must be finite"):
        af.OrnsteinUhlenbeck(F=np.full((3, 3), np.nan))


def test_ornstein_uhlenbeck_target_must_fit_heads(x0, D0) -> None:
    with pytest.raises(ValueError, match=r"OU target F has shape \(2, 2\) but the heads are 2 x \(3, 3\)"):
        Simulator(_model(weights=af.OrnsteinUhlenbeck(F=np.eye(2))), x0, D0, dt=0.1)
    with pytest.raises(ValueError, match=r"OU target F has shape \(5, 3, 3\) but the heads are 2 x \(3, 3\)"):
        Simulator(_model(weights=af.OrnsteinUhlenbeck(F=np.zeros((5, 3, 3)))), x0, D0, dt=0.1)


def test_oscillating_validation(x0, D0) -> None:
    with pytest.raises(ValueError, match="unknown forcing 's3'; valid: s2, s1 or a callable"):
        af.Oscillating(forcing="s3")
    with pytest.raises(ValueError, match="unknown phases 'random'; valid: per_head, shared"):
        af.Oscillating(phases="random")
    with pytest.raises(ValueError, match="rate must be a finite number > 0: got 0"):
        af.Oscillating(rate=0.0)
    with pytest.raises(ValueError, match="forcing 's1' is defined for d = 2, but the tokens have d = 3"):
        Simulator(_model(weights=af.Oscillating(forcing="s1")), x0, D0, dt=0.1)


def test_piecewise_constant_validation(x0, D0) -> None:
    with pytest.raises(ValueError, match=r"layers must be an array of shape \(L, H, d, d\): got None"):
        af.PiecewiseConstant()
    with pytest.raises(ValueError, match=r"layers must be an array of shape \(L, H, d, d\): got \(2, 3, 3\)"):
        af.PiecewiseConstant(layers=np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match="layer_time must be a finite number > 0: got -1"):
        af.PiecewiseConstant(layers=np.zeros((2, 1, 3, 3)), layer_time=-1.0)
    with pytest.raises(ValueError, match=r"layers have shape \(2, 1, 3, 3\) but the heads are 2 x \(3, 3\)"):
        Simulator(_model(weights=af.PiecewiseConstant(layers=np.zeros((2, 1, 3, 3)))), x0, D0, dt=0.1)


def test_custom_process_validation(x0, D0) -> None:
    with pytest.raises(ValueError, match="f must be a callable f\\(D, t\\) -> dD/dt: got None"):
        af.CustomProcess()
    with pytest.raises(ValueError, match="g must be a callable g\\(D, t\\) or None: got 1.0"):
        af.CustomProcess(f=lambda D, t: D, g=1.0)
    with pytest.raises(ValueError, match="unknown noise kind 'pink'"):
        af.CustomProcess(f=lambda D, t: D, noise="pink")
    bad = af.CustomProcess(f=lambda D, t: D[..., :2])
    with pytest.raises(ValueError, match=r"f\(D, t\) must return shape \(2, 2, 3, 3\): got \(2, 2, 3, 2\)"):
        Simulator(_model(weights=bad), x0, D0, dt=0.1).step()


# ------------------------------------------------------------------------------------------
# tokens and heads
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,match",
    [
        ((0, 4, 3), "paths must be an integer >= 1: got 0"),
        ((1, 0, 3), "n must be an integer >= 1: got 0"),
        ((1, 4, 1), "d must be an integer >= 2: got 1"),
        ((1, 4.0, 3), "n must be an integer >= 1: got 4.0"),
        ((True, 4, 3), "paths must be an integer >= 1: got True"),
    ],
)
def test_token_generators_check_sizes(args, match) -> None:
    with pytest.raises(ValueError, match=match):
        tokens.uniform(*args, seed=0)


def test_token_generator_options() -> None:
    with pytest.raises(ValueError, match=r"noise must be a number in \[0, 1e\+150\] .*: got -0.1"):
        tokens.octahedral(1, 4, 3, seed=0, noise=-0.1)
    with pytest.raises(ValueError, match="clusters must be an integer >= 1: got 0"):
        tokens.von_mises_fisher(1, 4, 3, seed=0, clusters=0)
    with pytest.raises(ValueError, match=r"kappa must be a number in \(0, 1e\+10\] .*: got 0"):
        tokens.von_mises_fisher(1, 4, 3, seed=0, kappa=0.0)


def test_tokens_from_array_validation() -> None:
    good = tokens.uniform(2, 4, 3, seed=0)
    assert tokens.from_array(good[0], paths=3).shape == (3, 4, 3)
    with pytest.raises(ValueError, match="tokens have 2 paths but paths=3; pass \\(n, d\\)"):
        tokens.from_array(good, paths=3)
    with pytest.raises(ValueError, match=r"tokens must have shape \(n, d\) or \(P, n, d\): got shape \(3,\)"):
        tokens.from_array(np.ones(3))
    with pytest.raises(ValueError, match="token dimension d must be >= 2: got d=1"):
        tokens.from_array(np.ones((4, 1)))
    with pytest.raises(ValueError, match="tokens must lie on S\\^\\{d-1\\}"):
        tokens.from_array(2 * good)


@pytest.mark.parametrize(
    "args,match",
    [
        ((0, 1, 3), "paths must be an integer >= 1: got 0"),
        ((1, 0, 3), "heads must be an integer >= 1: got 0"),
        ((1, 1, 1), "d must be an integer >= 2: got 1"),
    ],
)
def test_head_generators_check_sizes(args, match) -> None:
    with pytest.raises(ValueError, match=match):
        heads.symmetric_gaussian(*args, seed=0)
    with pytest.raises(ValueError, match=match):
        heads.gaussian(*args, seed=0)
    with pytest.raises(ValueError, match=match):
        heads.identity(*args)


def test_heads_from_qk_and_from_array_validation() -> None:
    with pytest.raises(
        ValueError, match=r"Q and K must have the same shape \(\.\.\., k, d\): got \(2, 3\) and \(3, 3\)"
    ):
        heads.from_qk(torch.ones(2, 3), torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"Q and K must have the same shape"):
        heads.from_qk(torch.ones(3), torch.ones(3))
    with pytest.raises(
        ValueError,
        match=r"heads must have shape \(d, d\), \(H, d, d\) or \(P, H, d, d\) with d=3: got \(2, 2\)",
    ):
        heads.from_array(torch.eye(2), paths=1, d=3)
    with pytest.raises(ValueError, match="heads have 3 paths but the tokens have 2; give \\(H, d, d\\)"):
        heads.from_array(torch.zeros(3, 1, 3, 3), paths=2, d=3)
    bad = torch.eye(3).repeat(2, 1, 1, 1)
    bad[1, 0, 0, 1] = math.inf
    with pytest.raises(ValueError, match="heads must be finite: found 1 non-finite entries"):
        heads.from_array(bad, paths=2, d=3)


# ------------------------------------------------------------------------------------------
# random streams
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [-1, 1.5, True, "0", None])
def test_seed_must_be_non_negative_integer(seed) -> None:
    with pytest.raises(ValueError, match="seed must be a non-negative integer: got .*; pass e.g. seed=0"):
        path_seed(seed, 0, "noise")
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        tokens.uniform(1, 3, 3, seed=seed)


def test_unknown_random_purpose() -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown random purpose 'weights'; valid: "
        r"\['heads', 'misc', 'noise', 'token_noise', 'tokens', 'values'\]",
    ):
        path_generator(0, 0, "weights")


# ------------------------------------------------------------------------------------------
# integrators
# ------------------------------------------------------------------------------------------
def test_unknown_integrator(x0, D0) -> None:
    with pytest.raises(ValueError, match="unknown integrator 'rk45'; valid: euler, euler_printed, heun, rk4"):
        get_integrator("rk45")
    with pytest.raises(
        ValueError, match="unknown integrator 'leapfrog'; valid: euler, euler_printed, heun, rk4"
    ):
        simulate(_model(), x0, D0, t1=0.2, dt=0.1, integrator="leapfrog")


# ------------------------------------------------------------------------------------------
# Simulator / simulate
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [0.0, -0.1, math.inf, math.nan, True, "0.1", None])
def test_dt_must_be_positive_finite(x0, D0, dt) -> None:
    with pytest.raises(ValueError, match="dt must be a finite number > 0: got"):
        Simulator(_model(), x0, D0, dt=dt)


def test_simulator_boundary_checks(x0, D0) -> None:
    with pytest.raises(ValueError, match="model must be a TransformerModel: got dict"):
        Simulator({"direction": "ascent"}, x0, D0, dt=0.1)
    with pytest.raises(ValueError, match="t0 must be finite: got nan"):
        Simulator(_model(), x0, D0, dt=0.1, t0=math.nan)
    with pytest.raises(ValueError, match=r"x0 must have shape \(P, n, d\) or \(n, d\): got \(5,\)"):
        Simulator(_model(), x0[0, 0, :1].expand(5), D0, dt=0.1)
    with pytest.raises(ValueError, match="x0 has 2 paths but paths=3"):
        Simulator(_model(), x0, D0, dt=0.1, paths=3)
    with pytest.raises(ValueError, match="token dimension d must be >= 2: got d=1"):
        Simulator(_model(), torch.ones(2, 4, 1, dtype=torch.float64), torch.ones(1, 1), dt=0.1)
    bad = x0.clone()
    bad[1, 2, 0] = math.nan
    with pytest.raises(ValueError, match="x0 must be finite: found non-finite entries"):
        Simulator(_model(), bad, D0, dt=0.1)
    with pytest.raises(
        ValueError,
        match=r"x0 must lie on S\^\{d-1\}: max \| \|x_i\| - 1 \| = 0\.01.*attnflow\.geometry\.project",
    ):
        Simulator(_model(), 1.01 * x0, D0, dt=0.1)
    with pytest.raises(ValueError, match=r"heads must have shape .* with d=3: got \(2, 2, 4, 4\)"):
        Simulator(_model(), x0, torch.zeros(2, 2, 4, 4), dt=0.1)
    with pytest.raises(ValueError, match="heads have 3 paths but the tokens have 2"):
        Simulator(_model(), x0, torch.zeros(3, 2, 3, 3), dt=0.1)
    with pytest.raises(ValueError, match="values have 1 heads but heads have 2"):
        Simulator(_model(), x0, D0, dt=0.1, values=torch.eye(3))
    with pytest.raises(ValueError, match=r"values must have shape"):
        Simulator(_model(), x0, D0, dt=0.1, values=torch.eye(2))
    with pytest.raises(ValueError, match="unknown dtype 'float16'; valid: float32, float64"):
        Simulator(_model(), x0, D0, dt=0.1, dtype="float16")
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64: got torch.int64"):
        Simulator(_model(), x0, D0, dt=0.1, dtype=torch.int64)


def test_flat_geometry_accepts_tokens_off_the_sphere(x0, D0) -> None:
    sim = Simulator(_model(geometry="flat"), 3.0 * x0, D0, dt=0.1)
    torch.testing.assert_close(sim.x, 3.0 * x0, rtol=0, atol=0)


def test_float32_tolerance_on_sphere_check(x0, D0) -> None:
    # float32 tokens are checked at 1e-5 (their round-off), float64 at 1e-6.
    y = x0 * (1 + 5e-6)
    Simulator(_model(), y, D0, dt=0.1, dtype="float32")
    with pytest.raises(ValueError, match="x0 must lie on S"):
        Simulator(_model(), y, D0, dt=0.1, dtype="float64")


def test_step_count_must_be_whole(x0, D0) -> None:
    assert n_steps_for(0.0, 1.0, 0.1) == 10
    with pytest.raises(
        ValueError,
        match=r"\(t1 - t0\)/dt must be a whole number of steps: got \(1 - 0\)/0.3 = 3.33333; choose t1 = 0.9",
    ):
        n_steps_for(0.0, 1.0, 0.3)
    with pytest.raises(ValueError, match=r"whole number of steps"):
        simulate(_model(), x0, D0, t1=0.25, dt=0.1)
    with pytest.raises(
        ValueError, match=r"whole number of steps: got \(0.01 - 0\)/0.1 = 0.1; choose t1 = 0.1"
    ):
        n_steps_for(0.0, 0.01, 0.1)
    for t1 in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="t1 must be a finite time > t0 = 0: got"):
            n_steps_for(0.0, t1, 0.1)


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_record_every_must_be_positive_integer(x0, D0, every) -> None:
    with pytest.raises(ValueError, match="record_every must be an integer >= 1: got"):
        simulate(_model(), x0, D0, t1=0.2, dt=0.1, record_every=every)


def test_load_state_dict_shape_mismatch(x0, D0) -> None:
    sd = Simulator(_model(), x0[:1], D0[:1], dt=0.1).state_dict()
    with pytest.raises(
        ValueError,
        match=r"checkpoint shapes \(1, 5, 3\), \(1, 2, 3, 3\) do not match this run "
        r"\(2, 5, 3\), \(2, 2, 3, 3\)",
    ):
        Simulator(_model(), x0, D0, dt=0.1).load_state_dict(sd)


def test_non_finite_state_raises_with_partial_dataset(x0, D0) -> None:
    # The drift sends the heads to inf at step 3: the error names the step and keeps what was recorded.
    def f(D, t):
        return torch.full_like(D, math.inf) if t >= 0.15 else torch.zeros_like(D)

    model = _model(weights=af.CustomProcess(f=f))
    with pytest.raises(
        NonFiniteStateError, match=r"non-finite at step 3 \(t = 0.3\).*reduce dt \(got 0.1\)"
    ) as err:
        simulate(model, x0, D0, t1=0.5, dt=0.1)
    partial = err.value.partial
    assert partial is not None
    np.testing.assert_allclose(partial.time.values, [0.0, 0.1, 0.2], rtol=0, atol=1e-15)
    assert np.isfinite(partial.positions.values).all()


def test_non_finite_tokens_name_the_paths(x0, D0) -> None:
    # Flat USA ascent with beta = 1e3 overflows in a single step; every path is reported.
    model = _model(geometry="flat", attention="usa", direction="ascent", beta=1e3)
    with pytest.raises(NonFiniteStateError, match=r"at step 1 \(t = 0.1\) in paths \[0, 1\]"):
        Simulator(model, 10 * x0, D0, dt=0.1).step()


def test_step_noise_override_shape(x0, D0) -> None:
    sim = Simulator(_model(weights=af.OrnsteinUhlenbeck()), x0, D0, dt=0.1)
    with pytest.raises(
        ValueError, match=r"z must have shape \(P, H, d, d\) = \(2, 2, 3, 3\): got \(2, 3, 3\)"
    ):
        sim.step(z=torch.zeros(2, 3, 3))
    # a correct override equals the path streams' own draws
    ref = Simulator(_model(weights=af.OrnsteinUhlenbeck()), x0, D0, dt=0.1, seed=4)
    z = torch.stack(
        [torch.randn(2, 3, 3, generator=path_generator(4, p, "noise"), dtype=torch.float64) for p in range(P)]
    )
    ref.step()
    sim.step(z=z)
    torch.testing.assert_close(sim.D, ref.D, rtol=0, atol=0)
    torch.testing.assert_close(sim.x, ref.x, rtol=0, atol=0)


def test_sinkhorn_cannot_be_causal() -> None:
    with pytest.raises(ValueError, match="attention='sinkhorn' cannot be causal: the only doubly stochastic"):
        _model(attention="sinkhorn", causal=True)


# ------------------------------------------------------------------------------------------
# dt: one validator (attnflow.simulation.spec.check_dt / n_steps_for) behind every entry
# ------------------------------------------------------------------------------------------
_CONFIG = {
    "model": {"direction": "descent", "backend": "torch"},
    "tokens": {"init": "uniform", "n": N, "d": DIM},
    "heads": {"init": "identity", "H": 1},
    "integrator": {"dt": 0.1, "t1": 1.0},
}
_PDE_CONFIG = {
    "model": "pde",
    "dynamics": {"direction": "ascent", "attention": "softmax", "beta": 1.0},
    "heads": {"init": "identity", "H": 1, "scale": 1.0},
    "density": {"init": "uniform", "d": 2},
    "pde": {"band_limit": 8},
    "integrator": {"dt": 0.1, "t1": 1.0},
}


def _message(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def _entry_messages(x0, D0, t1: float, dt) -> dict[str, str]:
    """The error of each entry that takes a time step: Python API, spec, simulator, YAML configs."""
    from attnflow.experiments.config import load_config
    from attnflow.experiments.pde_runs import load_pde_config
    from attnflow.simulation import SimulationSpec

    grid = {"dt": dt, "t1": t1}
    return {
        "simulate": _message(lambda: simulate(_model(), x0, D0, t1=t1, dt=dt)),
        "SimulationSpec": _message(lambda: SimulationSpec(_model(), x0, D0, t1=t1, dt=dt)),
        "config": _message(lambda: load_config({**_CONFIG, "integrator": grid})),
        "pde config": _message(lambda: load_pde_config({**_PDE_CONFIG, "integrator": grid})),
    }


@pytest.mark.parametrize("dt", [0.0, -0.1, math.inf, math.nan])
def test_a_bad_dt_gives_the_same_one_line_error_from_every_entry(x0, D0, dt) -> None:
    from attnflow.simulation.spec import check_dt

    rule = _message(lambda: check_dt(dt))
    assert "\n" not in rule and rule.startswith(f"dt must be a finite number > 0: got {dt!r}; ")
    messages = _entry_messages(x0, D0, 1.0, dt)
    assert messages.pop("simulate") == rule
    assert messages.pop("SimulationSpec") == rule
    for entry, text in messages.items():  # a config names the key first, on a line of its own
        assert f"integrator.dt: {rule}" in [line.strip() for line in text.splitlines()[1:]], (entry, text)
    assert _message(lambda: Simulator(_model(), x0, D0, dt=dt)) == rule


def test_a_time_grid_error_is_the_same_from_every_entry(x0, D0) -> None:
    whole = _message(lambda: n_steps_for(0.0, 1.0, 0.3))
    steps = _message(lambda: n_steps_for(0.0, 1e300, 1e-300))
    assert steps.startswith("t1 / dt must be at most 1e12 steps: got 1e+300/1e-300 = inf")
    for t1, dt, rule in [(1.0, 0.3, whole), (1e300, 1e-300, steps)]:
        messages = _entry_messages(x0, D0, t1, dt)
        assert messages.pop("simulate") == messages.pop("SimulationSpec") == rule
        for entry, text in messages.items():
            lines = [line.strip() for line in text.splitlines()[1:]]
            assert f"integrator.t1 / integrator.dt: {rule}" in lines, (entry, text)


def test_t0_and_record_every_have_one_check(x0, D0) -> None:
    from attnflow.simulation import SimulationSpec

    for call in (
        lambda: n_steps_for(math.nan, 1.0, 0.1),
        lambda: simulate(_model(), x0, D0, t0=math.nan, t1=1.0, dt=0.1),
        lambda: SimulationSpec(_model(), x0, D0, t0=math.nan, t1=1.0, dt=0.1),
    ):
        assert _message(call) == "t0 must be finite: got nan; e.g. t0=0.0"
    with pytest.raises(
        ValueError, match=r"record_every must be an integer >= 1: got 0; e.g. record_every=10"
    ):
        SimulationSpec(_model(), x0, D0, t1=1.0, dt=0.1, record_every=0)


# ------------------------------------------------------------------------------------------
# simulate() reaches every option of the config: loop, integrator options, noise refinement
# ------------------------------------------------------------------------------------------
def test_simulate_takes_the_step_loop(x0, D0) -> None:
    ds = simulate(_model(), x0, D0, t1=0.2, dt=0.1, loop="python")
    assert ds.attrs["loop"] == "python"
    with pytest.raises(ValueError, match=r"loop='fused' cannot run this simulation: integrator 'heun'"):
        simulate(_model(backend="auto"), x0, D0, t1=0.2, dt=0.1, integrator="heun", loop="fused")
    with pytest.raises(ValueError, match="unknown loop 'compiled'; valid: auto, fused, python"):
        simulate(_model(), x0, D0, t1=0.2, dt=0.1, loop="compiled")


def test_simulate_takes_integrator_options(x0, D0) -> None:
    from attnflow.integrators import JKO

    # the options by name give the run of the instance built with them, and differ from the defaults
    # (one softmax head: the JKO step needs a gradient flow)
    D0 = D0[:, :1]
    kw = {"t1": 0.2, "dt": 0.1, "loop": "python"}
    named = simulate(
        _model(), x0, D0, integrator="jko", integrator_options={"tol": 1e-2, "max_iter": 3}, **kw
    )
    built = simulate(_model(), x0, D0, integrator=JKO(tol=1e-2, max_iter=3), **kw)
    default = simulate(_model(), x0, D0, integrator="jko", **kw)
    np.testing.assert_array_equal(named.positions.values, built.positions.values)
    assert named.attrs == built.attrs
    assert float(named.integrator_jko_iterations[-1]) < float(default.integrator_jko_iterations[-1])
    with pytest.raises(ValueError, match="rtol"):
        simulate(_model(), x0, D0, integrator="jko", integrator_options={"rtol": 1e-3}, **kw)


def test_simulate_noise_refine_sees_the_brownian_path_of_the_finer_step(x0) -> None:
    from attnflow.model.registry import make_weight_process

    # OU heads with a negligible mean reversion: D(T) = D(0) + g W(T) + O(rate), so the heads at T of a run
    # at dt with noise_refine = m and of a run at dt/m with the same seed differ only by the drift (1e-12)
    # and the round-off of summing the increments in another order (float64: 1e-13 on entries of size 1).
    ou = make_weight_process("ornstein_uhlenbeck", sigma2=1.0, noise="symmetric", F="identity", rate=1e-12)
    m = _model(weights=ou)
    D0 = heads.identity(P, 1, DIM)
    kw = {"t1": 0.4, "seed": 3, "record_heads": True, "ledger": False, "loop": "python"}
    coarse = simulate(m, x0, D0, dt=0.1, noise_refine=4, **kw).heads.values[:, -1]
    fine = simulate(m, x0, D0, dt=0.025, **kw).heads.values[:, -1]
    plain = simulate(m, x0, D0, dt=0.1, **kw).heads.values[:, -1]
    np.testing.assert_allclose(coarse, fine, rtol=0, atol=1e-10)
    assert np.abs(plain - fine).max() > 0.1  # without the refinement: another Brownian path


# ------------------------------------------------------------------------------------------
# no private test switches in public signatures
# ------------------------------------------------------------------------------------------
#: Known `_`-prefixed parameters of public functions, each with its owner: the numba kernel's test variants
#: (``_general``, ``_exact_max``, ``_full``: the general / exact-max / full-pass kernels that tests and
#: benchmarks compare with the default one) belong to the compiled-kernel work (issue 30, fused loop),
#: which rewrites these signatures; nothing may be added to this list.
_KNOWN_PRIVATE_SWITCHES = {
    "dynamics/numba_backend.py:fused_field": ["_general", "_exact_max", "_full"],
    "dynamics/numba_kernel.py:pair_sums": ["_general", "_exact_max", "_full"],
}


def _private_parameters(root) -> dict[str, list[str]]:
    """``module:function`` -> its `_`-prefixed parameters, for every public function and method of the
    package (public: no `_`-prefixed module, class or function name on its path; ``__init__`` counts)."""
    import ast

    found: dict[str, list[str]] = {}

    def visit(body, where: str, prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("_") and node.name != "__init__":
                    continue
                a = node.args
                bad = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg.startswith("_")]
                if bad:
                    found[f"{where}:{prefix}{node.name}"] = bad
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, where, f"{prefix}{node.name}.")

    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(p.startswith("_") and p not in ("__init__.py", "__main__.py") for p in rel.parts):
            continue
        visit(ast.parse(path.read_text()).body, rel.as_posix(), "")
    return found


def test_no_private_switches_in_public_signatures() -> None:
    from pathlib import Path

    found = _private_parameters(Path(af.__file__).parent)
    assert found == _KNOWN_PRIVATE_SWITCHES, (
        "a public function takes a `_`-prefixed parameter (a private test switch in a public signature): "
        "make it a documented option, or move the variant into a private function the tests call"
    )


def test_the_private_switch_scan_finds_a_switch(tmp_path) -> None:
    mod = tmp_path / "pkg" / "mod.py"
    mod.parent.mkdir()
    mod.write_text(
        "def run(x, *, _fast=False): ...\n"
        "def _helper(_x): ...\n"
        "class Thing:\n    def __init__(self, _y=0): ...\n    def go(self, z): ...\n"
        "class _Hidden:\n    def go(self, _w): ...\n"
    )
    (tmp_path / "pkg" / "_private.py").write_text("def run(_z): ...\n")
    assert _private_parameters(tmp_path / "pkg") == {"mod.py:run": ["_fast"], "mod.py:Thing.__init__": ["_y"]}
