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

The first block of the compiled loop in a process compiles the numba kernels (or loads them from numba's
cache, in about a second). When a run shows progress and that first block takes longer than
``COMPILE_NOTE_AFTER_S``, one line on stderr says so ("compiling kernels (first run only, about 50 s) ..."),
a line every 20 s follows while it lasts, and its duration is left out of the progress rates and times left
(:func:`attnflow.simulation.progress.exclude_from_rates`), so that an ETA never counts the compilation.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from .progress import exclude_from_rates
from .spec import check_record_every

__all__ = [
    "CallbackSink",
    "MemorySink",
    "RunInterrupted",
    "Sink",
    "Steppable",
    "deferred_sigint",
    "integrate",
]


#: a first compiled block slower than this is taken as the one-time compilation of the kernels
COMPILE_NOTE_AFTER_S = 3.0
#: the compilation measured on the shared 2-core machine (fresh numba cache, fused loop, float32 and float64)
COMPILE_TYPICAL_S = 50
#: set once the compiled loop has run a block in this process (its kernels are compiled or loaded)
_WARM: list[bool] = [False]
#: the compile note was printed in this process (a second slow block only says it is still compiling)
_SAID: list[bool] = [False]


@contextlib.contextmanager
def _compile_watch(stream=None) -> Iterator[None]:
    """Say so when the block inside takes longer than :data:`COMPILE_NOTE_AFTER_S` (the kernels compile),
    with a line every 20 s; leave its duration out of the progress rates."""
    stream = sys.stderr if stream is None else stream
    done = threading.Event()
    t0 = time.monotonic()

    def watch() -> None:
        if done.wait(COMPILE_NOTE_AFTER_S):
            return
        if _SAID[0]:
            stream.write("  ... still compiling kernels\n")
        else:
            _SAID[0] = True
            stream.write(
                f"compiling kernels (first run only, about {COMPILE_TYPICAL_S} s; numba caches them for later"
                " runs) ...\n"
            )
        stream.flush()
        while not done.wait(20.0):
            stream.write(f"  ... still compiling ({time.monotonic() - t0:.0f} s)\n")
            stream.flush()

    thread = threading.Thread(target=watch, name="attnflow-compile-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        took = time.monotonic() - t0
        if took > COMPILE_NOTE_AFTER_S:
            stream.write(f"kernels ready in {took:.1f} s (left out of the times left)\n")
            stream.flush()
            exclude_from_rates(took)


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
    check_record_every(record_every)
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 0:
        raise ValueError(f"n_steps must be an integer >= 0: got {n_steps!r}")
    total = sim.step_index + n_steps if total_steps is None else int(total_steps)
    compiled = getattr(sim, "loop", None) == "fused"
    watch = progress is not None and compiled and not _WARM[0]
    with deferred_sigint() as interrupted:
        if endpoints and sink.last_recorded_step is None:
            with _compile_watch() if watch else contextlib.nullcontext():
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
                with _compile_watch() if watch and not _WARM[0] else contextlib.nullcontext():
                    advance(k)
                if compiled:
                    _WARM[0] = True
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
