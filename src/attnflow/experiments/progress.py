"""The progress bar of runs and sweeps and the overall view of many runs: defined in
:mod:`attnflow.simulation.progress` (so that :func:`attnflow.simulate` can draw one with ``progress=True``),
re-exported here for the run store and the studies."""

from ..simulation.progress import (
    OverallProgress as OverallProgress,
    ProgressBar as ProgressBar,
    current_overall as current_overall,
    format_duration as format_duration,
    overall_progress as overall_progress,
)

__all__ = ["OverallProgress", "ProgressBar", "current_overall", "format_duration", "overall_progress"]
