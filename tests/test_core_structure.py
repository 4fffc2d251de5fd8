"""The 0.2 core structure: geometry objects, the Brownian source, integrator orders with noise, the weight
process contract, the one driver, and the one home of the ledger formulas (issue 9)."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import attnflow as af
from attnflow.geometry import GEOMETRIES, Euclidean, Sphere, get_geometry
from attnflow.random import BrownianSource, path_generators, randn_per_path
from attnflow.simulation import MemorySink, Simulator, integrate

SRC = Path(af.__file__).resolve().parent


def _unit(rng: np.random.Generator, shape) -> torch.Tensor:
    x = torch.from_numpy(rng.normal(size=(*shape, 3)))
    return x / x.norm(dim=-1, keepdim=True)


# ------------------------------------------------------------------------------------------------
# geometry objects
# ------------------------------------------------------------------------------------------------
def test_sphere_log_exp_are_inverse_and_log_has_the_geodesic_length() -> None:
    rng = np.random.default_rng(0)
    z, x = _unit(rng, (500,)), _unit(rng, (500,))
    keep = (z * x).sum(-1) > -0.99  # the log map is undefined at the antipode
    z, x = z[keep], x[keep]
    s = Sphere()
    u = s.log(z, x)
    torch.testing.assert_close((u * z).sum(-1), torch.zeros(len(z), dtype=torch.float64), atol=1e-14, rtol=0)
    torch.testing.assert_close(u.norm(dim=-1), s.distance(z, x), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(s.exp(z, u), x, rtol=0, atol=1e-13)
    # nearby points keep their relative precision (atan2 form)
    y = s.retract(z + 1e-9 * torch.randn(z.shape, generator=torch.Generator().manual_seed(1), dtype=z.dtype))
    torch.testing.assert_close(s.exp(z, s.log(z, y)), y, rtol=0, atol=1e-15)


def test_sphere_tangent_retract_check_and_uniform() -> None:
    rng = np.random.default_rng(1)
    s = Sphere()
    x = _unit(rng, (4, 7))
    v = torch.from_numpy(rng.normal(size=(4, 7, 3)))
    torch.testing.assert_close(
        (s.tangent(x, v) * x).sum(-1), torch.zeros(4, 7, dtype=torch.float64), atol=1e-15, rtol=0
    )
    torch.testing.assert_close(s.retract(3.0 * x), x)
    with pytest.raises(
        ValueError, match=r"x0 must lie on S\^\{d-1\}: max \| \|x_i\| - 1 \| = 0.01 > 1e-06; normalise"
    ):
        s.check(1.01 * x, "x0")
    u = s.uniform((2000,), 3, torch.Generator().manual_seed(0), torch.float64)
    torch.testing.assert_close(u.norm(dim=-1), torch.ones(2000, dtype=torch.float64))
    # the uniform law has mean 0 and covariance I/3: 5 standard errors at n = 2000
    assert u.mean(0).abs().max() < 5 * math.sqrt(1 / 3 / 2000)
    torch.testing.assert_close(u.T @ u / 2000, torch.eye(3, dtype=torch.float64) / 3, atol=0.05, rtol=0)


def test_euclidean_geometry() -> None:
    e = Euclidean()
    x, y = torch.tensor([[1.0, 2.0]]), torch.tensor([[4.0, 6.0]])
    torch.testing.assert_close(e.exp(x, e.log(x, y)), y)
    assert float(e.distance(x, y)) == 5.0
    torch.testing.assert_close(e.tangent(x, y), y)
    torch.testing.assert_close(e.retract(y), y)
    with pytest.raises(ValueError, match="x must be finite: found 1 non-finite entries"):
        e.check(torch.tensor([[1.0, math.nan]]))
    with pytest.raises(ValueError, match="R\\^d has no uniform probability law"):
        e.uniform((3,), 2, torch.Generator(), torch.float64)


def test_geometry_registry_and_model_holds_the_object() -> None:
    assert set(GEOMETRIES) == {"sphere", "flat"}
    assert get_geometry("flat") == Euclidean() and get_geometry(Sphere()) == Sphere()
    with pytest.raises(ValueError, match="unknown geometry 'torus'; valid: sphere, flat"):
        get_geometry("torus")
    m = af.TransformerModel(direction="ascent", geometry="flat")
    assert isinstance(m.geometry, Euclidean)
    assert m == af.TransformerModel(direction="ascent", geometry=Euclidean())
    assert m.describe()["geometry"] == "flat"
    with pytest.raises(ValueError, match="unknown geometry 'torus'"):
        af.TransformerModel(direction="ascent", geometry="torus")


def test_no_geometry_string_is_tested_outside_the_geometry_package() -> None:
    pattern = re.compile(r"""(==|!=)\s*["'](sphere|flat)["']|["'](sphere|flat)["']\s*(==|!=)""")
    offenders = []
    for p in SRC.rglob("*.py"):
        if p.parent.name == "geometry":
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{p.relative_to(SRC)}:{i}: {line.strip()}")
    assert not offenders, "geometry compared as a string:\n" + "\n".join(offenders)


def test_one_home_for_the_pair_normalisation() -> None:
    """The energy normalisation 2 H n^2 is written in one module only (eq. (20))."""
    pattern = re.compile(
        r"2(\.0)?\s*\*\s*(H|nheads|heads)\s*\*\s*n\s*\*\s*n|2(\.0)?\s*\*\s*(H|nheads)\s*\*\s*n\*\*2"
    )
    homes = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if any(
            pattern.search(line) for line in p.read_text().splitlines() if not line.lstrip().startswith("#")
        )
    )
    assert homes == ["dynamics/assembly.py"], homes


# ------------------------------------------------------------------------------------------------
# the Brownian source
# ------------------------------------------------------------------------------------------------
def test_brownian_source_refinement_is_the_summed_fine_path() -> None:
    fine = BrownianSource(3, 2, (2, 3, 3), first=4)
    coarse = BrownianSource(3, 2, (2, 3, 3), first=4, refine=4)
    for _ in range(3):
        want = torch.stack([fine.next() for _ in range(4)]).sum(0) / 2.0
        torch.testing.assert_close(coarse.next(), want, rtol=0, atol=0)
    # refine = 1 is exactly the per-path streams of attnflow.random
    gens = path_generators(3, 2, "noise", first=4)
    src = BrownianSource(3, 2, (2, 3, 3), first=4)
    torch.testing.assert_close(
        src.next(), randn_per_path(gens, (2, 3, 3), torch.float64, "cpu"), rtol=0, atol=0
    )
    state = src.state_dict()
    a = src.next()
    src.load_state_dict(state)
    torch.testing.assert_close(src.next(), a, rtol=0, atol=0)
    with pytest.raises(ValueError, match="refine must be an integer >= 1 \\(fine draws per step\\): got 0"):
        BrownianSource(0, 1, (1,), refine=0)


def test_refined_simulator_sees_the_fine_runs_brownian_path() -> None:
    """A run at 2h with noise_refine=2 adds exactly the sum of the two fine increments of a run at h."""
    model = af.TransformerModel(direction="descent", weights=af.OrnsteinUhlenbeck())
    x0, D0 = af.tokens.octahedral(2, 6, 3, seed=0), af.heads.identity(2, 2, 3)
    fine = Simulator(model, x0, D0, dt=0.01, seed=5, ledger=False)
    coarse = Simulator(model, x0, D0, dt=0.02, seed=5, ledger=False, noise_refine=2)
    gens = path_generators(5, 2, "noise")
    z = torch.stack([randn_per_path(gens, (2, 3, 3), torch.float64, "cpu") for _ in range(2)]).sum(0)
    expect = Simulator(model, x0, D0, dt=0.02, seed=5, ledger=False)
    expect.step(z / math.sqrt(2))
    coarse.step()
    torch.testing.assert_close(coarse.D, expect.D, rtol=0, atol=0)
    fine.step()
    fine.step()  # the same draws: its D differs from the coarse run's by O(dt^{3/2}) terms only
    other = Simulator(model, x0, D0, dt=0.02, seed=6, ledger=False, noise_refine=2)
    other.step()  # another Brownian path differs by O(sqrt(dt))
    assert float((fine.D - coarse.D).abs().max()) < 0.1 * float((other.D - coarse.D).abs().max())


# ------------------------------------------------------------------------------------------------
# integrators: orders with noise
# ------------------------------------------------------------------------------------------------
def test_stochastic_run_records_the_order_it_has_and_warns() -> None:
    x0, D0 = af.tokens.uniform(1, 5, 3, seed=0), af.heads.identity(1, 1, 3)
    ou = af.TransformerModel(direction="ascent", weights=af.OrnsteinUhlenbeck())
    with pytest.warns(
        RuntimeWarning, match="integrator 'rk4' has deterministic order 4, but with the stochastic"
    ):
        ds = af.simulate(ou, x0, D0, t1=0.1, dt=0.05, integrator="rk4")
    assert ds.attrs["integrator_order"] == 1 and ds.attrs["integrator_ode_order"] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frozen = af.simulate(
            af.TransformerModel(direction="ascent"), x0, D0, t1=0.1, dt=0.05, integrator="rk4"
        )
        euler = af.simulate(ou, x0, D0, t1=0.1, dt=0.05, integrator="euler")
    assert frozen.attrs["integrator_order"] == 4
    assert euler.attrs["integrator_order"] == 1
    multiplicative = af.CustomProcess(f=lambda D, t: -D, g=lambda D, t: 0.1)
    with pytest.warns(RuntimeWarning, match="strong order 0.5"):
        ds = af.simulate(
            af.TransformerModel(direction="ascent", weights=multiplicative),
            x0,
            D0,
            t1=0.1,
            dt=0.05,
            integrator="heun",
        )
    assert ds.attrs["integrator_order"] == 0.5


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_strong_order_one_with_additive_weight_noise(integrator: str) -> None:
    """Pathwise error at T against a fine run on the same Brownian path: slope 1 for every method.

    Reference: the same method at dt = 1/512 (refine = 1); coarse runs at dt = 1/32 ... 1/128 draw the same
    fine increments (noise_refine). Euler-Maruyama with additive noise has strong order 1; RK4's extra
    stages do not raise it (its declared strong_order). Band [0.8, 1.3]: four-point fit over 8 paths.
    """
    model = af.TransformerModel(direction="descent", beta=1.0, weights=af.OrnsteinUhlenbeck(sigma2=0.5))
    x0, D0 = af.tokens.uniform(8, 6, 3, seed=1), af.heads.symmetric_gaussian(8, 2, 3, seed=1)
    T, fine_dt = 0.25, 1 / 512
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = Simulator(model, x0, D0, dt=fine_dt, seed=2, ledger=False, integrator=integrator)
        integrate(ref, round(T / fine_dt), record_every=10**9, sink=MemorySink(), endpoints=False)
        dts, errs = [], []
        for m in (8, 16, 32, 64):
            sim = Simulator(
                model, x0, D0, dt=m * fine_dt, seed=2, ledger=False, integrator=integrator, noise_refine=m
            )
            integrate(sim, round(T / (m * fine_dt)), record_every=10**9, sink=MemorySink(), endpoints=False)
            dts.append(m * fine_dt)
            errs.append(
                float((sim.x - ref.x).norm(dim=-1).mean() + (sim.D - ref.D).flatten(1).norm(dim=-1).mean())
            )
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    assert 0.8 <= slope <= 1.3, (slope, errs)
    assert af.integrators.get_integrator(integrator).strong_order == 1.0


# ------------------------------------------------------------------------------------------------
# weight-process contract, checked before the first step
# ------------------------------------------------------------------------------------------------
def test_custom_process_contract_is_checked_at_construction() -> None:
    x0, D0 = af.tokens.uniform(2, 4, 3, seed=0), af.heads.identity(2, 3, 3)

    def make(**kw):
        return af.TransformerModel(direction="ascent", weights=af.CustomProcess(**kw))

    with pytest.raises(
        ValueError,
        match=r"the diffusion g\(D, t\) must be a number or a tensor broadcastable to "
        r"\(P, H, 1, 1\) = \(2, 3, 1, 1\): got shape \(5,\)",
    ):
        Simulator(make(f=lambda D, t: -D, g=lambda D, t: torch.ones(5)), x0, D0, dt=0.1)
    with pytest.raises(
        ValueError,
        match=r"f\(D, t\) must return shape \(2, 3, 3, 3\): got \(3, 3\)",
    ):
        Simulator(make(f=lambda D, t: torch.eye(3)), x0, D0, dt=0.1)
    with pytest.raises(ValueError, match=r"the diffusion g\(D, t\) returned non-finite values at t = 0"):
        Simulator(make(f=lambda D, t: -D, g=lambda D, t: math.inf), x0, D0, dt=0.1)
    with pytest.raises(ValueError, match=r"must return a float or a tensor: got str"):
        Simulator(make(f=lambda D, t: -D, g=lambda D, t: "0.1"), x0, D0, dt=0.1)
    ok = Simulator(make(f=lambda D, t: -D, g=lambda D, t: torch.full((2, 3, 1, 1), 0.2)), x0, D0, dt=0.1)
    ok.step()
    assert not af.WeightProcess.__abstractmethods__ == frozenset()  # an abstract base class
    with pytest.raises(TypeError):
        af.WeightProcess()


# ------------------------------------------------------------------------------------------------
# the one driver
# ------------------------------------------------------------------------------------------------
def test_integrate_records_endpoints_and_every_kth_step() -> None:
    model = af.TransformerModel(direction="ascent")
    sim = Simulator(model, af.tokens.uniform(1, 4, 3, seed=0), af.heads.identity(1, 1, 3), dt=0.1)
    sink = integrate(sim, 7, record_every=3, sink=MemorySink())
    assert [r.step for r in sink.records] == [0, 3, 6, 7]
    more = integrate(sim, 0, record_every=3, sink=sink)  # nothing new: the final state is recorded once
    assert [r.step for r in more.records] == [0, 3, 6, 7]
    bare = integrate(sim, 5, record_every=3, sink=MemorySink(), endpoints=False)
    assert [r.step for r in bare.records] == [9, 12]
    with pytest.raises(ValueError, match="record_every must be an integer >= 1: got 0"):
        integrate(sim, 1, record_every=0, sink=MemorySink())
    with pytest.raises(ValueError, match="n_steps must be an integer >= 0: got -1"):
        integrate(sim, -1, sink=MemorySink())


def test_printed_euler_runs_on_both_backends() -> None:
    x0, D0 = af.tokens.octahedral(2, 20, 3, seed=0), af.heads.symmetric_gaussian(2, 3, 3, seed=0)
    out = {
        be: af.simulate(
            af.TransformerModel(direction="descent", backend=be),
            x0,
            D0,
            t1=0.2,
            dt=0.02,
            integrator="euler_printed",
        )
        for be in ("numba", "torch")
    }
    np.testing.assert_allclose(out["numba"].positions, out["torch"].positions, rtol=0, atol=1e-13)
    np.testing.assert_allclose(out["numba"].residual_exact, out["torch"].residual_exact, rtol=0, atol=1e-12)


def test_public_api_layout() -> None:
    import importlib

    assert callable(af.simulate) and af.simulate is af.simulation.simulate
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("attnflow.simulate")  # the function, not a module, lives at that name
    for name in (
        "geometry",
        "model",
        "dynamics",
        "integrators",
        "simulation",
        "observables",
        "analysis",
        "experiments",
    ):
        assert getattr(af, name).__name__ == f"attnflow.{name}"
    assert af.plot.__name__ == "attnflow.plot"
    assert af.__version__ == importlib.import_module("attnflow._version").__version__


# ------------------------------------------------------------------------------------------------
# review fixes: orders and warnings, forced backends, the ledger with layer jumps, contracts
# ------------------------------------------------------------------------------------------------
def test_euler_with_multiplicative_noise_does_not_warn_and_records_half() -> None:
    x0, D0 = af.tokens.uniform(1, 5, 3, seed=0), af.heads.identity(1, 1, 3)
    proc = af.CustomProcess(f=lambda D, t: -D, g=lambda D, t: 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = af.simulate(af.TransformerModel(direction="ascent", weights=proc), x0, D0, t1=0.1, dt=0.05)
    assert ds.attrs["integrator_order"] == 0.5
    additive = af.CustomProcess(f=lambda D, t: -D, g=lambda D, t: 0.1, additive=True)
    ds = af.simulate(af.TransformerModel(direction="ascent", weights=additive), x0, D0, t1=0.1, dt=0.05)
    assert ds.attrs["integrator_order"] == 1
    with pytest.raises(ValueError, match="additive must be True or False: got 'yes'"):
        af.CustomProcess(f=lambda D, t: -D, additive="yes")


def test_ou_without_noise_is_deterministic() -> None:
    assert not af.OrnsteinUhlenbeck(sigma2=0.0).stochastic and af.OrnsteinUhlenbeck(sigma2=0.5).stochastic
    x0, D0 = af.tokens.uniform(1, 5, 3, seed=0), af.heads.identity(1, 1, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = af.simulate(
            af.TransformerModel(direction="ascent", weights=af.OrnsteinUhlenbeck(sigma2=0.0)),
            x0,
            D0,
            t1=0.1,
            dt=0.05,
            integrator="rk4",
        )
    assert ds.attrs["integrator_order"] == 4
    np.testing.assert_array_equal(ds.martingale.values, 0.0)


def test_forced_numba_backend_checks_eligibility() -> None:
    from attnflow.dynamics.field import evaluate

    x, D = af.tokens.uniform(1, 6, 3, seed=0), af.heads.identity(1, 1, 3)
    relu = af.TransformerModel(direction="ascent", attention="relu")
    with pytest.raises(
        ValueError, match=r"backend='numba' needs CPU tensors, attention='softmax'.*attention='relu'"
    ):
        evaluate(relu, x, D, None, 0.0, backend="numba")
    with pytest.raises(ValueError, match="unknown backend 'cuda'; valid: auto, torch, numba"):
        evaluate(relu, x, D, None, 0.0, backend="cuda")


def test_ledger_terms_add_up_with_layer_jumps() -> None:
    from attnflow.observables.ledger import ledger_terms

    layers = torch.stack([k * torch.eye(3, dtype=torch.float64)[None] for k in (1.0, 2.0, 0.5)])
    model = af.TransformerModel(
        direction="ascent", weights=af.PiecewiseConstant(layers=layers, layer_time=0.1)
    )
    ds = af.simulate(model, af.tokens.uniform(2, 8, 3, seed=0), layers[0], t1=0.3, dt=0.01, record_every=5)
    assert float(abs(ds.jumps).max()) > 1e-3  # the layers change the energy at t = 0.1, 0.2
    terms = ledger_terms(ds)
    for kind in ("paper", "exact"):
        rhs = (
            terms.int_dtE
            + terms[f"dissipation_{kind}"]
            + terms.martingale
            + terms.jumps
            + terms[f"residual_{kind}"]
        )
        np.testing.assert_allclose(rhs.values, terms.delta_energy.values, rtol=0, atol=1e-12)


class _BadDrift(af.WeightProcess):
    def drift(self, D, t):
        return D[..., :2, :2]


class _BadJump(af.WeightProcess):
    def drift(self, D, t):
        return torch.zeros_like(D)

    def jump(self, D, t_new):
        return D[0]


def test_weight_process_contract_for_subclasses() -> None:
    x0, D0 = af.tokens.uniform(2, 4, 3, seed=0), af.heads.identity(2, 1, 3)
    with pytest.raises(
        ValueError, match=r"_BadDrift: the drift f\(D, t\) must return a tensor of the heads' shape"
    ):
        Simulator(af.TransformerModel(direction="ascent", weights=_BadDrift()), x0, D0, dt=0.1)
    with pytest.raises(
        ValueError, match=r"_BadJump: jump\(D, t\) must return None or the heads' shape \(2, 1, 3, 3\)"
    ):
        Simulator(af.TransformerModel(direction="ascent", weights=_BadJump()), x0, D0, dt=0.1)


def test_non_finite_step_leaves_the_ledger_at_the_last_good_step() -> None:
    model = af.TransformerModel(direction="ascent", attention="usa", beta=400.0)
    sim = Simulator(model, af.tokens.uniform(1, 6, 3, seed=0), 5.0 * af.heads.identity(1, 1, 3), dt=1.0)
    before = sim.ledger.state_dict()
    with pytest.raises(af.NonFiniteStateError):
        sim.step()
    after = sim.ledger.state_dict()
    for k in before["acc"]:
        torch.testing.assert_close(after["acc"][k], before["acc"][k], rtol=0, atol=0)


def test_fastsum_backend_through_the_model() -> None:
    """``backend="fastsum"``: a whole simulation with its ledger, within tolerance of the direct path."""
    x0, D0 = af.tokens.octahedral(2, 120, 3, seed=0), af.heads.gaussian(2, 2, 3, seed=0, scale=0.5)
    out = {
        be: af.simulate(
            af.TransformerModel(direction="descent", weights=af.OrnsteinUhlenbeck(), backend=be),
            x0,
            D0,
            t1=0.1,
            dt=0.02,
        )
        for be in ("fastsum", "torch")
    }
    for var in ("positions", "energy", "G2", "Ghat2", "residual_exact", "int_dtE"):
        a, b = out["fastsum"][var].values, out["torch"][var].values
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-9 * np.abs(b).max(), err_msg=var)
    from attnflow.dynamics.field import evaluate

    causal = af.TransformerModel(direction="ascent", causal=True, backend="fastsum")
    with pytest.raises(ValueError, match="backend='fastsum' needs softmax attention, causal=False"):
        evaluate(causal, x0, D0, None, 0.0)


def test_huge_scores_go_to_the_torch_path() -> None:
    """Heads scaled by 1e20: the kernel's two passes disagree by more than exp can absorb (lse = -inf), so
    "auto" takes PyTorch (finite velocity, same as backend="torch") and a forced "numba" is refused."""
    from attnflow.dynamics.field import evaluate

    x, D = af.tokens.uniform(1, 8, 3, seed=0), 1e20 * af.heads.symmetric_gaussian(1, 2, 3, seed=0)
    auto = evaluate(af.TransformerModel(direction="ascent"), x, D, None, 0.0, ledger=False)
    ref = evaluate(af.TransformerModel(direction="ascent", backend="torch"), x, D, None, 0.0, ledger=False)
    assert bool(auto.velocity.isfinite().all())
    torch.testing.assert_close(auto.velocity, ref.velocity, rtol=0, atol=0)
    with pytest.raises(
        ValueError, match=r"backend='numba' takes scores up to beta \|D\|_F max\|x\|\^2 = 1e\+12: got 5.5"
    ):
        evaluate(af.TransformerModel(direction="ascent", backend="numba"), x, D, None, 0.0, ledger=False)


def test_auto_backend_takes_fast_summation_for_many_tokens() -> None:
    """n = 4000 on S^2 with moderate heads: "auto" picks the fast summation (n >= 8 L^2) and agrees with the
    direct kernel to the guaranteed tolerance; 500 tokens stay on the direct kernel; causal never switches."""
    from attnflow.dynamics.field import choose_backend, evaluate

    D = af.heads.symmetric_gaussian(1, 2, 3, seed=1) * 0.3
    x = af.tokens.uniform(1, 4000, 3, seed=0)
    auto = af.TransformerModel(direction="ascent")
    assert choose_backend(auto, x, True, None, D) == "fastsum"
    assert choose_backend(auto, x[:, :500], True, None, D) == "numba"
    assert choose_backend(af.TransformerModel(direction="ascent", causal=True), x, True, None, D) == "numba"
    fast = evaluate(auto, x, D, None, 0.0)
    direct = evaluate(auto, x, D, None, 0.0, backend="numba")
    for name in ("velocity", "energy", "G2", "Ghat2"):
        a, b = getattr(fast, name), getattr(direct, name)
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-9 * float(b.abs().max()), msg=name)
