"""Figures of a probe (:mod:`attnflow.analysis.probe`): one per measure, the trained model beside its nulls.

Each figure draws the trained model's per-layer mean with its bootstrap interval (a band) and every random
initialisation of the same architecture (grey, dashed); per-head measures get a second panel with one
line per head of the trained model. The Jacobian figures draw the spectral norms against the sequence
length, one line per layer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import save_named

__all__ = ["MEASURES", "plot_probe"]

#: (variable, title, y label, per-head) of the per-layer figures
MEASURES = (
    ("cos_hidden", "mean pairwise cosine, hidden states", "mean cosine", False),
    (
        "cos_hidden_content",
        "mean pairwise cosine, hidden states without special tokens",
        "mean cosine",
        False,
    ),
    ("cos_sphere", "mean pairwise cosine, sphere tokens", "mean cosine", False),
    (
        "cos_sphere_content",
        "mean pairwise cosine, sphere tokens without special tokens",
        "mean cosine",
        False,
    ),
    ("aniso_hidden", "cross-sentence anisotropy, hidden states", "mean cosine across sentences", False),
    ("aniso_sphere", "cross-sentence anisotropy, sphere tokens", "mean cosine across sentences", False),
    ("erank_sv", "effective rank (singular values)", "erank", False),
    ("erank_gram", "effective rank (Gram eigenvalues)", "erank", False),
    ("erank_gram_sphere", "effective rank (Gram eigenvalues), sphere tokens", "erank", False),
    ("attn_entropy", "attention entropy", "nats", True),
    ("sink_special", "attention mass on special tokens", "mass", True),
    ("sink_first", "attention mass on the first token", "mass", True),
    ("sink_special_valuenorm", "value-norm-weighted attention on special tokens", "share", True),
    ("ds_distance", "distance from doubly stochastic", "(1/n) sum_j |col_j - 1|", True),
)


def _band(ax, x, ds, name: str, suffix: str, label: str) -> None:
    models = [str(m) for m in ds.model.values]
    for m in models:
        if m == models[0]:
            continue
        ax.plot(x, ds[name + suffix + "mean"].sel(model=m).values, color="0.6", ls="--", lw=1,
                label="random init (same architecture)" if m == models[1] else None)  # fmt: skip
    m0 = models[0]
    lo, hi = ds[name + suffix + "lo"].sel(model=m0).values, ds[name + suffix + "hi"].sel(model=m0).values
    ax.fill_between(x, lo, hi, color="C0", alpha=0.25, lw=0)
    ax.plot(x, ds[name + suffix + "mean"].sel(model=m0).values, color="C0", marker="o", ms=3, label=label)


def plot_probe(ds, out_dir: Path) -> dict[str, str]:
    """Write one PNG per measure into ``out_dir`` and return ``{name: file}``.

    Parameters
    ----------
    ds : xarray.Dataset
        What :func:`attnflow.analysis.probe.run_probe` stores (``probe.zarr``).
    out_dir : Path
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    title = str(ds.attrs.get("model", ""))
    first = str(ds.model.values[0])
    files: dict[str, str] = {}
    for name, what, ylabel, per_head in MEASURES:
        if per_head:
            fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
            x = ds.block.values + 1
            _band(ax, x, ds, name, "_layer_", f"{first} (95% bootstrap CI)")
            vals = ds[name + "_mean"].sel(model=first).values  # (block, head)
            for h in range(vals.shape[1]):
                ax2.plot(x, vals[:, h], lw=0.8, alpha=0.8)
            ax2.set_title(f"{first}: per head")
            ax2.set_xlabel("layer")
            ax2.set_ylabel(ylabel)
        else:
            fig, ax = plt.subplots(figsize=(5.5, 3.6))
            x = ds.layer.values
            _band(ax, x, ds, name, "_", f"{first} (95% bootstrap CI)")
        ax.set_title(f"{title}: {what}", fontsize=9)
        ax.set_xlabel("layer" if per_head else "depth (0 = embeddings)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        files.update(save_named(fig, out_dir, f"probe_{name}.png"))
    for name, what in (("lip_attention", "local Lipschitz constant of attention"),
                       ("jac_block", "spectral norm of the block Jacobian")):  # fmt: skip
        if ds.sizes.get("length", 0) == 0:  # the probe ran without Jacobians (--lengths "")
            break
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        lengths = ds.length.values
        vals = ds[name].sel(model=first).mean("sequence").values  # (length, block)
        null = (
            ds[name].drop_sel(model=first).mean(("sequence", "model")).values if ds.model.size > 1 else None
        )
        cmap = plt.get_cmap("viridis")
        L = vals.shape[1]
        for layer in range(L):
            ax.plot(lengths, vals[:, layer], marker="o", ms=3, color=cmap(layer / max(L - 1, 1)),
                    label=f"layer {layer + 1}" if L <= 8 or layer in (0, L - 1) else None)  # fmt: skip
        if null is not None:
            ax.plot(
                lengths, np.nanmean(null, axis=1), color="0.4", ls="--", label="random init, mean over layers"
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.set_ylabel("spectral norm")
        ax.set_title(f"{title}: {what}", fontsize=9)
        ax.legend(fontsize=6)
        files.update(save_named(fig, out_dir, f"probe_{name}.png"))
    return files
