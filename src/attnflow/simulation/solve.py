"""The one-call entry point :func:`simulate`: a Simulator, the driver and the in-memory sink."""

from __future__ import annotations

from collections.abc import Callable

import xarray as xr

from ..model.transformer import TransformerModel
from .dataset import records_to_dataset, run_attrs
from .driver import MemorySink, integrate
from .progress import ProgressBar
from .simulator import NonFiniteStateError, Simulator
from .spec import SimulationSpec, n_steps_for

__all__ = ["simulate", "simulate_spec"]


def simulate(
    model: TransformerModel,
    x0,
    heads,
    *,
    t1: float,
    dt: float,
    t0: float = 0.0,
    values=None,
    integrator: str = "euler",
    integrator_options: dict | None = None,
    seed: int = 0,
    record_every: int = 1,
    positions: bool = True,
    record_heads: bool = False,
    ledger: bool = True,
    dtype="float64",
    device="cpu",
    paths: int | None = None,
    loop: str = "auto",
    noise_refine: int = 1,
    progress: bool | Callable[[int], None] | None = None,
) -> xr.Dataset:
    """Integrate the multi-head attention dynamics and return a labelled dataset.

    Parameters
    ----------
    model : TransformerModel
        Attention kind, beta, direction (ascent/descent), geometry and weight process.
    x0 : array-like, shape=[P, n, d] or [n, d]
        Initial tokens (see :mod:`attnflow.model.tokens`).
    heads : array-like, shape=[P, H, d, d], [H, d, d] or [d, d]
        Initial heads D_h(0) (see :mod:`attnflow.model.heads`).
    t1, dt : float
        Final time and step; (t1 - t0)/dt must be a whole number.
    values : array-like or None
        Fixed value matrices V_h; None uses V = D as in the paper.
    integrator : str or Integrator
        A name of :data:`attnflow.integrators.INTEGRATORS` (``euler``, ``euler_printed``, ``heun``, ``rk4``,
        ``lie_euler``, ``rkmk2``, ``rkmk4``, ``adaptive_rkmk2``, ``jko``) or an instance such as
        ``JKO(tol=1e-9)``; its cumulative statistics become ``integrator_*`` variables.
    integrator_options : dict or None
        Options of a named integrator, as the config's ``integrator.tol`` / ``integrator.max_iter``:
        ``{"tol": 1e-9, "max_iter": 500}`` for ``jko``, ``{"tol": 1e-6, "max_substeps": 100}`` for
        ``adaptive_rkmk2`` (:func:`attnflow.integrators.get_integrator`); None for the fixed-step methods.
    seed : int
        Seed of the weight noise (per-path streams, see :mod:`attnflow.random`).
    record_every : int
        Record every k-th step (the initial and final states are always recorded).
    positions, record_heads, ledger : bool
        What to record.
    dtype : {"float64", "float32"}
    device : str
        ``"cpu"`` or ``"cuda"``.
    paths : int or None
        Number of paths when ``x0`` is one cloud (n, d).
    loop : {"auto", "fused", "python"}
        The step loop, as the config's ``integrator.loop``: ``auto`` takes the compiled multi-step loop
        when it can run the simulation, ``fused`` requires it (ValueError naming why it cannot run),
        ``python`` never takes it (:class:`~attnflow.simulation.Simulator`). The loop that ran is the
        dataset's attribute ``loop``.
    noise_refine : int
        Fine Brownian draws summed per step (:class:`attnflow.random.BrownianSource`): with m, this run
        sees the Brownian path of a run at dt/m with the same seed (strong-convergence studies).
    progress : bool, callable or None
        ``True`` draws a progress bar on stderr (steps, rate, time left; :class:`ProgressBar`);
        a callable is called with 1 after every step; ``None`` or ``False``: no progress.

    Returns
    -------
    xarray.Dataset
        ``positions`` (path, time, token, dim), optional ``heads`` (path, time, head, row, col),
        and the ledger scalars (path, time): energy, G2, Ghat2, dtE_drift, dtE_ito, int_dtE, int_G2,
        int_Ghat2, martingale, jumps, residual_paper, residual_exact. Attributes hold the parameters.

    Raises
    ------
    NonFiniteStateError
        If the state becomes non-finite; its ``partial`` attribute holds what was recorded.

    Examples
    --------
    >>> import attnflow as af
    >>> model = af.TransformerModel(direction="ascent", beta=1.0)
    >>> x0 = af.tokens.uniform(2, 16, 3, seed=0)
    >>> ds = af.simulate(model, x0, af.heads.identity(2, 1, 3), t1=1.0, dt=0.1)
    >>> ds.positions.shape
    (2, 11, 16, 3)
    """
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise TypeError(
            "progress must be True (a progress bar on stderr), False/None (none) or a callable taking "
            f"the number of steps done: got {type(progress).__name__} {progress!r}; pass progress=True"
        )
    n_steps = n_steps_for(t0, t1, dt)  # the time grid, checked before anything is built
    sim = Simulator(
        model,
        x0,
        heads,
        dt=dt,
        t0=t0,
        values=values,
        integrator=integrator,
        integrator_options=integrator_options,
        seed=seed,
        ledger=ledger,
        dtype=dtype,
        device=device,
        paths=paths,
        noise_refine=noise_refine,
        loop=loop,
    )
    if progress is True:
        label = f"simulate ({sim.x.shape[0]} paths, n={sim.x.shape[1]})"
        with ProgressBar(n_steps, label, unit="steps", enabled=True) as bar:
            return _run(sim, n_steps, t1, record_every, record_heads, positions, bar)
    return _run(sim, n_steps, t1, record_every, record_heads, positions, progress or None)


def simulate_spec(spec: SimulationSpec, *, progress: Callable[[int], None] | None = None) -> xr.Dataset:
    """:func:`simulate` from a :class:`~attnflow.simulation.SimulationSpec` (what a config builds)."""
    sim = Simulator.from_spec(spec)
    return _run(sim, spec.n_steps, spec.t1, spec.record_every, spec.record_heads, spec.positions, progress)


def _run(sim, n_steps, t1, record_every, record_heads, positions, progress) -> xr.Dataset:
    sink = MemorySink()
    try:
        integrate(
            sim, n_steps, record_every=record_every, sink=sink, with_heads=record_heads, progress=progress
        )
    except NonFiniteStateError as err:
        err.partial = records_to_dataset(
            sink.records, sim, run_attrs(sim, t1, record_every), positions=positions
        )
        raise
    return records_to_dataset(sink.records, sim, run_attrs(sim, t1, record_every), positions=positions)
