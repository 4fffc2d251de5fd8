r"""Adaptive Lie-group step: the embedded pair Lie-Euler (order 1) / RKMK2 (order 2) with step control.

Inside each outer step [t, t + dt] of the simulation loop (the record grid), the method takes substeps of
size h chosen from an embedded error estimate: both members of the pair share the first stage, the
Lie-Euler point :math:`y_1 = \exp_{x}(h s v(x))` is also the second stage point of RKMK2, so the estimate

.. math:: \mathrm{err} = \max\Big(\max_{p,i} d_{S}(y_1, y_2),\ \max_{p,h}\|D^{(1)} - D^{(2)}\|_F\Big)

(geodesic distance of the tokens, Frobenius norm of the heads) costs no extra field evaluation. A substep
is accepted when err <= ``tol`` and continues from the order-2 point (local extrapolation); the next h is
:math:`h\,\min(5, \max(0.2, 0.9\,(\mathrm{tol}/\mathrm{err})^{1/2}))` (the exponent 1/(q+1) with q = 1,
the order of the error estimate; Hairer-Norsett-Wanner I, Sec. II.4). Accepted and rejected substeps
are counted and returned by :meth:`AdaptiveRKMK2.stats`.
"""

from __future__ import annotations

import math

import torch

from ..geometry import exp_map, geodesic_distance
from .base import Integrator
from .lie import generator, require_sphere, rotate

__all__ = ["AdaptiveRKMK2"]

#: step-size controller: safety factor and the bounds on the ratio h_new / h
SAFETY, GROW_MAX, SHRINK_MIN = 0.9, 5.0, 0.2


def check_tolerance(tol: float, what: str, example: str) -> float:
    """A finite tolerance > 0 (rule, value, fix)."""
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol <= 0:
        raise ValueError(f"{what} must be a finite number > 0: got {tol!r}; give e.g. {example}")
    return float(tol)


def check_cap(cap: int, what: str, example: str) -> int:
    """An integer cap >= 1 (rule, value, fix)."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"{what} must be an integer >= 1: got {cap!r}; give e.g. {example}")
    return cap


class AdaptiveRKMK2(Integrator):
    """Lie-Euler/RKMK2 embedded pair with error control per outer step (order 2 at fixed tolerance ratio).

    Parameters
    ----------
    tol : float
        Absolute local error tolerance per substep (> 0), in radians for tokens and Frobenius units for heads.
    max_substeps : int
        Most substeps (accepted + rejected) inside one outer step; more raises ``RuntimeError``.
    """

    order = 2
    strong_order = 1.0
    name = "adaptive_rkmk2"

    def __init__(self, tol: float = 1e-6, max_substeps: int = 100_000):
        self.tol = check_tolerance(tol, "the adaptive integrator's tol", "tol=1e-6")
        self.max_substeps = check_cap(max_substeps, "max_substeps", "max_substeps=100000")
        self.accepted = 0
        self.rejected = 0
        self.h: float | None = None  # last accepted substep
        self.h_next: float | None = None  # the controller's proposal for the next substep
        self.history: list[tuple[float, float, float, bool]] = []  # (t, h, err, accepted)

    def stats(self) -> dict[str, float]:
        """Cumulative accepted and rejected substeps, the last accepted h and the tolerance."""
        return {
            "substeps_accepted": float(self.accepted),
            "substeps_rejected": float(self.rejected),
            "last_h": float(self.h) if self.h is not None else float("nan"),
            "tol": self.tol,
        }

    def _pair(self, field, x, D, t, h, fe):
        rate = field.token_rate(fe)
        F1 = field.weight_rate(D, t)
        y1, D1 = exp_map(x, h * rate), D + h * F1
        k2 = generator(y1, field.token_rate(field(y1, D1, t + h)))
        F2 = field.weight_rate(D1, t + h)
        y2 = rotate(0.5 * h * (generator(x, rate) + k2), x)
        D2 = D + 0.5 * h * (F1 + F2)
        err = float(geodesic_distance(y1, y2).max())
        if D.numel():
            err = max(err, float(torch.linalg.matrix_norm(D1 - D2).max()))
        return y2, D2, err

    def drift_step(self, field, x, D, t, dt, first):
        require_sphere(field, self.name)
        t_end = t + dt
        h = min(self.h_next or dt, dt)
        fe, tries = first, 0
        while t_end - t > 1e-12 * dt:
            if tries >= self.max_substeps:
                raise RuntimeError(
                    f"adaptive_rkmk2 needed more than max_substeps = {self.max_substeps} substeps in the "
                    f"step at t = {t:g} with tol = {self.tol:g} (last h = {h:.3g}); raise tol or max_substeps"
                )
            tries += 1
            h = min(h, t_end - t)
            y, Dn, err = self._pair(field, x, D, t, h, fe)
            ok = err <= self.tol
            self.history.append((t, h, err, ok))
            ratio = GROW_MAX if err == 0 else SAFETY * math.sqrt(self.tol / err)
            if ok:
                self.accepted += 1
                x, D, t = y, Dn, t + h
                self.h = h
                if t_end - t > 1e-12 * dt:
                    fe = field(x, D, t)
            else:
                self.rejected += 1
            h *= min(GROW_MAX, max(SHRINK_MIN, ratio))
            if ok:
                self.h_next = h
        return x, D
