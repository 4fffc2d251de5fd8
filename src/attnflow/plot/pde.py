"""Figures of the Transformer PDE (:mod:`attnflow.pde`): densities on S^2 as equal-area (Mollweide) maps,
their animation, densities on S^1, and the ``pde_particles`` study's convergence figure.

Mollweide's projection preserves area, so the colour of a region is read against its true share of the
sphere. The animation is written as MP4 through imageio-ffmpeg's bundled ffmpeg when it is installed,
else as a GIF (Pillow).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.animation as manimation  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..experiments.files import write_output_path  # noqa: E402
from .common import save_figure as _save, write_figure  # noqa: E402

__all__ = [
    "density_animation",
    "density_map",
    "lat_lon_raster",
    "plot_density_run",
    "plot_pde_particles",
]


def lat_lon_raster(n_lat: int = 90, n_lon: int = 180) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lat, lon, points): a latitude-longitude raster and its points on S^2, shape [n_lat * n_lon, 3]."""
    lat = np.linspace(-math.pi / 2, math.pi / 2, n_lat)
    lon = np.linspace(-math.pi, math.pi, n_lon)
    LA, LO = np.meshgrid(lat, lon, indexing="ij")
    pts = np.stack([np.cos(LA) * np.cos(LO), np.cos(LA) * np.sin(LO), np.sin(LA)], -1).reshape(-1, 3)
    return lat, lon, pts


def density_map(ax, lat: np.ndarray, lon: np.ndarray, values: np.ndarray, *, vmin=None, vmax=None, title=""):
    """Draw a density given on a (lat, lon) raster on a Mollweide (equal-area) axis; returns the mesh."""
    mesh = ax.pcolormesh(lon, lat, values, shading="auto", cmap="viridis", vmin=vmin, vmax=vmax)
    ax.set_title(title, fontsize=9)
    ax.grid(True, lw=0.3, alpha=0.5)
    ax.set_xticklabels([])
    ax.set_yticklabels([])
    return mesh


def density_animation(
    lat: np.ndarray, lon: np.ndarray, frames: np.ndarray, times: np.ndarray, out_dir: str | Path, stem: str
) -> str:
    """Animate densities [T, n_lat, n_lon] on a Mollweide map; returns the file name (MP4, else GIF)."""
    fig = plt.figure(figsize=(6, 3.4))
    ax = fig.add_subplot(111, projection="mollweide")
    vmax = float(np.nanmax(frames))
    mesh = density_map(ax, lat, lon, frames[0], vmin=0.0, vmax=vmax, title=f"t = {times[0]:.2f}")
    fig.colorbar(mesh, ax=ax, shrink=0.7, label="density")

    def update(k):
        mesh.set_array(frames[k].ravel())
        ax.set_title(f"t = {times[k]:.2f}", fontsize=9)
        return (mesh,)

    anim = manimation.FuncAnimation(fig, update, frames=len(frames), blit=False)
    try:
        import imageio_ffmpeg

        plt.rcParams["animation.ffmpeg_path"] = imageio_ffmpeg.get_ffmpeg_exe()
        name = f"{stem}.mp4"
        writer = manimation.FFMpegWriter(fps=6)
        write_output_path(Path(out_dir) / name, lambda tmp: anim.save(tmp, writer=writer), root=out_dir)
    except (ImportError, RuntimeError, FileNotFoundError, OSError):
        name = f"{stem}.gif"
        writer = manimation.PillowWriter(fps=6)
        write_output_path(Path(out_dir) / name, lambda tmp: anim.save(tmp, writer=writer), root=out_dir)
    plt.close(fig)
    return name


def plot_density_run(
    times: np.ndarray, frames: np.ndarray, out_dir: str | Path, *, d: int, lat=None, lon=None, theta=None
) -> dict[str, str]:
    """Figures of one density run: S^2 -> equal-area maps at three times and an animation; S^1 -> curves.

    Parameters
    ----------
    times : ndarray, shape=[T]
    frames : ndarray
        [T, n_lat, n_lon] on S^2 (with ``lat``, ``lon``) or [T, n_theta] on S^1 (with ``theta``).
    """
    out = {}
    if d == 3:
        pick = sorted({0, len(times) // 2, len(times) - 1})
        fig = plt.figure(figsize=(4.2 * len(pick), 2.8))
        vmax = float(frames.max())
        for i, k in enumerate(pick):
            ax = fig.add_subplot(1, len(pick), i + 1, projection="mollweide")
            mesh = density_map(ax, lat, lon, frames[k], vmin=0.0, vmax=vmax, title=f"t = {times[k]:.2f}")
        fig.colorbar(mesh, ax=fig.axes, shrink=0.7, label="density")
        write_figure(fig, Path(out_dir) / "fig_density_map.png", dpi=110, root=out_dir)
        plt.close(fig)
        out["density_map"] = "fig_density_map.png"
        out["density_animation"] = density_animation(lat, lon, frames, times, out_dir, "density")
    else:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for k in sorted({0, len(times) // 4, len(times) // 2, len(times) - 1}):
            ax.plot(theta, frames[k], label=f"t = {times[k]:.2f}")
        ax.set(xlabel="angle (rad)", ylabel="density", title="density on S^1")
        ax.legend(fontsize=7)
        out["density_s1"] = _save(fig, out_dir, "fig_density_s1.png")
    return out


def plot_pde_particles(summary: dict, out_dir: str | Path) -> dict[str, str]:
    """``fig_rate.png``: distance between the PDE and n particles at t1 against n, fitted lines and n^-1/2;
    ``fig_density_s1.png``, ``fig_density_map.png`` and the S^2 animation from ``densities.npz``."""
    out_dir = Path(out_dir)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ("s1", "s2"), strict=True):
        m = summary[key]
        for q, f in m["fits"].items():
            n = np.array(f["n"], float)
            y = np.array(f["mean"], float)
            style = "o" if q.endswith("_T") else "x"
            (line,) = ax.plot(n, y, style, label=f"{q} (rate {f['rate']:.2f})" if f.get("rate") else q)
            if f.get("rate") is not None:
                ax.plot(n, f["a"] * n ** (-f["rate"]), "-", lw=0.8, color=line.get_color())
        n = np.geomspace(min(m["fits"]["l2_T"]["n"]), max(m["fits"]["l2_T"]["n"]), 20)
        ax.plot(n, m["fits"]["l2_T"]["mean"][0] * (n / n[0]) ** -0.5, "k:", lw=1, label="n^-1/2")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="n",
            ylabel="distance at t1 (_0: at t = 0)",
            title=f"S^{m['d'] - 1}: PDE vs particles",
        )
        ax.legend(fontsize=7)
    out = {"rate": _save(fig, out_dir, "fig_rate.png")}
    dens = out_dir / summary.get("densities_file", "densities.npz")
    if dens.exists():
        z = np.load(dens)
        out.update(plot_density_run(z["s1_time"], z["s1_density"], out_dir, d=2, theta=z["s1_theta"]))
        out.update(
            plot_density_run(z["s2_time"], z["s2_density"], out_dir, d=3, lat=z["s2_lat"], lon=z["s2_lon"])
        )
    return out
