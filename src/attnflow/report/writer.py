""":func:`write_report`: a directory (or an in-memory Dataset) in, one HTML file out."""

from __future__ import annotations

from pathlib import Path

from ..experiments.files import check_output_target
from .collect import collect, collect_dataset
from .html import PLOTLY_MODES, REPORT_FILE, write_page
from .page import ReportLimits

__all__ = ["write_report"]


def write_report(
    directory,
    output: str | Path | None = None,
    *,
    limits: ReportLimits | None = None,
    theory_checks: str | Path | None = None,
    plotly: str = "inline",
) -> Path:
    """Write the HTML report of a run, sweep, study or reproduction directory, or of an in-memory run.

    Parameters
    ----------
    directory : str or Path or xarray.Dataset
        What ``attnflow run``, ``sweep``, ``study run``, ``reproduce`` or ``probe`` wrote (also a
        committed ``docs/studies/NAME``), or the Dataset that :func:`attnflow.simulate` returns (then
        ``output`` is required: there is no directory to write into).
    output : str or Path or None
        The HTML file; default ``directory/report.html``. Links to the stored data are relative to it.
    plotly : {"inline", "shared"}
        ``inline`` (default): plotly.js (about 4.6 MiB) inside the page, which needs no other file;
        ``shared``: the page references ``plotly-<version>.min.js`` in its own directory, written once
        there and shared by every page written beside it (a page of about the data's size; still no
        network).
    limits : ReportLimits or None
        Thinning of large runs (tokens, frames, times, runs); the page states what it kept.
    theory_checks : str or Path or None
        A Markdown page of verdicts; its sections about the study are shown. Default: the
        ``theory_checks.md`` two levels above a study directory when there is one (``docs/studies/NAME``
        -> ``docs/theory_checks.md``).

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    NotReportableError
        If ``directory`` is not one of the kinds of directory, or a Dataset without a ``time`` dimension.
    ValueError
        ``plotly`` is not a mode, or a Dataset is given without ``output``.
    FileNotFoundError
        If the directory of ``output`` does not exist.
    UnsafePathError
        ``output`` (or ``directory/report.html``) is a symlink, or a file the directory names lies outside
        it (the page is written to a tmp file and moved into place; nothing outside is read or written).

    Examples
    --------
    >>> write_report("runs/ou")  # doctest: +SKIP
    PosixPath('runs/ou/report.html')
    >>> write_report(attnflow.simulate(model, x0, D, t1=5, dt=0.01), "sim.html")  # doctest: +SKIP
    PosixPath('sim.html')
    """
    if plotly not in PLOTLY_MODES:
        raise ValueError(f"plotly must be one of {PLOTLY_MODES}: got {plotly!r}; use 'inline' or 'shared'")
    if not isinstance(directory, (str, Path)):  # an in-memory run (an xarray.Dataset)
        if output is None:
            raise ValueError(
                "an in-memory Dataset has no directory to write the report into: pass output='FILE.html'"
            )
        out = check_output_target(Path(output), what="report")  # a missing directory: FileNotFoundError
        return write_page(collect_dataset(directory, limits=limits), out, plotly=plotly)
    d = Path(directory)
    out = Path(output) if output is not None else d / REPORT_FILE
    check_output_target(out, root=d if output is None else None, what="report")  # before any work
    if not out.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write the report {out}: its directory {out.parent} does not exist; create it first or "
            "choose another output"
        )
    if theory_checks is None:
        guess = d.resolve().parent.parent / "theory_checks.md"
        theory_checks = guess if guess.is_file() else None
    page = collect(d, page_dir=out.parent, limits=limits, theory_checks=theory_checks)
    return write_page(page, out, root=d if output is None else None, plotly=plotly)
