"""The sections of a particle experiment config that say how it runs: ``integrator`` (the time grid,
the method and its options, the step loop), ``record``, and the ``device`` check.

``dt`` and ``t1`` are checked by :class:`attnflow.experiments.fields.TimeGrid`, that is by the one
time-grid rule :func:`attnflow.simulation.n_steps_for` that :func:`attnflow.simulate` and
:class:`attnflow.simulation.SimulationSpec` use.
"""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from .. import integrators as integrators_module
from ..simulation.spec import MAX_STEPS
from .fields import Section, TimeGrid
from .sections import one_of

__all__ = ["MAX_STEPS", "IntegratorConfig", "RecordConfig", "check_device"]


class IntegratorConfig(TimeGrid):
    """``integrator: {method, dt, t1, loop}`` (t0 = 0; t1/dt must be a whole number: :func:`n_steps_for`).

    ``loop`` is the step loop of :class:`attnflow.simulation.Simulator`: ``auto`` (the compiled multi-step
    loop when it can run the simulation), ``fused`` (required) or ``python``.
    """

    method: one_of("integrator.method") = "euler"
    dt: float = Field(allow_inf_nan=True)
    t1: float = Field(allow_inf_nan=True)
    tol: float | None = None
    max_iter: int | None = None
    loop: one_of("integrator.loop") = "auto"

    @model_validator(mode="after")
    def _loop(self):
        """``loop: fused`` only with the method the compiled loop runs (the rest is checked at build)."""
        if self.loop == "fused" and self.method != "euler":
            raise ValueError(
                f"integrator.loop: fused runs integrator.method euler only: got method {self.method!r}; use "
                "loop: auto (the Python loop then runs this method) or method: euler"
            )
        return self

    @model_validator(mode="after")
    def _options(self):
        """``tol`` (> 0) and ``max_iter`` (>= 1) only for the methods that take them (JKO, adaptive)."""
        takes = integrators_module.TOLERANCE_INTEGRATORS
        given = [k for k in ("tol", "max_iter") if getattr(self, k) is not None]
        if given and self.method not in takes:
            raise ValueError(
                f"integrator.{given[0]} applies only to integrator.method {' or '.join(takes)}: got method "
                f"{self.method!r}; remove integrator.{given[0]} or choose one of those methods"
            )
        if self.tol is not None and not self.tol > 0:
            raise ValueError(
                f"integrator.tol must be > 0 (the {self.method} solver stops when its residual is below it): "
                f"got {self.tol!r}; give e.g. tol: 1e-9"
            )
        if self.max_iter is not None and self.max_iter < 1:
            raise ValueError(f"integrator.max_iter must be an integer >= 1: got {self.max_iter!r}; e.g. 500")
        return self

    @property
    def options(self) -> tuple:
        """The integrator's options as (name, value) pairs (``max_iter`` is the adaptive method's
        ``max_substeps``)."""
        cap = integrators_module.TOLERANCE_INTEGRATORS.get(self.method, "max_iter")
        pairs = (("tol", self.tol), (cap, self.max_iter))
        return tuple((k, v) for k, v in pairs if v is not None)


class RecordConfig(Section):
    """``record: {every, positions, heads, ledger}``."""

    every: int = Field(10, ge=1)
    positions: bool = True
    heads: bool = False
    ledger: bool = True


def check_device(device: str) -> str:
    """``device`` if it names a device this torch build can use: ``cpu``, ``cuda`` or ``cuda:N``.

    Checked when a config loads (and for ``--device`` options), never as a failed run (issue 12).

    Raises
    ------
    ValueError
        Another name, CUDA requested on a torch build or machine without it, or ``cuda:N`` beyond the
        devices present.
    """
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N': got {device!r}")
    if device == "cpu":
        return device
    import torch  # the config layer imports torch only to check a CUDA request

    if not torch.cuda.is_available():
        raise ValueError(
            f"CUDA requested but this torch build has none; install a CUDA build or use device: cpu "
            f"(got device: {device}, torch {torch.__version__})"
        )
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"device {device} requested but this machine has {torch.cuda.device_count()} CUDA device(s); "
            "use cuda:0 ... cuda:N-1 or device: cpu"
        )
    return device
