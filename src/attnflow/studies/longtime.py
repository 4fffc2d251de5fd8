r"""Long-time behaviour under moving weights (arXiv 2605.18870, Thm 4.16, assumption (121)): ``longtime``.

Claim (Sec. 4.4, NOTES.md §4, §8): if :math:`\int_0^\infty|\Theta'_t|\,dt < \infty` (the head law has
finite length in W2), the omega-limit points of the token flow are stationary for a limiting head law
:math:`\bar\Theta` (:math:`G(\mu;\bar\Theta) = 0`), and :math:`|\partial_t E| \le C|\Theta'_t|`.
OU weights satisfy the assumption only in law, oscillating weights not at all, frozen weights trivially.

For each weight regime (OU, oscillating with shared forcing and with per-head phases, frozen) the study
runs ``paths`` paths with the heads recorded (``record.heads: true``) and measures

* pathwise :math:`|\Theta'_t|` and its integral: exact OT between the head clouds at consecutive records
  (:func:`attnflow.analysis.theorems.head_metric_derivative`), at record spacings
  ``spacings`` x (record_every dt): the exponent of the length in the spacing tells a rough path
  (OU: -1/2, an infinite length as the spacing goes to 0) from a rectifiable one (0);
* :math:`|\Theta'_t|` in law: the moment-matched Gaussian W2 between the laws of a head (pooled over
  paths and heads) at consecutive records (:func:`~attnflow.analysis.theorems.gaussian_wasserstein2`;
  exact for OU, whose heads stay Gaussian);
* the length over the second half [T/2, T] (pathwise and in law) against the first half: a finite
  integral has a vanishing tail;
* :math:`\int_0^t \partial_s E\,ds` (the ledger's ``int_dtE``) and :math:`\int|\partial_s E|` over the
  second half; time averages of :math:`G^2`, :math:`\hat G^2` over the four quarters of [0, T];
* stationarity of the late cloud :math:`\mu_T` for a limit law :math:`\bar\Theta` (OU: ``H_bar`` fresh heads
  from the stationary law, the mean-field value with its Monte Carlo bias removed; frozen: the final
  heads; oscillating: the heads at T and the heads pooled over the last forcing period):
  :math:`G^2(\mu_T;\bar\Theta)` against its median over ``random_clouds`` uniform clouds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveInt, field_validator, model_validator

from ..analysis.theorems import (
    draw_heads,
    fit_rate,
    gaussian_wasserstein2,
    gradient_mc_decomposition,
    head_metric_derivative,
    ou_law_length,
)
from ..model import tokens as tokens_mod
from ..observables import strong_upper_gradient_sq
from .base import Study, StudyAnalysis, StudyConfig, StudyRuns
from .common import distinct_sorted, finish_analysis, mean_sd, whole_steps
from .registry import register

__all__ = ["LongtimeConfig", "LongtimeStudy"]

REGIMES = ("ou", "osc_shared", "osc_per_head", "frozen")
_WEIGHTS = {
    "ou": {"process": "ornstein_uhlenbeck", "sigma2": 1.0, "F": "identity"},
    "osc_shared": {"process": "oscillating", "forcing": "s2", "phases": "shared"},
    "osc_per_head": {"process": "oscillating", "forcing": "s2", "phases": "per_head"},
    "frozen": {"process": "constant"},
}


class LongtimeConfig(StudyConfig):
    """Parameters of ``longtime``; the defaults are the committed full run (docs/studies)."""

    regimes: list[Literal["ou", "osc_shared", "osc_per_head", "frozen"]] = Field(
        list(REGIMES),
        min_length=1,
        description="the weight regimes (ou, osc_shared, osc_per_head, frozen)",
        examples=[["ou", "frozen"]],
    )
    H: PositiveInt = Field(8, description="heads per path", examples=[8])
    n: int = Field(64, ge=2, description="tokens (>= 2) on S^2", examples=[64])
    paths: int = Field(
        8, ge=2, description="paths per regime (>= 2: the law is a mean over them)", examples=[8]
    )
    t1: float = Field(30.0, gt=0, description="the final time T (> 0)", examples=[30.0])
    dt: float = Field(0.01, gt=0, description="the time step (> 0, T/dt whole)", examples=[0.01])
    record_every: PositiveInt = Field(10, description="steps between records", examples=[10])
    spacings: list[PositiveInt] = Field(
        [1, 2, 4, 8],
        min_length=3,
        description="record subsampling factors for the length-vs-spacing fit (>= 3 distinct)",
        examples=[[1, 2, 4, 8]],
    )
    direction: Literal["ascent", "descent"] = Field(
        "descent", description="the token direction (descent: the authors' code)", examples=["descent"]
    )
    H_bar: int = Field(2048, ge=2, description="fresh heads standing for the OU limit law", examples=[2048])
    random_clouds: int = Field(16, ge=2, description="uniform clouds of the reference G^2", examples=[16])
    seed: int = Field(0, ge=0, description="the seed (>= 0)", examples=[0])

    @field_validator("spacings")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        return distinct_sorted(v, "spacings")

    @model_validator(mode="after")
    def _steps(self):
        k = whole_steps(self.t1, self.dt)
        records = round(k) // self.record_every
        if records < 4 * max(self.spacings):
            raise ValueError(
                f"the run must hold at least 4 x max(spacings) records: got {records} records and "
                f"spacings {self.spacings}; lower record_every or the spacings, or raise t1"
            )
        return self


def _window_avg(integral: np.ndarray, times: np.ndarray, ta: float, tb: float) -> np.ndarray:
    ka, kb = int(np.argmin(abs(times - ta))), int(np.argmin(abs(times - tb)))
    return (integral[:, kb] - integral[:, ka]) / (times[kb] - times[ka])


def _law_length(heads: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Cumulative length in law: moment-matched Gaussian W2 of the pooled heads at consecutive records."""
    P, K, H = heads.shape[:3]
    flat = heads.transpose(1, 0, 2, 3, 4).reshape(K, P * H, -1)
    m = flat.mean(1)
    S = [np.cov(flat[k].T) for k in range(K)]
    steps = [gaussian_wasserstein2(m[k], S[k], m[k + 1], S[k + 1]) for k in range(K - 1)]
    return np.concatenate([[0.0], np.cumsum(steps)])


def _law_distance_to_last(heads: np.ndarray) -> np.ndarray:
    """Moment-matched Gaussian W2 between the pooled heads at each record and at the last one."""
    P, K, H = heads.shape[:3]
    flat = heads.transpose(1, 0, 2, 3, 4).reshape(K, P * H, -1)
    m = flat.mean(1)
    S = [np.cov(flat[k].T) for k in range(K)]
    return np.array([gaussian_wasserstein2(m[k], S[k], m[-1], S[-1]) for k in range(K)])


class LongtimeStudy(Study):
    """Integrability of |Theta'| and stationarity of the late cloud, per weight regime (module docstring)."""

    name = "longtime"
    description = (
        "Thm 4.16 / (121) of arXiv 2605.18870: length of the head law in W2 (pathwise and in law), decay "
        "of G^2 and stationarity of the late cloud, for OU, oscillating and frozen weights"
    )
    Config = LongtimeConfig

    def quick_params(self) -> dict:
        return {
            "H": 3,
            "n": 12,
            "paths": 3,
            "t1": 2.0,
            "dt": 0.02,
            "record_every": 2,
            "spacings": [1, 2, 4],
            "H_bar": 64,
            "random_clouds": 3,
        }

    def plan(self, config: LongtimeConfig) -> dict[str, dict]:
        return {
            reg: {
                "name": f"longtime_{reg}",
                "model": {"direction": config.direction},
                "weights": _WEIGHTS[reg],
                "tokens": {"init": "octahedral", "n": config.n, "d": 3, "noise": 0.05},
                "heads": {"init": "symmetric_gaussian", "H": config.H},
                "integrator": {"method": "euler", "dt": config.dt, "t1": config.t1},
                "record": {"every": config.record_every, "heads": True},
                "paths": config.paths,
                "seed": config.seed,
                "precision": "float64",
            }
            for reg in config.regimes
        }

    def _regime(self, config: LongtimeConfig, reg: str, runs: StudyRuns) -> dict:
        ds = runs.open(reg)
        times = np.asarray(ds.time.values, float)
        T = float(times[-1])
        heads = np.asarray(ds.heads.values)  # [P, K, H, d, d]
        P, K = heads.shape[:2]
        half = int(np.argmin(abs(times - T / 2)))
        # pathwise length, at the record spacing and coarser ones
        lengths = np.stack([head_metric_derivative(heads[p], times)[1] for p in range(P)])  # [P, K]
        by_spacing = {}
        for s in config.spacings:
            idx = np.arange(0, K, s)
            Ls = [head_metric_derivative(heads[p, idx], times[idx])[1][-1] for p in range(P)]
            by_spacing[str(s)] = {"spacing": float(times[idx[1]] - times[0]), "length_T": mean_sd(Ls)}
        fit_spacing = fit_rate(
            [v["spacing"] for v in by_spacing.values()], [v["length_T"]["mean"] for v in by_spacing.values()]
        )
        law_len = _law_length(heads, times)
        law_to_T = _law_distance_to_last(heads)
        # energy derivative and G^2
        int_dtE = np.asarray(ds.int_dtE.values)
        dtE = np.asarray(ds.dtE_drift.values) + np.asarray(ds.dtE_ito.values)
        abs_dtE_late = np.trapezoid(np.abs(dtE[:, half:]), times[half:], axis=1)
        quarters = [(T * q / 4, T * (q + 1) / 4) for q in range(4)]
        G2q = {
            var: [mean_sd(_window_avg(np.asarray(ds[f"int_{var}"].values), times, a, b)) for a, b in quarters]
            for var in ("G2", "Ghat2")
        }
        # stationarity of the late cloud for the limit law
        xT = torch.as_tensor(np.asarray(ds.positions.isel(time=-1).values))  # [P, n, d]
        n = xT.shape[1]
        clouds = tokens_mod.uniform(config.random_clouds, n, 3, seed=config.seed + 99)
        DT = torch.as_tensor(heads[:, -1])  # [P, H, d, d]
        stat: dict[str, dict] = {}

        x0 = torch.as_tensor(np.asarray(ds.positions.isel(time=0).values))  # [P, n, d]

        def test(label: str, g_late, g_rand, g_start, note: str) -> None:
            med = float(np.median(g_rand))
            stat[label] = {
                "G2_late": mean_sd(g_late),
                "G2_random_median": med,
                "G2_initial_cloud": mean_sd(g_start),
                "ratio": float(np.mean(g_late) / med),
                "ratio_to_initial": float(np.mean(g_late) / np.mean(g_start)),
                "note": note,
            }

        if reg == "ou":
            bar = torch.as_tensor(draw_heads("ou_stationary", 1, config.H_bar, 3, seed=config.seed + 7))[0]
            g_late = np.array([gradient_mc_decomposition(xT[p], bar)["G2_mean_field"] for p in range(P)])
            g_rand = np.array([gradient_mc_decomposition(c, bar)["G2_mean_field"] for c in clouds])
            g0 = np.array([gradient_mc_decomposition(x0[p], bar)["G2_mean_field"] for p in range(P)])
            test(
                "stationary_law",
                g_late,
                g_rand,
                g0,
                f"Theta-bar: {config.H_bar} fresh OU-stationary heads, "
                "mean-field G^2 (Monte Carlo bias c/H_bar removed)",
            )
        else:
            g_late = strong_upper_gradient_sq(xT, DT).numpy()
            g_rand = np.array(
                [
                    strong_upper_gradient_sq(clouds, DT[p].expand(len(clouds), -1, -1, -1)).numpy()
                    for p in range(P)
                ]
            ).ravel()
            what = "the final heads (= the initial ones)" if reg == "frozen" else "the heads at T, frozen"
            test("heads_at_T", g_late, g_rand, strong_upper_gradient_sq(x0, DT).numpy(), f"Theta-bar: {what}")
            if reg != "frozen":
                period = 2 * math.pi
                last = times >= T - period
                if T >= period and last.sum() >= 2:
                    g_late, g_rand, g0 = [], [], []
                    for p in range(P):
                        pool = torch.as_tensor(heads[p, last].reshape(-1, 3, 3))
                        g_late.append(gradient_mc_decomposition(xT[p], pool)["G2_mean_field"])
                        g0.append(gradient_mc_decomposition(x0[p], pool)["G2_mean_field"])
                        g_rand += [gradient_mc_decomposition(c, pool)["G2_mean_field"] for c in clouds[:4]]
                    test(
                        "period_pooled",
                        g_late,
                        g_rand,
                        g0,
                        "Theta-bar: the heads pooled over the last forcing period 2 pi (time-averaged law)",
                    )
        if reg == "ou":  # the exact marginal law (derived closed form) next to the sample estimate
            exact = ou_law_length(times)
            extra = {
                "length_in_law_exact_T": float(exact[-1]),
                "length_in_law_exact_first_half": float(exact[half]),
                "length_in_law_exact_second_half": float(exact[-1] - exact[half]),
                "length_in_law_exact_infinity": float(ou_law_length([0.0, 60.0])[-1]),
            }
        else:
            extra = {}
        return {
            **extra,
            "weights": _WEIGHTS[reg],
            "T": T,
            "times": times.tolist(),
            "length_pathwise_T": mean_sd(lengths[:, -1]),
            "length_pathwise_first_half": mean_sd(lengths[:, half]),
            "length_pathwise_second_half": mean_sd(lengths[:, -1] - lengths[:, half]),
            "length_pathwise_t": lengths.mean(0).tolist(),
            "length_by_spacing": by_spacing,
            "fit_length_vs_spacing": fit_spacing,
            "length_in_law_T": float(law_len[-1]),
            "length_in_law_first_half": float(law_len[half]),
            "length_in_law_second_half": float(law_len[-1] - law_len[half]),
            "length_in_law_t": law_len.tolist(),
            "law_distance_to_T_t": law_to_T.tolist(),
            "law_distance_to_T_at": {
                f"{f:g}T": float(law_to_T[int(np.argmin(abs(times - f * T)))]) for f in (0.0, 0.25, 0.5, 0.75)
            },
            "int_dtE_T": mean_sd(int_dtE[:, -1]),
            "int_abs_dtE_second_half": mean_sd(abs_dtE_late),
            "G2_quarters": G2q["G2"],
            "Ghat2_quarters": G2q["Ghat2"],
            "G2_t": np.asarray(ds.G2.values).mean(0).tolist(),
            "stationarity": stat,
        }

    def analyse(
        self,
        config: LongtimeConfig,
        runs: StudyRuns,
        out_dir: Path,
        *,
        figures: Callable[..., dict] | None = None,
    ) -> StudyAnalysis:
        regimes = {reg: self._regime(config, reg, runs) for reg in config.regimes}
        summary = {
            "regimes": regimes,
            "sizes": {
                "n": config.n,
                "H": config.H,
                "paths": config.paths,
                "T": config.t1,
                "dt": config.dt,
                "record_dt": config.dt * config.record_every,
                "direction": config.direction,
                "H_bar": config.H_bar,
            },
            "fit_note": "length(T) = a spacing^b over the record spacings; 95% t intervals. b = -1/2: a "
            "Brownian (infinite-length) path; b = 0: a rectifiable path",
        }
        return finish_analysis(summary, markdown_table, out_dir, figures)


def _f(x: dict) -> str:
    return f"{x['mean']:.3g} +- {x['sd']:.2g}"


def markdown_table(summary: dict) -> str:
    """Lengths, energy derivative, G^2 decay and the stationarity test per regime, as Markdown."""
    s = summary["sizes"]
    lines = [
        f"Sizes: n = {s['n']} tokens on S^2 (octahedral start), H = {s['H']} heads, {s['paths']} paths per "
        f"regime, T = {s['T']:g}, dt = {s['dt']:g}, records every {s['record_dt']:g}, {s['direction']}.",
        "",
        "| regime | length pathwise [0,T/2] | [T/2,T] | b of length vs spacing [95% CI] "
        "| length in law [0,T/2] "
        "| [T/2,T] | int_0^T d_sE | int abs(d_sE) over [T/2,T] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for reg, r in summary["regimes"].items():
        f = r["fit_length_vs_spacing"]
        fb = f"{f['b']:.3f} [{f['b_ci'][0]:.3f}, {f['b_ci'][1]:.3f}]" if "b" in f else "-"
        lines.append(
            f"| {reg} | {_f(r['length_pathwise_first_half'])} "
            f"| {_f(r['length_pathwise_second_half'])} | {fb} "
            f"| {r['length_in_law_first_half']:.3g} | {r['length_in_law_second_half']:.3g} "
            f"| {_f(r['int_dtE_T'])} | {_f(r['int_abs_dtE_second_half'])} |"
        )
    ou = summary["regimes"].get("ou")
    if ou and "length_in_law_exact_T" in ou:
        lines += [
            "",
            "OU in law, exact marginal (derived closed form): length "
            f"{ou['length_in_law_exact_first_half']:.3g} "
            f"on [0, T/2], {ou['length_in_law_exact_second_half']:.3g} on [T/2, T], "
            f"{ou['length_in_law_exact_infinity']:.4g} on [0, inf). The sample estimate above (pooled over "
            "paths x heads, moment-matched) is dominated by its Monte Carlo noise, which is itself a rough "
            "path of size (paths H)^-1/2 per record.",
        ]
    lines += ["", "| regime | distance in law to the law at T, at t = 0, T/4, T/2, 3T/4 |", "|---|---|"]
    for reg, r in summary["regimes"].items():
        lines.append(f"| {reg} | {', '.join(f'{v:.3g}' for v in r['law_distance_to_T_at'].values())} |")
    lines += ["", "| regime | G^2 by quarter of [0, T] | Ghat^2 by quarter |", "|---|---|---|"]
    for reg, r in summary["regimes"].items():
        g = ", ".join(f"{q['mean']:.3g}" for q in r["G2_quarters"])
        gh = ", ".join(f"{q['mean']:.3g}" for q in r["Ghat2_quarters"])
        lines.append(f"| {reg} | {g} | {gh} |")
    lines += [
        "",
        "| regime | limit law Theta-bar | G^2(mu_T; Theta-bar) | median G^2(random; Theta-bar) | ratio "
        "| G^2(mu_0; Theta-bar) | ratio to mu_0 |",
        "|---|---|---|---|---|---|---|",
    ]
    for reg, r in summary["regimes"].items():
        for st in r["stationarity"].values():
            lines.append(
                f"| {reg} | {st['note']} | {_f(st['G2_late'])} | {st['G2_random_median']:.3g} "
                f"| {st['ratio']:.3g} "
                f"| {_f(st['G2_initial_cloud'])} | {st['ratio_to_initial']:.3g} |"
            )
    return "\n".join(lines) + "\n"


register(LongtimeStudy())
