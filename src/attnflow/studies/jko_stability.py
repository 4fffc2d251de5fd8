r"""The JKO / minimizing-movement step against explicit Euler at large steps (issue 16, NOTES.md §10).

Claim: the JKO step (:class:`attnflow.integrators.JKO`) keeps :math:`s\,\mathcal E` monotone at every step
for any step size, while explicit (projected) Euler loses monotonicity beyond a step-size limit.

Runs: ``ascent`` tokens on S^2 with one identity head and unnormalised attention (``usa``, whose flow is
the gradient flow of E in the plain particle metric) or softmax (mobility-weighted metric), for each dt of
``dts`` to the same horizon T, once with ``euler`` and once with ``jko`` (tolerance ``tol``, cap
``max_iter``); a reference with ``rk4`` at ``reference_dt``. Measured: the smallest energy increment
over steps and paths (negative = monotonicity lost), the explicit limit (the largest dt of the grid at
which Euler stays monotone), JKO's iterations and residuals, and the distance at T to the reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt, field_validator, model_validator

from ..analysis.verdicts import record_description, record_identity
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .common import positive_distinct, value_tag, whole_steps
from .registry import register
from .render import Column, Table, verdicts_table

__all__ = ["JKOStabilityConfig", "JKOStabilityStudy", "records", "tables"]

METHODS = ("euler", "jko")
#: the JKO solver statistics recorded per run (the integrator's ``integrator_<key>`` variables)
_JKO_KEYS = ("jko_iterations", "jko_max_iterations", "jko_max_residual", "jko_unconverged")


class JKOStabilityConfig(StudyConfig):
    """Parameters of ``jko_stability``; the defaults are the committed full run (docs/studies)."""

    attention: Literal["usa", "softmax"] = Field("usa", description="attention kind", examples=["usa"])
    beta: float = Field(2.0, gt=0, description="inverse temperature (> 0)", examples=[2.0])
    dts: list[float] = Field(
        [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0],
        min_length=2,
        description="step sizes (> 0, each dividing T)",
        examples=[[0.1, 0.5, 5.0]],
    )
    t1: float = Field(10.0, gt=0, description="the horizon T (> 0)", examples=[10.0])
    reference_dt: float = Field(0.005, gt=0, description="the rk4 reference step", examples=[0.005])
    n: int = Field(12, ge=2, description="tokens (>= 2) on S^2", examples=[12])
    paths: PositiveInt = Field(2, description="paths per run", examples=[2])
    tol: float = Field(1e-9, gt=0, description="JKO tolerance (> 0, radians)", examples=[1e-9])
    max_iter: PositiveInt = Field(500, description="JKO iteration cap", examples=[500])
    seed: int = Field(0, ge=0, description="the seed (>= 0)", examples=[0])

    @field_validator("dts")
    @classmethod
    def _dts(cls, v: list[float]) -> list[float]:
        return positive_distinct(v, "dt", "step sizes", "a step size", "dts=[0.1, 0.5, 5.0]")

    @model_validator(mode="after")
    def _steps(self):
        for dt in (*self.dts, self.reference_dt):
            whole_steps(self.t1, dt)
        return self


class JKOStabilityStudy(Study):
    """Energy monotonicity of JKO vs explicit Euler over step sizes (module docstring)."""

    name = "jko_stability"
    description = (
        "NOTES §10: the JKO step keeps s E monotone at any step, explicit Euler only below a step-size limit"
    )
    Config = JKOStabilityConfig

    def quick_params(self) -> dict:
        return {"dts": [0.1, 1.0, 2.0], "t1": 2.0, "reference_dt": 0.02, "n": 6, "paths": 1}

    @staticmethod
    def run_name(method: str, dt: float) -> str:
        """The run directory of one method and step."""
        return f"{method}_dt{value_tag(dt)}"

    def _cfg(self, config: JKOStabilityConfig, method: str, dt: float, name: str) -> dict:
        integ = {"method": method, "dt": dt, "t1": config.t1}
        if method == "jko":
            integ.update(tol=config.tol, max_iter=config.max_iter)
        return {
            "name": name,
            "model": {
                "direction": "ascent",
                "attention": config.attention,
                "beta": config.beta,
                "backend": "torch",
            },
            "weights": {"process": "constant"},
            "tokens": {"init": "uniform", "n": config.n, "d": 3},
            "heads": {"init": "identity", "H": 1},
            "integrator": integ,
            "record": {"every": 1, "ledger": True},
            "paths": config.paths,
            "seed": config.seed,
            "precision": "float64",
        }

    def plan(self, config: JKOStabilityConfig) -> dict[str, dict]:
        out = {}
        for dt in config.dts:
            for method in METHODS:
                name = self.run_name(method, dt)
                out[name] = self._cfg(config, method, dt, name)
        out["reference"] = self._cfg(config, "rk4", config.reference_dt, "reference")
        out["reference"]["record"]["every"] = max(1, whole_steps(config.t1, config.reference_dt) // 200)
        return out

    def analyse(self, config: JKOStabilityConfig, runs: StudyRuns, out_dir: Path) -> StudyResult:
        ref = runs.open("reference")
        x_ref = np.asarray(ref.positions.values[:, -1])
        res = {}
        for dt in config.dts:
            for method in METHODS:
                name = self.run_name(method, dt)
                ds = runs.open(name)
                E = np.asarray(ds.energy.values)  # [P, K]
                x_T = np.asarray(ds.positions.values[:, -1])
                r = {
                    "method": method,
                    "dt": dt,
                    "min_energy_increment": float(np.diff(E, axis=1).min()),
                    "monotone": bool(np.diff(E, axis=1).min() >= -1e-12 * np.abs(E).max()),
                    "error_at_T": float(np.abs(x_T - x_ref).max()),
                    "energy_T": float(E[:, -1].mean()),
                    "times": np.asarray(ds.time.values, float).tolist(),
                    "energy": E[0].tolist(),
                }
                if method == "jko":
                    r["jko"] = {k: float(ds[f"integrator_{k}"].values[-1]) for k in _JKO_KEYS}
                res[name] = r
        euler_ok = [r["dt"] for r in res.values() if r["method"] == "euler" and r["monotone"]]
        euler_limit = max(euler_ok) if euler_ok else min(config.dts)
        jko_all = all(r["monotone"] for r in res.values() if r["method"] == "jko")
        summary = {
            "results": res,
            "reference": {
                "times": np.asarray(ref.time.values, float).tolist(),
                "energy": np.asarray(ref.energy.values[0]).tolist(),
            },
            "euler_limit": euler_limit,
            "euler_monotone_dts": euler_ok,
            "jko_monotone_at_every_dt": jko_all,
            "largest_dt_over_euler_limit": max(config.dts) / euler_limit,
            "sizes": {
                "attention": config.attention,
                "beta": config.beta,
                "n": config.n,
                "paths": config.paths,
                "T": config.t1,
                "tol": config.tol,
                "max_iter": config.max_iter,
            },
        }
        return StudyResult(summary=summary, verdicts=records(summary, config), tables=tables(summary, config))


def records(summary: dict, config: JKOStabilityConfig | None = None) -> list:
    """The verdict records (pure: computed from the summary's numbers).

    The JKO step's monotone energy is an **identity**: the step minimises -s E + W^2/(2 tau) by a descent
    (Armijo line search) started from x^k, so the objective at the returned point is at most its value at
    x^k, i.e. -s E(x^{k+1}) <= -s E(x^k) - W^2/(2 tau) <= -s E(x^k); the runs check the code. Explicit
    Euler's step-size limit is a **description** (no claim of the papers). The falsifiable check of the
    scheme, its first order, is the record ``jko-first-order`` of the study ``numerics_checks``.
    """
    res = summary["results"].values()
    jko = [r for r in res if r["method"] == "jko"]
    euler = [r for r in res if r["method"] == "euler"]
    return [
        record_identity(
            id="jko-energy-monotone",
            statement="each JKO step argmin [-s E + W^2/(2 tau)] keeps s E monotone, at any tau",
            source="2605.18870, Sec. 7 (future directions: minimizing movement); NOTES.md section 10",
            why="a descent method started from x^k: the objective cannot rise above its value at x^k, and "
            "the transport term is >= 0",
            result={
                "dts": [r["dt"] for r in jko],
                "min_energy_increment": min(r["min_energy_increment"] for r in jko),
                "monotone_at_every_dt": all(r["monotone"] for r in jko),
            },
        ),
        record_description(
            id="explicit-euler-energy-limit",
            statement="explicit projected Euler keeps s E monotone only below a step-size limit",
            source="derived: docs/noisy_tokens.md#4-jko--minimizing-movement-for-particles",
            result={
                "euler_limit": summary["euler_limit"],
                "min_increments": {str(r["dt"]): r["min_energy_increment"] for r in euler},
                "jko_energy_T": {str(r["dt"]): r["energy_T"] for r in jko},
            },
            notes="the limit is the largest monotone dt of the grid, not a located threshold",
        ),
    ]


def tables(summary: dict, config: JKOStabilityConfig | None = None) -> list[Table]:
    """Monotonicity, error at T and JKO solver statistics per method and step, then the verdict records
    (pure: from the summary's numbers)."""
    s = summary["sizes"]
    note = (
        f"Sizes: {s['attention']}, beta = {s['beta']:g}, ascent, n = {s['n']} on S^2, {s['paths']} paths, "
        f"T = {s['T']:g}; JKO tol = {s['tol']:g}, cap {s['max_iter']}. Explicit Euler limit (largest "
        f"monotone dt of the grid): {summary['euler_limit']:g}; JKO monotone at every dt: "
        f"{summary['jko_monotone_at_every_dt']} (up to {summary['largest_dt_over_euler_limit']:.3g} x the "
        "limit)."
    )
    no_jko = dict.fromkeys(_JKO_KEYS)
    runs = Table(
        columns=[
            Column("method"),
            Column("dt", fmt="g"),
            Column("monotone"),
            Column("min_energy_increment", "min step increment of E", ".3g"),
            Column("energy_T", "E(T)", ".6g"),
            Column("error_at_T", "max error at T vs rk4", ".3g"),
            Column("jko_iterations", "JKO iterations (total)", ".0f"),
            Column("jko_max_iterations", "JKO iterations (max per step)", ".0f"),
            Column("jko_max_residual", "JKO max residual", ".2g"),
            Column("jko_unconverged", "unconverged", ".0f"),
        ],
        rows=[{**r, **no_jko, **r.get("jko", {})} for r in summary["results"].values()],
        note=note,
        id="runs",
    )
    return [runs, verdicts_table(records(summary, config))]


register(JKOStabilityStudy())
