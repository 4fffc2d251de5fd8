"""Figures of the training studies ``ntk_injectivity`` and ``depth_limit`` (arXiv 2605.17660, 2605.11059).

Each function has the signature the study's analysis calls, ``figures(data, out_dir) -> {key: file}``, and
is registered for its study in :mod:`attnflow.plot.studies`. Figures are :class:`matplotlib.figure.Figure`
objects saved as small PNGs; pyplot is never used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from .common import save_named as _save

__all__ = ["plot_depth_limit", "plot_ntk_injectivity"]


def plot_ntk_injectivity(data: dict, out_dir: Path) -> dict[str, str]:
    """Relative smallest singular value against P per law (left) and the spectrum at the largest P (right)."""
    fig = Figure(figsize=(9, 3.8))
    ax, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    laws = list(dict.fromkeys(cv["law"] for cv in data["curves"]))
    floor = 1e-18
    for cv in data["curves"]:
        color = f"C{laws.index(cv['law']) % 10}"
        label = (
            cv["law"]
            if cv["seed"] == min(c["seed"] for c in data["curves"] if c["law"] == cv["law"])
            else None
        )
        rel = np.maximum(np.asarray(cv["rel_min"], float), floor)
        ax.loglog(cv["P"], rel, "o-", color=color, ms=3, lw=1, label=label)
        sv = np.maximum(np.asarray(cv["sv_last"], float) / cv["scale"][-1], floor)
        ax2.semilogy(np.arange(1, sv.size + 1), sv, ".-", color=color, lw=0.8, label=label)
    ax.axhline(data["rtol"], color="k", ls=":", lw=0.8)
    ax.axvline(data["curves"][0]["dim"], color="0.7", lw=0.8)
    ax.set_xlabel("number of parameters P")
    ax.set_ylabel("sigma_min / feature scale (0 shown at 1e-18)")
    ax.legend(fontsize=7)
    ax2.set_xlabel("index")
    ax2.set_ylabel("singular values / feature scale, largest P")
    return _save(fig, out_dir, "ntk_injectivity.png")


def _fit_curve(f: dict, L: np.ndarray, H: float) -> np.ndarray:
    ih = 0.0 if not np.isfinite(H) else H**-0.5
    return f["a"] * L ** -f["alpha"] + f["b"] * L ** -f["gamma"] * ih


def plot_depth_limit(data: dict, out_dir: Path) -> dict[str, str]:
    """Uniform errors of x and p against L per H with the fitted law (init, trained), and errors against n."""
    fig = Figure(figsize=(10, 7.5))
    panels = [
        ("init_rows", "err_x", "init_x", "x at initialisation"),
        ("init_rows", "err_p", "init_p", "p at initialisation"),
        ("train_rows", "err_x", "trained_x", "x after AdamW"),
        ("train_rows", "err_p", "trained_p", "p after AdamW"),
    ]
    for k, (rows_key, var, fit_key, title) in enumerate(panels):
        ax = fig.add_subplot(2, 2, k + 1)
        rows = data[rows_key]
        Hs = list(dict.fromkeys(r["H"] for r in rows))
        fit = data["fits"][fit_key]
        for j, H in enumerate(Hs):
            Ls = sorted({r["L"] for r in rows if r["H"] == H})
            e = [np.mean([r[var] for r in rows if r["H"] == H and r["L"] == L]) for L in Ls]
            ax.loglog(Ls, e, "o", color=f"C{j % 10}", ms=4, label=f"H={H}")
            if "error" not in fit:
                grid = np.geomspace(min(Ls), max(Ls), 50)
                ax.loglog(grid, _fit_curve(fit, grid, float(H)), "-", color=f"C{j % 10}", lw=0.8)
        if "error" not in fit:
            title += f": alpha={fit['alpha']:.2f}, gamma={fit['gamma']:.2f}"
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("depth L")
        ax.set_ylabel("max |error|")
        ax.legend(fontsize=6)
    out = _save(fig, out_dir, "depth_limit.png")

    fig = Figure(figsize=(9, 6.4))
    rows = data["n_rows"]
    H_all = list(dict.fromkeys(r["H"] for r in rows))
    L_all = sorted({r["L"] for r in rows})
    styles = ["-", "--", ":", "-."]
    for i, state in enumerate(("init", "trained")):
        for k, var in enumerate(("err_x", "err_p")):
            ax = fig.add_subplot(2, 2, 2 * i + k + 1)
            for H in H_all:
                for L in L_all:
                    pts = sorted(
                        (r["n"], r[var])
                        for r in rows
                        if r["state"] == state and r["L"] == L and r["H"] == H and r[var] is not None
                    )
                    if pts:
                        ax.loglog(
                            *zip(*pts, strict=True),
                            styles[L_all.index(L) % len(styles)],
                            marker="o",
                            ms=3,
                            lw=0.9,
                            color=f"C{H_all.index(H) % 10}",
                            label=f"L={L} H={H}",
                        )
            ax.set_title(f"{state}: {var[4:]}", fontsize=8)
            ax.set_xlabel("tokens n")
            ax.set_ylabel("max |error|")
            ax.legend(fontsize=5, ncol=3)
    out.update(_save(fig, out_dir, "depth_limit_tokens.png"))
    return out
