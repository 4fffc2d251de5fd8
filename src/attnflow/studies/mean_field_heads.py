r"""Finite H as a Monte Carlo approximation of a mean-field head law (arXiv 2605.18870, Sec. 5.2).

The study ``mean_field_heads``.

Claim (Sec. 5.2, NOTES.md §8): the empirical head law :math:`\Theta^H = \frac1H\sum_h\delta_{D_h}` of H
i.i.d. heads approximates a mean-field law Theta, and the token flow :math:`\mu^H_t` converges to the
mean-field flow. With heads i.i.d. the expected rates are :math:`H^{-1/2}` per draw (the central limit
theorem for the field, then Gronwall) and :math:`H^{-1}` for the bias of quadratic quantities such as
:math:`G^2` (*derived*, :func:`attnflow.analysis.theorems.gradient_mc_decomposition`).

The study

1. draws, per head law (symmetric Gaussian, OU stationary law, two-point law), ``paths`` independent
   head sets for every H of ``H`` and one reference set of ``H_ref`` heads, all acting on the same
   tokens (one uniform cloud), with frozen weights (Theta^H_t = Theta^H); runs ``<law>_H<H>`` and
   ``<law>_ref`` on the run store;
2. measures :math:`W_2(\mu^H_t, \mu^{ref}_t)` (exact, POT, geodesic cost; the sliced spherical distance
   at T as well), :math:`|E^H_t - E^{ref}_t|` per draw, :math:`|\langle E^H_t\rangle - E^{ref}_t|` (MC
   mean) and :math:`G^2`; fits the rates in H with 95% intervals on ``H <= H_ref / fit_margin``;
3. at frozen tokens (the initial cloud and the reference's cloud at T) evaluates
   :math:`G^2(\mu;\Theta^H)` over ``g2_draws`` fresh draws per H, fits the excess over the mean-field
   value against H (expected slope -1) and compares it with the derived :math:`c(\mu)/H`;
4. runs the Sec. 6 OU regime (H in ``sec6_H``) and asks whether its :math:`G^2 \sim 1/H` is this Monte
   Carlo effect: the measured late-time average of :math:`G^2` against the prediction
   :math:`G^2_\infty(\mu_t) + c(\mu_t)/H` evaluated on the run's own late clouds with fresh heads from
   the OU stationary law.

Head sets and the token cloud are inputs of the particle runs (:class:`attnflow.studies.tasks.ParticleRun`):
each run writes them into its own directory (``inputs/<sha1 of the content>.npy``), so nothing is written
outside the study directory and a rerun plans the same configs and resumes.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Annotated, Literal, Union

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from ..analysis.theorems import draw_heads, fit_rate, gradient_mc_decomposition
from ..analysis.verdicts import Criterion, record_identity, record_test
from ..model import tokens as tokens_mod
from ..observables import (
    sliced_wasserstein_sphere,
    strong_upper_gradient_sq,
    wasserstein2,
)
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .common import distinct_sorted, fit_robustness, mean_sd, robustness_checks, whole_steps
from .registry import register
from .render import Column, Table, ci_cells, ci_columns
from .tasks import ParticleRun

__all__ = ["MeanFieldHeadsConfig", "MeanFieldHeadsStudy", "records", "tables"]

#: the quantities whose rate in H is fitted: name in the table, expected exponent b
RATES = {
    "W2_T": ("W2(mu^H_T, mu^ref_T) exact", "-1/2"),
    "SW2_T": ("sliced spherical W2 at T", "-1/2"),
    "absdE_T": ("abs(E^H_T - E^ref_T) per draw", "-1/2"),
    "dE_mc_mean_T": ("abs(<E^H_T> - E^ref_T) (MC mean)", "-1 (bias) until MC noise"),
    "absdG2_T": ("abs(G^2_T - G^2_ref,T) per draw", "-1/2"),
}


# -- head laws ---------------------------------------------------------------------------------------
class _Law(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def params(self) -> dict:
        return self.model_dump(exclude={"kind"})


class SymmetricGaussianLaw(_Law):
    """D = scale (Z + Z^T)."""

    kind: Literal["symmetric_gaussian"]
    scale: float = Field(1.0, gt=0, description="the scale s of D = s (Z + Z^T) (> 0)")


class OUStationaryLaw(_Law):
    """D = I + sqrt(sigma2) (Z + Z^T)/2, the stationary law of the Sec. 6 OU weights."""

    kind: Literal["ou_stationary"]
    sigma2: float = Field(1.0, ge=0, description="the OU noise level sigma^2 (a variance, >= 0)")


class TwoPointLaw(_Law):
    """D = A with probability p, B otherwise (defaults: A = 2 I, B = -I + e1 e2^T + e2 e1^T)."""

    kind: Literal["two_point"]
    p: float = Field(0.5, description="the probability of the first point, in [0, 1]")

    @field_validator("p")
    @classmethod
    def _probability(cls, v: float) -> float:
        if not (math.isfinite(v) and 0 <= v <= 1):
            raise ValueError(
                f"a two-point law needs a probability p in [0, 1] (p = {v!r} is not a law); "
                "give e.g. {'kind': 'two_point', 'p': 0.5}"
            )
        return v


HeadLaw = Annotated[Union[SymmetricGaussianLaw, OUStationaryLaw, TwoPointLaw], Field(discriminator="kind")]  # noqa: UP007


class MeanFieldHeadsConfig(StudyConfig):
    """Parameters of ``mean_field_heads``; the defaults are the committed full run (docs/studies)."""

    laws: list[HeadLaw] = Field(
        default_factory=lambda: [
            SymmetricGaussianLaw(kind="symmetric_gaussian"),
            OUStationaryLaw(kind="ou_stationary"),
            TwoPointLaw(kind="two_point"),
        ],
        min_length=1,
        description="the head laws Theta (kind symmetric_gaussian, ou_stationary or two_point)",
        examples=[[{"kind": "ou_stationary", "sigma2": 1.0}]],
    )
    H: list[PositiveInt] = Field(
        [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
        min_length=1,
        description="the head counts (a non-empty list of distinct integers >= 1, below H_ref)",
        examples=[[1, 4, 16, 64]],
    )
    H_ref: PositiveInt = Field(
        16384, description="the head count of the reference (larger than every H)", examples=[4096]
    )
    fit_margin: float = Field(
        16.0, ge=1, description="rates are fitted on H <= H_ref / fit_margin (>= 1)", examples=[16.0]
    )
    fit_tail_min: PositiveInt = Field(
        16, description="the smallest H of the second (large-H) fit range", examples=[16]
    )
    paths: PositiveInt = Field(8, description="independent head draws per H", examples=[8])
    n: int = Field(32, ge=2, description="the number of tokens (>= 2)", examples=[32])
    d: int = Field(3, ge=2, description="the dimension of the ambient space (>= 2)", examples=[3])
    t1: float = Field(4.0, gt=0, description="the final time T (> 0)", examples=[4.0])
    dt: float = Field(0.05, gt=0, description="the time step (> 0, T/dt whole)", examples=[0.05])
    record_every: PositiveInt = Field(10, description="steps between records", examples=[10])
    direction: Literal["ascent", "descent"] = Field(
        "descent", description="the token direction (descent: the authors' code)", examples=["descent"]
    )
    g2_draws: PositiveInt = Field(
        32, description="fresh head draws per H for G^2 at frozen tokens", examples=[32]
    )
    mf_sample: int = Field(
        4096,
        ge=2,
        description="heads of the sample that estimates G2_inf and c at a cloud (>= 2)",
        examples=[4096],
    )
    sec6_H: list[PositiveInt] = Field(
        [1, 10, 100],
        description="head counts of the Sec. 6 OU runs (empty: skip that part)",
        examples=[[1, 10, 100]],
    )
    sec6_n: int = Field(100, ge=2, description="tokens of the Sec. 6 OU runs", examples=[100])
    sec6_t1: float = Field(10.0, gt=0, description="the horizon of the Sec. 6 OU runs", examples=[10.0])
    sec6_dt: float = Field(0.01, gt=0, description="the step of the Sec. 6 OU runs", examples=[0.01])
    sec6_paths: PositiveInt = Field(2, description="paths of each Sec. 6 OU run", examples=[2])
    seed: int = Field(0, ge=0, description="the seed of tokens and heads (>= 0)", examples=[0])
    criterion_w2_rate_band: tuple[float, float] = Field(
        (-0.6, -0.4),
        description="derived rate of W2(mu^H_T, mu^ref_T) in H (CLT for the field, then Gronwall): the tail "
        "fit's exponent must lie in this band around -1/2",
        examples=[(-0.6, -0.4)],
    )
    criterion_prediction_band: tuple[float, float] = Field(
        (0.8, 1.25),
        description="a derived prediction G2_inf + c/H counts as matching a measured G^2 when their ratio "
        "lies in this band (a factor 1.25 either way)",
        examples=[(0.8, 1.25)],
    )
    criterion_prediction_min_H: int = Field(
        8, ge=1, description="the frozen-token prediction is tested for H >= this (the H^-2 terms neglected)"
    )

    @field_validator("H", "sec6_H")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        return distinct_sorted(v, "head counts")

    @model_validator(mode="after")
    def _ref_largest(self):
        if self.H_ref <= max(self.H):
            raise ValueError(
                f"H_ref must exceed every H (the reference stands for H = infinity): got H_ref = "
                f"{self.H_ref} <= max(H) = {max(self.H)}; raise H_ref or drop the largest H"
            )
        whole_steps(self.t1, self.dt)
        whole_steps(self.sec6_t1, self.sec6_dt, "sec6_")
        return self


class MeanFieldHeadsStudy(Study):
    """Finite H against a reference H_ref for i.i.d. heads (module docstring)."""

    name = "mean_field_heads"
    description = (
        "Sec. 5.2 of arXiv 2605.18870: finite H as a Monte Carlo approximation of a mean-field head law "
        "(rates in H of W2, E, G^2; is the O(1/H) decay of G^2 in Sec. 6 a Monte Carlo effect?)"
    )
    Config = MeanFieldHeadsConfig

    def quick_params(self) -> dict:
        # 15 runs of 5 steps (3 laws x 3 H + the reference, 3 Sec. 6 runs): the sizes its test
        # (tests/test_theorems_mean_field.py) checks, run once per test session for that test and the
        # protocol checks
        return {
            "H": [1, 2, 4],
            "H_ref": 16,
            "fit_margin": 2.0,
            "fit_tail_min": 2,
            "paths": 3,
            "n": 12,
            "t1": 0.5,
            "dt": 0.1,
            "record_every": 5,
            "g2_draws": 4,
            "mf_sample": 256,
            "sec6_H": [1, 2, 4],
            "sec6_n": 12,
            "sec6_t1": 0.5,
            "sec6_dt": 0.1,
            "sec6_paths": 1,
        }

    # -- plan ------------------------------------------------------------------------------------------
    def _x0(self, config: MeanFieldHeadsConfig) -> np.ndarray:
        return tokens_mod.uniform(1, config.n, config.d, seed=config.seed)[0].numpy()

    def _heads(self, config: MeanFieldHeadsConfig, k: int, H: int, paths: int, salt: int) -> np.ndarray:
        law = config.laws[k]
        return draw_heads(law.kind, paths, H, config.d, seed=config.seed * 1_000_003 + salt, **law.params())

    def _key(self, config: MeanFieldHeadsConfig, k: int) -> str:
        kinds = [law.kind for law in config.laws]
        kind = config.laws[k].kind
        return kind if kinds.count(kind) == 1 else f"{kind}{k}"

    def plan(self, config: MeanFieldHeadsConfig) -> dict[str, ParticleRun | dict]:
        x0 = self._x0(config)
        base = {
            "model": {"direction": config.direction},
            "weights": {"process": "constant"},
            "tokens": {"init": "file", "path": "(input)"},
            "integrator": {"method": "euler", "dt": config.dt, "t1": config.t1},
            "record": {"every": config.record_every, "heads": False},
            "seed": config.seed,
            "precision": "float64",
        }
        out: dict[str, ParticleRun | dict] = {}
        for k in range(len(config.laws)):
            key = self._key(config, k)
            for H in [*config.H, config.H_ref]:
                P = 1 if H == config.H_ref else config.paths
                D = self._heads(config, k, H, P, salt=1000 * k + H)
                name = f"{key}_ref" if H == config.H_ref else f"{key}_H{H}"
                # the token cloud and the heads are written into the run's own directory (ParticleRun.inputs)
                cfg = {**base, "name": name, "heads": {"init": "file", "H": H, "path": "(input)"}, "paths": P}
                out[name] = ParticleRun(cfg, inputs={"tokens.path": x0, "heads.path": D})
        for H in config.sec6_H:
            name = f"sec6_ou_H{H}"
            out[name] = {
                "name": name,
                "model": {"direction": "descent"},
                "weights": {"process": "ornstein_uhlenbeck", "sigma2": 1.0, "F": "identity"},
                "tokens": {"init": "octahedral", "n": config.sec6_n, "d": 3, "noise": 0.05},
                "heads": {"init": "symmetric_gaussian", "H": H},
                "integrator": {"method": "euler", "dt": config.sec6_dt, "t1": config.sec6_t1},
                "record": {"every": max(1, round(0.1 / config.sec6_dt)), "heads": False},
                "paths": config.sec6_paths,
                "seed": config.seed,
                "precision": "float64",
            }
        return out

    # -- analysis --------------------------------------------------------------------------------------
    def _law_part(self, config: MeanFieldHeadsConfig, k: int, runs: StudyRuns) -> dict:
        key = self._key(config, k)
        law = config.laws[k]
        ref = runs.open(f"{key}_ref")
        xr_ = torch.as_tensor(np.asarray(ref.positions.values))[0]  # [K, n, d]
        times = np.asarray(ref.time.values, float)
        E_ref = np.asarray(ref.energy.values)[0]
        G2_ref = np.asarray(ref.G2.values)[0]
        per_H: dict[str, dict] = {}
        for H in config.H:
            ds = runs.open(f"{key}_H{H}")
            x = torch.as_tensor(np.asarray(ds.positions.values))  # [P, K, n, d]
            w2 = np.stack([wasserstein2(x[:, j], xr_[j]).numpy() for j in range(len(times))], 1)  # [P, K]
            sw = sliced_wasserstein_sphere(x[:, -1], xr_[-1], n_projections=200, seed=0).numpy()
            E = np.asarray(ds.energy.values)
            G2 = np.asarray(ds.G2.values)
            per_H[str(H)] = {
                "W2_T": mean_sd(w2[:, -1]),
                "W2_t": w2.mean(0).tolist(),
                "SW2_T": mean_sd(sw),
                "absdE_T": mean_sd(np.abs(E[:, -1] - E_ref[-1])),
                "dE_mc_mean_T": float(abs(E[:, -1].mean() - E_ref[-1])),
                "dE_mc_mean_se_T": float(E[:, -1].std(ddof=1) / math.sqrt(E.shape[0]))
                if E.shape[0] > 1
                else float("nan"),
                "absdG2_T": mean_sd(np.abs(G2[:, -1] - G2_ref[-1])),
                "G2_T": mean_sd(G2[:, -1]),
                "E_T": mean_sd(E[:, -1]),
            }
        Hs = np.array(config.H, float)
        hi = config.H_ref / config.fit_margin

        def series(q: str) -> list[float]:
            return [v["mean"] if isinstance(v := per_H[str(h)][q], dict) else v for h in config.H]

        fits = {q: fit_rate(Hs, series(q), hi=hi) for q in RATES}
        # the same rates on the large-H tail, where W2 is far from its O(1) saturation on the sphere
        fits_tail = {q: fit_rate(Hs, series(q), lo=config.fit_tail_min, hi=hi) for q in RATES}
        # G^2 at frozen tokens: fresh draws per H; the excess over the mean-field value against c/H
        frozen: dict[str, dict] = {}
        big = torch.as_tensor(self._heads(config, k, config.mf_sample, 1, salt=777_777 + k))[0]
        for label, xt in (("initial", xr_[0]), ("reference_T", xr_[-1])):
            dec = gradient_mc_decomposition(xt, big)
            means, ses = [], []
            for H in config.H:
                D = torch.as_tensor(self._heads(config, k, H, config.g2_draws, salt=555_555 + 7 * H + k))
                g = strong_upper_gradient_sq(xt.expand(config.g2_draws, -1, -1), D).numpy()
                means.append(float(g.mean()))
                ses.append(float(g.std(ddof=1) / math.sqrt(g.size)) if g.size > 1 else float("nan"))
            excess = np.array(means) - dec["G2_mean_field"]
            pred = dec["G2_mean_field"] + dec["c"] / Hs
            frozen[label] = {
                "G2_mean": means,
                "G2_se": ses,
                "G2_mean_field": dec["G2_mean_field"],
                "c": dec["c"],
                "predicted": pred.tolist(),
                "ratio_measured_to_predicted": (np.array(means) / pred).tolist(),
                "fit_excess": fit_rate(Hs, excess, hi=hi),
            }
        return {
            "law": law.model_dump(),
            "H": list(config.H),
            "H_ref": config.H_ref,
            "times": times.tolist(),
            "E_ref_T": float(E_ref[-1]),
            "G2_ref_T": float(G2_ref[-1]),
            "per_H": per_H,
            "fits": fits,
            "fits_tail": fits_tail,
            "frozen_tokens_G2": frozen,
        }

    def _sec6_part(self, config: MeanFieldHeadsConfig, runs: StudyRuns) -> dict:
        """Measured late G^2 of the Sec. 6 OU runs against the derived G2_inf + c/H on their clouds."""
        rows: dict[str, dict] = {}
        law = OUStationaryLaw(kind="ou_stationary")
        fresh = torch.as_tensor(
            draw_heads(law.kind, 1, config.mf_sample, 3, seed=config.seed + 31, **law.params())
        )[0]
        for H in config.sec6_H:
            ds = runs.open(f"sec6_ou_H{H}")
            times = np.asarray(ds.time.values, float)
            T = times[-1]
            late = np.where(times >= T / 2)[0]
            ka, kb = late[0], len(times) - 1
            iv = np.asarray(ds.int_G2.values)
            measured = (iv[:, kb] - iv[:, ka]) / (times[kb] - times[ka])  # per path, ledger integral
            pos = torch.as_tensor(np.asarray(ds.positions.values))  # [P, K, n, d]
            pick = late[:: max(1, len(late) // 5)]  # a few late clouds per path
            g_inf, cs = [], []
            for p in range(pos.shape[0]):
                for j in pick:
                    dec = gradient_mc_decomposition(pos[p, j], fresh)
                    g_inf.append(dec["G2_mean_field"])
                    cs.append(dec["c"])
            g_inf_m, c_m = float(np.mean(g_inf)), float(np.mean(cs))
            pred = g_inf_m + c_m / H
            rows[str(H)] = {
                "G2_late_measured": mean_sd(measured),
                "G2_inf_on_clouds": g_inf_m,
                "c_on_clouds": c_m,
                "G2_predicted": pred,
                "ratio_measured_to_predicted": float(measured.mean() / pred),
                "window": [float(times[ka]), float(times[kb])],
            }
        Hs = [float(h) for h in config.sec6_H]
        return {
            "H": list(config.sec6_H),
            "per_H": rows,
            "fit_measured": fit_rate(Hs, [rows[str(h)]["G2_late_measured"]["mean"] for h in config.sec6_H]),
            "fit_predicted": fit_rate(Hs, [rows[str(h)]["G2_predicted"] for h in config.sec6_H]),
        }

    def analyse(self, config: MeanFieldHeadsConfig, runs: StudyRuns, out_dir: Path) -> StudyResult:
        laws = {self._key(config, k): self._law_part(config, k, runs) for k in range(len(config.laws))}
        summary = {
            "laws": laws,
            "sec6_ou": self._sec6_part(config, runs) if config.sec6_H else None,
            "sizes": {
                "n": config.n,
                "d": config.d,
                "T": config.t1,
                "dt": config.dt,
                "paths": config.paths,
                "H": list(config.H),
                "H_ref": config.H_ref,
                "g2_draws": config.g2_draws,
                "mf_sample": config.mf_sample,
            },
            "fit_note": "y = a H^b by least squares on (log H, log y) over H <= H_ref / fit_margin and, in "
            "fits_tail, over fit_tail_min <= H <= H_ref / fit_margin; 95% t "
            "intervals; expected b = -1/2 per draw (W2, |E - E_ref|), -1 for the G^2 excess at frozen "
            "tokens (derived: E G^2(mu; Theta^H) = G2_inf + c/H)",
        }
        return StudyResult(summary=summary, verdicts=records(summary, config), tables=tables(summary, config))


def _fit_cells(f: dict | None, prefix: str = "") -> dict:
    """The cells of a fit (``fit_rate``): exponent, its 95% interval, the H range; the reason when none."""
    f = f or {}
    return {
        **ci_cells(f, "b", prefix=prefix),
        f"{prefix}range": f.get("range"),
        f"{prefix}no_fit": None if not f or "b" in f else f.get("error", "no fit"),
    }


def _fit_columns(prefix: str = "", what: str = "fitted b") -> list[Column]:
    return [*ci_columns(f"{prefix}b", what, ".3f"), Column(f"{prefix}range", "on H in", "g")]


def _no_fit_column(rows: list[dict], keys: tuple[str, ...]) -> list[Column]:
    """A column of the reasons a fit was not made, when some row has one."""
    if any(r[k] for r in rows for k in keys):
        for r in rows:
            r["no_fit"] = "; ".join(r[k] for k in keys if r[k])
        return [Column("no_fit", "not fitted")]
    return []


def tables(summary: dict, config: MeanFieldHeadsConfig | None = None) -> list[Table]:
    """The rates in H (per law and quantity), the per-H numbers and the Sec. 6 comparison (pure: from the
    summary's numbers). Sample summaries read ``mean +- sd`` over the head draws (paths for Sec. 6)."""
    s, laws = summary["sizes"], summary["laws"]
    rate_rows = []
    for key, part in laws.items():
        for q, f in part["fits"].items():
            tail = part.get("fits_tail", {}).get(q)
            rate_rows.append(
                {
                    "law": key,
                    "quantity": RATES[q][0],
                    "expected": RATES[q][1],
                    **_fit_cells(f),
                    **_fit_cells(tail, "tail_"),
                }
            )
        for label, fr in part["frozen_tokens_G2"].items():
            rate_rows.append(
                {
                    "law": key,
                    "quantity": f"G^2 excess at frozen tokens ({label})",
                    "expected": "-1",
                    **_fit_cells(fr["fit_excess"]),
                    **_fit_cells(None, "tail_"),
                }
            )
    out = [
        Table(
            columns=[
                Column("law"),
                Column("quantity"),
                Column("expected", "expected b"),
                *_fit_columns(what="fitted b, all H"),
                *_fit_columns("tail_", "fitted b, large-H tail"),
                *_no_fit_column(rate_rows, ("no_fit", "tail_no_fit")),
            ],
            rows=rate_rows,
            note=f"Sizes: n = {s['n']} tokens on S^{s['d'] - 1}, frozen heads, T = {s['T']:g}, "
            f"dt = {s['dt']:g}, {s['paths']} head draws per H, H in {s['H']}, reference H_ref = "
            f"{s['H_ref']} (one draw), "
            f"{s['g2_draws']} fresh draws per H for G^2 at frozen tokens; G2_inf and c from "
            f"{s['mf_sample']} heads. {summary.get('fit_note', '')}",
            id="rates",
        )
    ]
    per_h_rows = []
    for key, part in laws.items():
        fr = part["frozen_tokens_G2"]["reference_T"]
        for i, H in enumerate(part["H"]):
            r = part["per_H"][str(H)]
            per_h_rows.append(
                {
                    "law": key,
                    "H": H,
                    **r,
                    "SW2_T": r["SW2_T"]["mean"],
                    "absdE_T": r["absdE_T"]["mean"],
                    "G2_T": r["G2_T"]["mean"],
                    "G2_ref_cloud": fr["G2_mean"][i],
                    "G2_ref_cloud_predicted": fr["predicted"][i],
                }
            )
    out.append(
        Table(
            columns=[
                Column("law"),
                Column("H"),
                Column("W2_T", fmt=".3g"),
                Column("SW2_T", fmt=".3g"),
                Column("absdE_T", "abs dE_T", ".3g"),
                Column("dE_mc_mean_T", "abs(<E> - E_ref)", ".3g"),
                Column("dE_mc_mean_se_T", "its s.e.", ".2g"),
                Column("G2_T", "G^2_T", ".3g"),
                Column("G2_ref_cloud", "G^2 at ref cloud, measured", ".3g"),
                Column("G2_ref_cloud_predicted", "predicted G2_inf + c/H", ".3g"),
            ],
            rows=per_h_rows,
            id="per_H",
        )
    )
    sec6 = summary.get("sec6_ou")
    if sec6:
        out.append(
            Table(
                columns=[
                    Column("H"),
                    Column("G2_late_measured", "G^2 measured", ".3g"),
                    Column("G2_inf_on_clouds", "G2_inf", ".3g"),
                    Column("c_on_clouds", "c", ".3g"),
                    Column("G2_predicted", "predicted", ".3g"),
                    Column("ratio_measured_to_predicted", "measured / predicted", ".2f"),
                ],
                rows=[{"H": H, **sec6["per_H"][str(H)]} for H in sec6["H"]],
                note="Sec. 6 OU regime: late-time G^2 (second half, ledger integral) against the derived "
                "Monte Carlo prediction G2_inf(mu_t) + c(mu_t)/H on the run's own late clouds (fresh "
                "OU-stationary heads).",
                id="sec6",
            )
        )
        fit_rows = [
            {"series": name, **_fit_cells(sec6[key])}
            for name, key in (("measured G^2", "fit_measured"), ("prediction", "fit_predicted"))
        ]
        out.append(
            Table(
                columns=[Column("series"), *_fit_columns(), *_no_fit_column(fit_rows, ("no_fit",))],
                rows=fit_rows,
                note="Sec. 6 OU regime: the exponent b of the late-time G^2 = a H^b.",
                id="sec6_fits",
            )
        )
    return out


# -- verdict records ---------------------------------------------------------------------------------------
_SRC_52 = "2605.18870, Sec. 5.2 (finite H: Theta^H -> Theta, u^H_t -> u_t)"
_SRC_MC = (
    "derived: attnflow.analysis.theorems.gradient_mc_decomposition (variance of a sample mean over heads)"
)


def records(summary: dict, config: MeanFieldHeadsConfig) -> list:
    """The verdict records of ``mean_field_heads`` from its summary.

    * ``mean-field-heads-convergence`` (test of Sec. 5.2): W2(mu^H_T, mu^ref_T) -> 0 (tail exponent < 0);
    * ``mean-field-heads-w2-rate`` (test, derived): the tail exponent in ``criterion_w2_rate_band``;
    * ``mean-field-heads-g2-frozen-1-over-h`` (identity): the 1/H excess of G^2 at frozen tokens is the
      variance of a sample mean of i.i.d. heads;
    * ``mean-field-heads-g2-frozen-prediction`` (test, derived): G2_inf + c/H predicts the measured G^2 at
      frozen tokens (ratio in ``criterion_prediction_band`` for H >= ``criterion_prediction_min_H``);
    * ``mean-field-heads-sec6-mc-explanation`` (test, derived): Sec. 6's late-time G^2 under OU equals the
      frozen-token prediction on the runs' own late clouds.
    """
    laws = summary["laws"]
    out = []
    conv = Criterion(
        quantity="exponent b of W2(mu^H_T, mu^ref_T) = a H^b on the tail H >= fit_tail_min",
        op="<",
        threshold=0.0,
        declared_in="the claim itself (convergence): b < 0",
    )
    lo, hi = config.criterion_w2_rate_band
    rate = Criterion(
        quantity="exponent b of W2(mu^H_T, mu^ref_T) = a H^b on the tail H >= fit_tail_min",
        op="within",
        threshold=(float(lo), float(hi)),
        declared_in="config: criterion_w2_rate_band",
        note="derived H^-1/2 (central limit theorem for the field, then Gronwall)",
    )

    def fit_checks(crit):
        tail = {k: v["fits_tail"]["W2_T"] for k, v in laws.items() if "b" in v["fits_tail"]["W2_T"]}
        return tail, [
            *fit_robustness(crit, "head law", tail, "b"),
            *fit_robustness(
                crit, "fit range: all H (from H = 1)", {k: v["fits"]["W2_T"] for k, v in laws.items()}, "b"
            ),
            *fit_robustness(
                crit,
                "estimator: sliced spherical W2",
                {k: v["fits_tail"]["SW2_T"] for k, v in laws.items()},
                "b",
            ),
        ]

    for rid, crit, statement, source in (
        (
            "mean-field-heads-convergence",
            conv,
            "the token flow with H i.i.d. heads converges to the mean-field flow as H grows",
            _SRC_52,
        ),
        (
            "mean-field-heads-w2-rate",
            rate,
            "W2(mu^H_T, mu^ref_T) decays like H^-1/2 per draw",
            "derived: docs/theory_checks.md#mean-field-heads (CLT for the field, Gronwall); " + _SRC_52,
        ),
    ):
        tail, checks = fit_checks(crit)
        if not tail:
            continue
        k0 = next(iter(tail))
        out.append(
            record_test(
                id=rid,
                statement=statement + f" (main: law {k0})",
                source=source,
                criterion=crit,
                value=tail[k0]["b"],
                ci95=tail[k0]["b_ci"],
                samples=int(tail[k0]["points"]),
                method=f"t interval of the log-log slope over {tail[k0]['points']} H values (means of "
                f"{summary['sizes']['paths']} draws; reference H_ref = {summary['sizes']['H_ref']})",
                robustness=checks,
                extra={"range": tail[k0]["range"]},
            )
        )
    # frozen tokens: 1/H as the variance of a sample mean (identity) and the derived prediction (test)
    excess = {
        f"{k} {c}": f["fit_excess"].get("b")
        for k, v in laws.items()
        for c, f in v["frozen_tokens_G2"].items()
    }
    out.append(
        record_identity(
            id="mean-field-heads-g2-frozen-1-over-h",
            statement="at frozen tokens the excess E G^2(mu; Theta^H) - G2_inf decays like 1/H",
            source=_SRC_MC,
            why="v_i is a mean of H i.i.d. head velocities, so E|v_i|^2 = |E V_i|^2 + tr Cov(V_i)/H exactly; "
            "only the fluctuation of the harmonic-mean mobility is neglected: the 1/H law is the variance "
            "of a sample mean, a consequence of the construction, not a finding",
            result={"fitted_exponents": excess},
        )
    )
    plo, phi = config.criterion_prediction_band
    pred = Criterion(
        quantity="measured / predicted G^2 at frozen tokens, prediction G2_inf + c/H",
        op="within",
        threshold=(float(plo), float(phi)),
        declared_in="config: criterion_prediction_band, criterion_prediction_min_H",
    )
    Hs = list(summary["sizes"]["H"])
    keep = [i for i, h in enumerate(Hs) if h >= config.criterion_prediction_min_H]
    per_case = {}
    for k, v in laws.items():
        for c, f in v["frozen_tokens_G2"].items():
            for i in keep:
                m, se, p = f["G2_mean"][i], f["G2_se"][i], f["predicted"][i]
                per_case[f"{k} {c} H={Hs[i]}"] = (m / p, ((m - 1.96 * se) / p, (m + 1.96 * se) / p))
    if per_case:
        keys = list(per_case)
        first = keys[-1]  # the largest H of the first law: the most asymptotic
        first = [kk for kk in keys if kk.startswith(keys[0].rsplit(" H=", 1)[0])][-1]
        inside = sum(1 for r, _ in per_case.values() if plo <= r <= phi)
        out.append(
            record_test(
                id="mean-field-heads-g2-frozen-prediction",
                statement="at frozen tokens the derived G2_inf + c/H predicts the measured G^2 of H "
                "i.i.d. heads "
                f"(H >= {config.criterion_prediction_min_H}): the mobility fluctuation is negligible",
                source=_SRC_MC,
                criterion=pred,
                value=per_case[first][0],
                ci95=per_case[first][1],
                samples=int(summary["sizes"]["g2_draws"]),
                method=f"normal interval of the mean over {summary['sizes']['g2_draws']} head draws, "
                f"divided by "
                "the prediction (its own error neglected)",
                robustness=[
                    *robustness_checks(
                        pred,
                        "law, cloud and H",
                        keys,
                        [per_case[kk][0] for kk in keys],
                        ci95=[per_case[kk][1] for kk in keys],
                    )
                ],
                extra={"main_case": first, "inside_band": f"{inside}/{len(per_case)}"},
            )
        )
    sec6 = summary.get("sec6_ou")
    if sec6:
        ratios = {h: v["ratio_measured_to_predicted"] for h, v in sec6["per_H"].items()}
        cis = {}
        for h, v in sec6["per_H"].items():
            g = v["G2_late_measured"]
            half = 1.96 * g["sd"] / math.sqrt(config.sec6_paths) / v["G2_predicted"]
            cis[h] = (ratios[h] - half, ratios[h] + half)
        hmax = list(ratios)[-1]
        out.append(
            record_test(
                id="mean-field-heads-sec6-mc-explanation",
                statement="the late-time G^2 of Sec. 6 under OU weights is the Monte Carlo effect of H "
                "heads at "
                "frozen tokens: it equals G2_inf + c/H computed on the runs' own late clouds",
                source=_SRC_MC + "; 2605.18870, Sec. 6 (G^2 decaying like O(1/H))",
                criterion=pred,
                value=ratios[hmax],
                ci95=cis[hmax],
                samples=int(config.sec6_paths),
                method=f"normal interval over {config.sec6_paths} paths of the time average over the window",
                robustness=[
                    *robustness_checks(
                        pred, "H", list(ratios), list(ratios.values()), ci95=list(cis.values())
                    )
                ],
                extra={
                    "outcome_by_H": {
                        h: "holds"
                        if plo <= cis[h][0] and cis[h][1] <= phi
                        else ("fails" if cis[h][1] < plo or cis[h][0] > phi else "inconclusive")
                        for h in ratios
                    },
                    "exponent_measured": [sec6["fit_measured"]["b"], *sec6["fit_measured"]["b_ci"]],
                    "exponent_predicted": [sec6["fit_predicted"]["b"], *sec6["fit_predicted"]["b_ci"]],
                },
                notes="measured/predicted by H: "
                + ", ".join(f"{r:.2f} (H = {h})" for h, r in ratios.items())
                + ". "
                + (
                    "The ratios trend with H, so the frozen-token prediction does not explain the "
                    "H-dependence at small H: the explanation is partial (it fails at small H), not a "
                    "finding. "
                    if all(a < b for a, b in itertools.pairwise(ratios.values()))
                    else ""
                )
                + "Independent review, /tmp/review_theorems: the 1/H identity is exact for E|v|^2 but only "
                "leading-order for G^2, because the harmonic-mean mobility is computed from the same H "
                "heads; the verdict machinery combines per-H outcomes into one verdict, so 'fails at small "
                "H' is recorded per H under extra.outcome_by_H, not as the verdict.",
            )
        )
    return out


register(MeanFieldHeadsStudy())
