r"""Studies ``critical_beta``, ``superadditivity`` and ``relu_vs_softmax`` on the equiangular scalar-head
reduced model (arXiv 2605.04279 claims 4-6; NOTES.md §7, :mod:`attnflow.analysis.reduced`).

Every reduced-model number is checked against the particle system: attnflow RK4 on n tokens of
:math:`\mathbb R^n` (heads :math:`a_hI`, values :math:`Hw_hI`) against scipy ``solve_ivp`` (DOP853,
rtol 1e-10) on :math:`\dot\rho`; the tables give the largest relative difference of the clustering times.

* ``critical_beta``: :math:`T_\varepsilon(\beta)` for n in {8, 32, 128}, several a and :math:`\rho_0`.
  The transition :math:`\beta^*` is located where :math:`d\ln T_\varepsilon/d\beta` reaches half its
  large-:math:`\beta` value :math:`a(1-\rho_0)` (the same criterion applied to the initial rate
  :math:`\dot\rho(\rho_0)` gives exactly the candidate :math:`\beta_c = \ln(n-1)/(a(1-\rho_0))`).
* ``superadditivity``: two heads (a_1, a_2), weights 1/2, against one head of the mean a: the ratio
  :math:`T_{\rm hom}/T_{\rm het}` (> 1: heterogeneous faster) on a grid, against the Jensen region
  :math:`\beta\bar a(1-\rho_0) > \ln(n-1)`.
* ``relu_vs_softmax``: :math:`T_\varepsilon` of ReLU and softmax, full and linearised at
  :math:`\rho = 0`, against n and beta; fitted exponents :math:`T\propto n^p`.

They compute in ``analyse`` (``plan`` returns no runs): not resumable per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import Field, PositiveFloat, confloat, conint

from ..analysis.reduced import EquiangularModel, critical_beta, crossing_time, equiangular_particles
from .base import Study, StudyAnalysis, StudyConfig, StudyRuns
from .multihead_common import fit_order, jsonable, one_thread
from .registry import register

__all__ = ["CriticalBetaStudy", "ReluVsSoftmaxStudy", "SuperadditivityStudy"]


def _particle_time(model: EquiangularModel, rho0: float, eps: float, T_ref: float) -> tuple[float, float]:
    """T_eps from attnflow RK4 particles (dt from the reduced prediction) and the step used."""
    dt = float(np.clip(T_ref / 1500.0, 0.01, 0.05))
    t1 = dt * math.ceil(1.05 * T_ref / dt + 4)
    out = equiangular_particles(model, rho0, t1, dt)
    return crossing_time(out["time"], out["rho"], 1.0 - eps), dt


def _half_slope(beta: np.ndarray, T: np.ndarray, target: float) -> float:
    """beta where the secant slope of ln T (at midpoints) crosses ``target`` (linear interpolation)."""
    lb = np.log(T)
    slope = np.diff(lb) / np.diff(beta)
    mid = 0.5 * (beta[1:] + beta[:-1])
    above = np.nonzero(slope >= target)[0]
    if above.size == 0 or above[0] == 0:
        return math.nan
    k = above[0]
    return float(np.interp(target, slope[k - 1 : k + 1], mid[k - 1 : k + 1]))


# -- critical_beta -----------------------------------------------------------------------------------
class CriticalBetaConfig(StudyConfig):
    n: list[conint(ge=3)] = Field(
        [8, 32, 128], min_length=1, description="token counts (>= 3)", examples=[[8, 32]]
    )
    a: list[PositiveFloat] = Field([0.5, 1.0, 2.0], min_length=1, description="head scales a > 0")
    rho0: list[confloat(ge=0, lt=1)] = Field(
        [0.0, 0.5], min_length=1, description="initial inner products in [0, 1)", examples=[[0.0]]
    )
    eps: PositiveFloat = Field(1e-2, lt=1, description="T_eps: rho reaches 1 - eps", examples=[0.01])
    ratios: list[PositiveFloat] = Field(
        [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0],
        min_length=3,
        description="particle betas / beta_c (points whose reduced T_eps exceeds t_budget are skipped)",
    )
    t_budget: PositiveFloat = Field(400.0, description="largest T_eps run as particles", examples=[400.0])
    dense: int = Field(81, ge=10, description="reduced-model betas per curve", examples=[81])


class CriticalBetaStudy(Study):
    name = "critical_beta"
    description = (
        "arXiv 2605.04279: clustering time T_eps against beta for scalar heads (n = 8, 32, 128); transition "
        "from the particles vs the candidate beta_c = ln(n-1) / (a (1 - rho0))"
    )
    Config = CriticalBetaConfig

    def quick_params(self) -> dict:
        return {"n": [8], "a": [1.0], "rho0": [0.0], "ratios": [1.5, 2.5, 3.5], "dense": 12}

    def plan(self, config) -> dict:
        return {}

    def analyse(self, config, runs: StudyRuns, out_dir: Path, *, figures: Callable | None = None):
        c = config
        curves, rows = [], []
        with one_thread():
            for n in c.n:
                for r0 in c.rho0:
                    for a in c.a:
                        bc = critical_beta(n, a, r0)
                        dense = np.linspace(0.2, 4.0, c.dense) * bc
                        T_dense = np.array(
                            [EquiangularModel(n=n, beta=b, a=(a,)).clustering_time(r0, c.eps) for b in dense]
                        )
                        b_red = _half_slope(dense, T_dense, 0.5 * a * (1 - r0))
                        # particles: every ratio for a = 1 (or the first a); a collapse check otherwise
                        ratios = c.ratios if a == c.a[min(1, len(c.a) - 1)] or len(c.a) == 1 else [1.0]
                        pb = np.array(ratios) * bc
                        T_red = np.array(
                            [EquiangularModel(n=n, beta=b, a=(a,)).clustering_time(r0, c.eps) for b in pb]
                        )
                        keep = T_red <= c.t_budget  # longer particle runs are skipped (not checked)
                        pb, T_red = pb[keep], T_red[keep]
                        T_par = np.array(
                            [
                                _particle_time(EquiangularModel(n=n, beta=b, a=(a,)), r0, c.eps, t)[0]
                                for b, t in zip(pb, T_red, strict=True)
                            ]
                        )
                        b_par = _half_slope(pb, T_par, 0.5 * a * (1 - r0)) if len(pb) >= 3 else math.nan
                        rel = float(np.max(np.abs(T_par / T_red - 1)))
                        curves.append(
                            {
                                "n": n,
                                "rho0": r0,
                                "a": a,
                                "beta": dense,
                                "T": T_dense,
                                "beta_p": pb,
                                "T_p": T_par,
                            }
                        )
                        rows.append(
                            {
                                "n": n,
                                "rho0": r0,
                                "a": a,
                                "beta_c": bc,
                                "beta_star_reduced": b_red,
                                "beta_star_particles": b_par,
                                "ratio_reduced": b_red / bc,
                                "ratio_particles": b_par / bc,
                                "T_at_beta_c": float(T_red[np.isclose(pb, bc)][0])
                                if np.isclose(pb, bc).any()
                                else None,
                                "particle_points": int(len(pb)),
                                "particle_vs_reduced_max_rel": rel,
                            }
                        )
        # the form the data support: beta* a (1 - rho0) = k ln(n - 1) + c
        X = np.array([math.log(r["n"] - 1) for r in rows])
        Y = np.array([r["beta_star_reduced"] * r["a"] * (1 - r["rho0"]) for r in rows])
        ok = np.isfinite(Y)
        fit = None
        if len(set(X[ok])) >= 2:
            k, c0 = np.polyfit(X[ok], Y[ok], 1)
            fit = {
                "k": float(k),
                "c": float(c0),
                "max_abs_residual": float(np.max(np.abs(k * X[ok] + c0 - Y[ok]))),
            }
        per_rho0 = {}
        for r0 in c.rho0:
            sel = ok & np.array([r["rho0"] == r0 for r in rows])
            if len(set(X[sel])) >= 2:
                k, c0 = np.polyfit(X[sel], Y[sel], 1)
                per_rho0[str(r0)] = {
                    "k": float(k),
                    "c": float(c0),
                    "max_abs_residual": float(np.max(np.abs(k * X[sel] + c0 - Y[sel]))),
                }
        summary = jsonable(
            {"rows": rows, "fit_beta_star": fit, "fit_beta_star_per_rho0": per_rho0, "eps": c.eps}
        )
        lines = [
            f"T_eps: first time the mean pairwise inner product reaches 1 - {c.eps:g}; beta* = where d ln T "
            "/ d beta "
            "reaches a (1 - rho0) / 2 (half the large-beta slope); reduced: solve_ivp (rtol 1e-10) on a "
            "dense grid; "
            "particles: attnflow rk4 at beta / beta_c in " + ", ".join(f"{r:g}" for r in c.ratios) + ".",
            "",
            "| n | rho0 | a | beta_c (candidate) | beta* reduced | beta*/beta_c | beta* particles | "
            "beta*/beta_c | "
            "T_eps(beta_c) | particles vs reduced (max rel) |",
            "|" + "---|" * 10,
        ]
        for r in rows:
            tc = "-" if r["T_at_beta_c"] is None else f"{r['T_at_beta_c']:.4g}"
            lines.append(
                f"| {r['n']} | {r['rho0']:g} | {r['a']:g} | {r['beta_c']:.4g} | "
                f"{r['beta_star_reduced']:.4g} | "
                f"{r['ratio_reduced']:.3f} | {r['beta_star_particles']:.4g} | {r['ratio_particles']:.3f} | "
                f"{tc} | "
                f"{r['particle_vs_reduced_max_rel']:.1e} |"
            )
        if fit:
            lines += [
                "",
                f"Fit over all rows: beta* a (1 - rho0) = {fit['k']:.3f} ln(n - 1) + {fit['c']:.3f} "
                f"(max residual {fit['max_abs_residual']:.3f}); the candidate is k = 1, c = 0.",
            ]
            for r0, f in per_rho0.items():
                lines.append(
                    f"- rho0 = {r0}: beta* a (1 - rho0) = {f['k']:.3f} ln(n - 1) + {f['c']:.3f} "
                    f"(max residual {f['max_abs_residual']:.3f})"
                )
        files = figures({"study": self.name, "curves": curves, "rows": rows}, out_dir) if figures else {}
        return StudyAnalysis(summary=summary, table="\n".join(lines) + "\n", figures=files)


# -- superadditivity ---------------------------------------------------------------------------------
class SuperadditivityConfig(StudyConfig):
    n: int = Field(32, ge=3, description="tokens (>= 3)", examples=[32])
    rho0: float = Field(0.0, ge=0, lt=1, description="initial inner product", examples=[0.0])
    eps: PositiveFloat = Field(1e-2, lt=1, description="T_eps level", examples=[0.01])
    betas: list[PositiveFloat] = Field([1.0, 2.0, 4.0, 6.0], min_length=1, description="inverse temperatures")
    a_grid: list[PositiveFloat] = Field(
        [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5], min_length=2, description="head scales of the grid"
    )
    particle_checks: int = Field(6, ge=0, description="grid points also run as particles", examples=[4])
    t_budget: PositiveFloat = Field(
        200.0, description="largest T_eps run as particles (longer points are not checked)", examples=[200.0]
    )


class SuperadditivityStudy(Study):
    name = "superadditivity"
    description = (
        "arXiv 2605.04279: heterogeneous scalar heads (a1, a2) vs homogeneous heads of the same mean: "
        "ratio of clustering rates vs the Jensen region beta a (1 - rho) > ln(n - 1)"
    )
    Config = SuperadditivityConfig

    def quick_params(self) -> dict:
        return {"n": 8, "betas": [1.0, 4.0], "a_grid": [0.5, 1.0, 2.0], "particle_checks": 1}

    def plan(self, config) -> dict:
        return {}

    def analyse(self, config, runs: StudyRuns, out_dir: Path, *, figures: Callable | None = None):
        c = config
        thr = math.log(c.n - 1)
        points = []
        for beta in c.betas:
            for i, a1 in enumerate(c.a_grid):
                for a2 in c.a_grid[i + 1 :]:
                    het = EquiangularModel(n=c.n, beta=beta, a=(a1, a2))
                    hom = EquiangularModel(n=c.n, beta=beta, a=((a1 + a2) / 2,))
                    Th, To = het.clustering_time(c.rho0, c.eps), hom.clustering_time(c.rho0, c.eps)
                    r0_ratio = float(het.rate(c.rho0) / hom.rate(c.rho0))
                    jensen = beta * (a1 + a2) / 2 * (1 - c.rho0) > thr
                    # convex on the whole segment [a1, a2] at rho0: Jensen is then a theorem for the rate
                    convex_seg = beta * a1 * (1 - c.rho0) > thr
                    points.append(
                        {
                            "beta": beta,
                            "a1": a1,
                            "a2": a2,
                            "T_het": Th,
                            "T_hom": To,
                            "rate_ratio_T": To / Th,
                            "rate_ratio_rho0": r0_ratio,
                            "jensen_mean": bool(jensen),
                            "convex_segment": bool(convex_seg),
                        }
                    )
        checks = []
        cheap = [k for k, p in enumerate(points) if max(p["T_het"], p["T_hom"]) <= c.t_budget]
        if c.particle_checks and cheap:
            idx = np.asarray(cheap)[np.linspace(0, len(cheap) - 1, c.particle_checks).round().astype(int)]
            with one_thread():
                for k in sorted(set(idx.tolist())):
                    p = points[k]
                    het = EquiangularModel(n=c.n, beta=p["beta"], a=(p["a1"], p["a2"]))
                    hom = EquiangularModel(n=c.n, beta=p["beta"], a=((p["a1"] + p["a2"]) / 2,))
                    Th = _particle_time(het, c.rho0, c.eps, p["T_het"])[0]
                    To = _particle_time(hom, c.rho0, c.eps, p["T_hom"])[0]
                    checks.append(
                        {
                            **{k2: p[k2] for k2 in ("beta", "a1", "a2")},
                            "T_het_particles": Th,
                            "T_hom_particles": To,
                            "rel_het": abs(Th / p["T_het"] - 1),
                            "rel_hom": abs(To / p["T_hom"] - 1),
                            "ratio_particles": To / Th,
                        }
                    )
        faster = np.array([p["rate_ratio_T"] > 1 for p in points])
        jm = np.array([p["jensen_mean"] for p in points])
        cs = np.array([p["convex_segment"] for p in points])
        r0_faster = np.array([p["rate_ratio_rho0"] > 1 for p in points])
        stats = {
            "points": len(points),
            "het_faster_T": int(faster.sum()),
            "agree_T_with_jensen_mean": float((faster == jm).mean()),
            "het_faster_rate_rho0": int(r0_faster.sum()),
            "agree_rate_rho0_with_jensen_mean": float((r0_faster == jm).mean()),
            "convex_segment_implies_faster_rate_rho0": bool(r0_faster[cs].all()) if cs.any() else None,
            "convex_segment_points": int(cs.sum()),
            "convex_segment_implies_faster_T": bool(faster[cs].all()) if cs.any() else None,
            "max_ratio_T": float(max(p["rate_ratio_T"] for p in points)),
            "min_ratio_T": float(min(p["rate_ratio_T"] for p in points)),
            "particles_max_rel": max([max(ch["rel_het"], ch["rel_hom"]) for ch in checks], default=None),
        }
        summary = jsonable(
            {"points": points, "particle_checks": checks, "stats": stats, "n": c.n, "rho0": c.rho0}
        )
        lines = [
            f"n = {c.n}, rho0 = {c.rho0:g}, T_eps at eps = {c.eps:g}; ratio = T_hom / T_het (> 1: the "
            "heterogeneous "
            f"pair (a1, a2), weights 1/2, clusters faster than one head of the mean a); Jensen region: "
            f"beta a_mean (1 - rho0) > ln(n - 1) = {thr:.3f}.",
            "",
            f"- heterogeneous faster (T): {stats['het_faster_T']} / {stats['points']} grid points; agreement "
            f"with the Jensen region: {stats['agree_T_with_jensen_mean']:.3f}",
            f"- heterogeneous faster (initial rate at rho0): {stats['het_faster_rate_rho0']} / "
            f"{stats['points']}; "
            f"agreement with the Jensen region: {stats['agree_rate_rho0_with_jensen_mean']:.3f}; convex on "
            "the "
            f"whole segment (beta a1 (1 - rho0) > ln(n-1), {stats['convex_segment_points']} points) => "
            "faster "
            f"initial rate: {stats['convex_segment_implies_faster_rate_rho0']}, faster T: "
            f"{stats['convex_segment_implies_faster_T']}",
            f"- ratio range {stats['min_ratio_T']:.4f} .. {stats['max_ratio_T']:.4f}; particles vs reduced "
            f"(max rel. T): {stats['particles_max_rel']}",
            "",
            "| beta | a1 | a2 | T_het | T_hom | ratio T | ratio rate(rho0) | Jensen (mean) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for p in points:
            lines.append(
                f"| {p['beta']:g} | {p['a1']:g} | {p['a2']:g} | {p['T_het']:.4g} | {p['T_hom']:.4g} | "
                f"{p['rate_ratio_T']:.4f} | {p['rate_ratio_rho0']:.4f} | "
                f"{'yes' if p['jensen_mean'] else 'no'} |"
            )
        files = figures({"study": self.name, **summary}, out_dir) if figures else {}
        return StudyAnalysis(summary=summary, table="\n".join(lines) + "\n", figures=files)


# -- relu_vs_softmax ---------------------------------------------------------------------------------
class ReluVsSoftmaxConfig(StudyConfig):
    n: list[conint(ge=3)] = Field([8, 16, 32, 64, 128], min_length=2, description="token counts (>= 3)")
    betas: list[PositiveFloat] = Field([0.5, 1.0, 2.0, 4.0], min_length=1, description="inverse temperatures")
    rho0: float = Field(0.05, gt=0, lt=1, description="initial inner product (> 0: ReLU is stuck at 0)")
    eps: PositiveFloat = Field(0.05, lt=1, description="T_eps level", examples=[0.05])
    particle_n: list[conint(ge=3)] = Field([8, 32], description="n also run as particles (at every beta)")


class ReluVsSoftmaxStudy(Study):
    name = "relu_vs_softmax"
    description = (
        "arXiv 2605.04279: clustering times of ReLU and softmax attention, full and linearised, against n "
        "and "
        "beta (equiangular, scalar head)"
    )
    Config = ReluVsSoftmaxConfig

    def quick_params(self) -> dict:
        return {"n": [8, 16], "betas": [1.0], "particle_n": [8]}

    def plan(self, config) -> dict:
        return {}

    def analyse(self, config, runs: StudyRuns, out_dir: Path, *, figures: Callable | None = None):
        c = config
        rows = []
        with one_thread():
            for beta in c.betas:
                for n in c.n:
                    row = {"beta": beta, "n": n}
                    for kind in ("relu", "softmax"):
                        m = EquiangularModel(n=n, beta=beta, attention=kind)
                        row[f"T_{kind}"] = m.clustering_time(c.rho0, c.eps)
                        row[f"T_{kind}_lin"] = m.clustering_time(c.rho0, c.eps, linear=True)
                        if n in c.particle_n:
                            Tp = _particle_time(m, c.rho0, c.eps, row[f"T_{kind}"])[0]
                            row[f"rel_{kind}_particles"] = abs(Tp / row[f"T_{kind}"] - 1)
                    row["ratio"] = row["T_relu"] / row["T_softmax"]
                    row["ratio_lin"] = row["T_relu_lin"] / row["T_softmax_lin"]
                    rows.append(row)
        fits = {}
        for beta in c.betas:
            sub = [r for r in rows if r["beta"] == beta]
            ns = [r["n"] for r in sub]
            fits[str(beta)] = {
                k: fit_order(ns, [r[k] for r in sub])["order"]
                for k in ("T_relu", "T_softmax", "T_relu_lin", "T_softmax_lin", "ratio", "ratio_lin")
            }
        checks = [v for r in rows for k, v in r.items() if k.startswith("rel_")]
        summary = jsonable(
            {
                "rows": rows,
                "n_exponents": fits,
                "particles_max_rel": max(checks, default=None),
                "rho0": c.rho0,
                "eps": c.eps,
            }
        )
        lines = [
            f"Equiangular start rho0 = {c.rho0:g}, one head a = 1, T_eps at eps = {c.eps:g}; linearised: "
            "rho' "
            "replaced by its first-order Taylor polynomial at rho = 0 (ReLU: 2 beta rho / n; softmax: "
            "2/(e^beta + n - 1) + rho'(0) rho). Particles (attnflow rk4) vs reduced, max rel. T: "
            f"{summary['particles_max_rel']}.",
            "",
            "| beta | n | T ReLU | T softmax | ratio | T ReLU lin. | T softmax lin. | ratio lin. |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['beta']:g} | {r['n']} | {r['T_relu']:.4g} | {r['T_softmax']:.4g} | {r['ratio']:.3g} | "
                f"{r['T_relu_lin']:.4g} | {r['T_softmax_lin']:.4g} | {r['ratio_lin']:.3g} |"
            )
        lines += [
            "",
            "| beta | p(T ReLU) | p(T softmax) | p(ratio) | p(T ReLU lin.) | p(T softmax lin.) | p(ratio "
            "lin.) |",
            "|---|---|---|---|---|---|---|",
        ]
        for b, f in fits.items():
            vals = " | ".join(
                "-" if f[k] is None else f"{f[k]:.3f}"
                for k in ("T_relu", "T_softmax", "ratio", "T_relu_lin", "T_softmax_lin", "ratio_lin")
            )
            lines.append(f"| {b} | {vals} |")
        lines.append("")
        lines.append("p: least-squares exponent of T ~ n^p over the n of the table.")
        files = figures({"study": self.name, **summary}, out_dir) if figures else {}
        return StudyAnalysis(summary=summary, table="\n".join(lines) + "\n", figures=files)


register(CriticalBetaStudy())
register(SuperadditivityStudy())
register(ReluVsSoftmaxStudy())
