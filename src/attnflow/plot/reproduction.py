"""The three figures of a Sec. 6 reproduction (arXiv 2605.18870, Figs. 1-3).

* :func:`plot_tokens` (Fig. 1): token clouds at t = 0, 16, 18, 20 (mean over paths, renormalised, as
  the paper plots them, and one single path), largest H, every regime;
* :func:`plot_g2` (Fig. 2): G^2(t) per H (mean and +-1 sd band over paths) and the time-averaged G^2
  against H with the fit k(H) = a H^b and its 95% band;
* :func:`plot_ledger` (Fig. 3): the terms of the discrete energy identity (147) and both residuals.

The figures are :class:`matplotlib.figure.Figure` objects saved as PNG (dpi ~150 or less, kept small);
pyplot and its global backend are never used, so importing this module changes no one's backend and
the figures are drawn without a display.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..analysis.fits import power_law_band
from ..observables.ledger import ledger_terms

H_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


def _largest(runs: dict[int, xr.Dataset]) -> int:
    return max(runs)


def _sphere_wire(ax) -> None:
    u, v = np.mgrid[0 : 2 * np.pi : 17j, 0 : np.pi : 9j]
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.8", lw=0.3)


def _cloud(ds: xr.Dataset, t: float, mode: str) -> np.ndarray:
    x = np.asarray(ds.positions.sel(time=t, method="nearest").values)  # (P, n, d)
    if mode == "mean":
        m = x.mean(0)
        nrm = np.linalg.norm(m, axis=-1, keepdims=True)
        return m / np.where(nrm > 0, nrm, 1.0)
    return x[0]


def plot_tokens(datasets: dict, summary: dict, path: Path, *, snapshot_times) -> Path | None:
    """Fig. 1: rows (regime x {mean over paths, path 0}), columns snapshot times. d = 3 only (3D),
    d = 2 on the circle, d > 3: first three coordinates renormalised (stated in the title)."""
    keys = list(datasets)
    d = int(next(iter(next(iter(datasets.values())).values())).sizes["dim"])
    rows = [(k, mode) for k in keys for mode in ("mean", "path")]
    nt = len(snapshot_times)
    proj = "3d" if d >= 3 else None
    fig = Figure(figsize=(2.1 * nt, 2.0 * len(rows)))
    for r, (key, mode) in enumerate(rows):
        runs = datasets[key]
        H = _largest(runs)
        ds = runs[H]
        for c, t in enumerate(snapshot_times):
            ax = fig.add_subplot(len(rows), nt, r * nt + c + 1, projection=proj)
            y = _cloud(ds, t, mode)
            if d >= 3:
                y = y[:, :3] / np.linalg.norm(y[:, :3], axis=-1, keepdims=True).clip(1e-12)
                _sphere_wire(ax)
                ax.scatter(y[:, 0], y[:, 1], y[:, 2], s=3, c="tab:red", depthshade=False)
                ax.set_xlim(-1, 1), ax.set_ylim(-1, 1), ax.set_zlim(-1, 1)
                ax.set_box_aspect((1, 1, 1))
                ax.set_xticks([]), ax.set_yticks([]), ax.set_zticks([])
            else:
                th = np.linspace(0, 2 * np.pi, 200)
                ax.plot(np.cos(th), np.sin(th), color="0.8", lw=0.5)
                ax.scatter(y[:, 0], y[:, 1], s=4, c="tab:red")
                ax.set_aspect("equal"), ax.set_xticks([]), ax.set_yticks([])
            ax.set_title(f"t = {float(ds.time.sel(time=t, method='nearest')):g}", fontsize=8)
            if c == 0:
                lab = summary["regimes"][key]["label"]
                who = f"mean of {ds.sizes['path']} paths" if mode == "mean" else "single path"
                ax.text2D(
                    -0.1,
                    0.5,
                    f"{lab}\nH = {H}, {who}",
                    transform=ax.transAxes,
                    rotation=90,
                    va="center",
                    ha="center",
                    fontsize=7,
                ) if d >= 3 else ax.set_ylabel(f"{lab}\nH = {H}, {who}", fontsize=7)
    note = "" if d <= 3 else f" (first 3 of d = {d} coordinates, renormalised)"
    fig.suptitle(
        f"Token clouds on $S^{{{d - 1}}}$: mean over paths (renormalised) and one path{note}", fontsize=9
    )
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.01, top=0.95, wspace=0.02, hspace=0.12)
    fig.savefig(path, dpi=80)
    return path


def _band(ax, t, v, color, label, log=True):
    m, s = v.mean(0), v.std(0, ddof=1) if v.shape[0] > 1 else np.zeros(v.shape[1])
    lo = np.where(m - s > 0, m - s, m * 0.1) if log else m - s
    ax.plot(t, m, color=color, lw=1.2, label=label)
    ax.fill_between(t, lo, m + s, color=color, alpha=0.2, lw=0)


def plot_g2(datasets: dict, summary: dict, path: Path) -> Path:
    """Fig. 2: G^2(t) per H (left) and the time-averaged G^2 vs H with the fitted a H^b (right)."""
    keys = list(datasets)
    fig = Figure(figsize=(9, 2.8 * len(keys)))
    axes = fig.subplots(len(keys), 2, squeeze=False)
    wa, wb = summary["window"]
    for r, key in enumerate(keys):
        reg = summary["regimes"][key]
        ax = axes[r, 0]
        for i, H in enumerate(sorted(datasets[key])):
            ds = datasets[key][H]
            _band(ax, ds.time.values, np.asarray(ds.G2.values), H_COLORS[i % 5], f"H = {H}")
        ax.axvspan(wa, wb, color="0.9", zorder=0)
        ax.set_yscale("log")
        ax.set_xlabel("time $t$")
        ax.set_ylabel(r"$\mathscr{G}_t^2$")
        ax.set_title(f"{reg['label']}: mean $\\pm$1 sd over paths (grey: averaging window)", fontsize=9)
        ax.legend(fontsize=7)
        ax = axes[r, 1]
        Hs = np.array(reg["H"], float)
        for var, mk, col, lab in (
            ("G2", "o", "k", r"$\overline{\mathscr{G}^2}$ (harmonic-mean $b$)"),
            ("Ghat2", "s", "tab:purple", r"$\overline{\hat{\mathscr{G}}^2}$ (exact)"),
        ):
            y = np.array([reg["per_H"][str(int(h))][f"{var}_mean"] for h in Hs])
            e = np.array([reg["per_H"][str(int(h))][f"{var}_se"] for h in Hs])
            ax.errorbar(
                Hs,
                y,
                yerr=np.nan_to_num(1.96 * e),
                fmt=mk,
                color=col,
                ms=5,
                capsize=3,
                label=lab,
                alpha=1.0 if var == "G2" else 0.6,
            )
        fit = reg.get("fit_G2", {})
        if "a" in fit:
            grid = np.geomspace(Hs.min() * 0.8, Hs.max() * 1.25, 100)
            k, lo, hi = power_law_band(fit, grid)
            ax.plot(
                grid,
                k,
                "k--",
                lw=1,
                label=f"$k(H) = {fit['a']:.3g}\\,H^{{{fit['b']:.3f}}}$, "
                f"$b \\in [{fit['b_ci'][0]:.2f}, {fit['b_ci'][1]:.2f}]$",
            )
            ax.fill_between(grid, lo, hi, color="0.6", alpha=0.25, lw=0, label="95% band")
            # the band with 1 dof spans decades; keep the data readable
            ys = [reg["per_H"][str(int(h))]["G2_mean"] for h in Hs]
            ax.set_ylim(min(ys) / 20, max(ys) * 20)
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("number of heads $H$")
        ax.set_ylabel(f"time average over $t \\in [{wa:g}, {wb:g}]$")
        ax.set_title(f"{reg['label']}: error bars 95% over paths", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_ledger(datasets: dict, summary: dict, path: Path) -> Path:
    """Fig. 3: terms of the discrete energy identity (147), largest H, +-1 sd bands over paths."""
    keys = list(datasets)
    fig = Figure(figsize=(4.2 * len(keys), 3.4))
    axes = fig.subplots(1, len(keys), squeeze=False)
    for c, key in enumerate(keys):
        H = _largest(datasets[key])
        ds = datasets[key][H]
        lt = ledger_terms(ds)  # the terms of (147), signs included, from the observables layer
        t = ds.time.values
        sg = "-" if float(ds.attrs["sign"]) < 0 else "+"
        terms = [
            (lt.delta_energy.values, r"$\Delta\mathcal{E}_t$", "k"),
            (lt.int_dtE.values, r"$\int_0^t \partial_s\mathcal{E}\,ds$", "tab:blue"),
            (lt.dissipation_paper.values, f"${sg}" + r"\int_0^t \mathscr{G}^2_s\,ds$", "tab:orange"),
            (lt.dissipation_exact.values, f"${sg}" + r"\int_0^t \hat{\mathscr{G}}^2_s\,ds$", "tab:purple"),
            (lt.martingale.values, r"$M_t$", "tab:green"),
            (lt.residual_paper.values, r"residual with $\mathscr{G}^2$ (147)", "tab:red"),
            (lt.residual_exact.values, r"residual with $\hat{\mathscr{G}}^2$", "tab:brown"),
        ]
        ax = axes[0, c]
        for arr, lab, col in terms:
            _band(ax, t, arr, col, lab, log=False)
        ax.axhline(0, color="0.5", lw=0.5)
        ax.set_xlabel("time $t$")
        ax.set_ylabel("energy")
        ax.set_title(f"{summary['regimes'][key]['label']}, H = {H}", fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=130)
    return path


def plot_all(datasets: dict, summary: dict, out_dir: Path, *, snapshot_times) -> dict:
    """Draw Figs. 1-3 into ``out_dir``; returns {figure: file name}."""
    out_dir = Path(out_dir)
    files = {}
    has_pos = all("positions" in next(iter(r.values())) for r in datasets.values())
    if has_pos:
        plot_tokens(datasets, summary, out_dir / "fig1_tokens.png", snapshot_times=snapshot_times)
        files["fig1"] = "fig1_tokens.png"
    plot_g2(datasets, summary, out_dir / "fig2_G2.png")
    files["fig2"] = "fig2_G2.png"
    plot_ledger(datasets, summary, out_dir / "fig3_ledger.png")
    files["fig3"] = "fig3_ledger.png"
    return files
