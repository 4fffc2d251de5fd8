"""Figures of the multi-head studies (arXiv 2605.04279; :mod:`attnflow.studies.multihead_flows`,
:mod:`~attnflow.studies.multihead_reduced`, :mod:`~attnflow.studies.multihead_entropy`).

Each function has the signature the study's analysis calls, ``figures(data, out_dir) -> {key: file}``,
and is registered for its study in :mod:`attnflow.plot.studies`. Figures are
:class:`matplotlib.figure.Figure` objects saved as small PNGs; pyplot is never used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from .common import DPI, save_named as _save, write_figure

__all__ = [
    "plot_critical_beta",
    "plot_entropy",
    "plot_monotonicity",
    "plot_relu_vs_softmax",
    "plot_sufficient_condition",
    "plot_superadditivity",
]


def plot_monotonicity(data: dict, out_dir: Path) -> dict[str, str]:
    """Fraction of (configuration, time) samples with a violation, E_multi and E_h, per row."""
    rows = data["rows"]
    labels = [f"{r['family'][:10]}\n{r['attention']}/{r['geometry']}" for r in rows]
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(6, 0.55 * len(rows)), 3.6))
    ax = fig.add_subplot()
    ax.bar(x - 0.2, [r["multi_sample_fraction"] for r in rows], 0.4, label="dE_multi/dt < 0")
    ax.bar(x + 0.2, [r["head_sample_fraction"] for r in rows], 0.4, label="some dE_h/dt < 0")
    ax.set_xticks(x, labels, rotation=90, fontsize=6)
    ax.set_ylabel("fraction of samples")
    ax.set_title("monotonicity of the multi-head energies (ascent)")
    ax.legend(fontsize=7)
    return _save(fig, out_dir, "monotonicity.png")


def plot_sufficient_condition(data: dict, out_dir: Path) -> dict[str, str]:
    """Worst cross/self (flat) and radial/self (sphere) ratios against the orthogonality defect eps."""
    rows = [r for r in data["rows"] if r["eps"] > 0]
    eps = np.array([r["eps"] for r in rows])
    fig = Figure(figsize=(5.5, 4))
    ax = fig.add_subplot()
    for key, style in (("usa_flat", "o-"), ("softmax_flat", "s-")):
        ax.loglog(eps, [r[key]["cross_over_self_max"] for r in rows], style, label=f"{key}: |cross|/self")
    for key, style in (("usa_sphere", "o--"), ("softmax_sphere", "s--")):
        ax.loglog(eps, [r[key]["radial_neg_over_self_max"] for r in rows], style, label=f"{key}: radial/self")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_xlabel("orthogonality defect eps")
    ax.set_ylabel("worst ratio over states and heads")
    ax.legend(fontsize=7)
    return _save(fig, out_dir, "sufficient_condition.png")


def plot_critical_beta(data: dict, out_dir: Path) -> dict[str, str]:
    """T_eps against beta / beta_c (reduced curves, particle points) per (n, rho0, a)."""
    fig = Figure(figsize=(6, 4.2))
    ax = fig.add_subplot()
    for k, cv in enumerate(data["curves"]):
        bc = np.log(cv["n"] - 1) / (cv["a"] * (1 - cv["rho0"]))
        color = f"C{k % 10}"
        ax.semilogy(
            np.asarray(cv["beta"]) / bc,
            cv["T"],
            color=color,
            lw=1,
            label=f"n={cv['n']}, rho0={cv['rho0']:g}, a={cv['a']:g}",
        )
        ax.semilogy(np.asarray(cv["beta_p"]) / bc, cv["T_p"], "o", color=color, ms=3)
    for r in data["rows"]:
        ax.axvline(r["ratio_reduced"], color="0.85", lw=0.5)
    ax.axvline(1.0, color="k", lw=0.8, ls=":")
    ax.set_xlabel("beta / beta_c,  beta_c = ln(n-1) / (a (1 - rho0))")
    ax.set_ylabel("T_eps (lines: solve_ivp, dots: particles)")
    ax.legend(fontsize=5, ncol=2)
    return _save(fig, out_dir, "critical_beta.png")


def plot_superadditivity(data: dict, out_dir: Path) -> dict[str, str]:
    """log ratio T_hom / T_het over (a1, a2) per beta, with the Jensen boundary
    beta a_mean = ln(n-1)/(1-rho0)."""
    pts = data["points"]
    betas = sorted({p["beta"] for p in pts})
    fig = Figure(figsize=(3.2 * len(betas), 3.2))
    thr = np.log(data["n"] - 1) / (1 - data["rho0"])
    vmax = max(abs(np.log(p["rate_ratio_T"])) for p in pts) or 1.0
    for k, b in enumerate(betas):
        ax = fig.add_subplot(1, len(betas), k + 1)
        sub = [p for p in pts if p["beta"] == b]
        sc = ax.scatter(
            [p["a1"] for p in sub],
            [p["a2"] for p in sub],
            c=[np.log(p["rate_ratio_T"]) for p in sub],
            cmap="coolwarm",
            vmin=-vmax,
            vmax=vmax,
            s=40,
        )
        a = np.linspace(0, 3, 50)
        ax.plot(a, 2 * thr / b - a, "k--", lw=0.8)  # a1 + a2 = 2 ln(n-1) / (beta (1 - rho0))
        ax.set_xlim(0, 2.7)
        ax.set_ylim(0, 2.7)
        ax.set_title(f"beta = {b:g}", fontsize=8)
        ax.set_xlabel("a1")
        if k == 0:
            ax.set_ylabel("a2")
    fig.colorbar(sc, ax=fig.axes, label="ln(T_hom / T_het)")
    write_figure(fig, Path(out_dir) / "superadditivity.png", dpi=DPI, root=out_dir)
    return {"superadditivity": "superadditivity.png"}


def plot_relu_vs_softmax(data: dict, out_dir: Path) -> dict[str, str]:
    """T_eps against n for ReLU and softmax, full and linearised, per beta; with ``ratio_series``
    ({label: (n, T_ReLU / T_softmax)}), the ratios against n in a second panel."""
    rows = data["rows"]
    series = data.get("ratio_series") or {}
    fig = Figure(figsize=(11, 4) if series else (6, 4))
    ax = fig.add_subplot(1, 2 if series else 1, 1)
    if series:
        ax2 = fig.add_subplot(1, 2, 2)
        for k, (label, (n, ratio)) in enumerate(series.items()):
            ax2.loglog(n, ratio, "o-" if "c/n" in label else "s--", color=f"C{k % 10}", ms=3, label=label)
        ax2.set_xlabel("n")
        ax2.set_ylabel("T_ReLU / T_softmax")
        ax2.legend(fontsize=6)
    for k, b in enumerate(sorted({r["beta"] for r in rows})):
        sub = sorted((r for r in rows if r["beta"] == b), key=lambda r: r["n"])
        n = [r["n"] for r in sub]
        c = f"C{k}"
        ax.loglog(n, [r["T_relu"] for r in sub], "o-", color=c, label=f"ReLU, beta={b:g}")
        ax.loglog(n, [r["T_softmax"] for r in sub], "s-", color=c, mfc="none", label=f"softmax, beta={b:g}")
        ax.loglog(n, [r["T_relu_lin"] for r in sub], ":", color=c)
        ax.loglog(n, [r["T_softmax_lin"] for r in sub], "--", color=c)
    ax.set_xlabel("n")
    ax.set_ylabel("T_eps (dotted/dashed: linearised)")
    ax.legend(fontsize=6, ncol=2)
    return _save(fig, out_dir, "relu_vs_softmax.png")


def plot_entropy(data: dict, out_dir: Path) -> dict[str, str]:
    """Mean attention entropy / log n along the flows: equiangular (left) and random starts (right)."""
    fig = Figure(figsize=(9, 3.6))
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    k = 0
    for cv in data["curves"]:
        if cv["kind"] == "equiangular":
            ax1.plot(cv["t"], cv["S"], lw=1, label=f"n={cv['n']}, rho0={cv['rho0']:g}, beta={cv['beta']:g}")
        else:
            S = np.asarray(cv["S"])
            lines = ax2.plot(cv["t"], S, lw=0.5, alpha=0.6, color=f"C{k % 10}")
            k += 1
            lines[0].set_label(f"{cv['kind']}, beta={cv['beta']:g}")
    ax1.set_title("equiangular starts", fontsize=9)
    ax2.set_title("random starts (one line per cloud)", fontsize=9)
    for ax in (ax1, ax2):
        ax.set_xlabel("t")
        ax.set_ylabel("mean S / log n")
        ax.legend(fontsize=5)
    return _save(fig, out_dir, "entropy.png")
