"""Helpers shared by the registered studies: the whole-step rule of a study config, the weight regimes of
the particle runs, mean and spread, the robustness checks of a verdict record over a choice."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..analysis.verdicts import Criterion, RobustnessCheck
from ..simulation import n_steps_for

__all__ = [
    "WEIGHT_REGIMES",
    "distinct_sorted",
    "enough_records",
    "fit_robustness",
    "mean_sd",
    "positive_distinct",
    "robustness_checks",
    "value_tag",
    "weight_regime",
    "whole_steps",
]

#: the weight processes of the regimes of Sec. 6 of arXiv 2605.18870 the particle studies run (longtime,
#: layer_scaling, stability_input): regime -> the ``weights`` section of a run config
WEIGHT_REGIMES: Mapping[str, Mapping] = {
    "ou": {"process": "ornstein_uhlenbeck", "sigma2": 1.0, "F": "identity"},
    "osc_shared": {"process": "oscillating", "forcing": "s2", "phases": "shared"},
    "osc_per_head": {"process": "oscillating", "forcing": "s2", "phases": "per_head"},
    "frozen": {"process": "constant"},
}


def weight_regime(name: str) -> dict:
    """The ``weights`` section of a run config for the regime ``name`` of :data:`WEIGHT_REGIMES` (a fresh
    copy: a study may change its own).

    Raises
    ------
    ValueError
        For an unknown regime (the error lists the known ones).

    Examples
    --------
    >>> weight_regime("frozen")
    {'process': 'constant'}
    """
    if name not in WEIGHT_REGIMES:
        raise ValueError(
            f"unknown weight regime {name!r}: the studies run {sorted(WEIGHT_REGIMES)}; choose one of them"
        )
    return dict(WEIGHT_REGIMES[name])


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


def enough_records(
    t1: float,
    dt: float,
    every: int,
    minimum: int,
    *,
    rule: str = "",
    fix: str = "lower record_every or raise t1",
) -> int:
    """The records of a study's runs (``whole_steps(t1, dt) // every``), refused below ``minimum`` (the
    message names the ``rule``, default the minimum, the count and the ``fix``).

    Examples
    --------
    >>> enough_records(1.0, 0.05, 2, 4)
    10
    """
    records = whole_steps(t1, dt) // every
    if records < minimum:
        raise ValueError(f"the run must hold at least {rule or minimum} records: got {records}; {fix}")
    return records


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


def robustness_checks(crit: Criterion, choice: str, values, results, ci95=None) -> list[RobustnessCheck]:
    """``[RobustnessCheck.from_values(...)]``, or ``[]`` when the choice has no value (e.g. a fit that a
    small grid cannot make)."""
    if not list(values):
        return []
    return [RobustnessCheck.from_values(crit, choice, list(values), list(results), ci95=ci95)]


def fit_robustness(crit: Criterion, choice: str, fits: Mapping, param: str) -> list[RobustnessCheck]:
    """The robustness check of fitted parameter ``param`` over ``fits`` ({value of the choice: fit}), each
    with its 95% interval ``<param>_ci``; fits without ``param`` (not made) are left out."""
    ok = {k: f for k, f in fits.items() if param in f}
    return robustness_checks(
        crit, choice, list(ok), [f[param] for f in ok.values()], ci95=[f[f"{param}_ci"] for f in ok.values()]
    )
