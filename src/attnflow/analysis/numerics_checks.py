r"""The computations of the study ``numerics_checks`` (issue 25): pure functions of a config object whose
attributes are the study's parameters (:class:`attnflow.studies.numerics_checks.NumericsChecksConfig`).

* :func:`lie_errors`: error at T of the Lie-group integrators against scipy DOP853 (rtol = atol = 1e-13) of
  the same ODE written with the independent field :func:`attnflow.observables.multihead_velocity`;
* :func:`jko_errors`: error at T of the JKO scheme against an RK4 reference;
* :func:`heat_kernel_moments`: E P_l(<x_0, x_t>) of free Brownian tokens against the heat kernel;

The training checks (adjoint memory, first variation) need :mod:`attnflow.training`, a layer above this
one: they live in :mod:`attnflow.studies.numerics_checks`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.integrate import solve_ivp
from scipy.special import eval_legendre

from ..integrators import INTEGRATORS, JKO
from ..model import heads as heads_mod, tokens
from ..model.transformer import TransformerModel
from ..observables.multihead import multihead_velocity
from ..simulation import Simulator, simulate
from .fits import fit_power_law

__all__ = [
    "LIE",
    "heat_kernel_moments",
    "jko_errors",
    "lie_errors",
]

LIE = ("lie_euler", "rkmk2", "rkmk4")


def _reference_solution(
    model_kind: str, beta: float, x0: torch.Tensor, D: torch.Tensor, t1: float
) -> np.ndarray:
    """DOP853 (rtol = atol = 1e-13) of x' = multihead_velocity(x), renormalised at the end (frozen heads)."""
    shape = tuple(x0.shape)

    def rhs(_t, y):
        x = torch.as_tensor(y.reshape(shape))
        x = x / x.norm(dim=-1, keepdim=True)
        return multihead_velocity(x, D, beta, attention=model_kind).numpy().ravel()

    sol = solve_ivp(rhs, (0.0, t1), x0.numpy().ravel(), method="DOP853", rtol=1e-13, atol=1e-13)
    if not sol.success:
        raise RuntimeError(f"the DOP853 reference failed: {sol.message}")
    x = sol.y[:, -1].reshape(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def lie_errors(c, attention: str = "softmax", dt_factor: float = 1.0, scale_factor: float = 1.0) -> dict:
    """Error at T of each Lie integrator against DOP853, per dt; the free slope with its interval."""
    x0 = tokens.uniform(1, c.n, 3, seed=c.seed + 21)
    D = heads_mod.symmetric_gaussian(1, c.H, 3, seed=c.seed + 21) * c.head_scale * scale_factor
    model = TransformerModel(direction="ascent", attention=attention, backend="torch")
    ref = _reference_solution(attention, 1.0, x0, D, c.t1)
    out = {}
    for name in LIE:
        dts = [dt * dt_factor for dt in c.lie_dts[name]]
        errs = []
        for dt in dts:
            ds = simulate(
                model, x0, D, t1=c.t1, dt=dt, integrator=name, ledger=False, record_every=round(c.t1 / dt)
            )
            errs.append(float(np.abs(ds.positions.values[0, -1] - ref[0]).max()))
        f = fit_power_law(dts, errs)
        out[name] = {
            "dts": dts,
            "errors": errs,
            "order": f["b"],
            "order_ci": list(f["b_ci"]),
            "declared": INTEGRATORS[name].order,
        }
    return out


def jko_errors(c, attention: str = "softmax", dts: list[float] | None = None) -> dict:
    """Error at T of the JKO scheme against an RK4 reference (one identity head, beta = 2, ascent)."""
    model = TransformerModel(direction="ascent", beta=2.0, attention=attention, backend="torch")
    x0, D0 = tokens.uniform(1, 8, 3, seed=c.seed + 5), heads_mod.identity(1, 1, 3)
    ref = simulate(
        model,
        x0,
        D0,
        t1=c.t1,
        dt=c.jko_reference_dt,
        integrator="rk4",
        ledger=False,
        record_every=round(c.t1 / c.jko_reference_dt),
    ).positions.values[0, -1]
    dts = list(dts or c.jko_dts)
    errs = []
    for dt in dts:
        x = simulate(
            model,
            x0,
            D0,
            t1=c.t1,
            dt=dt,
            integrator=JKO(tol=c.jko_tol),
            ledger=False,
            record_every=round(c.t1 / dt),
        ).positions.values[0, -1]
        errs.append(float(np.abs(x - ref).max()))
    f = fit_power_law(dts, errs)
    return {"dts": dts, "errors": errs, "order": f["b"], "order_ci": list(f["b_ci"])}


def heat_kernel_moments(c, d: int, dt: float, l: int) -> dict:
    """E P_l(<x_0, x_t>) (S^2: Legendre; S^1: cos(l theta)) of free Brownian tokens at t = heat_t,
    against exp(-l(l + d - 2) eps t); the difference with its 95% normal interval over the tokens."""
    model = TransformerModel(direction="ascent", token_noise=c.heat_eps, backend="torch")
    x0 = tokens.uniform(c.heat_paths, c.heat_n, d, seed=c.seed + 11)
    D = torch.zeros(c.heat_paths, 1, d, d, dtype=torch.float64)  # no interaction
    sim = Simulator(model, x0, D, dt=dt, seed=c.seed + 11, ledger=False)
    steps = round(c.heat_t / dt)
    sim.run(steps)
    cos = (x0 * sim.x).sum(-1).flatten().clamp(-1, 1).numpy()
    sample = eval_legendre(l, cos) if d == 3 else np.cos(l * np.arccos(cos))
    exact = math.exp(-l * (l + d - 2) * c.heat_eps * steps * dt)
    mean = float(sample.mean())
    se = float(sample.std(ddof=1) / math.sqrt(sample.size))
    diff = mean - exact
    return {
        "d": d,
        "dt": dt,
        "l": l,
        "mean": mean,
        "exact": exact,
        "difference": diff,
        "ci95": [diff - 1.96 * se, diff + 1.96 * se],
        "samples": int(sample.size),
    }
