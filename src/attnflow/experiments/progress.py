"""The progress bar of runs and sweeps: defined in :mod:`attnflow.simulation.progress` (so that
:func:`attnflow.simulate` can draw one with ``progress=True``), re-exported here for the run store."""

from ..simulation.progress import ProgressBar as ProgressBar, format_duration as format_duration

__all__ = ["ProgressBar", "format_duration"]
