"""The interactive parts of a report: ledger and G^2 curves with bands over paths, G^2 against H, the
token clouds, the inlined PNG figures and the table of run directories."""

from __future__ import annotations

import base64
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from ..experiments.files import UnsafePathError, inside, read_bounded
from ..experiments.store import CONFIG_FILE, DATA_DIR, META_FILE, open_run, read_meta
from .page import (
    COLORS,
    G2_VARS,
    LEDGER_VARS,
    VAR_TITLES,
    Page,
    ReportLimits,
    Section,
    esc,
    json_safe,
    link,
)
from .thin import CloudFrames, even_indices, thin_cloud

__all__ = [
    "band_traces",
    "cloud_entry",
    "curves_and_cloud",
    "draw_datasets",
    "figures_section",
    "g2_against_h",
    "open_quiet",
    "run_links",
    "series_figure",
]


def open_quiet(run_dir: Path) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unfinished run is shown as far as it went (stated on the page)
        return open_run(run_dir)


def band_traces(t: np.ndarray, a: np.ndarray, name: str, color: str, group: str) -> list[dict]:
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
            "x": json_safe(band_x),
            "y": json_safe(band_y),
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
            "x": json_safe(t),
            "y": json_safe(mean),
            "line": {"color": color, "width": 1.6},
            "name": name,
            "legendgroup": group,
        },
    ]


def series_figure(runs: dict[str, xr.Dataset], variables: tuple[str, ...], title: str, limits: ReportLimits):
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
            traces += band_traces(t, a, label, COLORS[k % len(COLORS)], label)
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


def cloud_entry(name: str, cf: CloudFrames) -> dict:
    f = np.round(cf.frames, 4)
    return {
        "name": name,
        "times": json_safe(cf.times),
        "x": json_safe(f[..., 0]),
        "y": json_safe(f[..., 1]),
        "z": json_safe(f[..., 2]),
        "note": cf.note + "; coordinates rounded to 1e-4",
    }


#: figure files inlined as images, by suffix; any other file a study lists (an MP4 animation) is linked
IMAGE_TYPES = {".png": "image/png", ".gif": "image/gif", ".svg": "image/svg+xml", ".jpg": "image/jpeg"}


#: The largest figure file inlined into a page.
MAX_FIGURE_BYTES = 32 * 2**20


def figures_section(directory: Path, page_dir: Path, names: list[str] | None = None) -> Section | None:
    """The PNG figures of the directory, inlined (base64) with a link to each file.

    Only files that resolve inside ``directory`` are read: a name from ``summary.json`` that is absolute or
    holds ``..``, or a ``*.png`` that is a symlink leading elsewhere, is listed as not shown (never read),
    and so is a file larger than :data:`MAX_FIGURE_BYTES`.
    """
    files = [directory / n for n in names] if names else sorted(directory.glob("*.png"))
    files += [f for f in sorted(directory.glob("*.mp4")) if f not in files]  # animations, linked
    parts, kept = [], []
    for f in files:
        try:
            inside(directory, f, what="figure")
        except UnsafePathError:
            parts.append(
                f"<p class='note'>not shown: {esc(str(f.name)[:80])} leads outside the directory</p>"
            )
            continue
        if f.is_file() and f.stat().st_size <= MAX_FIGURE_BYTES:
            kept.append(f)
        elif f.is_file():
            parts.append(
                f"<p class='note'>not shown: {esc(f.name)} is larger than {MAX_FIGURE_BYTES} bytes</p>"
            )
    files = kept
    if not files and not parts:
        return None
    for f in files:
        mime = IMAGE_TYPES.get(f.suffix.lower())
        if mime is None:  # an animation or other file: a link, not inlined (it would swell the page)
            parts.append(f"<p>{esc(f.suffix.lstrip('.').upper())} file: {link(f, page_dir, f.name)}</p>")
            continue
        raw = read_bounded(f, MAX_FIGURE_BYTES, "the figure", "remove it", error=UnsafePathError)
        data = base64.b64encode(raw).decode("ascii")
        parts.append(
            f'<figure><img alt="{esc(f.name)}" src="data:{mime};base64,{data}">'
            f"<figcaption>{link(f, page_dir, f.name)}</figcaption></figure>"
        )
    return Section("figures", "Figures", "".join(parts))


def curves_and_cloud(page: Page, runs: dict[str, Path], page_dir: Path, limits: ReportLimits) -> None:
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
    draw_datasets(page, {n: open_quiet(runs[n]) for n in shown}, limits)


def draw_datasets(page: Page, datasets: dict[str, xr.Dataset], limits: ReportLimits) -> None:
    """The curves, the clustering measure and the token clouds of runs already opened (a run directory's
    store, or the Dataset that :func:`attnflow.simulation.simulate` returns)."""
    shown = list(datasets)
    T = max(ds.sizes["time"] for ds in datasets.values())
    if T > limits.max_points:
        page.notes.append(
            f"curves: at most {limits.max_points} of {T} recorded times per run (evenly spaced)"
        )
    paths = sorted({int(ds.sizes.get("path", 1)) for ds in datasets.values()})
    band = f"lines: mean over paths ({'/'.join(map(str, paths))}); bands: 10-90% quantiles over paths"
    body = [f"<p>{esc(band)}.</p>"]
    if len(datasets) == 1:  # one run: G^2 with Ghat^2, the energy with the two residuals
        plan = [
            ("fig-g2", G2_VARS, "G^2 and Ghat^2 (Lemma 4.12; exact chain rule)"),
            ("fig-ledger", LEDGER_VARS, "energy E(t) and ledger residuals of identity (147)"),
        ]
    else:  # several runs: one figure per variable, one band per run
        plan = [(f"fig-{v.lower().replace('_', '-')}", (v,), VAR_TITLES[v]) for v in (*G2_VARS, *LEDGER_VARS)]
    for fig_id, variables, title in plan:
        fig = series_figure(datasets, variables, title, limits)
        if fig:
            page.figures[fig_id] = fig
            body.append(f'<div class="plot" id="{fig_id}"></div>')
    if len(body) > 1:
        page.sections.append(Section("ledger", "Energy ledger and G^2", "".join(body)))
    clustering_section(page, datasets, limits)
    for n in shown:
        ds = datasets[n]
        if "positions" in ds and ds.sizes.get("time", 0) > 0:
            cf = thin_cloud(ds, max_tokens=limits.max_tokens, max_frames=limits.max_frames)
            page.clouds.append(cloud_entry(n, cf))
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


def clustering_section(page: Page, datasets: dict[str, xr.Dataset], limits: ReportLimits) -> None:
    """A clustering measure over time (issue 31): the mean pairwise inner product of the tokens (1 for one
    cluster), mean line and 10-90% band over paths, for every run that recorded positions; shown with or
    without the ledger (a run with ``ledger: false`` then still has a curve)."""
    from ..observables.clustering import mean_pairwise_inner_product

    measured = {}
    for name, ds in datasets.items():
        if "positions" in ds and ds.sizes.get("time", 0) > 0 and ds.sizes.get("token", 0) >= 2:
            T = ds.sizes["time"]
            sub = ds.isel(time=even_indices(T, limits.max_points))
            rho = mean_pairwise_inner_product(sub["positions"].transpose("path", "time", "token", "dim"))
            measured[name] = xr.Dataset({"mean_inner_product": rho.drop_vars("step", errors="ignore")})
    fig = series_figure(measured, ("mean_inner_product",), "clustering: mean pairwise inner product", limits)
    if fig:
        page.figures["fig-clustering"] = fig
        page.sections.append(
            Section(
                "clustering",
                "Clustering",
                "<p>Mean pairwise inner product of the tokens, 1/(n(n-1)) sum_{i != j} &lt;x_i, x_j&gt; "
                "(1 for a single cluster; <code>attnflow.observables.mean_pairwise_inner_product</code>); "
                "lines: mean over paths, bands: 10-90% quantiles.</p>"
                '<div class="plot" id="fig-clustering"></div>',
            )
        )


def run_links(runs: dict[str, Path], page_dir: Path) -> str:
    rows = []
    for name, p in runs.items():
        meta = read_meta(p) if (p / META_FILE).is_file() else {}
        links = [link(p / f, page_dir, f) for f in (CONFIG_FILE, META_FILE, DATA_DIR) if (p / f).exists()]
        rows.append(
            f"<tr><td>{link(p, page_dir, name)}</td><td>{esc(meta.get('status', 'missing'))}</td>"
            f"<td>{' '.join(links)}</td></tr>"
        )
    return f"<table><thead><tr><th>run</th><th>status</th><th>files</th></tr></thead>{''.join(rows)}</table>"


def g2_against_h(summary: dict) -> dict | None:
    traces = []
    for k, (key, reg) in enumerate(summary["regimes"].items()):
        per_h = reg.get("per_H", {})
        try:
            Hs = sorted(int(h) for h in per_h)
            y = np.array([per_h[str(h)]["G2_mean"] for h in Hs], dtype=float)
            se = np.array([per_h[str(h)]["G2_se"] for h in Hs], dtype=float)
        except (KeyError, TypeError, ValueError):
            continue
        color = COLORS[k % len(COLORS)]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers+lines",
                "x": Hs,
                "y": json_safe(y),
                "error_y": {"type": "data", "array": json_safe(1.96 * se), "visible": True},
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
                    "x": json_safe(hh),
                    "y": json_safe(fit["a"] * hh ** fit["b"]),
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
