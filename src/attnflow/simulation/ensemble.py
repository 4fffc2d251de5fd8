r"""Ensembles of small clouds in one compiled call: :func:`simulate_clouds` (issue 27 part 2).

B independent clouds of n tokens, each with its own heads, values, inverse temperature, step and number
of steps, integrated by RK4 (constant heads, no noise) in one call of the compiled
:func:`attnflow.dynamics.numba_ensemble.rk4_clouds` (``prange`` over the clouds): no Python per step, both
cores busy. For the small clouds of the multi-head studies (n <= 128) this replaces one
:func:`attnflow.simulate` run per cloud, whose Python step loop cost 50-100x the arithmetic
(docs/performance.md section 10.2).

What it does not do (use :func:`attnflow.simulate`): weight processes, noise, layer scaling, a ledger,
integrators other than RK4, attention kinds other than softmax, usa and relu. A cloud's result agrees
with the same cloud run by :func:`attnflow.simulate` (``integrator="rk4"``, ``backend="torch"``, constant
heads) to round-off, and is the same bit for bit whatever the other clouds of the batch
(``tests/test_ensemble.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..geometry import SPHERE_TOL, Sphere, get_geometry
from ..integrators.base import grid_times

__all__ = ["CloudRuns", "simulate_clouds"]

#: the largest positions array :func:`simulate_clouds` allocates (bytes)
MAX_RECORD_BYTES = 2 * 2**30


@dataclass(frozen=True)
class CloudRuns:
    """The records of :func:`simulate_clouds`.

    Attributes
    ----------
    positions : ndarray, shape=[B, R, n, d]
        Recorded tokens per cloud; cloud b fills its first ``records[b]`` rows (NaN after).
    record_steps : ndarray of int64, shape=[B, R]
        Step index of each recorded row (-1 where unused).
    rho : ndarray, shape=[B, S + 1]
        Mean pairwise inner product after every step (row b filled up to ``steps_done[b]``, NaN after).
    dt : ndarray, shape=[B]
    steps_done : ndarray of int64, shape=[B]
        ``n_steps[b]`` unless the state of cloud b became non-finite in the next step.
    """

    positions: np.ndarray
    record_steps: np.ndarray
    rho: np.ndarray
    dt: np.ndarray
    steps_done: np.ndarray

    @property
    def records(self) -> np.ndarray:
        """Rows of ``positions`` filled per cloud, shape=[B]."""
        return (self.record_steps >= 0).sum(1)

    def times(self, b: int) -> np.ndarray:
        """The recorded times of cloud ``b``, shape=[records[b]]: step x dt rounded to the decimals of dt
        as in :func:`attnflow.simulate`'s datasets (:func:`attnflow.integrators.base.grid_times`)."""
        steps = self.record_steps[b, : self.records[b]]
        return grid_times(steps * self.dt[b], steps, 0.0, float(self.dt[b]))

    def rho_series(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """``(times, rho)`` of cloud ``b`` at every step done."""
        k = int(self.steps_done[b]) + 1
        return np.arange(k) * self.dt[b], self.rho[b, :k]


def _per_cloud(name: str, value, B: int, kind: type) -> np.ndarray:
    """A number or one per cloud, as a float64 (or int64 for ``kind`` int) array of shape [B]."""
    raw = np.asarray(value, dtype=float)
    if raw.ndim == 0:
        raw = np.full(B, float(raw))
    if raw.shape != (B,):
        raise ValueError(
            f"{name} must be a number or one value per cloud (shape ({B},)): got shape {raw.shape}"
        )
    if kind is int:
        if not (np.isfinite(raw).all() and (raw == np.round(raw)).all()):
            raise ValueError(f"{name} must be whole numbers: got {value!r}")
        return raw.astype(np.int64)
    return raw


def _array(name: str, value, shape_hint: str) -> np.ndarray:
    a = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"{name} must be a numeric array {shape_hint}: got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite: got {int((~np.isfinite(a)).sum())} non-finite entries")
    return a


def simulate_clouds(
    x0,
    heads,
    *,
    dt,
    n_steps,
    beta=1.0,
    values=None,
    attention: str = "softmax",
    geometry: str = "sphere",
    direction: str = "ascent",
    record_every=None,
) -> CloudRuns:
    r"""Integrate B independent clouds by RK4 in one compiled call.

    Parameters
    ----------
    x0 : array-like, shape=[B, n, d]
        Initial tokens (on the unit sphere for ``geometry="sphere"``); n >= 2.
    heads : array-like, shape=[B, H, d, d] or [H, d, d]
        Score matrices D_h per cloud (or shared), constant in time.
    dt : float or array-like, shape=[B]
        Step per cloud (> 0).
    n_steps : int or array-like, shape=[B]
        Steps per cloud (>= 1).
    beta : float or array-like, shape=[B]
        Inverse temperature per cloud (> 0).
    values : array-like or None, shape=[B, H, d, d] or [H, d, d]
        Value matrices V_h; None uses V = D as in the paper.
    attention : {"softmax", "usa", "relu"}
    geometry : {"sphere", "flat"} or Geometry
    direction : {"ascent", "descent"}
    record_every : int, array-like of int (shape=[B]) or None
        Record the positions every k steps (the first and last steps always); None: first and last only.

    Returns
    -------
    CloudRuns

    Raises
    ------
    ValueError
        A shape, option or number breaks its rule (the message names it and the fix).

    Examples
    --------
    >>> import attnflow as af
    >>> x0 = af.tokens.uniform(3, 8, 3, seed=0)
    >>> out = simulate_clouds(x0, torch.eye(3).expand(1, 3, 3), dt=0.1, n_steps=10)
    >>> out.positions.shape, out.steps_done.tolist()
    ((3, 2, 8, 3), [10, 10, 10])
    """
    from ..dynamics.numba_ensemble import KINDS, rk4_clouds  # numba compiles on first use

    if attention not in KINDS:
        raise ValueError(f"unknown attention {attention!r} for simulate_clouds; valid: {', '.join(KINDS)}")
    geom = get_geometry(geometry)  # a name ("sphere", "flat") or a Geometry; an unknown one is named
    if direction not in ("ascent", "descent"):
        raise ValueError(f"unknown direction {direction!r}; valid: ascent, descent")
    x = _array("x0", x0, "[B, n, d]")
    if x.ndim != 3 or x.shape[1] < 2:
        raise ValueError(
            f"x0 must have shape [B, n, d] with n >= 2 tokens: got shape {x.shape}; add a leading axis "
            "for one cloud (x0[None])"
        )
    B, n, d = x.shape
    sphere = isinstance(geom, Sphere)
    if sphere:
        err = float(np.abs(np.linalg.norm(x, axis=-1) - 1.0).max())
        if err > SPHERE_TOL:
            raise ValueError(
                f"x0 must lie on S^(d-1) for geometry 'sphere': max |‖x_i‖ - 1| = {err:.2g} > "
                f"{SPHERE_TOL:g}; normalise with attnflow.geometry.project(x0)"
            )

    def mats(name, value):
        a = _array(name, value, "[B, H, d, d]")
        if a.ndim == 3:
            a = np.broadcast_to(a, (B, *a.shape))
        if a.ndim != 4 or a.shape[0] != B or a.shape[2:] != (d, d):
            raise ValueError(
                f"{name} must have shape [B, H, d, d] = [{B}, H, {d}, {d}] or [H, d, d]: got {a.shape}"
            )
        return np.ascontiguousarray(a)

    D = mats("heads", heads)
    V = D if values is None else mats("values", values)
    if V.shape != D.shape:
        raise ValueError(f"values must have the heads' shape {D.shape}: got {V.shape}")
    dts = _per_cloud("dt", dt, B, float)
    betas = _per_cloud("beta", beta, B, float)
    steps = _per_cloud("n_steps", n_steps, B, int)
    for name, arr, low in (("dt", dts, 0.0), ("beta", betas, 0.0)):
        if not (np.isfinite(arr).all() and (arr > low).all()):
            raise ValueError(f"{name} must be finite and > 0 for every cloud: got min {arr.min()!r}")
    if (steps < 1).any():
        raise ValueError(f"n_steps must be >= 1 for every cloud: got min {int(steps.min())}")
    every = steps.copy() if record_every is None else _per_cloud("record_every", record_every, B, int)
    if (every < 1).any():
        raise ValueError(f"record_every must be >= 1 (or None): got min {int(every.min())}")
    counts = steps // every + 1 + (steps % every > 0)
    R, S = int(counts.max()), int(steps.max())
    size = B * R * n * d * 8
    if size > MAX_RECORD_BYTES:
        raise ValueError(
            f"the positions of {B} clouds x {R} records x {n} x {d} need {size / 2**30:.1f} GiB > "
            f"{MAX_RECORD_BYTES / 2**30:g} GiB; raise record_every or run fewer clouds per call"
        )
    pos = np.full((B, R, n, d), np.nan)
    rho = np.full((B, S + 1), np.nan)
    done = rk4_clouds(
        x, D, V, betas, dts, steps, every, KINDS[attention], sphere, 1.0 if direction == "ascent" else -1.0,
        pos, rho,
    )  # fmt: skip
    rec = np.full((B, R), -1, dtype=np.int64)
    for b in range(B):
        ks = np.arange(0, int(steps[b]) + 1, int(every[b]))
        if ks[-1] != steps[b]:
            ks = np.append(ks, steps[b])
        ks = ks[ks <= done[b]]
        rec[b, : ks.size] = ks
    return CloudRuns(positions=pos, record_steps=rec, rho=rho, dt=dts, steps_done=done)
