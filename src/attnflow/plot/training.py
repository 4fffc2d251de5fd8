"""Figures of a training run directory (:mod:`attnflow.experiments.training_run`).

:func:`training_figures` is the figure function the CLI injects into ``run_training``: it reads the
files of a finished run and writes ``figures/loss.png`` (loss curves), ``figures/clouds.png`` (test
token clouds at depth 0, after the untrained and after the trained flow, with the target),
``figures/head_law.png`` (the empirical head law of every layer along training, as particles) and
``figures/landscape.png`` (the risk's first variation on a plane of parameter space, with the heads and
the force on them). Figures are :class:`matplotlib.figure.Figure` objects; pyplot is never used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..experiments.files import inside, read_json
from ..experiments.rundir import read_npz
from .common import DPI, save_figure, write_figure

__all__ = [
    "plot_clouds",
    "plot_head_law",
    "plot_landscape",
    "plot_loss",
    "training_figures",
]


def _save(fig: Figure, path: Path) -> str:
    return save_figure(fig, path.parent, path.name)


def plot_loss(history: dict, path: Path) -> str:
    """Minibatch loss per step, full training and test loss at the recorded steps (log scale)."""
    fig = Figure(figsize=(6.0, 3.6))
    ax = fig.add_subplot()
    losses = np.asarray(history["losses"], dtype=float)
    ax.plot(np.arange(len(losses)), losses, lw=0.8, color="0.6", label="minibatch")
    evals = history["evals"]
    steps = [e["step"] for e in evals]
    ax.plot(steps, [e["train_loss"] for e in evals], "o-", ms=3, label="train")
    ax.plot(steps, [e["test_loss"] for e in evals], "s-", ms=3, label="test")
    if "test_accuracy" in evals[-1]:
        ax2 = ax.twinx()
        ax2.plot(steps, [e["test_accuracy"] for e in evals], "^:", ms=3, color="C3", label="test accuracy")
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("test accuracy")
    if np.all(losses > 0):
        ax.set_yscale("log")
    ax.set_xlabel("AdamW step")
    ax.set_ylabel("loss")
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, path)


def _lonlat(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longitude and latitude (degrees) of points of S^2 (the first three coordinates)."""
    lon = np.degrees(np.arctan2(x[..., 1], x[..., 0]))
    lat = np.degrees(np.arcsin(np.clip(x[..., 2], -1.0, 1.0)))
    return lon, lat


def plot_clouds(clouds: dict, path: Path) -> str:
    """Each test cloud at depth 0, after the initial flow and after the trained flow (longitude/latitude)."""
    x0 = clouds["x0"]
    P = x0.shape[0]
    cols = ["x0", "x_init", "x_final"]
    titles = ["input", "untrained flow", "trained flow"]
    fig = Figure(figsize=(3.0 * len(cols), 2.2 * P))
    for p in range(P):
        for c, (key, title) in enumerate(zip(cols, titles, strict=True)):
            ax = fig.add_subplot(P, len(cols), p * len(cols) + c + 1)
            if x0.shape[-1] >= 3:
                if "target" in clouds:
                    tl, tb = _lonlat(clouds["target"])
                    ax.scatter(tl, tb, s=4, color="0.75", label="target sample")
                lon, lat = _lonlat(clouds[key][p])
                colour = "C1" if "labels" in clouds and clouds["labels"][p] > 0.5 else "C0"
                ax.scatter(lon[1:], lat[1:], s=8, color=colour)
                ax.scatter(lon[:1], lat[:1], s=30, marker="*", color="k")
                ax.set_xlim(-180, 180)
                ax.set_ylim(-90, 90)
            else:
                ang = np.arctan2(clouds[key][p][:, 1], clouds[key][p][:, 0])
                ax.scatter(np.cos(ang), np.sin(ang), s=8)
                ax.set_aspect("equal")
            if p == 0:
                ax.set_title(title, fontsize=9)
            ax.tick_params(labelsize=6)
    return _save(fig, path)


def plot_head_law(law: dict, path: Path) -> str:
    """The heads of each layer as particles (tr D / d, tr V / d) along training, coloured by step."""
    steps, D, V = law["steps"], law["D"], law["V"]  # (S,), (S, L, H, d, d)
    d = D.shape[-1]
    a = np.trace(D, axis1=-2, axis2=-1) / d
    b = np.trace(V, axis1=-2, axis2=-1) / d
    L = D.shape[1]
    fig = Figure(figsize=(3.0 * L, 3.0))
    for layer in range(L):
        ax = fig.add_subplot(1, L, layer + 1)
        for h in range(D.shape[2]):
            ax.plot(a[:, layer, h], b[:, layer, h], lw=0.6, color="0.7")
        sc = ax.scatter(
            a[:, layer].ravel(), b[:, layer].ravel(), c=np.repeat(steps, D.shape[2]), s=8, cmap="viridis"
        )
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.set_xlabel("tr D / d", fontsize=8)
        if layer == 0:
            ax.set_ylabel("tr V / d", fontsize=8)
    fig.tight_layout()
    fig.colorbar(sc, ax=fig.axes, label="step", shrink=0.8)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_figure(fig, path, dpi=DPI)
    return path.name


def plot_landscape(land: dict, path: Path) -> str:
    """Psi_l on the plane through each layer's mean head, the heads and -grad Psi_l at them."""
    layers = sorted(int(k.split("_")[1]) for k in land if k.startswith("psi_"))
    names = [str(s) for s in land["directions"]]
    fig = Figure(figsize=(3.2 * len(layers), 3.0))
    for i, layer in enumerate(layers):
        ax = fig.add_subplot(1, len(layers), i + 1)
        grid = land[f"grid_{layer}"]
        cs = ax.contourf(grid, grid, land[f"psi_{layer}"].T, levels=20, cmap="coolwarm")
        fig.colorbar(cs, ax=ax, shrink=0.8)
        hd, fc = land[f"heads_{layer}"], land[f"force_{layer}"]
        ax.scatter(hd[:, 0], hd[:, 1], s=12, color="k")
        scale = np.abs(fc).max() or 1.0
        ax.quiver(hd[:, 0], hd[:, 1], fc[:, 0] / scale, fc[:, 1] / scale, angles="xy", scale=6, width=0.008)
        ax.set_title(f"layer {layer}: first variation", fontsize=9)
        ax.set_xlabel(names[0], fontsize=8)
        ax.set_ylabel(names[1], fontsize=8)
    return _save(fig, path)


def training_figures(run_dir: str | Path) -> list[str]:
    """Write the figures of a finished training run into ``run_dir/figures``; returns their names."""
    run = Path(run_dir)
    fig_dir = run / "figures"
    # a run directory may come from someone else: every file is read bounded, inside the directory, arrays
    # only after their declared sizes were checked (attnflow.experiments.rundir.read_npz)
    fix = "the run directory is damaged or not a finished training run: rerun the training"
    history = read_json(inside(run, run / "history.json", what="run file"), "the run's history", fix)
    clouds = read_npz(inside(run, run / "clouds.npz", what="run file"), fix)
    law = read_npz(inside(run, run / "head_law.npz", what="run file"), fix)
    land = None
    if (run / "landscape.npz").is_file():
        land = read_npz(inside(run, run / "landscape.npz", what="run file"), fix)
    # every file read and checked before the first figure is drawn
    made = [plot_loss(history, fig_dir / "loss.png")]
    made.append(plot_clouds(clouds, fig_dir / "clouds.png"))
    made.append(plot_head_law(law, fig_dir / "head_law.png"))
    if land is not None:
        made.append(plot_landscape(land, fig_dir / "landscape.png"))
    return made
