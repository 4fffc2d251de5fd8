""":func:`write_report`: a directory in, one self-contained HTML file out."""

from __future__ import annotations

from pathlib import Path

from ..experiments.files import check_output_target
from .collect import collect
from .html import REPORT_FILE, write_page
from .page import ReportLimits

__all__ = ["write_report"]


def write_report(
    directory: str | Path,
    output: str | Path | None = None,
    *,
    limits: ReportLimits | None = None,
    theory_checks: str | Path | None = None,
) -> Path:
    """Write the HTML report of a run, sweep, study or reproduction directory.

    Parameters
    ----------
    directory : str or Path
        What ``attnflow run``, ``sweep``, ``study run`` or ``reproduce`` wrote (also a committed
        ``docs/studies/NAME``).
    output : str or Path or None
        The HTML file; default ``directory/report.html``. Links to the stored data are relative to it.
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
        If ``directory`` is not one of the four kinds of directory.
    FileNotFoundError
        If the directory of ``output`` does not exist.
    UnsafePathError
        ``output`` (or ``directory/report.html``) is a symlink, or a file the directory names lies outside
        it (the page is written to a tmp file and moved into place; nothing outside is read or written).

    Examples
    --------
    >>> write_report("runs/ou")  # doctest: +SKIP
    PosixPath('runs/ou/report.html')
    """
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
    return write_page(page, out, root=d if output is None else None)
