"""Figures of the noisy-token and JKO studies (issue 16): ``noise_phase`` and ``jko_stability``.

Each function takes the study's summary (``summary.json``) and the output directory and returns
{figure key: file name}; :mod:`attnflow.plot.studies` registers them for ``attnflow study run``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..analysis.noise_stability import critical_token_noise  # noqa: E402
from .common import save_figure as _save  # noqa: E402

__all__ = ["plot_jko_stability", "plot_noise_phase"]


def plot_noise_phase(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_phase.png``: per (sphere, kernel), the order parameter <|m|> over (beta, eps) with the derived
    line eps_c(beta) and the fitted eps_c; ``fig_fluctuations.png``: 1/(n<|m|^2>) against eps/eps_c with the
    derived line 1 - eps_c/eps."""
    out = {}
    groups: dict[tuple, list] = {}
    for c in summary["cases"].values():
        groups.setdefault((c["sphere"], c["kernel"], c["d"]), []).append(c)
    keys = sorted(groups)
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.8), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        sphere, kernel, d = key
        cases = sorted(groups[key], key=lambda c: c["beta"])
        bs, es, ms = [], [], []
        for c in cases:
            for v in c["per_ratio"].values():
                bs.append(c["beta"])
                es.append(v["eps"])
                ms.append(v["order_parameter"]["mean"])
        sc = ax.scatter(bs, es, c=ms, cmap="viridis", vmin=0, vmax=1, s=40, edgecolor="k", lw=0.3)
        grid = np.geomspace(min(bs) * 0.8, max(bs) * 1.25, 100)
        ax.plot(grid, [critical_token_noise(float(b), d, kernel) for b in grid], "r-", label="derived eps_c")
        fb = [(c["beta"], c["fit"]) for c in cases if c["fit"].get("eps_c") is not None]
        if fb:
            ax.errorbar(
                [b for b, _ in fb],
                [f["eps_c"] for _, f in fb],
                yerr=np.array(
                    [[f["eps_c"] - f["eps_c_ci"][0], f["eps_c_ci"][1] - f["eps_c"]] for _, f in fb]
                ).T,
                fmt="ws",
                mec="r",
                capsize=3,
                label="fitted eps_c (95%)",
            )
        ax.set(xscale="log", yscale="log", xlabel="beta", ylabel="eps", title=f"{sphere}, {kernel}")
        betas = sorted({c["beta"] for c in cases})
        ax.set_xticks(betas, [f"{b:g}" for b in betas])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.legend(fontsize=7)
        fig.colorbar(sc, ax=ax, label="<|m|> (late times)")
    out["phase"] = _save(fig, out_dir, "fig_phase.png")

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for c in summary["cases"].values():
        ec = c["eps_c_predicted"]
        r = [v["eps"] / ec for v in c["per_ratio"].values()]
        y = [1.0 / v["n_m2"]["mean"] for v in c["per_ratio"].values()]
        ax.plot(r, y, "o-", ms=3, lw=0.8, label=f"{c['sphere']} {c['kernel']} b={c['beta']:g}")
    rr = np.linspace(1.0, max(summary["sizes"]["ratios"]), 100)
    ax.plot(rr, 1 - 1 / rr, "k--", lw=2, label="derived 1 - eps_c/eps")
    ax.axvline(1.0, color="gray", lw=0.5)
    ax.set(xlabel="eps / eps_c (mean field)", ylabel="1 / (n <|m|^2>)", title="disordered-side fluctuations")
    ax.legend(fontsize=5, ncol=2)
    out["fluctuations"] = _save(fig, out_dir, "fig_fluctuations.png")
    return out


def plot_jko_stability(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_jko_vs_euler.png``: the energy against time for explicit (projected) Euler and the JKO step at
    each step size, with the exact-flow reference."""
    runs = summary["results"]
    dts = sorted({r["dt"] for r in runs.values()})
    ncol = min(4, len(dts))
    nrow = -(-len(dts) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, 3.2 * nrow), squeeze=False, sharey=True)
    ref = summary["reference"]
    for ax, dt in zip(axes.flat, dts, strict=False):
        ax.plot(ref["times"], ref["energy"], "k-", lw=2.5, alpha=0.3, label="rk4 reference")
        for r in runs.values():
            if r["dt"] != dt:
                continue
            style = "o-" if r["method"] == "jko" else "x--"
            ax.plot(
                r["times"], r["energy"], style, ms=3, lw=1, label=f"{r['method']} (monotone: {r['monotone']})"
            )
        ax.set(xlabel="t", title=f"dt = {dt:g} ({dt / summary['euler_limit']:.2g} x Euler limit)")
        ax.legend(fontsize=6)
    for ax in axes.flat[len(dts) :]:
        ax.axis("off")
    for row in axes:
        row[0].set_ylabel("energy E (path 0)")
    return {"jko_vs_euler": _save(fig, out_dir, "fig_jko_vs_euler.png")}
