"""Read a run, a sweep, a study or a reproduction directory into a :class:`Page`: its sections (HTML),
its interactive figures (Plotly JSON) and its token cloud (thinned), ready for :mod:`attnflow.report.html`.

Every number on a page comes from the directory's own files (``config.yaml``, ``meta.json``,
``data.zarr``, ``tasks.json``, ``study.json``, ``summary.json``, ``table.md``, PNG figures); nothing is
recomputed but means and 10-90% quantiles over paths for the bands.
"""

from __future__ import annotations

import html
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..experiments.reproduce import available_reproductions
from ..experiments.store import CONFIG_FILE, DATA_DIR, META_FILE, open_run, read_meta
from ..experiments.sweep import TASKS_FILE, read_index, sweep_info
from ..studies.runner import RUNS_DIR, STUDY_FILE, SUMMARY_FILE, TABLE_FILE, study_info
from .markdown import markdown_to_html
from .thin import CloudFrames, even_indices, thin_cloud

__all__ = ["KINDS", "NotReportableError", "Page", "ReportLimits", "Section", "collect", "detect_kind"]

#: the kinds of directory a report can be written for
KINDS = ("run", "sweep", "study", "reproduction")
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
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


class NotReportableError(FileNotFoundError):
    """The directory is not a run, sweep, study or reproduction directory attnflow wrote."""


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


# -- kind ------------------------------------------------------------------------------------------
def detect_kind(directory: str | Path) -> str:
    """``run``, ``sweep``, ``study`` or ``reproduction``, from the files the directory holds.

    Raises
    ------
    NotReportableError
        If the directory holds none of ``tasks.json``, ``study.json``, ``meta.json``/``config.yaml``/
        ``data.zarr``.
    """
    d = Path(directory)
    if not d.is_dir():
        raise NotReportableError(
            f"cannot report on {d}: no such directory; pass a run, sweep, study or reproduction directory"
        )
    if (d / TASKS_FILE).is_file():
        return "sweep"
    if (d / STUDY_FILE).is_file():
        try:
            name = json.loads((d / STUDY_FILE).read_text()).get("study")
        except (json.JSONDecodeError, AttributeError):
            name = None
        return "reproduction" if name in available_reproductions() else "study"
    if any((d / f).exists() for f in (META_FILE, CONFIG_FILE, DATA_DIR)):
        return "run"
    raise NotReportableError(
        f"cannot report on {d}: it holds no {TASKS_FILE} (sweep), {STUDY_FILE} (study or reproduction) or "
        f"{META_FILE}/{CONFIG_FILE}/{DATA_DIR} (run); pass a directory written by `attnflow run`, "
        "`attnflow sweep`, `attnflow study run` or `attnflow reproduce`"
    )


# -- small helpers ---------------------------------------------------------------------------------
def _esc(x: Any) -> str:
    return html.escape(str(x))


def _json_safe(v: Any, digits: int = 6) -> Any:
    """Lists of floats rounded to ``digits`` significant digits, NaN/inf as None (JSON has neither)."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_json_safe(u, digits) for u in v]
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return float(f"{f:.{digits}g}") if np.isfinite(f) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _kv_table(rows: dict) -> str:
    body = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in rows.items())
    return f'<table class="kv">{body}</table>'


def _pre(obj: Any) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, indent=2, default=str)
    return f"<pre>{_esc(text)}</pre>"


def _details(summary: str, inner: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{_esc(summary)}</summary>{inner}</details>"


def _rel(target: Path, page_dir: Path) -> str:
    return Path(os.path.relpath(target, page_dir)).as_posix()


def _link(target: Path, page_dir: Path, label: str | None = None) -> str:
    href = _rel(target, page_dir) + ("/" if target.is_dir() else "")
    return f'<a href="{_esc(href)}">{_esc(label or href)}</a>'


def _open_quiet(run_dir: Path) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unfinished run is shown as far as it went (stated on the page)
        return open_run(run_dir)


def _band_traces(t: np.ndarray, a: np.ndarray, name: str, color: str, group: str) -> list[dict]:
    """Mean over paths (a line) and the 10-90% quantile band (a filled area) of ``a`` [path, time]."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all-NaN columns (a variable not recorded yet) stay NaN
        mean = np.nanmean(a, axis=0)
        lo, hi = np.nanquantile(a, [0.1, 0.9], axis=0)
    band_x = np.concatenate([t, t[::-1]])
    band_y = np.concatenate([hi, lo[::-1]])
    return [
        {
            "type": "scatter",
            "x": _json_safe(band_x),
            "y": _json_safe(band_y),
            "fill": "toself",
            "fillcolor": color + "33",
            "line": {"width": 0},
            "hoverinfo": "skip",
            "showlegend": False,
            "legendgroup": group,
            "name": f"{name} 10-90%",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": _json_safe(t),
            "y": _json_safe(mean),
            "line": {"color": color, "width": 1.6},
            "name": name,
            "legendgroup": group,
        },
    ]


def _series_figure(runs: dict[str, xr.Dataset], variables: tuple[str, ...], title: str, limits: ReportLimits):
    """A figure of ``variables`` against time for each run: mean line + 10-90% band over paths."""
    traces: list[dict] = []
    k = 0
    for run_name, ds in runs.items():
        present = [v for v in variables if v in ds]
        if not present:
            continue
        T = ds.sizes["time"]
        ti = even_indices(T, limits.max_points)
        t = np.asarray(ds["time"].values, dtype=float)[ti]
        for var in present:
            a = np.asarray(ds[var].isel(time=ti).transpose("path", "time").values, dtype=float)
            label = var if len(runs) == 1 else f"{run_name}: {var}"
            traces += _band_traces(t, a, label, _COLORS[k % len(_COLORS)], label)
            k += 1
    if not traces:
        return None
    layout = {
        "title": {"text": title},
        "xaxis": {"title": {"text": "t"}},
        # G^2 and Ghat^2 are >= 0 and span decades (an initial transient, then a plateau): log scale
        "yaxis": {"type": "log" if set(variables) <= set(G2_VARS) else "linear"},
        "height": 420,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "legend": {"font": {"size": 10}},
    }
    return {"data": traces, "layout": layout}


def _cloud_entry(name: str, cf: CloudFrames) -> dict:
    f = np.round(cf.frames, 4)
    return {
        "name": name,
        "times": _json_safe(cf.times),
        "x": _json_safe(f[..., 0]),
        "y": _json_safe(f[..., 1]),
        "z": _json_safe(f[..., 2]),
        "note": cf.note + "; coordinates rounded to 1e-4",
    }


def _figures_section(directory: Path, page_dir: Path, names: list[str] | None = None) -> Section | None:
    """The PNG figures of the directory, inlined (base64) with a link to each file."""
    import base64

    files = [directory / n for n in names] if names else sorted(directory.glob("*.png"))
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    parts = []
    for f in files:
        data = base64.b64encode(f.read_bytes()).decode("ascii")
        parts.append(
            f'<figure><img alt="{_esc(f.name)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_link(f, page_dir, f.name)}</figcaption></figure>"
        )
    return Section("figures", "Figures", "".join(parts))


def _curves_and_cloud(page: Page, runs: dict[str, Path], page_dir: Path, limits: ReportLimits) -> None:
    """Ledger and G^2 figures (bands over paths) and the token cloud of the given run directories."""
    names = [n for n, p in runs.items() if (p / DATA_DIR).is_dir()]
    if not names:
        page.notes.append("no run data (data.zarr) in this directory: no curves and no token cloud")
        return
    shown = names[: limits.max_runs]
    if len(shown) < len(names):
        page.notes.append(
            f"curves and token clouds of the first {len(shown)} of {len(names)} runs with data "
            f"(--max-runs {limits.max_runs})"
        )
    datasets = {n: _open_quiet(runs[n]) for n in shown}
    T = max(ds.sizes["time"] for ds in datasets.values())
    if T > limits.max_points:
        page.notes.append(
            f"curves: at most {limits.max_points} of {T} recorded times per run (evenly spaced)"
        )
    paths = sorted({int(ds.sizes.get("path", 1)) for ds in datasets.values()})
    band = f"lines: mean over paths ({'/'.join(map(str, paths))}); bands: 10-90% quantiles over paths"
    body = [f"<p>{_esc(band)}.</p>"]
    if len(datasets) == 1:  # one run: G^2 with Ghat^2, the energy with the two residuals
        plan = [
            ("fig-g2", G2_VARS, "G^2 and Ghat^2 (Lemma 4.12; exact chain rule)"),
            ("fig-ledger", LEDGER_VARS, "energy E(t) and ledger residuals of identity (147)"),
        ]
    else:  # several runs: one figure per variable, one band per run
        plan = [(f"fig-{v.lower().replace('_', '-')}", (v,), VAR_TITLES[v]) for v in (*G2_VARS, *LEDGER_VARS)]
    for fig_id, variables, title in plan:
        fig = _series_figure(datasets, variables, title, limits)
        if fig:
            page.figures[fig_id] = fig
            body.append(f'<div class="plot" id="{fig_id}"></div>')
    if len(body) > 1:
        page.sections.append(Section("ledger", "Energy ledger and G^2", "".join(body)))
    for n in shown:
        ds = datasets[n]
        if "positions" in ds and ds.sizes.get("time", 0) > 0:
            cf = thin_cloud(ds, max_tokens=limits.max_tokens, max_frames=limits.max_frames)
            page.clouds.append(_cloud_entry(n, cf))
    if page.clouds:
        page.notes.append("token cloud: " + page.clouds[0]["note"])
        body = (
            '<div class="cloud-controls">'
            '<label>run <select id="cloud-run"></select></label> '
            '<label>time <input type="range" id="time-slider" min="0" max="0" value="0" step="1"></label> '
            '<span id="time-label"></span></div>'
            '<div class="plot cloud" id="fig-cloud"></div><p class="note" id="cloud-note"></p>'
        )
        page.sections.append(Section("tokens", "Token cloud", body))
    else:
        page.notes.append("no run recorded token positions: no token cloud")


def _run_links(runs: dict[str, Path], page_dir: Path) -> str:
    rows = []
    for name, p in runs.items():
        meta = read_meta(p) if (p / META_FILE).is_file() else {}
        links = [_link(p / f, page_dir, f) for f in (CONFIG_FILE, META_FILE, DATA_DIR) if (p / f).exists()]
        rows.append(
            f"<tr><td>{_link(p, page_dir, name)}</td><td>{_esc(meta.get('status', 'missing'))}</td>"
            f"<td>{' '.join(links)}</td></tr>"
        )
    return f"<table><thead><tr><th>run</th><th>status</th><th>files</th></tr></thead>{''.join(rows)}</table>"


# -- kinds -----------------------------------------------------------------------------------------
def _collect_run(d: Path, page_dir: Path, limits: ReportLimits) -> Page:
    meta = read_meta(d)
    title = f"run {meta.get('name') or d.name}"
    page = Page(title=title, kind="run", directory=str(d))
    overview = {
        k: meta.get(k)
        for k in ("name", "status", "step", "n_steps", "records", "started", "ended")
        if k in meta
    }
    page.sections.append(Section("overview", "Overview", _kv_table(overview)))
    if (d / CONFIG_FILE).is_file():
        page.sections.append(Section("config", "Config", _pre((d / CONFIG_FILE).read_text())))
    rest = {k: v for k, v in meta.items() if k not in overview}
    if rest:
        page.sections.append(Section("metadata", "Metadata", _details("meta.json", _pre(rest), open_=True)))
    if meta.get("status") not in (None, "done"):
        page.notes.append(
            f"the run is not finished (status {meta.get('status')}): data shown as far as stored"
        )
    _curves_and_cloud(page, {d.name: d}, page_dir, limits)
    fig = _figures_section(d, page_dir)
    if fig:
        page.sections.append(fig)
    links = [
        _link(d / f, page_dir, f)
        for f in (CONFIG_FILE, META_FILE, DATA_DIR, "checkpoint.pt")
        if (d / f).exists()
    ]
    page.sections.append(Section("data", "Stored data", "<p>" + " &middot; ".join(links) + "</p>"))
    return page


def _collect_sweep(d: Path, page_dir: Path, limits: ReportLimits) -> Page:
    info = sweep_info(d)
    index = read_index(d)
    page = Page(title=f"sweep {info['name'] or d.name}", kind="sweep", directory=str(d))
    counts = ", ".join(f"{v} {k}" for k, v in sorted(info["counts"].items()))
    overview = {
        "tasks": counts,
        "grid": json.dumps(info["grid"]),
        "started": info["started"],
        "ended": info["ended"],
    }
    page.sections.append(Section("overview", "Overview", _kv_table(overview)))
    page.sections.append(Section("config", "Base config", _pre(index["base"])))
    rows = []
    for name, row in info["tasks"].items():
        params = ", ".join(f"{k}={v}" for k, v in row["params"].items())
        rows.append(
            f"<tr><td>{_link(d / name, page_dir, name)}</td><td>{_esc(params)}</td>"
            f"<td>{_esc(row['status'])}</td>"
            f"<td>{_esc(row.get('error', ''))}</td></tr>"
        )
    table = (
        "<table><thead><tr><th>task</th><th>parameters</th><th>status</th><th>error</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    page.sections.append(Section("tasks", "Tasks", table))
    _curves_and_cloud(page, {n: d / n for n in index["tasks"]}, page_dir, limits)
    links = [_link(d / f, page_dir, f) for f in (TASKS_FILE, "sweep.json") if (d / f).exists()]
    page.sections.append(Section("data", "Stored data", "<p>" + " &middot; ".join(links) + "</p>"))
    return page


def collect_verdicts(summary: Any, prefix: str = "") -> dict[str, str]:
    """Every ``verdict*`` entry of a summary (nested dicts and lists), keyed by its path.

    Examples
    --------
    >>> collect_verdicts({"a": {"verdict": "holds"}, "b": [{"verdict_x": "fails"}]})
    {'a.verdict': 'holds', 'b[0].verdict_x': 'fails'}
    """
    out: dict[str, str] = {}
    if isinstance(summary, dict):
        for k, v in summary.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if str(k).startswith("verdict") and isinstance(v, str):
                out[key] = v
            else:
                out.update(collect_verdicts(v, key))
    elif isinstance(summary, list):
        for i, v in enumerate(summary):
            out.update(collect_verdicts(v, f"{prefix}[{i}]"))
    return out


def theory_check_sections(text: str, study: str, dirname: str) -> list[str]:
    """The sections (``##``/``###``) of a theory-checks Markdown page about a study: the heading names
    it in backquotes, the text cites ``docs/studies/<dirname>/``, or a measurement opens with
    ``(`<study>` `` (the page's convention for the study a number comes from)."""
    blocks = re.split(r"(?m)^(?=#{2,3} )", text)
    picked = []
    for b in blocks:
        heading = b.splitlines()[0] if b else ""
        if not heading.startswith("#"):
            continue
        if f"`{study}`" in heading or f"docs/studies/{dirname}/" in b or f"(`{study}`" in b:
            picked.append(b.strip())
    return picked


def _collect_study(
    d: Path, page_dir: Path, limits: ReportLimits, kind: str, theory_checks: Path | None
) -> Page:
    info = study_info(d)
    summary = json.loads((d / SUMMARY_FILE).read_text()) if (d / SUMMARY_FILE).is_file() else {}
    label = "reproduction" if kind == "reproduction" else "study"
    page = Page(title=f"{label} {info['study']}", kind=kind, directory=str(d))
    counts = ", ".join(f"{v} {k}" for k, v in sorted(info["counts"].items()))
    overview = {
        "study": info["study"],
        "claim": info["description"],
        "status": info["status"],
        "variant": "quick" if info["quick"] else "full",
        "runs": counts,
        "started": info["started"],
        "ended": info["ended"],
        "wall time (s)": None if info["wall_time_s"] is None else f"{info['wall_time_s']:.0f}",
        "attnflow version": summary.get("attnflow_version") or summary.get("versions", {}).get("attnflow"),
    }
    page.sections.append(Section("overview", "Overview", _kv_table(overview)))
    page.sections.append(Section("config", "Config", _pre(info["config"])))
    if info["table"]:
        page.sections.append(Section("tables", "Tables", markdown_to_html(info["table"])))
    verdict_parts = []
    found = collect_verdicts(summary)
    if found:
        rows = "".join(
            f"<tr><td><code>{_esc(k)}</code></td><td>{_esc(v)}</td></tr>" for k, v in found.items()
        )
        verdict_parts.append(
            "<p>verdict entries of summary.json:</p>"
            f"<table><thead><tr><th>entry</th><th>verdict</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    if theory_checks is not None and theory_checks.is_file():
        for block in theory_check_sections(theory_checks.read_text(), info["study"], d.name):
            verdict_parts.append(f'<div class="verdict">{markdown_to_html(block)}</div>')
        verdict_parts.append(f"<p class='note'>from {_esc(theory_checks.name)}</p>")
    if not verdict_parts:
        verdict_parts.append(
            "<p>no verdict stored with this study (summary.json holds no verdict entry and no "
            "theory-checks page was given: pass --theory-checks docs/theory_checks.md)</p>"
        )
    page.sections.append(Section("verdicts", "Verdicts", "".join(verdict_parts)))
    if kind == "reproduction" and isinstance(summary.get("regimes"), dict):
        fig = _g2_against_h(summary)
        if fig:
            page.figures["fig-g2-h"] = fig
            page.sections.append(
                Section(
                    "g2-vs-h",
                    "G^2 against H",
                    "<p>time-averaged G^2 over the window "
                    f"{_esc(summary.get('window'))}: mean over paths with 95% bands (mean +- 1.96 se); "
                    "dashed: the least-squares fit k(H) = a H^b of summary.json</p>"
                    '<div class="plot" id="fig-g2-h"></div>',
                )
            )
    runs_root = d / RUNS_DIR
    runs = {n: runs_root / n for n in info["runs"]}
    if runs_root.is_dir():
        _curves_and_cloud(page, runs, page_dir, limits)
    else:
        page.notes.append(
            f"run directories not stored here ({RUNS_DIR}/ absent, e.g. committed results): no per-run "
            f"curves and no token cloud; `attnflow study run {info['study']} --out DIR` writes them"
        )
    fig = _figures_section(d, page_dir, list(summary.get("figures", {}).values()) or None)
    if fig:
        page.sections.append(fig)
    parts = [_link(d / f, page_dir, f) for f in (STUDY_FILE, SUMMARY_FILE, TABLE_FILE) if (d / f).exists()]
    body = "<p>" + " &middot; ".join(parts) + "</p>"
    if runs_root.is_dir():
        body += _run_links(runs, page_dir)
    if summary:
        body += _details("summary.json", _pre(summary))
    page.sections.append(Section("data", "Stored data", body))
    return page


def _g2_against_h(summary: dict) -> dict | None:
    traces = []
    for k, (key, reg) in enumerate(summary["regimes"].items()):
        per_h = reg.get("per_H", {})
        try:
            Hs = sorted(int(h) for h in per_h)
            y = np.array([per_h[str(h)]["G2_mean"] for h in Hs], dtype=float)
            se = np.array([per_h[str(h)]["G2_se"] for h in Hs], dtype=float)
        except (KeyError, TypeError, ValueError):
            continue
        color = _COLORS[k % len(_COLORS)]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers+lines",
                "x": Hs,
                "y": _json_safe(y),
                "error_y": {"type": "data", "array": _json_safe(1.96 * se), "visible": True},
                "name": reg.get("label", key),
                "line": {"color": color},
            }
        )
        fit = reg.get("fit_G2", {})
        if isinstance(fit, dict) and "a" in fit and "b" in fit and len(Hs) > 1:
            hh = np.geomspace(min(Hs), max(Hs), 30)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": _json_safe(hh),
                    "y": _json_safe(fit["a"] * hh ** fit["b"]),
                    "line": {"color": color, "dash": "dash", "width": 1},
                    "name": f"fit: b = {fit['b']:.3g}",
                }
            )
    if not traces:
        return None
    layout = {
        "xaxis": {"type": "log", "title": {"text": "H"}},
        "yaxis": {"type": "log", "title": {"text": "time-averaged G^2"}},
        "height": 420,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
    }
    return {"data": traces, "layout": layout}


def collect(
    directory: str | Path,
    *,
    page_dir: str | Path | None = None,
    limits: ReportLimits | None = None,
    theory_checks: str | Path | None = None,
) -> Page:
    """The report page of a run, sweep, study or reproduction directory.

    Parameters
    ----------
    directory : str or Path
        The directory (its kind is detected: :func:`detect_kind`).
    page_dir : str or Path or None
        Where the page will be written (links to the stored data are relative to it); default ``directory``.
    limits : ReportLimits or None
        Thinning limits (default :class:`ReportLimits`).
    theory_checks : str or Path or None
        A theory-checks Markdown page whose sections about the study are shown as its verdicts.

    Raises
    ------
    NotReportableError
        If the directory is none of the four kinds.
    """
    d = Path(directory)
    kind = detect_kind(d)
    pdir = Path(page_dir) if page_dir is not None else d
    lim = limits or ReportLimits()
    tc = Path(theory_checks) if theory_checks is not None else None
    if kind == "run":
        return _collect_run(d, pdir, lim)
    if kind == "sweep":
        return _collect_sweep(d, pdir, lim)
    return _collect_study(d, pdir, lim, kind, tc)
