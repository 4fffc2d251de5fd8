"""The state of one batch of paths and its step: :class:`Simulator` (checkpointable, resumable bit for bit).

Each step k (arXiv 2605.18870 Sec. 6; NOTES.md §1-3):

1. evaluate the field at (x_k, D_k, t_k) once, with the energy-ledger pieces and the ledger rates
   (cached: a record at step k and the step from k share them);
2. draw the weight noise g sqrt(dt) xi from the Brownian source (xi = (Z+Z^T)/2 or Z);
3. advance tokens and heads with the integrator (drift by its Runge-Kutta rule, noise increment by
   Euler-Maruyama), then apply any layer jump;
4. with ``model.token_noise = eps > 0``, move every token by a geodesic random walk step
   x <- exp_x(sqrt(2 eps dt) P(x) z), z standard normal from the per-path ``token_noise`` streams: the
   Brownian motion with generator eps Delta on the sphere (weak order 1; Lie-Trotter splitting with the
   drift). The energy ledger (147) has no token-noise term, so its residual then also holds the
   token-noise contribution (see :func:`attnflow.observables.free_energy` for E - eps S);
5. add the step's left Riemann terms to the :class:`~attnflow.simulation.ledger.EnergyLedger`.

The loop over steps lives in :func:`attnflow.simulation.integrate`.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import xarray as xr

from ..dynamics import numba_backend
from ..dynamics.assembly import FieldEval, energy_from_lse, martingale_increment
from ..dynamics.field import model_ledger_rates
from ..dynamics.system import VectorField
from ..integrators import get_integrator
from ..integrators.brownian import geodesic_random_walk
from ..model import heads as heads_mod
from ..model.transformer import TransformerModel
from ..model.weights import noise_matrix, noise_scale
from ..random import BrownianSource
from .driver import CallbackSink, integrate
from .ledger import EnergyLedger
from .spec import SimulationSpec, check_dt, check_t0

__all__ = ["DTYPES", "LOOPS", "NonFiniteStateError", "Record", "Simulator"]

DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: the step loops of a Simulator (see its ``loop`` parameter)
LOOPS = ("auto", "fused", "python")


class NonFiniteStateError(FloatingPointError):
    """The state became nan/inf. ``partial`` holds the dataset recorded up to then (or None)."""

    def __init__(self, message: str, partial: xr.Dataset | None = None):
        super().__init__(message)
        self.partial = partial


@dataclass
class Record:
    """One recorded time: tokens, optionally heads, and the ledger scalars (each shape [P])."""

    step: int
    time: float
    x: torch.Tensor
    D: torch.Tensor | None
    scalars: dict[str, torch.Tensor] = field(default_factory=dict)
    #: cumulative solver statistics of the integrator (adaptive substeps, JKO iterations); may be empty
    stats: dict[str, float] = field(default_factory=dict)


def _dtype(dtype) -> torch.dtype:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
        return DTYPES[dtype]
    if dtype not in DTYPES.values():
        raise ValueError(f"dtype must be torch.float32 or torch.float64: got {dtype!r}")
    return dtype


class Simulator:
    """Stateful integrator of one batch of paths; can be checkpointed and resumed bit for bit.

    Parameters
    ----------
    model : TransformerModel
    x0 : Tensor, shape=[P, n, d] (or [n, d] with ``paths``)
        Initial tokens (points of the model's geometry).
    heads : Tensor, shape=[P, H, d, d], [H, d, d] or [d, d]
        Initial score matrices D_h(0).
    dt : float
        Time step (> 0).
    t0 : float
        Initial time.
    values : Tensor or None
        Fixed value matrices V_h (same shapes as ``heads``); None: V = D (the paper).
    integrator : str or Integrator
        A name of :data:`attnflow.integrators.INTEGRATORS`: ``euler`` (projected, the authors' code),
        ``euler_printed``, ``heun``, ``rk4``, the Lie-group methods ``lie_euler``, ``rkmk2``, ``rkmk4``,
        ``adaptive_rkmk2``, the minimizing movement ``jko``; or an instance.
    integrator_options : dict or None
        Options of the named integrator (``tol``, ``max_iter``, ``max_substeps``).
    seed : int
        Seed of the weight-noise streams (one per path).
    ledger : bool
        Compute the energy ledger (costs about one extra pass over the pairs).
    dtype : {"float64", "float32"} or torch dtype
    device : str or torch.device
    first_path : int
        Global index of the first path (a batch of paths split across workers keeps its streams).
    paths : int or None
        Number of paths when ``x0`` is one cloud (n, d).
    noise_refine : int
        Fine Brownian draws per step (:class:`attnflow.random.BrownianSource`): with m, this run sees
        the Brownian path of a run at dt/m with the same seed.
    loop : {"auto", "fused", "python"}
        ``auto``: the compiled multi-step loop (:mod:`attnflow.simulation.fused`) when it can run this
        simulation (softmax attention on the sphere, CPU, the numba kernel, ``euler``, a built-in weight
        process), else the Python loop; ``fused`` requires the compiled loop (ValueError naming why it
        cannot run); ``python``: the step-by-step loop through the integrator objects. ``loop_reason`` says
        why the compiled loop does not run (None when it does).

    Warns
    -----
    RuntimeWarning
        When the weights are stochastic and the integrator's deterministic order exceeds the strong
        order the run really has (the extra stages buy nothing).
    """

    def __init__(
        self,
        model: TransformerModel,
        x0,
        heads,
        *,
        dt: float,
        t0: float = 0.0,
        values=None,
        integrator: str = "euler",
        integrator_options: dict | None = None,
        seed: int = 0,
        ledger: bool = True,
        dtype="float64",
        device="cpu",
        first_path: int = 0,
        paths: int | None = None,
        noise_refine: int = 1,
        loop: str = "auto",
    ):
        if not isinstance(model, TransformerModel):
            raise ValueError(f"model must be a TransformerModel: got {type(model).__name__}")
        self.model = model
        self.dtype = _dtype(dtype)
        self.device = torch.device(device)
        self.dt = check_dt(dt)
        t0 = check_t0(t0)
        x = torch.as_tensor(x0)
        if x.ndim == 2:
            x = x.unsqueeze(0).expand(paths or 1, -1, -1)
        if x.ndim != 3:
            raise ValueError(f"x0 must have shape (P, n, d) or (n, d): got {tuple(x.shape)}")
        if paths is not None and x.shape[0] != paths:
            raise ValueError(f"x0 has {x.shape[0]} paths but paths={paths}")
        P, n, d = x.shape
        if d < 2:
            raise ValueError(f"token dimension d must be >= 2: got d={d}")
        x = x.to(dtype=self.dtype, device=self.device).clone()
        if not torch.isfinite(x).all():
            raise ValueError("x0 must be finite: found non-finite entries")
        model.geometry.check(x, "x0")
        D = heads_mod.from_array(heads, paths=P, d=d, dtype=self.dtype, device=self.device)
        H = D.shape[1]
        V = None
        if values is not None:
            V = heads_mod.from_array(
                values, paths=P, d=d, dtype=self.dtype, device=self.device, name="values"
            )
            if V.shape[1] != H:
                raise ValueError(f"values have {V.shape[1]} heads but heads have {H}")
        model.weights.validate(H, d)
        model.weights.check_contract(D, float(t0))
        self.integrator = get_integrator(integrator, **(integrator_options or {}))
        w = model.weights
        self.order = self.integrator.effective_order(w.stochastic, w.additive)
        eps = float(model.token_noise)
        if eps > 0:  # the geodesic random walk: weak order 1, strong order 1/2
            self.order = min(self.order, 0.5)
        # projected Euler reaches the same strong order
        if (w.stochastic or eps > 0) and self.integrator.order > 1:
            why = " and ".join(
                ([f"the stochastic weights of {type(w).__name__}"] if w.stochastic else [])
                + ([f"token_noise = {eps:g}"] if eps > 0 else [])
            )
            warnings.warn(
                f"integrator {self.integrator.name!r} has deterministic order {self.integrator.order}, but "
                f"with {why} the run has strong order {self.order:g} (the noise enters by its increment): "
                "the extra stages buy no accuracy; use integrator='euler' for the same order at lower cost",
                RuntimeWarning,
                stacklevel=2,
            )
        self.field = VectorField(model, V)
        self.ledger_on = bool(ledger)
        self.seed = int(seed)
        self.first_path = int(first_path)
        self.noise = BrownianSource(
            self.seed, P, (H, d, d), self.dtype, self.device, first=self.first_path, refine=noise_refine
        )
        self.token_noise = (
            BrownianSource(
                self.seed,
                P,
                (n, d),
                self.dtype,
                self.device,
                first=self.first_path,
                refine=noise_refine,
                purpose="token_noise",
            )
            if eps > 0
            else None
        )
        self.P, self.n, self.d, self.H = P, n, d, H
        self.x, self.D, self.t, self.step_index = x, D, float(t0), 0
        self.t0 = float(t0)
        self.ledger = EnergyLedger(P, model.sign, float(model.beta), self.device)
        self._fe: FieldEval | None = None
        self._rates: tuple[torch.Tensor, torch.Tensor] | None = None
        if loop not in LOOPS:
            raise ValueError(f"unknown loop {loop!r}; valid: {', '.join(LOOPS)}")
        if loop == "python":
            why = "loop='python' was asked for"
        elif not numba_backend.available():
            why = "numba is not installed (the fused loop is compiled with it)"
        else:
            from . import fused  # imports numba: only for runs that may take the compiled loop

            why = fused.plan(self)
        if loop == "fused" and why is not None:
            raise ValueError(
                f"loop='fused' cannot run this simulation: {why}; use loop='auto' (the Python loop then "
                "runs it)"
            )
        self._fused = fused.FusedLoop(self) if why is None else None
        self.loop_reason: str | None = why

    @classmethod
    def from_spec(cls, spec: SimulationSpec) -> Simulator:
        """The Simulator of a :class:`attnflow.simulation.SimulationSpec` (at its initial state)."""
        return cls(spec.model, spec.x0, spec.heads, **spec.simulator_options())

    @property
    def loop(self) -> str:
        """``"fused"`` (the compiled multi-step loop runs the steps) or ``"python"``."""
        return "fused" if self._fused is not None else "python"

    @property
    def E0(self) -> torch.Tensor | None:
        """The initial energy per path (None before the first evaluation or without the ledger)."""
        return self.ledger.E0

    @property
    def evaluation(self) -> FieldEval | None:
        """The field at the current state if it was evaluated already (None otherwise)."""
        return self._fe

    # -- state -----------------------------------------------------------------------------------
    def take_state(
        self,
        x: torch.Tensor | None,
        D: torch.Tensor | None,
        steps: int,
        evaluation: FieldEval | None,
        rates: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        """Take the state reached by ``steps`` steps taken outside this object (the compiled loop of
        :mod:`attnflow.simulation.fused`): tokens ``x`` and heads ``D`` (None with ``steps = 0``), and the
        field at that state with its ledger rates (None: evaluated on demand)."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"take_state takes a number of steps >= 0: got {steps!r}")
        if steps > 0:
            if x is None or D is None:
                raise ValueError(f"take_state after {steps} steps needs the new tokens and heads: got None")
            if tuple(x.shape) != tuple(self.x.shape) or tuple(D.shape) != tuple(self.D.shape):
                raise ValueError(
                    f"take_state: shapes {tuple(x.shape)}, {tuple(D.shape)} do not match this run "
                    f"{tuple(self.x.shape)}, {tuple(self.D.shape)}"
                )
            self.x, self.D = x, D
            self.step_index += steps
            self.t = self.t0 + self.step_index * self.dt
        self._fe, self._rates = evaluation, rates

    def _current(self) -> tuple[FieldEval, tuple[torch.Tensor, torch.Tensor] | None]:
        """The field at the current state and its ledger rates, each computed once per state."""
        if self._fe is None and self._fused is not None:
            block = self._fused.run(0)  # evaluates the current state (sets _fe and _rates)
            if block.huge:
                self._leave_fused()
            elif self.ledger_on:
                self.ledger.start(self._fe)
        if self._fe is None:
            fe = self.field(
                self.x,
                self.D,
                self.t,
                ledger=self.ledger_on,
                raw=self.integrator.needs_raw,
                ito=self.model.weights.stochastic,  # g = 0: no Ito sums (their rate is exactly 0)
            )
            self._fe, self._rates = fe, None
            if self.ledger_on:
                self.ledger.start(fe)
                w = self.model.weights
                self._rates = model_ledger_rates(
                    self.model, fe, self.D, self.t, w.drift(self.D, self.t), w.diffusion(self.D, self.t)
                )
        return self._fe, self._rates

    def state_dict(self) -> dict:
        """Everything needed to continue identically (tokens, heads, time, RNG states, ledger sums)."""
        self._current()
        led = self.ledger.state_dict()
        return {
            "x": self.x.cpu().clone(),
            "D": self.D.cpu().clone(),
            "t": self.t,
            "step": self.step_index,
            "rng": self.noise.state_dict(),
            **({"rng_tokens": self.token_noise.state_dict()} if self.token_noise is not None else {}),
            "integrator_state": copy.deepcopy(vars(self.integrator)),
            "loop": self.loop,
            "loop_reason": self.loop_reason,
            "acc": led["acc"],
            "E0": led["E0"],
        }

    def load_state_dict(self, sd: dict) -> None:
        """Restore a :meth:`state_dict` (same model, shapes and seed)."""
        if tuple(sd["x"].shape) != (self.P, self.n, self.d) or tuple(sd["D"].shape) != tuple(self.D.shape):
            raise ValueError(
                f"checkpoint shapes {tuple(sd['x'].shape)}, {tuple(sd['D'].shape)} do not match this run "
                f"{(self.P, self.n, self.d)}, {tuple(self.D.shape)}"
            )
        self.x = sd["x"].to(self.device, self.dtype)
        self.D = sd["D"].to(self.device, self.dtype)
        self.t, self.step_index = float(sd["t"]), int(sd["step"])
        self.noise.load_state_dict(sd["rng"])
        if self.token_noise is not None and "rng_tokens" in sd:
            self.token_noise.load_state_dict(sd["rng_tokens"])
        vars(self.integrator).update(copy.deepcopy(sd.get("integrator_state", {})))
        self.ledger.load_state_dict({"acc": sd["acc"], "E0": sd["E0"]}, self.device)
        self._fe = self._rates = None
        if sd.get("loop") == "python" and self._fused is not None:
            # the saved run had handed over to the Python loop (scores beyond the kernel's range): go on there
            self._leave_fused(sd.get("loop_reason"))

    # -- stepping --------------------------------------------------------------------------------
    def record(self, *, with_heads: bool = False) -> Record:
        """Snapshot of the current state with the ledger scalars (each of shape [P])."""
        # without the ledger a record needs no field: evaluating it here cost one evaluation per run (the
        # final state's, which no step uses); a step evaluates its own state when it comes to it
        sc = self.ledger.scalars(*self._current(), self.t) if self.ledger_on else {}
        return Record(
            step=self.step_index,
            time=self.t,
            x=self.x.detach().cpu().clone(),
            D=self.D.detach().cpu().clone() if with_heads else None,
            scalars=sc,
            stats=self.integrator.stats(),
        )

    def step(self, z: torch.Tensor | None = None) -> None:
        """Advance one step of size dt.

        Parameters
        ----------
        z : Tensor or None, shape=[P, H, d, d]
            Standard normal draws to use for this step's weight noise instead of the Brownian source
            (which is then not advanced). Ignored for deterministic weight processes.
        """
        if z is not None:
            self._check_z(z)
        if self._fused is not None:
            self.advance(1, z=z)
        else:
            self._python_step(z)

    def block_steps(self) -> int:
        """Steps for one call of :meth:`advance` that keep it near
        :data:`attnflow.simulation.fused.BLOCK_SECONDS` (1 for the Python loop)."""
        return self._fused.block_steps() if self._fused is not None else 1

    def advance(self, k: int, *, z: torch.Tensor | None = None) -> None:
        """Take ``k`` steps: with the compiled loop in as few calls as layer jumps allow, else one by one.

        The result is the same, bit for bit, as ``k`` calls of :meth:`step` (``z``: as there, ``k = 1``).
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"advance takes a number of steps k >= 0: got {k!r}")
        if z is not None:
            if k != 1:
                raise ValueError(f"z gives the draws of one step: advance(1, z=z), not advance({k}, z=z)")
            self._check_z(z)
        done = 0
        while done < k:
            if self._fused is None:
                self._python_step(z)
                done += 1
                continue
            kb = self._fused.steps_to_jump(k - done)
            before = self.step_index
            block = self._fused.run(kb, z=z)
            done += block.steps
            if block.nonfinite:
                t_new = self.t0 + (self.step_index + 1) * self.dt
                self._raise_non_finite(block.x_bad, block.D_bad, t_new)
            if self._fused.jumps and self.step_index > before:
                self._fused_jump()  # a block ends at a jump, also when its end left the kernel's range
            if block.huge:
                self._leave_fused()

    def _check_z(self, z: torch.Tensor) -> None:
        """``z`` (the draws of one step) must have the heads' shape (P, H, d, d)."""
        if self.model.weights.stochastic and tuple(z.shape) != (self.P, self.H, self.d, self.d):
            raise ValueError(
                f"z must have shape (P, H, d, d) = {(self.P, self.H, self.d, self.d)}: got {tuple(z.shape)}"
            )

    def _leave_fused(self, reason: str | None = None) -> None:
        """Scores beyond the kernel's range: the Python loop (and the dispatcher) take over from here on,
        also in a run resumed from a later checkpoint (``state_dict`` keeps the loop)."""
        self._fused = None
        bound = numba_backend.score_bound(
            self.x, self.D, self.model.beta, self.model.head_scale(self.t, self.H)
        )
        self.loop_reason = reason or (
            f"scores up to {bound:.3g} left the kernel's range {numba_backend.SCORE_MAX:g} at step "
            f"{self.step_index}: the Python loop took over"
        )

    def _fused_jump(self) -> None:
        """The layer jump after a compiled block (piecewise-constant weights; the Python loop's rule)."""
        w = self.model.weights
        jump = w.jump(self.D, self.t)
        if jump is None or torch.equal(jump, self.D):
            return
        if self.ledger_on:
            self.ledger.add_jump(self._jump_energy(self.x, self.D, jump, self.t))
        self.D = jump.clone()
        self._fe = self._rates = None

    def _jump_energy(self, x: torch.Tensor, D: torch.Tensor, jump: torch.Tensor, t: float) -> torch.Tensor:
        """E(x, jump) - E(x, D): the energy jump of a layer boundary (booked apart in the ledger)."""
        before = self.field(x, D, t, ledger=False).lse
        after = self.field(x, jump, t, ledger=False).lse
        return energy_from_lse(after, self.model.beta) - energy_from_lse(before, self.model.beta)

    def _python_step(self, z: torch.Tensor | None = None) -> None:
        """One step through the integrator object (the Python loop)."""
        fe, rates = self._current()
        w = self.model.weights
        dt, t = self.dt, self.t
        noise = None
        if w.stochastic:
            if z is None:
                z = self.noise.next()
            else:
                z = z.to(dtype=self.dtype, device=self.device)
            g = w.diffusion(self.D, t)
            noise = noise_scale(torch.as_tensor(g, dtype=self.dtype, device=self.device), dt) * noise_matrix(
                z, w.noise
            )
        x_new, D_new = self.integrator.step(self.field, self.x, self.D, t, dt, fe, noise)
        jump = w.jump(D_new, t + dt)
        energy_jump = None
        if jump is not None:
            if self.ledger_on and not torch.equal(jump, D_new):
                energy_jump = self._jump_energy(x_new, D_new, jump, t + dt)
            D_new = jump.clone()
        if self.token_noise is not None:
            x_new = self.brownian_step(x_new)
        if not (torch.isfinite(x_new).all() and torch.isfinite(D_new).all()):
            self._raise_non_finite(x_new, D_new, t + dt)  # before the ledger moves: it stays at step k
        if self.ledger_on:
            mart = martingale_increment(fe, noise, self.model.head_scale(t, self.H))
            self.ledger.add_step(fe, rates, mart, dt, t=t, step=self.step_index)
            if energy_jump is not None:
                self.ledger.add_jump(energy_jump)
        self.x, self.D = x_new, D_new
        self.t = self.t0 + (self.step_index + 1) * dt
        self.step_index += 1
        self._fe = self._rates = None

    def brownian_step(self, x: torch.Tensor) -> torch.Tensor:
        """One geodesic random-walk step of the token noise: exp_x(sqrt(2 eps dt) P(x) z), z ~ N(0, I)
        (:func:`attnflow.integrators.brownian.geodesic_random_walk`, with the next draws of the per-path
        ``token_noise`` streams).

        The compiled loop (:mod:`attnflow.simulation.fused`) compiles the same formulas (the scale
        sqrt(2 eps dt), the tangent projection, the exp map's great-circle point and the retraction, from
        their homes), held to this by ``tests/test_fused_loop.py``."""
        z = self.token_noise.next()
        return geodesic_random_walk(self.model.geometry, x, z, self.model.token_noise, self.dt)

    def _raise_non_finite(self, x_new: torch.Tensor, D_new: torch.Tensor, t_new: float) -> None:
        bad_x = (~torch.isfinite(x_new)).flatten(1).any(1)
        bad = (bad_x | (~torch.isfinite(D_new)).flatten(1).any(1)).nonzero().flatten().tolist()
        hint = (
            "; attention='usa' uses exp(beta <x, D y>) without normalisation, which overflows once "
            "beta * <x_i, D x_j> exceeds ~88 (float32) or ~709 (float64)"
            if self.model.attention == "usa"
            else ""
        )
        raise NonFiniteStateError(
            f"the state became non-finite at step {self.step_index + 1} (t = {t_new:g}) in paths "
            f"{[p + self.first_path for p in bad]}: reduce dt (got {self.dt:g}) or beta "
            f"(got {self.model.beta:g}), or use dtype='float64'{hint}"
        )

    def run(
        self,
        n_steps: int,
        *,
        record_every: int = 1,
        on_record: Callable[[Record], None] | None = None,
        with_heads: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Take ``n_steps`` steps through :func:`attnflow.simulation.integrate`, calling ``on_record``
        whenever the global step index is a multiple of ``record_every`` (no initial or final record:
        the caller records those itself)."""
        integrate(
            self,
            n_steps,
            record_every=record_every,
            sink=CallbackSink(on_record),
            with_heads=with_heads,
            progress=progress,
            endpoints=False,
        )
