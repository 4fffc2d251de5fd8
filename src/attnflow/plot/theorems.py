"""Figures of the studies of the main paper's theorems (issue 13): mean_field_heads, longtime, layer_scaling.

Each function takes the study's summary (``summary.json``) and the output directory and returns
{figure key: file name}; :mod:`attnflow.plot.studies` registers them for ``attnflow study run``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .common import save_figure as _save  # noqa: E402

__all__ = [
    "plot_layer_scaling",
    "plot_longtime",
    "plot_mean_field_heads",
    "plot_stability_input",
    "plot_stability_weights",
]


def plot_mean_field_heads(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_w2_vs_H.png``: W2(mu^H_T, mu^ref_T) and abs(E^H_T - E^ref_T) against H, with the fitted lines;
    ``fig_G2_mc.png``: G^2 at frozen tokens against the derived G2_inf + c/H, and the Sec. 6 OU check."""
    out = {}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for key, part in summary["laws"].items():
        H = np.array(part["H"], float)
        for ax, q in zip(axes, ("W2_T", "absdE_T"), strict=True):
            y = np.array([part["per_H"][str(h)][q]["mean"] for h in part["H"]])
            e = np.array([part["per_H"][str(h)][q]["sd"] for h in part["H"]])
            (line,) = ax.plot(H, y, "o", label=key)
            ax.errorbar(H, y, e, fmt="none", color=line.get_color(), alpha=0.5)
            f = part["fits"][q]
            if "b" in f:
                hh = np.geomspace(*f["range"], 20)
                ax.plot(
                    hh, f["a"] * hh ** f["b"], "-", color=line.get_color(), lw=1, label=f"b = {f['b']:.2f}"
                )
    for ax, title in zip(axes, ("W2(mu^H_T, mu^ref_T) (exact OT)", "abs(E^H_T - E^ref_T)"), strict=True):
        H = np.geomspace(1, max(max(p["H"]) for p in summary["laws"].values()), 20)
        ax.plot(H, 0.3 * H**-0.5, "k:", lw=1, label="H^-1/2")
        ax.set(xscale="log", yscale="log", xlabel="H", title=title)
        ax.legend(fontsize=7)
    out["w2_vs_H"] = _save(fig, out_dir, "fig_w2_vs_H.png")

    sec6 = summary.get("sec6_ou")
    fig, axes = plt.subplots(1, 2 if sec6 else 1, figsize=(10 if sec6 else 5, 4), squeeze=False)
    ax = axes[0, 0]
    for key, part in summary["laws"].items():
        fr = part["frozen_tokens_G2"]["reference_T"]
        H = np.array(part["H"], float)
        (line,) = ax.plot(H, fr["G2_mean"], "o", label=f"{key}: measured")
        ax.plot(H, fr["predicted"], "-", color=line.get_color(), lw=1, label=f"{key}: G2_inf + c/H")
    ax.set(
        xscale="log", yscale="log", xlabel="H", ylabel="G^2", title="G^2 at the reference cloud (fresh heads)"
    )
    ax.legend(fontsize=7)
    if sec6:
        ax = axes[0, 1]
        H = np.array(sec6["H"], float)
        m = [sec6["per_H"][str(h)]["G2_late_measured"]["mean"] for h in sec6["H"]]
        p = [sec6["per_H"][str(h)]["G2_predicted"] for h in sec6["H"]]
        ax.plot(H, m, "o", label="Sec. 6 OU: late G^2 measured")
        ax.plot(H, p, "s-", mfc="none", label="G2_inf(mu_t) + c(mu_t)/H")
        ax.set(xscale="log", yscale="log", xlabel="H", ylabel="G^2", title="Sec. 6 OU: a Monte Carlo effect?")
        ax.legend(fontsize=7)
    out["G2_mc"] = _save(fig, out_dir, "fig_G2_mc.png")
    return out


def plot_longtime(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_length.png``: the length of the head law (pathwise and in law) against t, and the pathwise
    length against the record spacing; ``fig_G2.png``: G^2 against t per regime."""
    out = {}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for reg, r in summary["regimes"].items():
        t = np.array(r["times"])
        (line,) = axes[0].plot(t, r["length_pathwise_t"], "-", label=f"{reg} pathwise")
        axes[0].plot(t, r["length_in_law_t"], "--", color=line.get_color(), label=f"{reg} in law")
        sp = [v["spacing"] for v in r["length_by_spacing"].values()]
        L = [v["length_T"]["mean"] for v in r["length_by_spacing"].values()]
        if min(L) > 0:
            axes[1].plot(sp, L, "o-", color=line.get_color(), label=reg)
    axes[0].set(xlabel="t", ylabel="int_0^t abs(Theta') (W2)", title="length of the head law")
    axes[0].legend(fontsize=7)
    axes[1].set(
        xscale="log",
        yscale="log",
        xlabel="record spacing",
        ylabel="pathwise length at T",
        title="length vs spacing (slope -1/2: infinite)",
    )
    axes[1].legend(fontsize=7)
    out["length"] = _save(fig, out_dir, "fig_length.png")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for reg, r in summary["regimes"].items():
        ax.plot(r["times"], r["G2_t"], label=reg)
    ax.set(yscale="log", xlabel="t", ylabel="G^2 (mean over paths)", title="decay of G^2")
    ax.legend(fontsize=7)
    out["G2"] = _save(fig, out_dir, "fig_G2.png")
    return out


def plot_layer_scaling(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_budget.png``: M_theta(t) against depth per H, with and without the scaling;
    ``fig_clusters.png``: the cluster count at T against the threshold (its sensitivity)."""
    out = {}
    variants = summary["variants"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, scaled in zip(axes, (False, True), strict=True):
        for v in variants.values():
            if v["scaled"] != scaled:
                continue
            for H, r in v["per_H"].items():
                ax.plot(r["times"][1:], r["M_t"][1:], label=f"{v['direction']} H = {H}")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="depth t",
            ylabel="M_theta(t)",
            title="with z -> z/((t0 + t) sqrt H)" if scaled else "without scaling",
        )
        ax.legend(fontsize=6)
    out["budget"] = _save(fig, out_dir, "fig_budget.png")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for key, v in variants.items():
        for H, r in v["per_H"].items():
            ax.plot(
                r["sensitivity_thresholds"],
                r["sensitivity_mean_counts"],
                "-" if v["scaled"] else "--",
                lw=1,
                label=f"{key} H = {H}",
            )
    ax.set(
        xscale="log",
        xlabel="threshold (rad)",
        ylabel="clusters at T (mean over paths)",
        title="cluster count vs threshold",
    )
    ax.legend(fontsize=5, ncol=2)
    out["clusters"] = _save(fig, out_dir, "fig_clusters.png")
    return out


def plot_stability_input(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_gronwall.png``: W2(u^eta_t, u_t) / W2(u^eta_0, u_0) against t per variant (smallest eta, each
    shape) with the fitted exponential; ``fig_linear_response.png``: W2(T)/W2(0) against eta."""
    out = {}
    variants = summary["variants"]
    fig, axes = plt.subplots(1, len(variants), figsize=(3.2 * len(variants), 3.4), sharey=True, squeeze=False)
    for ax, (key, v) in zip(axes[0], variants.items(), strict=True):
        t = np.array(v["times"])
        eta0 = min(r["eta"] for r in v["rows"].values())
        for r in v["rows"].values():
            if r["eta"] != eta0:
                continue
            y = np.array(r["W2_t"]) / r["W2_t"][0]
            (line,) = ax.plot(t, y, label=f"{r['shape']} C2 = {r['C2']:.2f}")
            ax.plot(t, r["C1"] * np.exp(r["C2"] * t), ":", color=line.get_color(), lw=1)
        ax.set(yscale="log", xlabel="t", title=key)
        ax.legend(fontsize=6)
    axes[0, 0].set_ylabel("W2(u^eta_t, u_t) / W2(u^eta_0, u_0)")
    out["gronwall"] = _save(fig, out_dir, "fig_gronwall.png")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for key, v in variants.items():
        for shape, lr in v["linear_response"].items():
            ax.plot(lr["etas"], lr["amplification_T"], "o-", ms=3, lw=1, label=f"{key} {shape}")
    ax.set(xscale="log", yscale="log", xlabel="eta", ylabel="W2(T) / W2(0)", title="linear response")
    ax.legend(fontsize=5, ncol=2)
    out["linear_response"] = _save(fig, out_dir, "fig_linear_response.png")
    return out


def plot_stability_weights(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_eps.png``: abs(E^eps_T - E_T), abs(d_tE^eps_T - d_tE_T) and W2(u^eps_T, u_T) against eps."""
    kinds = summary["kinds"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 4), squeeze=False)
    for ax, (kind, r) in zip(axes[0], kinds.items(), strict=True):
        eps = np.array([float(e) for e in r["per_eps"]])
        for q in ("abs_dE_T", "abs_d_dtE_T", "W2_T"):
            y = np.array([v[q]["mean"] for v in r["per_eps"].values()])
            if np.all(y > 0):
                b = r["fits"][q].get("b", float("nan"))
                ax.plot(eps, y, "o-", label=f"{q} (b = {b:.2f})")
        ax.plot(eps, eps * 0.1, "k:", lw=1, label="eps^1")
        ax.set(xscale="log", yscale="log", xlabel="eps", title=f"perturbed {kind}")
        ax.legend(fontsize=7)
    return {"eps": _save(fig, out_dir, "fig_eps.png")}
