"""What a report page is made of: :class:`Page`, :class:`Section`, the thinning limits
(:class:`ReportLimits`), the variables drawn, and small HTML helpers (every text escaped)."""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "COLORS",
    "G2_VARS",
    "KINDS",
    "LEDGER_VARS",
    "VAR_TITLES",
    "NotReportableError",
    "Page",
    "ReportLimits",
    "Section",
    "details",
    "esc",
    "json_safe",
    "kv_table",
    "link",
    "pre",
    "rel",
]

#: the kinds of directory a report can be written for
KINDS = ("run", "sweep", "study", "reproduction", "probe")
#: the time series drawn with bands (when the run recorded them), by figure
LEDGER_VARS = ("energy", "residual_paper", "residual_exact")
G2_VARS = ("G2", "Ghat2")
VAR_TITLES = {
    "G2": "G^2 (the paper's, harmonic-mean mobility; Lemma 4.12)",
    "Ghat2": "Ghat^2 (exact chain rule)",
    "energy": "energy E(t)",
    "residual_paper": "ledger residual R_paper of identity (147)",
    "residual_exact": "ledger residual R_exact (exact dissipation)",
}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


class NotReportableError(FileNotFoundError):
    """The directory is not a run, sweep, study, reproduction or probe directory attnflow wrote."""


@dataclass(frozen=True)
class ReportLimits:
    """How much of a large directory goes on the page (the page states what was left out).

    Attributes
    ----------
    max_tokens : int
        Tokens per frame of the token cloud (every k-th token).
    max_frames : int
        Frames of the token cloud (evenly spaced recorded times, first and last kept).
    max_points : int
        Times per curve of the ledger and G^2 plots.
    max_runs : int
        Runs drawn in the curves and offered in the token cloud of a sweep or a study.
    """

    max_tokens: int = 400
    max_frames: int = 60
    max_points: int = 400
    max_runs: int = 12

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_frames", "max_points", "max_runs"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1: got {v!r}; pass a positive limit")
        if self.max_points < 2:
            raise ValueError(f"max_points must be >= 2: got {self.max_points}; a curve needs two points")


@dataclass
class Section:
    """One section of the page: anchor id, heading, HTML body."""

    id: str
    title: str
    body: str


@dataclass
class Page:
    """Everything a report page shows.

    Attributes
    ----------
    title, kind, directory : str
    sections : list of Section
    figures : dict
        Element id -> Plotly figure ``{"data": [...], "layout": {...}}``.
    clouds : list of dict
        Per run: ``name``, ``times`` (F values), ``x``, ``y``, ``z`` (F lists of m coordinates),
        ``note`` (the thinning).
    notes : list of str
        Thinning and omissions, shown at the top of the page.
    """

    title: str
    kind: str
    directory: str
    sections: list[Section] = field(default_factory=list)
    figures: dict[str, dict] = field(default_factory=dict)
    clouds: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- small helpers ---------------------------------------------------------------------------------
def esc(x: Any) -> str:
    return html.escape(str(x))


def json_safe(v: Any, digits: int = 6) -> Any:
    """Lists of floats rounded to ``digits`` significant digits, NaN/inf as None (JSON has neither)."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [json_safe(u, digits) for u in v]
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return float(f"{f:.{digits}g}") if np.isfinite(f) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def kv_table(rows: dict) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows.items())
    return f'<table class="kv">{body}</table>'


def pre(obj: Any) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, indent=2, default=str)
    return f"<pre>{esc(text)}</pre>"


def details(summary: str, inner: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{inner}</details>"


def rel(target: Path, page_dir: Path) -> str:
    return Path(os.path.relpath(target, page_dir)).as_posix()


def link(target: Path, page_dir: Path, label: str | None = None) -> str:
    href = rel(target, page_dir) + ("/" if target.is_dir() else "")
    return f'<a href="{esc(href)}">{esc(label or href)}</a>'
