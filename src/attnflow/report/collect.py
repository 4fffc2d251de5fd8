"""Read a run, a sweep, a study or a reproduction directory into a :class:`Page`: its sections (HTML),
its interactive figures (Plotly JSON) and its token cloud (thinned), ready for :mod:`attnflow.report.html`.

Every number on a page comes from the directory's own files (``config.yaml``, ``meta.json``,
``data.zarr``, ``tasks.json``, ``study.json``, ``summary.json``, ``table.md``, PNG figures); nothing is
recomputed but means and 10-90% quantiles over paths for the bands.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..experiments.files import MAX_JSON_BYTES, CorruptFileError, UnsafePathError, inside, read_bounded
from ..experiments.reproduce import available_reproductions
from ..experiments.store import CONFIG_FILE, DATA_DIR, META_FILE, read_meta
from ..experiments.sweep import TASKS_FILE, read_index, sweep_info
from ..studies.runner import RUNS_DIR, STUDY_FILE, SUMMARY_FILE, TABLE_FILE, study_info
from .figures import curves_and_cloud, draw_datasets, figures_section, g2_against_h, run_links
from .markdown import markdown_to_html
from .page import (
    KINDS,
    NotReportableError,
    Page,
    ReportLimits,
    Section,
    details,
    esc,
    kv_table,
    link,
    pre,
)
from .probe import collect_probe, is_probe

__all__ = [
    "KINDS",
    "NotReportableError",
    "Page",
    "ReportLimits",
    "Section",
    "collect",
    "collect_dataset",
    "collect_verdicts",
    "detect_kind",
    "json_object_or_empty",
    "marked_kind",
    "theory_check_sections",
]


# -- paths -----------------------------------------------------------------------------------------
#: The files (and folders, ending in "/") a report reads from a directory, of every kind.
_KNOWN = (
    META_FILE,
    CONFIG_FILE,
    DATA_DIR + "/",
    "checkpoint.pt",
    TASKS_FILE,
    "sweep.json",
    STUDY_FILE,
    SUMMARY_FILE,
    TABLE_FILE,
    RUNS_DIR + "/",
)
#: The largest text file (config, table, summary) read into a page.
MAX_TEXT_BYTES = 16 * 2**20


def check_directory(d: Path) -> None:
    """Refuse a directory whose files a report would read from outside it: every known file that exists
    (or is a dangling symlink) must resolve inside ``d``, a file must be a regular file and a folder a
    folder (a FIFO named ``study.json`` would hang the read).

    Raises
    ------
    UnsafePathError
        Naming the file, where it leads, and the fix.
    """
    for entry in _KNOWN:
        name = entry.rstrip("/")
        p = d / name
        if not (p.exists() or p.is_symlink()):
            continue
        inside(d, p, what="file of the directory")
        ok = p.is_dir() if entry.endswith("/") else p.is_file()
        if not ok:
            raise UnsafePathError(
                f"{p} is not a regular {'folder' if entry.endswith('/') else 'file'}; a report reads only "
                "regular files of the directory (remove it or give another directory)"
            )


def _text(path: Path, what: str) -> str:
    """A text file of the directory, bounded in size (:data:`MAX_TEXT_BYTES`)."""
    fix = "give a directory written by attnflow"
    return read_bounded(path, MAX_TEXT_BYTES, what, fix, error=NotReportableError).decode("utf-8", "replace")


def _json(path: Path, what: str):
    try:
        return json.loads(_text(path, what))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotReportableError(
            f"{what} {path} is not valid JSON ({str(exc)[:200]}); give a directory written by attnflow"
        ) from None


# -- kind ------------------------------------------------------------------------------------------
def json_object_or_empty(path: Path) -> dict:
    """The JSON object of ``path``, or ``{}`` for anything else: a file that is absent, not regular (a FIFO
    would hang a plain read), over :data:`~attnflow.experiments.files.MAX_JSON_BYTES`, not UTF-8, not
    JSON, nested too deeply or not an object.

    For deciding a directory's kind only (:func:`marked_kind`, the CLI's ``detect``): the reader of that
    kind then names what is wrong with the file.

    Examples
    --------
    >>> json_object_or_empty(Path("no such file.json"))
    {}
    """
    try:
        data = json.loads(read_bounded(path, MAX_JSON_BYTES, "file", "").decode("utf-8"))
    except (CorruptFileError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def marked_kind(d: Path) -> str | None:
    """The kind of a directory as its marker files tell, in this order: ``sweep`` (``tasks.json``),
    ``reproduction`` or ``study`` (``study.json``: a reproduction's name or not), ``probe``
    (:func:`~attnflow.report.probe.is_probe`), ``run`` (``meta.json``, ``config.yaml`` or ``data.zarr``),
    else ``None``.

    The one reading of the marker files shared by :func:`detect_kind` and the CLI's
    ``attnflow.cli.kinds.detect`` (which tells the kinds of run apart). It checks nothing about ``d``
    itself (callers do: :func:`check_directory`), and an unreadable ``study.json``
    (:func:`json_object_or_empty`) reads as a study, whose own reader then names what is wrong with it.

    Parameters
    ----------
    d : Path
        An existing directory.

    Returns
    -------
    str or None
    """
    if (d / TASKS_FILE).is_file():
        return "sweep"
    if (d / STUDY_FILE).is_file():
        name = json_object_or_empty(d / STUDY_FILE).get("study")
        return "reproduction" if name in available_reproductions() else "study"
    if is_probe(d):
        return "probe"
    if any((d / f).exists() for f in (META_FILE, CONFIG_FILE, DATA_DIR)):
        return "run"
    return None


def detect_kind(directory: str | Path) -> str:
    """``run``, ``sweep``, ``study``, ``reproduction`` or ``probe``, from the files the directory holds.

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
    check_directory(d)
    kind = marked_kind(d)
    if kind is not None:
        return kind
    raise NotReportableError(
        f"cannot report on {d}: it holds no {TASKS_FILE} (sweep), {STUDY_FILE} (study or reproduction) or "
        f"{META_FILE}/{CONFIG_FILE}/{DATA_DIR} (run) or probe.zarr (probe); pass a directory written by "
        "`attnflow run`, `attnflow sweep`, `attnflow study run`, `attnflow reproduce` or `attnflow probe`"
    )


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
    page.sections.append(Section("overview", "Overview", kv_table(overview)))
    if (d / CONFIG_FILE).is_file():
        page.sections.append(Section("config", "Config", pre(_text(d / CONFIG_FILE, "the run config"))))
    rest = {k: v for k, v in meta.items() if k not in overview}
    if rest:
        page.sections.append(Section("metadata", "Metadata", details("meta.json", pre(rest), open_=True)))
    if meta.get("status") not in (None, "done"):
        page.notes.append(
            f"the run is not finished (status {meta.get('status')}): data shown as far as stored"
        )
    curves_and_cloud(page, {d.name: d}, page_dir, limits)
    fig = figures_section(d, page_dir)
    if fig:
        page.sections.append(fig)
    links = [
        link(d / f, page_dir, f)
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
    page.sections.append(Section("overview", "Overview", kv_table(overview)))
    page.sections.append(Section("config", "Base config", pre(index["base"])))
    rows = []
    for name, row in info["tasks"].items():
        params = ", ".join(f"{k}={v}" for k, v in row["params"].items())
        rows.append(
            f"<tr><td>{link(d / name, page_dir, name)}</td><td>{esc(params)}</td>"
            f"<td>{esc(row['status'])}</td>"
            f"<td>{esc(row.get('error', ''))}</td></tr>"
        )
    table = (
        "<table><thead><tr><th>task</th><th>parameters</th><th>status</th><th>error</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    page.sections.append(Section("tasks", "Tasks", table))
    curves_and_cloud(page, {n: d / n for n in index["tasks"]}, page_dir, limits)
    links = [link(d / f, page_dir, f) for f in (TASKS_FILE, "sweep.json") if (d / f).exists()]
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
    summary = _json(d / SUMMARY_FILE, "the study summary") if (d / SUMMARY_FILE).is_file() else {}
    if not isinstance(summary, dict):
        raise NotReportableError(
            f"{d / SUMMARY_FILE} is not a JSON object; give a directory written by attnflow"
        )
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
        "attnflow version": info.get("attnflow_version") or summary.get("versions", {}).get("attnflow"),
    }
    page.sections.append(Section("overview", "Overview", kv_table(overview)))
    page.sections.append(Section("config", "Config", pre(info["config"])))
    if info["table"]:
        page.sections.append(Section("tables", "Tables", markdown_to_html(info["table"])))
    verdict_parts = []
    found = collect_verdicts(summary)
    if found:
        rows = "".join(f"<tr><td><code>{esc(k)}</code></td><td>{esc(v)}</td></tr>" for k, v in found.items())
        verdict_parts.append(
            "<p>verdict entries of summary.json:</p>"
            f"<table><thead><tr><th>entry</th><th>verdict</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    if theory_checks is not None and theory_checks.is_file():
        for block in theory_check_sections(theory_checks.read_text(), info["study"], d.name):
            verdict_parts.append(f'<div class="verdict">{markdown_to_html(block)}</div>')
        verdict_parts.append(f"<p class='note'>from {esc(theory_checks.name)}</p>")
    if not verdict_parts:
        verdict_parts.append(
            "<p>no verdict stored with this study (summary.json holds no verdict entry and no "
            "theory-checks page was given: pass --theory-checks docs/theory_checks.md)</p>"
        )
    page.sections.append(Section("verdicts", "Verdicts", "".join(verdict_parts)))
    if kind == "reproduction" and isinstance(summary.get("regimes"), dict):
        fig = g2_against_h(summary)
        if fig:
            page.figures["fig-g2-h"] = fig
            page.sections.append(
                Section(
                    "g2-vs-h",
                    "G^2 against H",
                    "<p>time-averaged G^2 over the window "
                    f"{esc(summary.get('window'))}: mean over paths with 95% bands (mean +- 1.96 se); "
                    "dashed: the least-squares fit k(H) = a H^b of summary.json</p>"
                    '<div class="plot" id="fig-g2-h"></div>',
                )
            )
    runs_root = d / RUNS_DIR
    runs, outside = {}, []
    for n in info["runs"]:
        try:
            runs[n] = inside(runs_root, runs_root / str(n), what="run directory")
            inside(d, runs[n] / DATA_DIR, what="run data")
        except UnsafePathError:
            runs.pop(n, None)
            outside.append(str(n)[:80])
    if outside:
        page.notes.append(f"not shown (they lead outside the directory): runs {', '.join(outside[:10])}")
    if runs_root.is_dir():
        curves_and_cloud(page, runs, page_dir, limits)
    else:
        page.notes.append(
            f"run directories not stored here ({RUNS_DIR}/ absent, e.g. committed results): no per-run "
            f"curves and no token cloud; `attnflow study run {info['study']} --out DIR` writes them"
        )
    figs = info.get("figures") or {}
    fig = figures_section(
        d, page_dir, [str(v) for v in figs.values()] if isinstance(figs, dict) and figs else None
    )
    if fig:
        page.sections.append(fig)
    parts = [link(d / f, page_dir, f) for f in (STUDY_FILE, SUMMARY_FILE, TABLE_FILE) if (d / f).exists()]
    body = "<p>" + " &middot; ".join(parts) + "</p>"
    if runs_root.is_dir():
        body += run_links(runs, page_dir)
    if summary:
        body += details("summary.json", pre(summary))
    page.sections.append(Section("data", "Stored data", body))
    return page


#: the attributes of a simulated Dataset shown in the overview of its page (:func:`collect_dataset`)
_DATASET_OVERVIEW = ("name", "direction", "integrator", "dt", "t1", "n", "d", "H", "paths", "seed", "dtype")


def collect_dataset(ds: Any, *, name: str | None = None, limits: ReportLimits | None = None) -> Page:
    """The report page of an in-memory run: the :class:`xarray.Dataset` that
    :func:`attnflow.simulation.simulate` (or :func:`attnflow.experiments.open_run`) returns.

    The page has what a run directory's page has but the stored files: an overview of the Dataset's
    attributes, the model, the curves with bands over paths (G^2, the ledger when recorded), the clustering
    measure and the token cloud (when positions were recorded).

    Parameters
    ----------
    ds : xarray.Dataset
        Dimensions ``time`` and ``path`` (and ``token``, ``dim`` for positions).
    name : str or None
        The page's title (default the Dataset's ``name`` attribute, else "simulation").
    limits : ReportLimits or None

    Raises
    ------
    NotReportableError
        ``ds`` is not a Dataset with a ``time`` dimension.
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset) or ds.sizes.get("time", 0) == 0:
        got = type(ds).__name__ if not isinstance(ds, xr.Dataset) else f"a Dataset of dims {dict(ds.sizes)}"
        raise NotReportableError(
            f"a report of an in-memory run needs the xarray.Dataset that attnflow.simulate returns (a "
            f"'time' dimension of at least one record): got {got}; pass simulate's result or a run directory"
        )
    lim = limits or ReportLimits()
    title = str(name or ds.attrs.get("name") or "simulation")
    page = Page(title=f"run {title}", kind="run", directory="")
    overview = {k: ds.attrs[k] for k in _DATASET_OVERVIEW if k in ds.attrs}
    overview["records"] = int(ds.sizes["time"])
    overview["variables"] = ", ".join(map(str, ds.data_vars))
    page.sections.append(Section("overview", "Overview", kv_table(overview)))
    model = ds.attrs.get("model") or ds.attrs.get("config")
    if model:
        page.sections.append(Section("config", "Model" if "model" in ds.attrs else "Config", pre(str(model))))
    rest = {k: v for k, v in ds.attrs.items() if k not in overview and k not in ("model", "config")}
    if rest:
        page.sections.append(Section("metadata", "Attributes", details("attributes", pre(rest))))
    page.notes.append("an in-memory Dataset (attnflow.simulate): no stored files to link")
    if "path" not in ds.dims:
        ds = ds.expand_dims("path")
    draw_datasets(page, {title: ds}, lim)
    return page


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
    UnsafePathError
        If a file the page would read resolves outside the directory (:func:`check_directory`).
    """
    d = Path(directory)
    kind = detect_kind(d)  # also refuses files that lead outside d (check_directory)
    pdir = Path(page_dir) if page_dir is not None else d
    lim = limits or ReportLimits()
    tc = Path(theory_checks) if theory_checks is not None else None
    if kind == "run":
        return _collect_run(d, pdir, lim)
    if kind == "sweep":
        return _collect_sweep(d, pdir, lim)
    if kind == "probe":
        return collect_probe(d, pdir)
    return _collect_study(d, pdir, lim, kind, tc)
