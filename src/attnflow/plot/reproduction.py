"""The three figures of a Sec. 6 reproduction (arXiv 2605.18870, Figs. 1-3).

* :func:`plot_tokens` (Fig. 1, one per regime): token clouds at t = 0, 16, 18, 20 for every H, the mean
  over the noise paths of the shared start (renormalised, as the paper plots it) or the single
  deterministic trajectory, the back hemisphere faded, with a caption saying which;
* :func:`plot_g2` (Fig. 2): G^2(t) per H (log scale; mean and +-1 sd band over paths) and the
  time-averaged G^2 against H with the fit k(H) = a H^b and its 95% band (when a dof is left);
* :func:`plot_ledger` (Fig. 3, one per regime): the terms of the discrete energy identity (147) and, in
  their own panel, both residuals, for H = 10 and H = 100;
* :func:`regime_figures`: Figs. 1 and 3 of one regime, drawn as soon as its runs finish.

The figures are :class:`matplotlib.figure.Figure` objects saved as PNG (dpi ~150 or less, kept small);
pyplot and its global backend are never used, so importing this module changes no one's backend and
the figures are drawn without a display.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..analysis.fits import power_law_band
from ..observables.ledger import ledger_terms
from .common import write_figure

H_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


def _largest(runs: dict[int, xr.Dataset]) -> int:
    return max(runs)


def _sphere_wire(ax) -> None:
    u, v = np.mgrid[0 : 2 * np.pi : 17j, 0 : np.pi : 9j]
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.3)


def _cloud(ds: xr.Dataset, t: float, mode: str) -> np.ndarray:
    x = np.asarray(ds.positions.sel(time=t, method="nearest").values)  # (P, n, d)
    if mode == "mean":
        m = x.mean(0)
        nrm = np.linalg.norm(m, axis=-1, keepdims=True)
        return m / np.where(nrm > 0, nrm, 1.0)
    return x[0]


def view_direction(elev: float, azim: float) -> np.ndarray:
    """Unit vector from the centre towards the viewer of a matplotlib 3-D axes (degrees)."""
    e, a = np.deg2rad(elev), np.deg2rad(azim)
    return np.array([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)])


def scatter_sphere(ax, y: np.ndarray, *, color: str = "tab:red", size: float = 4.0) -> None:
    """Points on S^2 in a 3-D axes with a depth cue: the hemisphere facing away from the viewer faded."""
    v = view_direction(ax.elev, ax.azim)
    front = y @ v >= 0
    _sphere_wire(ax)
    ax.scatter(*y[~front].T, s=size * 0.6, c=color, alpha=0.15, depthshade=False, lw=0)
    ax.scatter(*y[front].T, s=size, c=color, alpha=1.0, depthshade=False, lw=0)
    ax.set_xlim(-1, 1), ax.set_ylim(-1, 1), ax.set_zlim(-1, 1)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xticks([]), ax.set_yticks([]), ax.set_zticks([])


def _averaged(ds: xr.Dataset, summary_row: dict | None) -> tuple[str, str]:
    """(mode, what the dots are) of the cloud of a run, from its paths and estimator."""
    P = int(ds.sizes["path"])
    if P == 1:
        return (
            "path",
            "the one deterministic trajectory (no noise: every path of the shared start is this one)",
        )
    init = (summary_row or {}).get("init", "shared")
    if init == "shared":
        return "mean", (
            f"each token's position averaged over the {P} noise paths of one shared start (x0, D0), "
            "renormalised to the sphere (the paper's 'mean token cloud')"
        )
    return "mean", (
        f"each token's position averaged over {P} paths with independent starts, renormalised "
        "(with per-path starts this mean has no token-wise meaning)"
    )


def plot_tokens(datasets: dict, summary: dict, path: Path, *, snapshot_times) -> Path | None:
    """Fig. 1 of one regime: rows H (every head count run), columns the snapshot times.

    ``datasets`` maps H -> run dataset of one regime (``summary`` is that regime's entry, with
    ``label``). On S^2 the back hemisphere (facing away from the viewer) is faded; on S^1 the circle; for
    d > 3 the first three coordinates, renormalised (said in the title). A caption under the panels says
    what each dot is: the mean over the noise paths of a shared start, or the single deterministic
    trajectory.
    """
    Hs = sorted(datasets)
    ds0 = datasets[Hs[0]]
    d = int(ds0.sizes["dim"])
    nt = len(snapshot_times)
    proj = "3d" if d >= 3 else None
    fig = Figure(figsize=(2.0 * nt + 0.4, 2.0 * len(Hs) + 0.7))
    captions = set()
    for r, H in enumerate(Hs):
        ds = datasets[H]
        mode, what = _averaged(ds, summary.get("per_H", {}).get(str(H)))
        captions.add(what)
        for c, t in enumerate(snapshot_times):
            ax = fig.add_subplot(len(Hs), nt, r * nt + c + 1, projection=proj)
            y = _cloud(ds, t, mode)
            if d >= 3:
                y = y[:, :3] / np.linalg.norm(y[:, :3], axis=-1, keepdims=True).clip(1e-12)
                scatter_sphere(ax, y)
            else:
                th = np.linspace(0, 2 * np.pi, 200)
                ax.plot(np.cos(th), np.sin(th), color="0.8", lw=0.5)
                ax.scatter(y[:, 0], y[:, 1], s=4, c="tab:red")
                ax.set_aspect("equal"), ax.set_xticks([]), ax.set_yticks([])
            ax.set_title(f"t = {float(ds.time.sel(time=t, method='nearest')):g}", fontsize=8)
            if c == 0:
                label = f"H = {H}"
                if d >= 3:
                    ax.text2D(
                        -0.08,
                        0.5,
                        label,
                        transform=ax.transAxes,
                        rotation=90,
                        va="center",
                        ha="center",
                        fontsize=9,
                    )
                else:
                    ax.set_ylabel(label, fontsize=9)
    note = "" if d <= 3 else f" (first 3 of d = {d} coordinates, renormalised)"
    fig.suptitle(f"Fig. 1, {summary.get('label', '')}: token clouds on $S^{{{d - 1}}}${note}", fontsize=10)
    cap = "Dots: " + "; ".join(sorted(captions)) + "."
    if d >= 3:
        cap += " Faint dots lie on the hemisphere facing away from the viewer."
    fig.text(0.5, 0.005, "\n".join(textwrap.wrap(cap, 120)), ha="center", va="bottom", fontsize=7)
    fig.subplots_adjust(left=0.04, right=0.99, bottom=0.09, top=0.92, wspace=0.02, hspace=0.12)
    write_figure(fig, path, dpi=80)
    return path


def _band(ax, t, v, color, label, log=True):
    m = v.mean(0)
    ax.plot(t, m, color=color, lw=1.2, label=label)
    if v.shape[0] > 1:  # one path (a deterministic run): no band
        sd = v.std(0, ddof=1)
        lo = np.where(m - sd > 0, m - sd, m * 0.1) if log else m - sd
        ax.fill_between(t, lo, m + sd, color=color, alpha=0.2, lw=0)


def _paths_note(runs: dict) -> str:
    P = {int(ds.sizes["path"]) for ds in runs.values()}
    if P == {1}:
        return "one deterministic path per H"
    return f"mean $\\pm$1 sd over {'/'.join(str(p) for p in sorted(P))} paths"


def plot_g2(datasets: dict, summary: dict, path: Path) -> Path:
    """Fig. 2: G^2(t) per H (left, log scale) and the time-averaged G^2 vs H with the fit a H^b (right).

    The fit's 95 % band is drawn only when the fit has a degree of freedom left (3 or more head counts);
    otherwise the panel says so. Error bars are 95 % over paths, absent for a deterministic run (1 path).
    """
    keys = list(datasets)
    fig = Figure(figsize=(9, 2.9 * len(keys)))
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
        ax.set_xlabel("time $t$ (model time units)")
        ax.set_ylabel(r"$\mathscr{G}_t^2$ (log scale)")
        ax.set_title(f"{reg['label']}: {_paths_note(datasets[key])}; grey: window", fontsize=8)
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
                yerr=None if not np.isfinite(e).any() else np.nan_to_num(1.96 * e),
                fmt=mk,
                color=col,
                ms=5,
                capsize=3,
                label=lab,
                alpha=1.0 if var == "G2" else 0.6,
            )
        fit = reg.get("fit_G2", {})
        ys = [reg["per_H"][str(int(h))]["G2_mean"] for h in Hs]
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
            if fit.get("dof", 0) >= 1:
                ax.fill_between(
                    grid, lo, hi, color="0.6", alpha=0.25, lw=0, label=f"95% band ({fit['dof']} dof)"
                )
            # the band with 1 dof spans decades; keep the data readable
            ax.set_ylim(min(ys) / 20, max(ys) * 20)
        else:
            ax.text(
                0.5,
                0.05,
                f"no fit with an interval: {len(Hs)} head counts leave no degree of freedom",
                transform=ax.transAxes,
                ha="center",
                fontsize=7,
            )
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("number of heads $H$")
        ax.set_ylabel(f"time average over $t \\in [{wa:g}, {wb:g}]$")
        bars = (
            "error bars: 95% over paths"
            if np.isfinite([reg["per_H"][str(int(h))]["G2_se"] for h in Hs]).any()
            else "1 path: no error bars"
        )
        ax.set_title(f"{reg['label']}: {bars}", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    write_figure(fig, path, dpi=110)
    return path


def plot_ledger(datasets: dict, summary: dict, path: Path) -> Path:
    """Fig. 3 of one regime: the terms of the discrete energy identity (147) and, in their own panel at
    their own scale, its two residuals, for every head count H > 1 run (H = 10 and H = 100).

    ``datasets`` maps H -> run of one regime; ``summary`` is that regime's entry (``label``).
    Bands: +-1 sd over paths (none for a single deterministic path).
    """
    Hs = [H for H in sorted(datasets) if H > 1] or sorted(datasets)
    fig = Figure(figsize=(4.4 * len(Hs), 5.6))
    gs = fig.add_gridspec(2, len(Hs), height_ratios=(1.6, 1.0))
    handles, labels = [], []
    for c, H in enumerate(Hs):
        ds = datasets[H]
        lt = ledger_terms(ds)  # the terms of (147), signs included, from the observables layer
        t = ds.time.values
        sg = "-" if float(ds.attrs["sign"]) < 0 else "+"
        terms = [
            (lt.delta_energy.values, r"$\Delta\mathcal{E}_t$", "k"),
            (lt.int_dtE.values, r"$\int_0^t \partial_s\mathcal{E}\,ds$", "tab:blue"),
            (lt.dissipation_paper.values, f"${sg}" + r"\int_0^t \mathscr{G}^2_s\,ds$", "tab:orange"),
            (lt.dissipation_exact.values, f"${sg}" + r"\int_0^t \hat{\mathscr{G}}^2_s\,ds$", "tab:purple"),
            (lt.martingale.values, r"$M_t$", "tab:green"),
        ]
        residuals = [
            (lt.residual_paper.values, r"residual with $\mathscr{G}^2$ (147)", "tab:red"),
            (lt.residual_exact.values, r"residual with $\hat{\mathscr{G}}^2$", "tab:brown"),
        ]
        ax = fig.add_subplot(gs[0, c])
        for arr, lab, col in terms:
            _band(ax, t, arr, col, lab, log=False)
        ax.axhline(0, color="0.5", lw=0.5)
        ax.set_ylabel("energy (model units)")
        ax.set_title(f"{summary.get('label', '')}, H = {H}: terms of (147)", fontsize=9)
        if c == 0:
            h, lab = ax.get_legend_handles_labels()
            handles += h
            labels += lab
        ax2 = fig.add_subplot(gs[1, c], sharex=ax)
        for arr, lab, col in residuals:
            _band(ax2, t, arr, col, lab, log=False)
        ax2.axhline(0, color="0.5", lw=0.5)
        ax2.set_xlabel("time $t$ (model time units)")
        ax2.set_ylabel("residual (own scale)")
        if c == 0:
            h, lab = ax2.get_legend_handles_labels()
            handles += h
            labels += lab
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    write_figure(fig, path, dpi=110)
    return path


def regime_figures(key: str, runs: dict, summary: dict, out_dir: Path, *, snapshot_times) -> dict:
    """Fig. 1 and Fig. 3 of one regime (``runs``: H -> dataset), as soon as its runs are finished.

    Returns
    -------
    dict
        {figure key: file name} (``fig1_<key>``, ``fig3_<key>``).
    """
    out_dir = Path(out_dir)
    files = {}
    if all("positions" in ds for ds in runs.values()):
        name = f"fig1_tokens_{key}.png"
        plot_tokens(runs, summary, out_dir / name, snapshot_times=snapshot_times)
        files[f"fig1_{key}"] = name
    name = f"fig3_ledger_{key}.png"
    plot_ledger(runs, summary, out_dir / name)
    files[f"fig3_{key}"] = name
    return files


def plot_all(data: dict, out_dir: Path) -> dict:
    """The figure callback of a reproduction study (the one signature, ``figures(data, out_dir)``): draw
    Fig. 1 and Fig. 3 per regime and Fig. 2 for all regimes into ``out_dir``; returns {figure: file name}.

    ``data`` holds ``datasets`` (regime -> H -> stored run), ``summary`` (the study's numbers) and
    ``snapshot_times`` (the times of Fig. 1). A ``summary`` with ``partial: true`` (one regime finished
    while the study goes on) gets its regime figures only."""
    datasets, summary, snapshot_times = data["datasets"], data["summary"], data["snapshot_times"]
    out_dir = Path(out_dir)
    files = {}
    for key, runs in datasets.items():
        files.update(
            regime_figures(key, runs, summary["regimes"][key], out_dir, snapshot_times=snapshot_times)
        )
    if not summary.get("partial"):
        plot_g2(datasets, summary, out_dir / "fig2_G2.png")
        files["fig2"] = "fig2_G2.png"
    return dict(sorted(files.items()))


def plot_robustness(summary: dict, out_dir: Path) -> dict:
    """The figure of ``massucco2026_robustness``: per regime, the fitted (a, b) of every draw in every
    (n, dt) cell and window, with the published values (and their intervals, where printed); and the
    per-draw correlation r of the shared-forcing regime against the published r = -0.33.

    Returns
    -------
    dict
        {"robustness": "robustness.png"}
    """
    regs = list(summary["regimes"])
    fig = Figure(figsize=(4.0 * (len(regs) + 1), 3.8))
    axes = fig.subplots(1, len(regs) + 1, squeeze=False)[0]
    markers = ("o", "s", "^", "D", "v")
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")
    for ax, reg in zip(axes, regs, strict=False):
        rr = summary["regimes"][reg]
        for ci, (cell, cc) in enumerate(rr["cells"].items()):
            c = summary["cells"][cell]
            for wi, (wl, w) in enumerate(cc["windows"].items()):
                pts = [(f["a"], f["b"]) for f in w["fits"] if "a" in f]
                if not pts:
                    continue
                a, b = np.array(pts).T
                ax.scatter(
                    a,
                    b,
                    s=14,
                    marker=markers[ci % 5],
                    color=colors[wi % 5],
                    alpha=0.7,
                    label=f"n = {c['n']}, dt = {c['dt']:g}, {wl} ({len(pts)} draws)",
                )
        pub = rr.get("published", {})
        if "a" in pub and "b" in pub:
            ax.plot(pub["a"], pub["b"], "k*", ms=12, label=f"published a = {pub['a']}, b = {pub['b']}")
            a_ci, b_ci = pub.get("a_ci"), pub.get("b_ci")
            if a_ci and b_ci:  # the published 95 % intervals as a box
                ax.add_patch(
                    Rectangle(
                        (a_ci[0], b_ci[0]),
                        a_ci[1] - a_ci[0],
                        b_ci[1] - b_ci[0],
                        fill=False,
                        ls="--",
                        color="k",
                        lw=0.8,
                        label="published 95% intervals",
                    )
                )
        elif "b" in pub:
            ax.axhline(pub["b"], color="k", ls="--", lw=0.8, label=f"published b = {pub['b']} (O(1/H))")
        ax.set_xlabel("fitted $a$")
        ax.set_ylabel("fitted $b$")
        ax.set_title(f"{reg}: one point per draw of the shared $(x_0, D_0)$", fontsize=8)
        ax.legend(fontsize=5.5, loc="best")
    ax = axes[-1]
    rr = summary["regimes"].get("osc_shared")
    if rr is not None:
        k = 0
        labels = []
        for cell, cc in rr["cells"].items():
            for wl, w in cc["windows"].items():
                r = [f["r"] for f in w["fits"] if "r" in f]
                ax.scatter(np.full(len(r), k), r, s=12, alpha=0.7)
                labels.append(f"{cell}\n{wl}")
                k += 1
        ax.axhline(-0.33, color="k", ls="--", lw=0.8, label="published r = -0.33")
        ax.set_xticks(range(k))
        ax.set_xticklabels(labels, fontsize=5, rotation=60, ha="right")
        ax.set_ylabel("Pearson r of (log H, log G^2), per draw")
        ax.set_ylim(-1.05, 1.05)
        ax.legend(fontsize=6)
        ax.set_title("osc_shared: r over draws", fontsize=8)
    fig.tight_layout()
    write_figure(fig, Path(out_dir) / "robustness.png", dpi=110, root=out_dir)
    return {"robustness": "robustness.png"}
