"""The one driver loop: :func:`integrate` steps a :class:`~attnflow.simulation.simulator.Simulator` and hands
records to a sink. :func:`attnflow.simulate` uses the in-memory :class:`MemorySink`, the run store its Zarr
sink, the energy-identity audit a :class:`MemorySink` as well.

A sink has one method, ``on_record(record)``, and one attribute, ``last_recorded_step`` (the step of the
last record it holds, ``None`` before the first).

Ctrl-C. While :func:`integrate` runs in the main thread, a first SIGINT only sets a flag: the step under
way (possibly inside a compiled numba kernel, where an exception raised by the signal would surface as a
``SystemError``) finishes, and the loop then raises :class:`RunInterrupted`, "interrupted at step k of N;
rerun to resume", with the simulator in the consistent state after step k (the run store checkpoints it
there). A second SIGINT raises :class:`KeyboardInterrupt` at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

__all__ = [
    "CallbackSink",
    "MemorySink",
    "RunInterrupted",
    "Sink",
    "Steppable",
    "deferred_sigint",
    "integrate",
]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped a run between two steps; the state after ``step`` is whole.

    Attributes
    ----------
    step : int
        The global step index reached (the steps 1..step are done).
    n_steps : int
        The step count of the whole run.
    """

    def __init__(self, step: int, n_steps: int):
        self.step, self.n_steps = int(step), int(n_steps)
        super().__init__(f"interrupted at step {self.step} of {self.n_steps}; rerun to resume")

    def __str__(self) -> str:
        return f"interrupted at step {self.step} of {self.n_steps}; rerun to resume"


@contextlib.contextmanager
def deferred_sigint() -> Iterator[Callable[[], bool]]:
    """Turn the first SIGINT into a flag for the enclosed code; yields ``pending()`` (True once it came).

    A second SIGINT restores the previous handler and raises :class:`KeyboardInterrupt` at once. Outside
    the main thread (signal handlers cannot be set there) nothing is deferred and ``pending()`` is False.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    hits = {"n": 0}
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        hits["n"] += 1
        if hits["n"] > 1:
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt("interrupted twice: stopped at once, without finishing the step")

    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main interpreter
        yield lambda: False
        return
    try:
        yield lambda: hits["n"] > 0
    finally:
        signal.signal(signal.SIGINT, previous)


class Steppable(Protocol):
    """What the driver needs of a simulator (:class:`attnflow.simulation.Simulator` is one).

    A simulator may also have ``advance(k)`` (take k steps, the same result as k calls of ``step``) and
    ``block_steps()`` (how many steps one ``advance`` call should take); the driver then steps in blocks.
    """

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
    total_steps: int | None = None,
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
        Called with the number of steps taken after every step or block of steps.
    endpoints : bool
        Also record the current state first when the sink holds no record yet, and the final state
        when it was not recorded (the initial and final states are always in a run's data).
    total_steps : int or None
        The step count of the whole run, for the message of :class:`RunInterrupted` (default: the
        current step plus ``n_steps``).

    Returns
    -------
    Sink
        ``sink``.

    Raises
    ------
    RunInterrupted
        A SIGINT (Ctrl-C) came while stepping: the step under way was finished first (see the module
        docstring); the final state is then not recorded.
    """
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1: got {record_every!r}")
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 0:
        raise ValueError(f"n_steps must be an integer >= 0: got {n_steps!r}")
    total = sim.step_index + n_steps if total_steps is None else int(total_steps)
    with deferred_sigint() as interrupted:
        if endpoints and sink.last_recorded_step is None:
            sink.on_record(sim.record(with_heads=with_heads))
        advance = getattr(sim, "advance", None)
        block_steps = getattr(sim, "block_steps", lambda: 1)
        done = 0
        while done < n_steps:
            if interrupted():
                raise RunInterrupted(sim.step_index, total)
            if advance is not None:
                # a block of steps up to the next record (the compiled loop of simulation.fused takes it in
                # one call; its length only decides where Ctrl-C and progress are seen, never the result)
                k = min(n_steps - done, record_every - sim.step_index % record_every, block_steps())
                advance(k)
            else:
                k = 1
                sim.step()
            done += k
            if sim.step_index % record_every == 0:
                sink.on_record(sim.record(with_heads=with_heads))
            if progress is not None:
                progress(k)
        if interrupted():
            raise RunInterrupted(sim.step_index, total)
    if endpoints and sink.last_recorded_step != sim.step_index:
        sink.on_record(sim.record(with_heads=with_heads))
    return sink
