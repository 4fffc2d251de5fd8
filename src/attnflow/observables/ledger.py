r"""Trajectory-level view of the discrete energy-dissipation identity (147) of arXiv 2605.18870.

The simulation loop (:class:`attnflow.simulation.EnergyLedger`) accumulates, with left Riemann sums, the
terms of

.. math:: \underbrace{\mathcal{E}_t - \mathcal{E}_0}_{\texttt{delta\_energy}}
          = \underbrace{\int_0^t \partial_s\mathcal{E}\,ds}_{\texttt{int\_dtE}}
          + \underbrace{s\int_0^t G_s^2\,ds}_{\texttt{dissipation\_paper}}
          + \underbrace{M_t}_{\texttt{martingale}} + \underbrace{J_t}_{\texttt{jumps}} + R^{\mathrm{paper}}_t

(eq. (147) with the paper's harmonic-mean :math:`G^2`, Lemma 4.12) and the same with the exact dissipation
power :math:`\hat G^2` (``dissipation_exact``, residual :math:`R^{\mathrm{exact}}_t`); s = +1 (ascent) or
-1 (descent); :math:`J_t` sums the energy jumps of layered (piecewise-constant) weights, zero otherwise.
The time integral of (116) is the continuous-time limit. These helpers read a Dataset
returned by :func:`attnflow.simulate` (or a stored run) and tabulate the terms, and fit the order in dt of
residuals measured at several step sizes. The per-time terms themselves (energy, Ito factor with its
derivation, dissipation, martingale) are in :mod:`attnflow.observables.energy` and
:mod:`attnflow.observables.dissipation`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import xarray as xr

from ..simulation import SCALARS

__all__ = ["ledger_table", "ledger_terms", "residual_order"]

#: Terms of identity (147), in the order of the equation.
TERMS = (
    "delta_energy",
    "int_dtE",
    "dissipation_paper",
    "dissipation_exact",
    "martingale",
    "jumps",
    "residual_paper",
    "residual_exact",
)
#: the ledger variables of a run these helpers read (:data:`attnflow.simulation.SCALARS`)
_NEEDED = tuple(k for k in SCALARS if k not in ("G2", "Ghat2", "dtE_drift", "dtE_ito"))


def ledger_terms(ds: xr.Dataset) -> xr.Dataset:
    r"""Terms of identity (147) per path and recorded time.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`attnflow.simulate` with ``ledger=True`` (variables ``energy``, ``int_dtE``,
        ``int_G2``, ``int_Ghat2``, ``martingale``, ``residual_paper``, ``residual_exact`` on
        (path, time); attribute ``sign``); the first recorded time must be the initial one.

    Returns
    -------
    xarray.Dataset
        Variables ``delta_energy``, ``int_dtE``, ``dissipation_paper`` (= s int G^2),
        ``dissipation_exact`` (= s int Ghat^2), ``martingale``, ``residual_paper``, ``residual_exact``,
        each of dims (path, time), with
        ``delta_energy = int_dtE + dissipation_* + martingale + jumps + residual_*``.
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds must be an xarray.Dataset from attnflow.simulate: got {type(ds).__name__}")
    missing = [k for k in _NEEDED if k not in ds]
    if missing:
        raise ValueError(f"ds lacks the ledger variables {missing}; run attnflow.simulate(..., ledger=True)")
    if "sign" not in ds.attrs:
        raise ValueError("ds lacks the attribute 'sign' (+1 ascent, -1 descent) written by attnflow.simulate")
    t0 = float(ds.attrs.get("t0", ds.time.values[0]))
    if not math.isclose(float(ds.time.values[0]), t0, rel_tol=0.0, abs_tol=1e-12):
        raise ValueError(
            f"the first recorded time {float(ds.time.values[0]):g} is not the initial time t0 = {t0:g}: "
            "E_t - E_0 needs the initial record; pass the whole run, not a slice"
        )
    s = float(ds.attrs["sign"])
    out = xr.Dataset(
        {
            "delta_energy": ds.energy - ds.energy.isel(time=0),
            "int_dtE": ds.int_dtE,
            "dissipation_paper": s * ds.int_G2,
            "dissipation_exact": s * ds.int_Ghat2,
            "martingale": ds.martingale,
            "jumps": ds.jumps,
            "residual_paper": ds.residual_paper,
            "residual_exact": ds.residual_exact,
        }
    )
    out.attrs = {"sign": s, "identity": "arXiv 2605.18870 eq. (147)"}
    return out


def ledger_table(ds: xr.Dataset) -> xr.Dataset:
    r"""Mean and standard deviation over paths of the terms of identity (147), per recorded time.

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`attnflow.simulate` with the ledger (see :func:`ledger_terms`).

    Returns
    -------
    xarray.Dataset
        The variables of :func:`ledger_terms` with dims (stat, time), ``stat = ["mean", "std"]``
        (sample standard deviation over paths, ddof = 1; 0 for a single path). This is what
        Fig. 3 of the paper shows (Monte Carlo mean of each term with a +-1 sigma band).
    """
    terms = ledger_terms(ds)
    P = terms.sizes["path"]
    mean = terms.mean("path")
    std = terms.std("path", ddof=1) if P > 1 else xr.zeros_like(mean)
    table = xr.concat([mean, std], dim=xr.DataArray(["mean", "std"], dims="stat", name="stat"))
    table.attrs = dict(terms.attrs, paths=P)
    return table


def residual_order(dts: Sequence[float], residuals: Sequence[float]) -> dict[str, float]:
    r"""Fit :math:`|R| \approx C\,dt^{p}`: least-squares slope of :math:`\log|R|` against :math:`\log dt`.

    Parameters
    ----------
    dts : sequence of float, length K >= 2
        Step sizes (> 0, distinct).
    residuals : sequence of float, length K
        Residual sizes at a fixed time (e.g. mean over paths of |R_T|), one per dt.

    Returns
    -------
    dict
        ``order`` (p), ``stderr`` (standard error of p from the fit residuals; nan for K = 2),
        ``prefactor`` (C). All nan when a residual is exactly 0 (no power law to fit).
    """
    h = np.asarray(dts, dtype=float)
    r = np.abs(np.asarray(residuals, dtype=float))
    if h.ndim != 1 or h.shape != r.shape or h.size < 2:
        raise ValueError(
            f"dts and residuals must be 1-d of the same length >= 2: got shapes {h.shape} and {r.shape}"
        )
    if not (np.all(np.isfinite(h)) and np.all(h > 0)) or np.unique(h).size != h.size:
        raise ValueError(f"dts must be distinct finite numbers > 0: got {h.tolist()}")
    if not np.all(np.isfinite(r)):
        raise ValueError(f"residuals must be finite: got {r.tolist()}")
    if np.any(r == 0):
        return {"order": math.nan, "stderr": math.nan, "prefactor": math.nan}
    X, Y = np.log(h), np.log(r)
    A = np.stack([X, np.ones_like(X)], 1)
    coef, *_ = np.linalg.lstsq(A, Y, rcond=None)
    slope, icpt = float(coef[0]), float(coef[1])
    if h.size > 2:
        res = Y - A @ coef
        s2 = float(res @ res) / (h.size - 2)
        stderr = math.sqrt(s2 / float(((X - X.mean()) ** 2).sum()))
    else:
        stderr = math.nan
    return {"order": slope, "stderr": stderr, "prefactor": math.exp(icpt)}
