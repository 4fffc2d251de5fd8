r"""The layer normalisation z -> z / (t sqrt H) of Sec. 5 of arXiv 2605.18870: ``layer_scaling``.

Claim (Sec. 5.1, NOTES.md §1, §8): input stability is governed by the weight budget
:math:`M_\theta(t) = \int_0^t\int\|D\|^2\,d\Theta_\tau\,d\tau`, and the head- and layer-dependent
normalisation :math:`\theta \mapsto \theta/(t\sqrt H)` keeps it independent of the depth t. attnflow
implements it as :math:`c(t) = 1/((t_0 + t)\sqrt H)` (``model.layer_scaling = t0``,
:meth:`attnflow.TransformerModel.head_scale`).

For each token direction, H in ``H``, with and without the scaling, the study runs the Sec. 6 OU
weights (or frozen ones) with the heads recorded and measures

* :math:`M_\theta(t)` of the effective heads :math:`c(t)D_h(t)` with the normalised head law
  (:func:`attnflow.analysis.theorems.weight_budget`) and the derived a-priori Gronwall rate R(t); the
  depth exponent of M over the second half, :math:`\log(M(T)/M(T/2))/\log 2` (1: linear growth, 0:
  saturation) and the exponent of M(T) in H;
* clustering at T: the mean pairwise inner product and single-linkage cluster counts with their
  threshold sensitivity (:func:`attnflow.observables.cluster_count_sensitivity`).

Convention (*derived*): with the normalised law :math:`\frac1H\sum_h\delta_{D_h}` (attnflow's
:math:`v = \frac1H\sum_h`), the scaled budget is :math:`\overline{\|D\|^2}\,(1/t_0 - 1/(t_0+t))/H`, bounded in
depth and O(1/H); with Theta as the unnormalised sum of H Dirac masses it is H times that, independent
of H, which is the paper's statement.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveInt, field_validator, model_validator

from ..analysis.theorems import fit_rate, weight_budget
from ..analysis.verdicts import record_description, record_identity
from ..model.transformer import TransformerModel
from ..observables import cluster_count_sensitivity, mean_pairwise_inner_product
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .common import distinct_sorted, enough_records, mean_sd, weight_regime
from .registry import register
from .render import Column, Table, ci_cells, ci_columns, verdicts_table

__all__ = ["LayerScalingConfig", "LayerScalingStudy", "records", "tables"]

#: thresholds (radians) at which the table reports cluster counts; the full sensitivity curve is stored
TABLE_THRESHOLDS = (0.01, 0.1, 0.5)


class LayerScalingConfig(StudyConfig):
    """Parameters of ``layer_scaling``; the defaults are the committed full run (docs/studies)."""

    H: list[PositiveInt] = Field(
        [1, 4, 16, 64],
        min_length=3,
        description="the head counts (>= 3 distinct, for a fit in H)",
        examples=[[1, 4, 16, 64]],
    )
    t0: float = Field(
        1.0, gt=0, description="the offset t0 > 0 of c(t) = 1/((t0 + t) sqrt H)", examples=[1.0]
    )
    directions: list[Literal["ascent", "descent"]] = Field(
        ["ascent", "descent"], min_length=1, description="the token directions", examples=[["ascent"]]
    )
    weights: Literal["ou", "frozen"] = Field(
        "ou", description="the weight process (Sec. 6 OU or frozen)", examples=["ou"]
    )
    n: int = Field(48, ge=2, description="tokens (>= 2) on S^2", examples=[48])
    paths: PositiveInt = Field(4, description="paths per run", examples=[4])
    t1: float = Field(10.0, gt=0, description="the depth T (> 0)", examples=[10.0])
    dt: float = Field(0.02, gt=0, description="the time step (> 0, T/dt whole)", examples=[0.02])
    record_every: PositiveInt = Field(5, description="steps between records", examples=[5])
    seed: int = Field(0, ge=0, description="the seed (>= 0)", examples=[0])

    @field_validator("H")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        return distinct_sorted(v, "head counts")

    @model_validator(mode="after")
    def _steps(self):
        enough_records(self.t1, self.dt, self.record_every, 4)
        return self


class LayerScalingStudy(Study):
    """M_theta(t) and clustering with and without the layer scaling (module docstring)."""

    name = "layer_scaling"
    description = (
        "Sec. 5 of arXiv 2605.18870: the normalisation z -> z/(t sqrt H) and the weight budget M_theta(t) "
        "against depth and H, and its effect on clustering"
    )
    Config = LayerScalingConfig

    def quick_params(self) -> dict:
        # ascent only (6 runs): the sizes its test (tests/test_theorems_layer_scaling.py) checks, run once per
        # test session for that test and the protocol checks
        return {
            "directions": ["ascent"],
            "H": [1, 2, 4],
            "n": 8,
            "paths": 2,
            "t1": 1.0,
            "dt": 0.05,
            "record_every": 2,
        }

    @staticmethod
    def _run(direction: str, scaled: bool, H: int) -> str:
        return f"{direction}_{'scaled' if scaled else 'plain'}_H{H}"

    def plan(self, config: LayerScalingConfig) -> dict[str, dict]:
        out = {}
        for direction in config.directions:
            for scaled in (False, True):
                for H in config.H:
                    name = self._run(direction, scaled, H)
                    out[name] = {
                        "name": name,
                        "model": {"direction": direction, "layer_scaling": config.t0 if scaled else None},
                        "weights": weight_regime(config.weights),
                        "tokens": {"init": "octahedral", "n": config.n, "d": 3, "noise": 0.05},
                        "heads": {"init": "symmetric_gaussian", "H": H},
                        "integrator": {"method": "euler", "dt": config.dt, "t1": config.t1},
                        "record": {"every": config.record_every, "heads": True},
                        "paths": config.paths,
                        "seed": config.seed,
                        "precision": "float64",
                    }
        return out

    def _one(self, config: LayerScalingConfig, direction: str, scaled: bool, H: int, runs: StudyRuns) -> dict:
        ds = runs.open(self._run(direction, scaled, H))
        times = np.asarray(ds.time.values, float)
        heads = np.asarray(ds.heads.values)  # [P, K, H, d, d], the unscaled D_h
        model = TransformerModel(direction=direction, layer_scaling=config.t0 if scaled else None)
        budgets = [
            weight_budget(heads[p], times, lambda t: model.head_scale(t, H)) for p in range(len(heads))
        ]
        M = np.stack([b["M"] for b in budgets])
        R = np.stack([b["R"] for b in budgets])
        half = int(np.argmin(abs(times - times[-1] / 2)))
        depth_exp = np.log(M[:, -1] / M[:, half]) / math.log(times[-1] / times[half])
        xT = torch.as_tensor(np.asarray(ds.positions.isel(time=-1).values))
        thresholds = np.geomspace(1e-3, math.pi, 30)
        sens = cluster_count_sensitivity(xT, thresholds).values  # [P, 30]
        counts = cluster_count_sensitivity(xT, list(TABLE_THRESHOLDS)).values
        return {
            "M_T": mean_sd(M[:, -1]),
            "M_half": mean_sd(M[:, half]),
            "M_t": M.mean(0).tolist(),
            "R_T": mean_sd(R[:, -1]),
            "depth_exponent": mean_sd(depth_exp),
            "mean_inner_product_T": mean_sd(mean_pairwise_inner_product(xT).numpy()),
            "mean_inner_product_0": mean_sd(
                mean_pairwise_inner_product(
                    torch.as_tensor(np.asarray(ds.positions.isel(time=0).values))
                ).numpy()
            ),
            "cluster_counts_T": {f"{th:g}": mean_sd(counts[:, i]) for i, th in enumerate(TABLE_THRESHOLDS)},
            "sensitivity_thresholds": thresholds.tolist(),
            "sensitivity_mean_counts": sens.mean(0).tolist(),
            "times": times.tolist(),
        }

    def analyse(self, config: LayerScalingConfig, runs: StudyRuns, out_dir: Path) -> StudyResult:
        res: dict[str, dict] = {}
        for direction in config.directions:
            for scaled in (False, True):
                key = f"{direction}_{'scaled' if scaled else 'plain'}"
                per_H = {str(H): self._one(config, direction, scaled, H, runs) for H in config.H}
                res[key] = {
                    "direction": direction,
                    "scaled": scaled,
                    "per_H": per_H,
                    "fit_M_T_vs_H": fit_rate(config.H, [per_H[str(h)]["M_T"]["mean"] for h in config.H]),
                }
        summary = {
            "variants": res,
            "sizes": {
                "n": config.n,
                "H": list(config.H),
                "paths": config.paths,
                "T": config.t1,
                "dt": config.dt,
                "t0": config.t0,
                "weights": config.weights,
            },
            "note": "M uses the effective heads c(t) D_h and the normalised head law (1/H) sum_h; with "
            "Theta as a sum of H Dirac masses multiply by H. depth exponent = log(M(T)/M(T/2))/log 2.",
        }
        return StudyResult(summary=summary, verdicts=records(summary, config), tables=tables(summary, config))


def records(summary: dict, config: LayerScalingConfig | None = None) -> list:
    """The verdict records (pure: computed from the summary's numbers).

    Both statements about M_theta are **identities**: M_theta(t) = int_0^t c(tau)^2 mean|D|^2 dtau is the
    integral of the chosen c(t)^2 = 1/((t0 + t)^2 H) against a head norm that the OU weights keep
    stationary, so it saturates in depth and H M_theta does not depend on H by construction; the runs
    check the code. What the scaling does to the tokens is a **description**.
    """
    v = summary["variants"]
    src = "2605.18870, Sec. 5 (normalisation theta -> theta/(t sqrt H))"
    depth = {k: [r["depth_exponent"]["mean"] for r in x["per_H"].values()] for k, x in v.items()}
    fits = {k: {kk: x["fit_M_T_vs_H"].get(kk) for kk in ("b", "b_ci")} for k, x in v.items()}
    return [
        record_identity(
            id="layer-scaling-budget-bounded-in-depth",
            statement="with c(t) = 1/((t0 + t) sqrt H) the weight budget M_theta(t) stays bounded in depth",
            source=src,
            why="M_theta is the integral of the chosen c(t)^2 times the mean head norm: "
            "mean|D|^2 (1/t0 - 1/(t0 + t))/H",
            result={"depth_exponent_by_variant": depth},
        ),
        record_identity(
            id="layer-scaling-budget-independent-of-h",
            statement="with the scaling, H x M_theta(T) does not depend on H (Theta as H Dirac masses)",
            source=src,
            why="the 1/H of c(t)^2 cancels the count of Dirac masses by construction",
            result={"fit_M_T_vs_H": fits},
        ),
        record_description(
            id="layer-scaling-clustering",
            statement="mean pairwise inner product and cluster counts at T with and without the scaling",
            source=src,
            result={
                k: {h: r["mean_inner_product_T"]["mean"] for h, r in x["per_H"].items()} for k, x in v.items()
            },
            notes="the scaled field is damped by 1/((t0 + t) sqrt H): tokens move O(log T / sqrt H)",
        ),
    ]


def tables(summary: dict, config: LayerScalingConfig | None = None) -> list[Table]:
    """M_theta, its depth exponent and clustering at T per variant and H; the exponent of M(T) in H per
    variant; the verdict records (pure: from the summary's numbers)."""
    s = summary["sizes"]
    per_h = Table(
        columns=[
            Column("variant"),
            Column("H"),
            Column("M_half", "M(T/2)", ".3g"),
            Column("M_T", "M(T)", ".3g"),
            Column("depth_exponent", "depth exponent", ".3f"),
            Column("R_T", "R(T)", ".3g"),
            Column("mean_inner_product_T", "mean <x_i,x_j> at T", ".3f"),
            Column(
                "clusters", "clusters at " + ", ".join(f"{t:g}" for t in TABLE_THRESHOLDS) + " rad", ".3g"
            ),
        ],
        rows=[
            {
                "variant": key,
                "H": int(H),
                **{k: r[k]["mean"] for k in ("M_half", "M_T", "depth_exponent", "R_T")},
                "mean_inner_product_T": r["mean_inner_product_T"],
                "clusters": [c["mean"] for c in r["cluster_counts_T"].values()],
            }
            for key, v in summary["variants"].items()
            for H, r in v["per_H"].items()
        ],
        note=f"Sizes: n = {s['n']} tokens on S^2 (octahedral start), {s['weights']} weights, {s['paths']} "
        f"paths, depth T = {s['T']:g}, dt = {s['dt']:g}, t0 = {s['t0']:g}, H in {s['H']}.",
        id="per_H",
    )
    fit = Table(
        columns=[
            Column("variant"),
            *ci_columns("b", "b of M(T) in H", ".3f"),
            Column("range", "H range", ".1f"),
        ],
        rows=[
            {"variant": key, **ci_cells(v["fit_M_T_vs_H"], "b"), "range": v["fit_M_T_vs_H"].get("range")}
            for key, v in summary["variants"].items()
        ],
        id="fit_in_H",
    )
    return [per_h, fit, verdicts_table(records(summary, config))]


register(LayerScalingStudy())
