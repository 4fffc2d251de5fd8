"""HTML reports of runs, sweeps, studies, reproductions and probes (issues 18, 26, 31): `attnflow report`.

* :func:`write_report` — one HTML file (plotly.js inlined, or shared beside many pages; figures as data
  URIs), of a directory or of the in-memory Dataset that ``attnflow.simulate`` returns;
* :func:`collect` / :class:`Page` — what a page shows, read from the directory's own files;
* :mod:`attnflow.report.browser` — headless Chromium through the DevTools protocol (tests, load time).

The layer sits between ``cli`` and ``plot`` (pyproject's import-linter contract).
"""

from .collect import collect as collect, detect_kind as detect_kind
from .html import REPORT_FILE as REPORT_FILE, page_html as page_html
from .page import (
    KINDS as KINDS,
    NotReportableError as NotReportableError,
    Page as Page,
    ReportLimits as ReportLimits,
    Section as Section,
)
from .writer import write_report as write_report

__all__ = [
    "KINDS",
    "REPORT_FILE",
    "NotReportableError",
    "Page",
    "ReportLimits",
    "Section",
    "collect",
    "detect_kind",
    "page_html",
    "write_report",
]
