"""The one driver loop: :func:`integrate` steps a :class:`~attnflow.simulation.simulator.Simulator` and hands
records to a sink. :func:`attnflow.simulate` uses the in-memory :class:`MemorySink`, the run store its Zarr
sink, the energy-identity audit a :class:`MemorySink` as well.

A sink has one method, ``on_record(record)``, and one attribute, ``last_recorded_step`` (the step of the
last record it holds, ``None`` before the first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["CallbackSink", "MemorySink", "Sink", "Steppable", "integrate"]


class Steppable(Protocol):
    """What the driver needs of a simulator (:class:`attnflow.simulation.Simulator` is one)."""

    step_index: int

    def step(self) -> None:
        """Advance one step."""

    def record(self, *, with_heads: bool = False) -> Any:
        """A record of the current state with a ``step`` attribute."""


class Sink(Protocol):
    """Where the driver puts records."""

    last_recorded_step: int | None

    def on_record(self, record: Any) -> None:
        """Take one record (a :class:`attnflow.simulation.Record`)."""


class MemorySink:
    """Keeps every record in a list (``records``)."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    @property
    def last_recorded_step(self) -> int | None:
        return self.records[-1].step if self.records else None

    def on_record(self, record: Any) -> None:
        self.records.append(record)


class CallbackSink:
    """Passes each record to a callable (or drops it when the callable is None)."""

    def __init__(self, callback: Callable[[Any], None] | None):
        self.callback = callback
        self.last_recorded_step: int | None = None

    def on_record(self, record: Any) -> None:
        self.last_recorded_step = record.step
        if self.callback is not None:
            self.callback(record)


def integrate(
    sim: Steppable,
    n_steps: int,
    *,
    record_every: int = 1,
    sink: Sink,
    with_heads: bool = False,
    progress: Callable[[int], None] | None = None,
    endpoints: bool = True,
) -> Sink:
    """Take ``n_steps`` steps of ``sim``, recording every ``record_every``-th global step into ``sink``.

    Parameters
    ----------
    sim : Steppable
        A :class:`attnflow.simulation.Simulator` (anything with ``step``, ``record``, ``step_index``).
    n_steps : int
        Steps to take from the simulator's current state (>= 0).
    record_every : int
        Record when the global step index is a multiple of it.
    sink : Sink
    with_heads : bool
        Records carry the heads too.
    progress : callable or None
        Called with 1 after every step.
    endpoints : bool
        Also record the current state first when the sink holds no record yet, and the final state
        when it was not recorded (the initial and final states are always in a run's data).

    Returns
    -------
    Sink
        ``sink``.
    """
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1: got {record_every!r}")
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 0:
        raise ValueError(f"n_steps must be an integer >= 0: got {n_steps!r}")
    if endpoints and sink.last_recorded_step is None:
        sink.on_record(sim.record(with_heads=with_heads))
    for _ in range(n_steps):
        sim.step()
        if sim.step_index % record_every == 0:
            sink.on_record(sim.record(with_heads=with_heads))
        if progress is not None:
            progress(1)
    if endpoints and sink.last_recorded_step != sim.step_index:
        sink.on_record(sim.record(with_heads=with_heads))
    return sink
