"""What every figure module shares: the resolution and the one way a figure is written to disk."""

from __future__ import annotations

from pathlib import Path

from ..experiments.files import write_output

__all__ = ["DPI", "save_figure", "save_named", "write_figure"]

#: resolution of every PNG attnflow writes (small files, readable on screen and in a report)
DPI = 110


def save_figure(fig, out_dir: Path, name: str) -> str:
    """Lay out ``fig``, write it to ``out_dir / name`` (creating the folder) and release it.

    Returns ``name``. A pyplot figure is closed; a plain :class:`matplotlib.figure.Figure` has nothing to
    release."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    write_figure(fig, out_dir / name, dpi=DPI, root=out_dir)
    if getattr(fig.canvas, "manager", None) is not None:  # made by pyplot: drop it from pyplot's registry
        import matplotlib.pyplot as plt

        plt.close(fig)
    return name


def write_figure(fig, path: str | Path, *, dpi: int = DPI, root: str | Path | None = None) -> Path:
    """``fig.savefig`` into a new tmp file of the target's directory, then ``os.replace``: never through a
    symlink planted at ``path`` (refused), never outside ``root`` when given
    (:func:`attnflow.experiments.files.write_output`). The format is the suffix's (``.png``, ``.pdf``...)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    return write_output(path, lambda fh: fig.savefig(fh, dpi=dpi, format=fmt), root=root, what="figure")


def save_named(fig, out_dir: Path, name: str) -> dict[str, str]:
    """:func:`save_figure`, returned as ``{key: file}`` with the key the file name without ``.png``
    (the shape a study's figure function returns)."""
    return {name.removesuffix(".png"): save_figure(fig, out_dir, name)}
