"""The ``attnflow`` command line (typer), one module per command group.

    attnflow config example > ou.yaml
    attnflow run ou.yaml --out runs/ou                    # resumes runs/ou if it was interrupted
    attnflow sweep ou.yaml --grid heads.H=2,4 --grid weights.sigma2=0.5,1 --out runs/sweep
    attnflow info runs/sweep
    attnflow plot runs/ou                                 # writes runs/ou/summary.png
    attnflow study run massucco2026 --out out/q --quick   # a registered study; `study show out/q`

=================  ==========================================================================
module             commands
=================  ==========================================================================
``config``         ``config example``, ``config check``
``runs``           ``run`` (particle and PDE runs), ``sweep``
``readers``        ``info``, ``plot``, ``animate`` (with :mod:`.kinds`: what a directory holds)
``study``          ``study list``, ``study run``, ``study show``
``reproduce``      ``reproduce``
``theory``         ``check-edi``, ``critical-noise``
``train``          ``train``
``report``         ``report``
``pde``            ``pde-plot``
``probe``          ``probe`` (a real model's layers, beside random-init nulls)
``errors``         the one exception -> exit status mapping (every command runs inside it)
=================  ==========================================================================

Exit codes (:mod:`.errors`): 0 success, 1 a run or a task failed (or a directory cannot be resumed, read
or written: in use by another process, corrupt, not created by attnflow), 2 bad input (an invalid config
or grid, a config whose objects cannot be built, a missing file or directory), 130 interrupted. Every
failure is reported on one line ``error: ...`` (a config error lists its problems one per line after it)
with the fix, never as a Python traceback.

Each command imports the layer it drives (experiments, studies, plot, analysis) when it runs: these pull in
Zarr, Dask, pydantic, POT and matplotlib, and ``attnflow --help`` or ``attnflow config example`` should not
pay for all of them. These are the only function-level imports of the package besides the optional numba
kernel.
"""

from __future__ import annotations

from ._app import app, config_app, study_app

# the command modules register their commands on ``app`` when imported, in the order of ``--help``
# isort: off
from . import config, runs, readers, study, reproduce, theory, train, report, pde, probe  # noqa: F401, E402

# isort: on
from .errors import CLI_PHRASES, for_cli  # noqa: E402

__all__ = ["CLI_PHRASES", "app", "config_app", "for_cli", "main", "study_app"]


def main() -> None:
    """Entry point of the ``attnflow`` script (pyproject: ``attnflow = "attnflow.cli:main"``)."""
    app()
