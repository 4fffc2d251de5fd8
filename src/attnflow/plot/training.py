"""Figures of the training studies ``ntk_injectivity`` and ``depth_limit`` (arXiv 2605.17660, 2605.11059).

Each function has the signature the study's analysis calls, ``figures(data, out_dir) -> {key: file}``, and
is registered for its study in :mod:`attnflow.plot.studies`. Figures are :class:`matplotlib.figure.Figure`
objects saved as small PNGs; pyplot is never used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

__all__ = ["plot_ntk_injectivity"]

DPI = 110


def _save(fig: Figure, out_dir: Path, name: str) -> dict[str, str]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out_dir / name, dpi=DPI)
    return {name.removesuffix(".png"): name}


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
        sv = np.maximum(np.asarray(cv["sv_last"], float) / max(cv["sigma_max"][-1], 1e-300), floor)
        ax2.semilogy(np.arange(1, sv.size + 1), sv, ".-", color=color, lw=0.8, label=label)
    ax.axhline(data["rtol"], color="k", ls=":", lw=0.8)
    ax.axvline(data["curves"][0]["dim"], color="0.7", lw=0.8)
    ax.set_xlabel("number of parameters P")
    ax.set_ylabel("sigma_min / feature scale (0 shown at 1e-18)")
    ax.legend(fontsize=7)
    ax2.set_xlabel("index")
    ax2.set_ylabel("singular values / sigma_max at the largest P")
    return _save(fig, out_dir, "ntk_injectivity.png")
