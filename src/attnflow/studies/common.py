"""Helpers shared by the registered studies: the whole-step rule of a study config, mean and spread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..simulation import n_steps_for
from .base import StudyAnalysis

__all__ = ["distinct_sorted", "finish_analysis", "mean_sd", "positive_distinct", "value_tag", "whole_steps"]


def whole_steps(t1: float, dt: float, prefix: str = "") -> int:
    """Number of steps of a study's runs, by the core's one whole-step rule
    (:func:`attnflow.simulation.n_steps_for`); its error names the study keys (``prefix`` + t1, dt).

    Examples
    --------
    >>> whole_steps(1.0, 0.25)
    4
    """
    try:
        return n_steps_for(0.0, float(t1), float(dt))
    except ValueError as exc:
        k = max(1, round(float(t1) / float(dt)))
        raise ValueError(f"{prefix}t1 / {prefix}dt: {exc}; or choose {prefix}dt = {float(t1) / k:g}") from exc


def value_tag(value: float) -> str:
    """A file-name-safe tag of a number, distinct for distinct floats (from ``repr``): 0.0012 -> ``0p0012``,
    1e-06 -> ``1em06``.

    Examples
    --------
    >>> value_tag(1e-3), value_tag(1.2e-3)
    ('0p001', '0p0012')
    """
    return repr(float(value)).replace("+", "").replace("-", "m").replace(".", "p")


def mean_sd(values) -> dict:
    """``{"mean", "sd"}`` of a sample (sd with ddof = 1; 0 for a single value)."""
    v = np.asarray(values, float)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0}


def distinct_sorted(values: list, what: str) -> list:
    """``values`` sorted, refusing repeats (rule, the repeated values, the fix)."""
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(
            f"the {what} must be distinct: got {repeated} more than once in {values}; list each once"
        )
    return sorted(values)


def positive_distinct(
    values: list[float], what: str, plural: str, meaning: str, example: str, *, noun: str = ""
) -> list[float]:
    """Distinct finite positive ``values``, sorted (``meaning``: why 0 is excluded; ``example``: the fix)."""
    bad = [v for v in values if not (np.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"every {what} must be {noun}> 0 ({meaning}): got {bad}; give e.g. {example}")
    return distinct_sorted(values, plural)


def finish_analysis(
    summary: dict, table: Callable[[dict], str], out_dir: Path, figures: Callable[..., dict] | None
) -> StudyAnalysis:
    """Draw the figures (when the plot layer passed its callback), record them, build the table."""
    files: dict[str, str] = {}
    if figures is not None:
        files = figures(summary, out_dir)
        summary["figures"] = files
    return StudyAnalysis(summary=summary, table=table(summary), figures=files)
