"""A small progress bar on stderr (``\\r`` redraws), silent when stderr is not a terminal.

    bar = ProgressBar(total=2000, label="run ou_H10 (20 paths)", unit="steps")
    for _ in range(2000):
        ...
        bar.update(1)
    bar.close()

Redraws are throttled (at most ~10 per second) so the bar costs nothing next to a simulation step.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar", "format_duration"]


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
    ):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.total, self.label, self.unit = max(int(total), 0), label, unit
        self.count = self.initial = int(initial)
        self.extra = ""
        self._t0 = time.monotonic()
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

    def line(self, now: float | None = None) -> str:
        """The text of the bar (without ``\\r``)."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self._t0, 1e-9)
        done = self.count - self.initial
        rate = done / elapsed
        left = (self.total - self.count) / rate if rate > 0 else float("nan")
        frac = min(self.count / self.total, 1.0) if self.total else 1.0
        fill = int(round(frac * self.width))
        bar = "#" * fill + "-" * (self.width - fill)
        extra = f"  {self.extra}" if self.extra else ""
        return (
            f"{self.label} {frac:4.0%} |{bar}| {self.count}/{self.total} {self.unit}  "
            f"{rate:.3g} {self.unit}/s  elapsed {format_duration(elapsed)}  "
            f"left {format_duration(left)}{extra}"
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
