"""Figures of one stored run or of a sweep (``attnflow plot DIR``), and the animation of a run's token
cloud (``attnflow animate DIR``).

* :func:`plot_run`: energy, G^2 (log scale) and the residuals of identity (147) against time (mean and
  10-90 % band over paths), and the token cloud at the last record (back hemisphere faded); the title
  names the run's parameters (H, beta, sigma^2, direction, init mode) and says "unfinished (t = 5.1 of
  20)" for a run that has not reached its final time;
* :func:`plot_sweep`: the mean energy and G^2 of every task of a sweep on shared axes, one line per
  grid point;
* :func:`animate_run`: the token cloud of one path (or the mean over the paths of a shared start) over
  time, as MP4 through imageio-ffmpeg, or as a GIF (Pillow) when ffmpeg is not available.

Figures are :class:`matplotlib.figure.Figure` objects with the Agg canvas; pyplot is never used.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import xarray as xr
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..experiments.files import write_output_path
from .common import write_figure
from .reproduction import scatter_sphere

#: The files an animation may be written to (the suffix names the format).
ANIMATION_SUFFIXES = (".mp4", ".gif")

__all__ = ["animate_run", "plot_run", "plot_sweep", "run_title"]

TIME_LABEL = "time $t$ (model time units)"


def _config(ds: xr.Dataset) -> dict:
    try:
        cfg = yaml.safe_load(ds.attrs.get("config", "")) or {}
    except yaml.YAMLError:
        cfg = {}
    return cfg if isinstance(cfg, dict) else {}


def run_title(ds: xr.Dataset, name: str = "", status: str | None = None) -> str:
    """The parameters of a run for a figure title: H, beta, sigma^2 (OU), direction, init mode, paths;
    and "unfinished (t = a of b)" when the run did not reach its final time.

    Parameters
    ----------
    ds : xarray.Dataset
        A stored run (its ``config`` attribute holds the YAML config).
    name : str
        The run's name.
    status : str or None
        The run's ``meta.json`` status (``done`` or not); None: judged from the times alone.
    """
    cfg = _config(ds)
    model, weights = cfg.get("model", {}), cfg.get("weights", {})
    parts = [name] if name else []
    H = cfg.get("heads", {}).get("H", ds.attrs.get("H"))
    if H is not None:
        parts.append(f"H = {H}")
    if "beta" in model:
        parts.append(f"beta = {model['beta']:g}")
    process = weights.get("process")
    if process == "ornstein_uhlenbeck":
        parts.append(f"OU sigma^2 = {weights.get('sigma2', 1.0):g}")
    elif process:
        parts.append(f"{process}" + (f" ({weights['phases']})" if "phases" in weights else ""))
    if "direction" in model:
        parts.append(model["direction"])
    parts.append(f"init {cfg.get('init', 'per_path')}, {ds.sizes.get('path', 1)} path(s)")
    t = np.asarray(ds["time"].values)
    t1 = cfg.get("integrator", {}).get("t1")
    if t1 is not None and (status not in (None, "done") or t[-1] < float(t1) - 1e-9):
        parts.append(f"unfinished (t = {t[-1]:.3g} of {float(t1):g})")
    return ", ".join(parts)


def _mean_band(ax, t, a, label=None, color=None):
    lo, hi = np.nanquantile(a, [0.1, 0.9], axis=0)
    (line,) = ax.plot(t, np.nanmean(a, axis=0), label=label, color=color)
    if a.shape[0] > 1:
        ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.25, linewidth=0)
    return line


def plot_run(ds: xr.Dataset, path: Path, title: str = "", *, status: str | None = None) -> Path:
    """Energy, G^2 (log) and the ledger residuals against time, and the token cloud at the last record.

    Parameters
    ----------
    ds : xarray.Dataset
        A stored run.
    path : Path
        The PNG to write.
    title : str
        The run's name (its parameters are added, :func:`run_title`).
    status : str or None
        The run's status from ``meta.json`` (an unfinished run says so in the title).

    Returns
    -------
    Path
    """
    panels = []
    if "energy" in ds:
        panels.append(("energy $\\mathcal{E}_t$", ["energy"], "energy (model units)", False))
    if "G2" in ds:
        panels.append(("$\\mathscr{G}^2_t$", ["G2"], "$\\mathscr{G}^2_t$ (log scale)", True))
    residuals = [v for v in ("residual_paper", "residual_exact") if v in ds]
    if residuals:
        panels.append(("residuals of identity (147)", residuals, "residual (energy units)", False))
    d = ds.sizes.get("dim", 0)
    cloud = "positions" in ds and d in (2, 3)
    ncols = max(len(panels) + int(cloud), 1)
    fig = Figure(figsize=(4.2 * ncols, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    t = np.asarray(ds["time"].values)
    for i, (label, names, ylabel, log) in enumerate(panels):
        ax = fig.add_subplot(1, ncols, i + 1)
        for name in names:
            a = np.asarray(ds[name].transpose("path", "time").values, dtype=float)
            _mean_band(ax, t, a, label=name)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel(TIME_LABEL)
        ax.set_ylabel(ylabel)
        ax.set_title(label)
        if len(names) > 1:
            ax.legend(fontsize="small")
    if cloud:
        x = np.asarray(ds["positions"].isel(time=-1, path=0).values)
        if d == 3:
            ax = fig.add_subplot(1, ncols, ncols, projection="3d")
            scatter_sphere(ax, x / np.linalg.norm(x, axis=-1, keepdims=True), size=10)
        else:
            ax = fig.add_subplot(1, ncols, ncols)
            s = np.linspace(0, 2 * np.pi, 200)
            ax.plot(np.cos(s), np.sin(s), color="0.8", linewidth=0.8)
            ax.scatter(x[:, 0], x[:, 1], s=12, color="C3")
            ax.set_aspect("equal")
        ax.set_title(f"tokens at t = {t[-1]:.3g} (path 0; faint: far side)", fontsize=9)
    head = run_title(ds, title, status)
    if panels:
        head += f"\nlines: mean over {ds.sizes.get('path', 1)} path(s); bands: 10-90% quantiles over paths"
    fig.suptitle(head, fontsize=9)
    write_figure(fig, path, dpi=100)
    return path


def plot_sweep(datasets: Mapping[str, xr.Dataset], path: Path, title: str = "") -> Path:
    """The mean energy and the mean G^2 (log) of every task of a sweep, one line per grid point.

    Parameters
    ----------
    datasets : mapping
        Grid-point label (e.g. ``heads.H=10``) -> the task's run.
    path : Path
        The PNG to write.
    title : str
        The sweep's name.
    """
    if not datasets:
        raise ValueError("a sweep overlay needs at least one finished task; run the sweep first")
    fig = Figure(figsize=(10, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2)
    for label, ds in datasets.items():
        t = np.asarray(ds["time"].values)
        for ax, var in zip(axes, ("energy", "G2"), strict=True):
            if var in ds:
                ax.plot(t, np.asarray(ds[var].values, float).mean(0), label=label)
    axes[0].set_ylabel("energy (model units), mean over paths")
    axes[1].set_ylabel("$\\mathscr{G}^2_t$ (log scale), mean over paths")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel(TIME_LABEL)
    axes[1].legend(fontsize="small", ncol=max(1, len(datasets) // 8))
    first = next(iter(datasets.values()))
    fig.suptitle(f"sweep {title}: {len(datasets)} grid points; {run_title(first)}", fontsize=9)
    write_figure(fig, path, dpi=100)
    return path


def _frames(ds: xr.Dataset, *, mean: bool, max_frames: int, size_px: int):
    d = int(ds.sizes["dim"])
    if d not in (2, 3):
        raise ValueError(f"an animation needs tokens on S^1 or S^2 (d = 2 or 3): got d = {d}")
    n_t = int(ds.sizes["time"])
    idx = np.unique(np.linspace(0, n_t - 1, min(max_frames, n_t)).round().astype(int))
    t = np.asarray(ds["time"].values)
    if int(ds.sizes["path"]) == 1:
        what, mean = "the one computed path", False
    elif mean:
        what = f"mean over the {ds.sizes['path']} paths (renormalised)"
    else:
        what = "path 0"
    fig = Figure(figsize=(size_px / 100, size_px / 100), dpi=100)
    canvas = FigureCanvasAgg(fig)
    for k in idx:
        x = np.asarray(ds["positions"].isel(time=int(k)).values, float)
        y = x.mean(0) if mean else x[0]
        y = y / np.linalg.norm(y, axis=-1, keepdims=True).clip(1e-12)
        fig.clear()
        if d == 3:
            ax = fig.add_subplot(projection="3d")
            scatter_sphere(ax, y, size=8)
        else:
            ax = fig.add_subplot()
            s = np.linspace(0, 2 * np.pi, 200)
            ax.plot(np.cos(s), np.sin(s), color="0.8")
            ax.scatter(y[:, 0], y[:, 1], s=8, c="tab:red")
            ax.set_aspect("equal"), ax.set_xticks([]), ax.set_yticks([])
        ax.set_title(f"t = {t[k]:.2f}: tokens, {what}", fontsize=8)
        canvas.draw()
        yield np.asarray(canvas.buffer_rgba())[..., :3].copy()


def animate_run(
    ds: xr.Dataset,
    path: Path,
    *,
    fps: int = 10,
    max_frames: int = 200,
    mean: bool = False,
    size_px: int = 480,
    fmt: str = "auto",
) -> Path:
    """Animate the token cloud of a run: MP4 (H.264 through imageio-ffmpeg) or a GIF fallback.

    Parameters
    ----------
    ds : xarray.Dataset
        A stored run with ``positions`` (``record.positions: true``), d = 2 or 3.
    path : Path
        Output file, ending in ``.mp4`` or ``.gif`` (any other suffix is refused: the file written is the
        one asked for). ``.gif`` writes a GIF; ``.mp4`` an MP4, or with ``fmt="gif"`` (or ``auto``
        without imageio-ffmpeg) the GIF of the same name with ``.gif``. It is written to a new tmp file
        and moved into place; a symlink at the output's name is refused.
    fps : int
        Frames per second.
    max_frames : int
        At most this many records, evenly spaced, become frames.
    mean : bool
        Animate the per-token mean over paths (renormalised; meaningful with ``init: shared``) instead
        of path 0.
    size_px : int
        Width and height of a frame in pixels (even, for H.264).
    fmt : {"auto", "mp4", "gif"}
        ``auto``: the suffix's format (MP4 falls back to GIF without imageio-ffmpeg).

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ValueError
        A run without positions, d not in (2, 3), bad fps / max_frames / fmt, a suffix other than
        ``.mp4``/``.gif``; :class:`~attnflow.experiments.files.UnsafePathError` (a ValueError) for a
        symlink at the output's name.
    """
    if "positions" not in ds:
        raise ValueError(
            "the run has no token positions to animate (it was run with record.positions: false); "
            "rerun it with record.positions: true"
        )
    if not (isinstance(fps, int) and fps >= 1 and isinstance(max_frames, int) and max_frames >= 2):
        raise ValueError(f"fps must be >= 1 and max_frames >= 2: got fps={fps!r}, max_frames={max_frames!r}")
    if fmt not in ("auto", "mp4", "gif"):
        raise ValueError(f"fmt must be 'auto', 'mp4' or 'gif': got {fmt!r}")
    size_px = int(size_px) // 16 * 16 or 480
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in ANIMATION_SUFFIXES:
        raise ValueError(
            f"the animation {path} must end in .mp4 or .gif (the file written is what was asked): got "
            f"{path.suffix or 'no suffix'!r}; name it {path.with_suffix('.mp4').name} or "
            f"{path.with_suffix('.gif').name}"
        )
    auto = fmt == "auto"
    if auto:
        fmt = "gif" if suffix == ".gif" else "mp4"
    if fmt == "mp4":
        try:
            import imageio_ffmpeg
        except ImportError:
            if auto:
                fmt = "gif"  # the documented fallback: x.mp4 -> x.gif without imageio-ffmpeg
            else:
                raise ValueError(
                    "MP4 needs the imageio-ffmpeg package (pip install imageio-ffmpeg); or use fmt='gif'"
                ) from None
    if fmt == "mp4":
        out = path.with_suffix(".mp4")

        def write_mp4(tmp: Path) -> None:
            writer = imageio_ffmpeg.write_frames(
                str(tmp),
                (size_px, size_px),
                fps=fps,
                codec="libx264",
                pix_fmt_out="yuv420p",
                quality=6,
                macro_block_size=16,
            )
            writer.send(None)
            for frame in _frames(ds, mean=mean, max_frames=max_frames, size_px=size_px):
                writer.send(np.ascontiguousarray(frame))
            writer.close()

        return write_output_path(out, write_mp4, what="animation")
    from PIL import Image

    out = path.with_suffix(".gif")
    images = [Image.fromarray(f) for f in _frames(ds, mean=mean, max_frames=max_frames, size_px=size_px)]

    def write_gif(tmp: Path) -> None:
        images[0].save(
            tmp, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0
        )

    return write_output_path(out, write_gif, what="animation")
