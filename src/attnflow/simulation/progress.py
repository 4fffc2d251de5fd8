"""A small progress bar on stderr (``\\r`` redraws); when stderr is not a terminal (a log file), one
full line every ``log_every_s`` seconds instead (or nothing).

    bar = ProgressBar(total=2000, label="run ou_H10 (20 paths)", unit="steps")
    for _ in range(2000):
        ...
        bar.update(1)
    bar.close()

Redraws are throttled (at most ~10 per second) so the bar costs nothing next to a simulation step.

Inside :func:`overall_progress` (a study or a reproduction running many runs) every bar's line also says
which run of how many it is and the time left overall, estimated from the work of each run (paths x
tokens^2 x heads x steps) and the rate measured so far.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TextIO

__all__ = [
    "OverallProgress",
    "ProgressBar",
    "current_overall",
    "excluded_seconds",
    "exclude_from_rates",
    "format_duration",
    "overall_progress",
]

#: seconds of one-time work (numba compiling the kernels) in this process, left out of every rate and ETA
_EXCLUDED = [0.0]


def exclude_from_rates(seconds: float) -> None:
    """Leave ``seconds`` of one-time work (compiling the kernels) out of the rates and times left of the
    progress bars and overall views open now or later in this process."""
    _EXCLUDED[0] += max(float(seconds), 0.0)


def excluded_seconds() -> float:
    """The seconds left out of rates so far in this process (see :func:`exclude_from_rates`)."""
    return _EXCLUDED[0]


def format_duration(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour); ``?`` when unknown."""
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        return "?"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressBar:
    """Progress of ``total`` units: percentage, bar, count, rate and estimated time left.

    Parameters
    ----------
    total : int
        Number of units (steps, tasks).
    label : str
        Text before the bar (e.g. the run name and number of paths).
    unit : str
        Name of a unit, shown with the count and the rate.
    initial : int
        Units already done (a resumed run); the rate counts only the new ones.
    enabled : bool or None
        None: draw only when ``stream`` is a terminal. False: never draw (``--quiet``).
    stream : text stream
        Default ``sys.stderr``.
    """

    width = 24
    min_interval = 0.1

    def __init__(
        self,
        total: int,
        label: str = "",
        *,
        unit: str = "it",
        initial: int = 0,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        log_every_s: float | None = None,
        run: str | None = None,
    ):
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        tty = bool(isatty and isatty())
        # not a terminal: no redraws, but one whole line every log_every_s seconds when asked
        self.log_every_s = log_every_s if (enabled is None and not tty) else None
        if enabled is None:
            enabled = tty
        self.enabled = enabled
        self.run = run
        self.total, self.label, self.unit = max(int(total), 0), label, unit
        self.count = self.initial = int(initial)
        self.extra = ""
        self._t0 = time.monotonic()
        self._excluded0 = excluded_seconds()
        self._last = 0.0
        self._closed = False

    def __call__(self, k: int = 1) -> None:
        """Same as :meth:`update` (so a bar can be passed as ``progress=`` to :meth:`Simulator.run`)."""
        self.update(k)

    def update(self, k: int = 1, *, extra: str | None = None) -> None:
        """Advance by ``k`` units; ``extra`` replaces the trailing note (e.g. "1 failed")."""
        self.count += k
        if extra is not None:
            self.extra = extra
        if self.enabled:
            now = time.monotonic()
            if now - self._last >= self.min_interval or self.count >= self.total:
                self._last = now
                self._draw(now)
        elif self.log_every_s is not None:
            now = time.monotonic()
            if now - self._last >= self.log_every_s:
                self._last = now
                self.stream.write(self.line(now) + "\n")
                self.stream.flush()

    def line(self, now: float | None = None) -> str:
        """The text of the bar (without ``\\r``)."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self._t0, 1e-9)
        # the rate (and the time left) without the one-time compilation of the kernels
        working = max(elapsed - (excluded_seconds() - self._excluded0), 1e-9)
        done = self.count - self.initial
        rate = done / working
        left = (self.total - self.count) / rate if rate > 0 else float("nan")
        frac = min(self.count / self.total, 1.0) if self.total else 1.0
        fill = int(round(frac * self.width))
        bar = "#" * fill + "-" * (self.width - fill)
        extra = f"  {self.extra}" if self.extra else ""
        overall = current_overall()
        whole = ""
        if overall is not None and self.run is not None:
            whole = "  " + overall.describe(self.run, frac)
        return (
            f"{self.label} {frac:4.0%} |{bar}| {self.count}/{self.total} {self.unit}  "
            f"{rate:.3g} {self.unit}/s  elapsed {format_duration(elapsed)}  "
            f"left {format_duration(left)}{extra}{whole}"
        )

    def _draw(self, now: float) -> None:
        self.stream.write("\r" + self.line(now) + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self.enabled and not self._closed:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
        self._closed = True

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: the share of a sequence's work measured before :class:`OverallProgress` estimates the time left
MIN_MEASURED = 0.005


class OverallProgress:
    """Where a sequence of runs stands: which run of how many, and the time left overall.

    Parameters
    ----------
    work : mapping
        Run name -> its work in any consistent unit (e.g. paths x n^2 x H x steps), in run order.

    The rate is the work finished in this process per second of wall time, so runs skipped as already
    complete do not make it look faster than it is.
    """

    def __init__(self, work: Mapping[str, float]):
        self.work = {k: max(float(v), 0.0) for k, v in work.items()}
        self.order = list(self.work)
        self.finished: set[str] = set()
        self.done_here = 0.0
        self._t0 = time.monotonic()
        self._excluded0 = excluded_seconds()
        self._current: tuple[str, float] | None = None

    def finish(self, name: str, *, skipped: bool = False) -> None:
        """Mark run ``name`` finished (``skipped``: it was complete before this process started)."""
        if name in self.finished:
            return
        self.finished.add(name)
        if not skipped:  # a skipped run's work was never part of this process' rate
            self.done_here += self.work.get(name, 0.0)
        self._current = None

    def left_s(self, name: str | None = None, frac: float = 0.0) -> float:
        """Seconds left overall, ``name`` being ``frac`` done (NaN before any work was measured)."""
        # wall time without the one-time compilation of the kernels (exclude_from_rates)
        elapsed = time.monotonic() - self._t0 - (excluded_seconds() - self._excluded0)
        cur = self.work.get(name, 0.0) * frac if name else 0.0
        done = self.done_here + cur
        rate = done / elapsed if elapsed > 0 else 0.0
        left = sum(w for k, w in self.work.items() if k not in self.finished) - cur
        # an estimate from under MIN_MEASURED of the work is noise (the main job's first line after the
        # compile read "overall left 56:00:11" from 1 step of 2000): unknown ("?") until then
        if done < MIN_MEASURED * sum(self.work.values()):
            return float("nan")
        return left / rate if rate > 0 else float("nan")

    def describe(self, name: str, frac: float = 0.0) -> str:
        """``run k/N <name>, overall left m:ss`` (k: the run's place in the order)."""
        k = self.order.index(name) + 1 if name in self.order else len(self.finished) + 1
        return f"[run {k}/{len(self.order)} {name}, overall left {format_duration(self.left_s(name, frac))}]"


_OVERALL: list[OverallProgress] = []


def current_overall() -> OverallProgress | None:
    """The :class:`OverallProgress` of the innermost :func:`overall_progress`, or None."""
    return _OVERALL[-1] if _OVERALL else None


@contextlib.contextmanager
def overall_progress(work: Mapping[str, float]) -> Iterator[OverallProgress]:
    """Make an :class:`OverallProgress` of ``work`` current: progress lines then carry the overall view."""
    overall = OverallProgress(work)
    _OVERALL.append(overall)
    try:
        yield overall
    finally:
        _OVERALL.remove(overall)
