"""Helpers shared by the registered studies: the whole-step rule of a study config, mean and spread."""

from __future__ import annotations

import numpy as np

from ..simulation import n_steps_for

__all__ = ["mean_sd", "value_tag", "whole_steps"]


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
