"""The Transformer PDE's density runs: ``attnflow run`` on a ``model: pde`` config (:func:`pde_run`) and
``attnflow pde-plot DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .errors import reported
from .kinds import detect, refuse


def pde_run(config: Path, out: Path, resume: bool, quiet: bool) -> None:
    """A density run (``attnflow run`` hands ``model: pde`` configs here, inside its error mapping)."""
    from ..experiments.pde_runs import run_pde

    run_pde(config, out, resume=resume, progress=not quiet)
    if not quiet:
        typer.echo(f"done: {out} (config.yaml, meta.json, data.zarr); figures: attnflow pde-plot {out}")


@app.command("pde-plot")
def pde_plot(
    directory: Annotated[
        Path, typer.Argument(help="A PDE run directory (attnflow run on a model: pde config).")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Figure directory (default: the run's).")
    ] = None,
) -> None:
    """Draw a density run: equal-area (Mollweide) maps and an animation on S^2, density curves on S^1."""
    with reported(f"cannot draw {directory}"):
        kind = detect(directory)
        if kind != "pde run":
            raise refuse(kind, "pde-plot", directory)
        import numpy as np

        from ..experiments.pde_runs import open_pde_run
        from ..pde import make_grid
        from ..plot.pde import lat_lon_raster, plot_density_run

        ds = open_pde_run(directory).load()  # its sizes checked against its config before the load
        target = directory if out is None else out
        target.mkdir(parents=True, exist_ok=True)
        coef = ds.coefficients.values[..., 0] + 1j * ds.coefficients.values[..., 1]
        d = int(ds.nodes.shape[1])
        grid = make_grid(d, int(ds.attrs["band_limit"]))
        if d == 3:
            lat, lon, pts = lat_lon_raster()
            frames = np.stack([grid.evaluate(c, pts).reshape(lat.size, lon.size) for c in coef])
            files = plot_density_run(ds.time.values, frames, target, d=3, lat=lat, lon=lon)
        else:
            th = np.linspace(-np.pi, np.pi, 1024, endpoint=False)
            pts = np.stack([np.cos(th), np.sin(th)], 1)
            frames = np.stack([grid.evaluate(c, pts) for c in coef])
            files = plot_density_run(ds.time.values, frames, target, d=2, theta=th)
    typer.echo(f"wrote {', '.join(str(target / f) for f in files.values())}")
