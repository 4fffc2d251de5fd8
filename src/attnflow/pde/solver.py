r"""Time stepping of the Transformer PDE (arXiv 2605.18870, eq. (81)) for the token density.

.. math:: \partial_t u + \nabla\cdot(u\,v[u, \Theta_t]) = \varepsilon\,\Delta u, \qquad
          dD_h = f_h(D_h, t)\,dt + g_h\,dW_h,

with the velocity :math:`v` of :mod:`attnflow.pde.field` (sign ``s`` from the model's ``direction``)
and the H heads of any weight process of :mod:`attnflow.model.weights` as :math:`\Theta_t`
(:math:`\varepsilon > 0`: tokens with Brownian noise of generator :math:`\varepsilon\Delta`, the
McKean-Vlasov equation of NOTES.md §10; :math:`\varepsilon = 0`: the paper's equation).

Method: the coefficients of :math:`u` up to the band limit (:mod:`attnflow.pde.grids`) are advanced by
the integrating-factor ("Lawson") fourth-order Runge-Kutta method: the diffusion is exact in coefficient
space (:math:`e^{-\varepsilon l(l+1) t}`, an exponential integrator), the transport term is explicit RK4.
Without diffusion the transport is not stiff, so an implicit part would buy nothing; the explicit
stability limit is checked at load (the CFL number ``dt * max|v| * L`` must stay below 2.8, the RK4
stability interval on the imaginary axis) and recorded at every record. The heads' drift is advanced by
the same RK4 stages; stochastic heads get their Euler-Maruyama increment after the drift (as the particle
integrators do), and any jump of the heads (noise or a layer switch) is booked in the ledger as an energy
jump. The energy ledger :math:`E(t) - E(0) = \int_0^t \frac{dE}{ds}ds + \text{jumps}` is integrated by the
same RK4 stages, so its residual closes at the order of the time discretisation (fourth) plus the
spatial error, which is spectral. Mass is conserved exactly by the divergence form (the degree-0
coefficient of a divergence is zero); positivity is monitored on a finer grid.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
import xarray as xr

from ..geometry import Sphere
from ..integrators.base import check_dt, check_t0, grid_times
from ..model.transformer import TransformerModel
from ..model.weights import Constant, noise_matrix, noise_scale
from ..random import BrownianSource
from .band import BAND_TOL, check_band_limit, kernel_radius, minimum_band_limit
from .coefficients import COEF_MAX_BYTES, COEF_TOL, KernelOperator, coefficient_band, estimated_bytes
from .field import ATTENTIONS, KERNEL_METHODS, DensityField, density_field
from .grids import SpectralGrid, make_grid

__all__ = [
    "CFL_MAX",
    "SOLVER_QUADRATURES",
    "DensitySolver",
    "make_solver",
    "records_to_dataset",
    "snapshot",
    "solve_density",
]

#: RK4 is stable for purely imaginary eigenvalues i w with |w| dt <= 2 sqrt(2) = 2.83
CFL_MAX = 2.8
MASS_TOL = 1e-6
#: how the solver's kernel sums run: ``coefficients`` (matrices on spherical-harmonic coefficients, constant
#: heads on S^2, :mod:`attnflow.pde.coefficients`), ``numba`` (the compiled quadrature of
#: :mod:`attnflow.pde.quadsums`), ``numpy`` (the reference), ``auto`` (coefficients where they apply)
SOLVER_QUADRATURES = ("auto", "coefficients", "numba", "numpy")


def _check_nonneg(name: str, value, hint: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number >= 0: got {value!r}; {hint}")
    return float(value)


class DensitySolver:
    """Stateful solver of the Transformer PDE for one density and one set of H heads.

    Parameters
    ----------
    model : TransformerModel
        Direction (ascent/descent), attention (``softmax`` or ``usa``), beta, weight process, layer
        scaling. The geometry must be the sphere; causal masks have no meaning for a density.
    u0 : ndarray
        Coefficients of the initial density on ``grid`` (:mod:`attnflow.pde.initial`), mass 1.
    heads : array-like, shape=[H, d, d] or [d, d]
        Initial heads D_h(0).
    grid : SpectralGrid
        Grid of band limit L (:func:`attnflow.pde.grids.make_grid`).
    dt : float
        Time step (> 0).
    t0 : float
    eps : float
        Token noise intensity (generator eps * Laplacian), >= 0.
    seed : int
        Seed of the heads' noise (stochastic weight processes).
    kernel : {"auto", "fft", "quadrature"}
    quadrature : {"auto", "coefficients", "numba", "numpy"}
        How the kernel sums run (:data:`SOLVER_QUADRATURES`): ``coefficients``, the sums as matrices on
        the density's spherical-harmonic coefficients built once (:mod:`attnflow.pde.coefficients`; heads
        constant in time on S^2 only: ``Constant`` weights, no layer scaling); ``numba``, the compiled
        quadrature over node pairs; ``numpy``, the reference with the N x N score matrix (the last two agree
        to round-off, the first to its truncation ``coef_tol``, measured in ``docs/performance.md`` 10.3).
        ``auto`` (default): ``coefficients`` where it applies and its matrices take at most
        :data:`~attnflow.pde.coefficients.COEF_MAX_BYTES`, else ``numba``. The choice is ``self.quadrature``.
    coef_tol : float
        Truncation tolerance of the coefficient method: the output band of the kernel sums is
        ``max(L, minimum_band_limit(beta |D|, 3, coef_tol))``
        (:func:`~attnflow.pde.coefficients.coefficient_band`).
    band_tol : float
        Tolerance of the band-limit rule (:mod:`attnflow.pde.band`).

    Raises
    ------
    ValueError
        At load: dt not a finite number > 0 or t0 not finite (:func:`attnflow.integrators.base.check_dt`,
        ``check_t0``: the messages of the particle simulation), band limit too small for beta |D| (with
        the minimum), negative eps, dt beyond the explicit stability limit (with the largest stable dt),
        mass not 1, an attention kind the solver lacks.
    """

    def __init__(
        self,
        model: TransformerModel,
        u0: np.ndarray,
        heads,
        *,
        grid: SpectralGrid,
        dt: float,
        t0: float = 0.0,
        eps: float = 0.0,
        seed: int = 0,
        kernel: str = "auto",
        quadrature: str = "auto",
        band_tol: float = BAND_TOL,
        coef_tol: float = COEF_TOL,
    ):
        if not isinstance(model, TransformerModel):
            raise ValueError(f"model must be a TransformerModel: got {type(model).__name__}")
        if not isinstance(model.geometry, Sphere):
            raise ValueError(
                f"the Transformer PDE lives on the sphere: got geometry {model.geometry.name!r}; "
                "use TransformerModel(geometry='sphere')"
            )
        if model.attention not in ATTENTIONS:
            raise ValueError(
                f"the density solver implements attention in {ATTENTIONS}: got {model.attention!r}; "
                "simulate other kinds with particles (attnflow.simulate)"
            )
        if model.causal:
            raise ValueError(
                "causal=True has no meaning for a token density (no token order): use causal=False"
            )
        if kernel not in KERNEL_METHODS:
            raise ValueError(f"unknown kernel method {kernel!r}; valid: {', '.join(KERNEL_METHODS)}")
        if quadrature not in SOLVER_QUADRATURES:
            raise ValueError(
                f"unknown quadrature backend {quadrature!r}; valid: {', '.join(SOLVER_QUADRATURES)}"
            )
        self.quadrature = quadrature
        dt = check_dt(dt)  # the one check of the time step (the particle simulation's too)
        t0 = check_t0(t0)
        self.eps = _check_nonneg("eps", eps, "eps is the token noise intensity (0: the paper's PDE)")
        self.model, self.grid, self.dt, self.kernel = model, grid, float(dt), kernel
        d = grid.d
        D = torch.as_tensor(np.asarray(heads, dtype=np.float64))
        if D.ndim == 2:
            D = D[None]
        if D.ndim != 3 or tuple(D.shape[1:]) != (d, d):
            raise ValueError(
                f"heads must have shape (H, {d}, {d}) or ({d}, {d}) on S^{d - 1}: got {tuple(D.shape)}"
            )
        if not torch.isfinite(D).all():
            raise ValueError("heads must be finite")
        self.H = D.shape[0]
        self.D = D[None].clone()  # (1, H, d, d): the weight processes act on batched heads
        model.weights.validate(self.H, d)
        model.weights.check_contract(self.D, float(t0))
        u0 = np.asarray(u0, dtype=np.complex128)
        if u0.shape != grid.degree.shape:
            raise ValueError(
                f"u0 must hold {grid.degree.size} coefficients of band limit {grid.L}: got {u0.shape}"
            )
        mass = grid.mass(u0)
        if abs(mass - 1) > MASS_TOL:
            raise ValueError(
                f"the initial density must have mass 1 (|mass - 1| <= {MASS_TOL:g}): got {mass:.8g}; "
                "divide the coefficients by grid.mass(u0)"
            )
        self.band_tol = band_tol
        self.band_min = check_band_limit(grid.L, self._effective(self.D, t0)[0], model.beta, d, band_tol)
        self.u, self.t, self.t0, self.step_index = u0.copy(), float(t0), float(t0), 0
        self.ledger_integral, self.jumps = 0.0, 0.0
        self.noise = BrownianSource(int(seed), 1, (self.H, d, d))
        self._op: KernelOperator | None = None
        self.quadrature = self._choose_quadrature(quadrature, coef_tol, t0)
        self._fe: DensityField | None = None
        fe = self._current()
        self.E0 = fe.energy
        cfl = self.cfl(fe)
        if cfl > CFL_MAX:
            vmax = float(np.linalg.norm(fe.velocity, axis=1).max())
            raise ValueError(
                f"dt = {dt:g} is beyond the explicit RK4 stability limit: CFL = dt * max|v| * L = "
                f"{cfl:.3g} > {CFL_MAX} (max|v| = {vmax:.3g}, L = {grid.L}); use dt <= "
                f"{CFL_MAX / (vmax * grid.L):.3g}"
            )
        self._warned: set[str] = set()

    # -- field ------------------------------------------------------------------------------------
    def _choose_quadrature(self, quadrature: str, coef_tol, t0: float) -> str:
        """Resolve ``auto`` and build the coefficient matrices when that method is chosen."""
        if quadrature in ("numba", "numpy"):
            return quadrature
        m, g = self.model, self.grid
        why = None
        if g.d != 3:
            why = "it runs on S^2 only (on S^1 use quadrature='numba')"
        elif not isinstance(m.weights, Constant) or m.layer_scaling is not None:
            why = (
                f"it needs heads constant in time (Constant weights, no layer scaling): got weights "
                f"{type(m.weights).__name__}, layer_scaling = {m.layer_scaling!r}"
            )
        if not (isinstance(coef_tol, (int, float)) and not isinstance(coef_tol, bool) and 0 < coef_tol < 1):
            raise ValueError(f"coef_tol must lie in (0, 1): got {coef_tol!r}; the default is {COEF_TOL:g}")
        Deff, _ = self._effective(self.D, t0)
        if why is None:
            Lp = coefficient_band(g.L, Deff, m.beta, coef_tol)
            sym = all(np.array_equal(D, D.T) for D in Deff)
            size = estimated_bytes(g, Lp, self.H, sym)
            if quadrature == "auto" and size > COEF_MAX_BYTES:
                why = f"its matrices would take {size / 2**20:.0f} MiB > {COEF_MAX_BYTES / 2**20:.0f} MiB"
        if why is not None:
            if quadrature == "coefficients":
                raise ValueError(f"quadrature='coefficients' does not apply: {why}; use quadrature='numba'")
            return "numba"
        self._op = KernelOperator(g, Deff, m.beta, Lp)
        return "coefficients"

    def _effective(self, D: torch.Tensor, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(c(t) D, d/dt[c(t) D]) as (H, d, d) arrays: the heads the kernel sees and their rate."""
        c = self.model.head_scale(t, self.H)
        cdot = self.model.head_scale_rate(t, self.H)
        f = self.model.weights.drift(D, t)
        Dn = D[0].numpy()
        return c * Dn, cdot * Dn + c * f[0].numpy()

    def _field(
        self, u_coef: np.ndarray, D: torch.Tensor, t: float, u: np.ndarray | None = None
    ) -> DensityField:
        """The field of the density with coefficients ``u_coef`` (``u``: its grid values, if at hand)."""
        Deff, Ddot = self._effective(D, t)
        u = self.grid.synthesis(u_coef) if u is None else u
        op = self._op
        if op is not None and np.array_equal(Deff, op.heads) and not Ddot.any():
            return op.field(u_coef, u, attention=self.model.attention, sign=self.model.sign)
        return density_field(
            self.grid.points,
            self.grid.weights,
            u,
            Deff,
            beta=self.model.beta,
            attention=self.model.attention,
            sign=self.model.sign,
            heads_dot=Ddot,
            kernel=self.kernel,
            quadrature="numpy" if self.quadrature == "numpy" else "numba",
        )

    def _rhs(self, u_coef: np.ndarray, D: torch.Tensor, t: float, fe: DensityField | None = None):
        """(transport part of du/dt in coefficients, dD/dt, dE/dt) at one stage."""
        u = self.grid.synthesis(u_coef)
        fe = self._field(u_coef, D, t, u) if fe is None else fe
        if fe.tangent is not None:  # components on (e_theta, e_phi) at hand: no projection
            du = -self.grid.divergence_components(u * fe.tangent)
        else:
            du = -self.grid.divergence(u[:, None] * fe.velocity)
        rate = fe.token_rate + fe.heads_rate
        if self.eps > 0:
            lap_u = self.grid.synthesis(self.grid.laplacian * u_coef)
            rate += self.eps * self.grid.integrate(fe.phi * lap_u)
        return du, self.model.weights.drift(D, t), rate

    def _current(self) -> DensityField:
        if self._fe is None:
            self._fe = self._field(self.u, self.D, self.t)
        return self._fe

    def cfl(self, fe: DensityField | None = None) -> float:
        """dt * max|v| * L at the current state."""
        fe = self._current() if fe is None else fe
        return float(self.dt * np.linalg.norm(fe.velocity, axis=1).max() * self.grid.L)

    def energy(self, u_coef: np.ndarray, D: torch.Tensor, t: float) -> float:
        """E[u] with heads D at time t."""
        return self._field(u_coef, D, t).energy

    # -- stepping ---------------------------------------------------------------------------------
    def step(self) -> None:
        """One Lawson-RK4 step of size dt (module docstring)."""
        h, t, u, D = self.dt, self.t, self.u, self.D
        lam = self.eps * self.grid.laplacian
        e_half, e_full = np.exp(lam * h / 2), np.exp(lam * h)
        k1, f1, r1 = self._rhs(u, D, t, self._current())
        k2, f2, r2 = self._rhs(e_half * (u + h / 2 * k1), D + h / 2 * f1, t + h / 2)
        k3, f3, r3 = self._rhs(e_half * u + h / 2 * k2, D + h / 2 * f2, t + h / 2)
        k4, f4, r4 = self._rhs(e_full * u + h * e_half * k3, D + h * f3, t + h)
        u_new = e_full * u + h / 6 * (e_full * k1 + 2 * e_half * (k2 + k3) + k4)
        D_new = D + h / 6 * (f1 + 2 * f2 + 2 * f3 + f4)
        self.ledger_integral += h / 6 * (r1 + 2 * r2 + 2 * r3 + r4)
        t_new = self.t0 + (self.step_index + 1) * h
        w = self.model.weights
        D_jump = D_new
        if w.stochastic:
            g = torch.as_tensor(w.diffusion(D, t), dtype=torch.float64)  # Ito: g at the step start
            D_jump = D_new + noise_scale(g, h) * noise_matrix(self.noise.next(), w.noise)  # eq. (10)
        imposed = w.jump(D_jump, t_new)
        if imposed is not None:
            D_jump = imposed.to(torch.float64)
        if D_jump is not D_new and not torch.equal(D_jump, D_new):
            self.jumps += self.energy(u_new, D_jump, t_new) - self.energy(u_new, D_new, t_new)
        if not (np.isfinite(u_new).all() and torch.isfinite(D_jump).all()):
            raise FloatingPointError(
                f"the density became non-finite at step {self.step_index + 1} (t = {t_new:g}): reduce dt "
                f"(got {h:g}) or raise the band limit (L = {self.grid.L})"
            )
        self.u, self.D, self.t = u_new, D_jump.clone(), t_new
        self.step_index += 1
        self._fe = None

    # -- records ----------------------------------------------------------------------------------
    def monitors(self) -> dict[str, float]:
        """Mass, positivity, ledger, CFL and band-limit need at the current state."""
        fe = self._current()
        _, fw, fv = self.grid.fine(self.u, 2)
        Deff, _ = self._effective(self.D, self.t)
        r = kernel_radius(Deff, self.model.beta)
        need = minimum_band_limit(r, self.grid.d, self.band_tol)
        out = {
            "energy": fe.energy,
            "ledger_integral": self.ledger_integral,
            "jumps": self.jumps,
            "residual": fe.energy - self.E0 - self.ledger_integral - self.jumps,
            "dissipation": fe.token_rate,
            "heads_rate": fe.heads_rate,
            "mass": self.grid.mass(self.u),
            "min_density": float(fv.min()),
            "negative_mass": float(np.dot(fw, np.minimum(fv, 0.0))),
            "cfl": self.cfl(fe),
            "band_needed": float(need),
        }
        self._warn(out)
        return out

    def _warn(self, m: dict[str, float]) -> None:
        if m["cfl"] > CFL_MAX and "cfl" not in self._warned:
            self._warned.add("cfl")
            warnings.warn(
                f"t = {self.t:g}: CFL = {m['cfl']:.3g} > {CFL_MAX}: the explicit step is beyond its "
                "stability limit (the density has sharpened or the heads have grown); reduce dt",
                RuntimeWarning,
                stacklevel=3,
            )
        if m["band_needed"] > self.grid.L and "band" not in self._warned:
            self._warned.add("band")
            warnings.warn(
                f"t = {self.t:g}: the heads have grown to need band limit {int(m['band_needed'])} > L = "
                f"{self.grid.L} (band rule of attnflow.pde.band); raise L",
                RuntimeWarning,
                stacklevel=3,
            )

    def state_dict(self) -> dict:
        """Everything needed to continue identically."""
        return {
            "u": self.u.copy(),
            "D": self.D.clone(),
            "t": self.t,
            "step": self.step_index,
            "ledger_integral": self.ledger_integral,
            "jumps": self.jumps,
            "E0": self.E0,
            "rng": self.noise.state_dict(),
        }

    def load_state_dict(self, sd: dict) -> None:
        """Restore a :meth:`state_dict` of a solver of the same grid and heads' shape."""
        if np.shape(sd["u"]) != self.u.shape or tuple(sd["D"].shape) != tuple(self.D.shape):
            raise ValueError(
                f"checkpoint shapes {np.shape(sd['u'])}, {tuple(sd['D'].shape)} do not match this solver "
                f"{self.u.shape}, {tuple(self.D.shape)}"
            )
        self.u = np.asarray(sd["u"], dtype=np.complex128).copy()
        self.D = sd["D"].clone().to(torch.float64)
        self.t, self.step_index = float(sd["t"]), int(sd["step"])
        self.ledger_integral, self.jumps, self.E0 = (
            float(sd["ledger_integral"]),
            float(sd["jumps"]),
            float(sd["E0"]),
        )
        self.noise.load_state_dict(sd["rng"])
        self._fe = None

    def attrs(self) -> dict:
        """Run attributes stored with the dataset."""
        m = self.model
        return {
            "solver": "transformer_pde",
            "manifold": f"S^{self.grid.d - 1}",
            "band_limit": self.grid.L,
            "band_min": self.band_min,
            "band_tol": self.band_tol,
            "n_nodes": int(self.grid.points.shape[0]),
            "time_stepping": "Lawson (integrating-factor) RK4",
            "kernel": self.kernel,
            "quadrature": self.quadrature,
            "coefficient_band": -1 if self._op is None else self._op.out_band,
            "dt": self.dt,
            "eps": self.eps,
            "direction": m.direction,
            "attention": m.attention,
            "beta": float(m.beta),
            "H": self.H,
        }


def snapshot(solver: DensitySolver) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, dict]:
    """One record: (t, coefficients, density on the grid nodes, heads, monitors)."""
    return (
        solver.t,
        solver.u.copy(),
        solver.grid.synthesis(solver.u),
        solver.D[0].numpy().copy(),
        solver.monitors(),
    )


def records_to_dataset(records: list, solver: DensitySolver) -> xr.Dataset:
    """An xarray Dataset of recorded states: ``density`` (time, node) on the grid nodes, ``coefficients``
    (time, coef, part) the coefficients (real, imaginary), ``heads`` (time, head, row, col) and the
    monitors (time)."""
    g = solver.grid
    raw = np.array([r[0] for r in records], dtype=np.float64)
    steps = np.rint((raw - solver.t0) / solver.dt)
    times = grid_times(raw, steps, solver.t0, solver.dt)  # exact decimals: ds.sel(time=9.2) works
    data = {
        "density": (("time", "node"), np.stack([r[2] for r in records])),
        "coefficients": (
            ("time", "coef", "part"),
            np.stack([np.stack([r[1].real, r[1].imag], -1) for r in records]),
        ),
        "heads": (("time", "head", "row", "col"), np.stack([r[3] for r in records])),
        "nodes": (("node", "dim"), g.points),
        "weights": (("node",), g.weights),
        "degree": (("coef",), g.degree),
    }
    for key in records[0][4]:
        data[key] = (("time",), np.array([r[4][key] for r in records]))
    return xr.Dataset(data, coords={"time": times}, attrs=solver.attrs())


def solve_density(solver: DensitySolver, n_steps: int, *, record_every: int = 1, progress=None) -> xr.Dataset:
    """Take ``n_steps`` steps, recording the initial state, every ``record_every``-th step and the last.

    Returns
    -------
    xarray.Dataset
        See :func:`records_to_dataset`.
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 0:
        raise ValueError(f"n_steps must be an integer >= 0: got {n_steps!r}")
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1: got {record_every!r}")
    recs = [snapshot(solver)]
    for k in range(1, n_steps + 1):
        solver.step()
        if k % record_every == 0 or k == n_steps:
            recs.append(snapshot(solver))
        if progress is not None:
            progress(1)
    return records_to_dataset(recs, solver)


def make_solver(model: TransformerModel, u0, heads, *, L: int, d: int, dt: float, **kw) -> DensitySolver:
    """A :class:`DensitySolver` on the grid of band limit ``L`` on S^{d-1}."""
    return DensitySolver(model, u0, heads, grid=make_grid(d, L), dt=dt, **kw)
