"""The report page of a probe directory (what ``attnflow probe`` writes, issue 26): one interactive figure
per measure, the trained model beside its random-initialisation nulls of the same architecture, a table
of the per-layer numbers, and the probe's own PNG figures.

Every number comes from the directory's ``summary.json`` (``per_layer``: the bootstrap means per layer of
every entry of the ``model`` axis, :func:`attnflow.analysis.probe.summary_table`); when ``probe.zarr`` is
there too (a fresh probe; committed results keep only the summary and the figures), the trained model's
95% bootstrap interval is drawn as a band from it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..experiments.files import MAX_JSON_BYTES, CorruptFileError, inside, read_bounded
from ..plot.probe import MEASURES
from .figures import figures_section
from .page import NotReportableError, Page, Section, esc, json_safe, kv_table, link, pre

__all__ = ["PROBE_STORE", "SUMMARY", "collect_probe", "is_probe"]

#: what ``attnflow probe`` writes
PROBE_STORE = "probe.zarr"
SUMMARY = "summary.json"
#: the Jacobian measures of the summary: {length: [value per layer]}
JACOBIANS = (
    ("lip_attention", "local Lipschitz constant of attention", "spectral norm"),
    ("jac_block", "spectral norm of the block Jacobian", "spectral norm"),
)


def _summary(d: Path) -> Any:
    import json

    raw = read_bounded(d / SUMMARY, MAX_JSON_BYTES, "the probe summary", "rerun `attnflow probe`")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise NotReportableError(
            f"the probe summary {d / SUMMARY} is not valid JSON ({str(exc)[:200]}); rerun `attnflow probe`"
        ) from None


def is_probe(directory: str | Path) -> bool:
    """Whether ``directory`` is a probe directory: ``probe.zarr``, or (committed results, whose Zarr store
    is not kept) a ``summary.json`` with the probe's ``per_layer`` and ``architecture`` entries. Reads
    nothing but a bounded, regular ``summary.json``; anything else is "not a probe"."""
    d = Path(directory)
    store = d / PROBE_STORE
    if store.is_dir() and not store.is_symlink():
        return True
    try:
        s = _summary(d)
    except (CorruptFileError, NotReportableError):
        return False
    return (
        isinstance(s, dict)
        and isinstance(s.get("per_layer"), dict)
        and isinstance(s.get("architecture"), dict)
    )


def _models(per_layer: dict) -> tuple[str | None, list[str]]:
    """The model probed (``trained``, or ``random-<seed>`` with ``--random-init``) and its nulls."""
    names = [str(m) for m in per_layer]
    main = next((m for m in names if not m.startswith("random-")), names[0] if names else None)
    return main, [m for m in names if m != main]


def _values(row: Any, key: str) -> np.ndarray | None:
    v = row.get(key) if isinstance(row, dict) else None
    if not isinstance(v, list) or not v:
        return None
    try:
        return np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return None


def _bands(d: Path) -> Any:
    """The probe's Dataset (lazy) when ``probe.zarr`` is there and reads, else None."""
    store = d / PROBE_STORE
    if not store.is_dir():
        return None
    import xarray as xr

    from ..experiments.store import check_store

    inside(d, store, what="probe store")
    check_store(store)  # no link or FIFO in it (UnsafePathError)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return xr.open_zarr(store)
    except Exception:  # noqa: BLE001 - an unreadable store: the page draws the summary's means only
        return None


def _figure(x, lines: dict[str, np.ndarray], main: str, band, title: str, xlabel: str, ylabel: str) -> dict:
    traces: list[dict] = []
    if band is not None:
        lo, hi = band
        traces.append(
            {
                "type": "scatter", "mode": "lines", "x": json_safe(np.concatenate([x, x[::-1]])),
                "y": json_safe(np.concatenate([hi, lo[::-1]])), "fill": "toself", "fillcolor": "#1f77b433",
                "line": {"width": 0}, "hoverinfo": "skip", "name": f"{main}: 95% bootstrap interval",
            }
        )  # fmt: skip
    first_null = True
    for name, y in lines.items():
        if name == main:
            continue
        traces.append(
            {
                "type": "scatter", "mode": "lines", "x": json_safe(x), "y": json_safe(y), "name": name,
                "line": {"color": "#999", "dash": "dash", "width": 1},
                "legendgroup": "null", "showlegend": first_null,
            }
        )  # fmt: skip
        if first_null:
            traces[-1]["name"] = f"random init, same architecture ({name}...)"
        first_null = False
    traces.append(
        {
            "type": "scatter", "mode": "lines+markers", "x": json_safe(x), "y": json_safe(lines[main]),
            "name": main, "line": {"color": "#1f77b4", "width": 2},
        }
    )  # fmt: skip
    layout = {
        "title": {"text": title, "font": {"size": 13}},
        "xaxis": {"title": {"text": xlabel}},
        "yaxis": {"title": {"text": ylabel}},
        "height": 360,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 45},
        "legend": {"font": {"size": 10}},
    }
    return {"data": traces, "layout": layout}


def _band_of(ds, name: str, per_head: bool, main: str):
    if ds is None or main not in [str(m) for m in ds.model.values]:
        return None
    suffix = "_layer_" if per_head else "_"
    lo, hi = f"{name}{suffix}lo", f"{name}{suffix}hi"
    if lo not in ds or hi not in ds:
        return None
    try:
        return (
            np.asarray(ds[lo].sel(model=main).values, dtype=float),
            np.asarray(ds[hi].sel(model=main).values, dtype=float),
        )
    except Exception:  # noqa: BLE001 - a band that does not read is left out, the means stay
        return None


def collect_probe(d: Path, page_dir: Path) -> Page:
    """The report page of a probe directory (module docstring).

    Raises
    ------
    NotReportableError
        ``summary.json`` is missing, not JSON, or has no per-layer table.
    UnsafePathError
        ``summary.json``, ``probe.zarr`` or a figure it names leads outside the directory.
    """
    if not (d / SUMMARY).exists():
        raise NotReportableError(f"{d} holds no {SUMMARY}; a probe directory is what `attnflow probe` writes")
    inside(d, d / SUMMARY, what="probe summary")
    s = _summary(d)
    per_layer = s.get("per_layer") if isinstance(s, dict) else None
    if not isinstance(per_layer, dict) or not per_layer:
        raise NotReportableError(f"{d / SUMMARY} has no per_layer table; rerun `attnflow probe`")
    main, nulls = _models(per_layer)
    page = Page(title=f"probe {s.get('model', d.name)}", kind="probe", directory=str(d))
    arch = s.get("architecture") if isinstance(s.get("architecture"), dict) else {}
    overview = {
        "model": s.get("model"),
        "description": s.get("description"),
        "architecture": ", ".join(f"{k} {v}" for k, v in arch.items()),
        "first token": s.get("first_token"),
        "corpus": f"{s.get('sentences')} sentences, {s.get('tokens')} tokens",
        "drawn": f"{main} against {len(nulls)} random initialisations ({', '.join(nulls) or 'none'})",
        "seconds": s.get("seconds"),
    }
    if isinstance(s.get("versions"), dict):
        overview["versions"] = ", ".join(f"{k} {v}" for k, v in s["versions"].items())
    page.sections.append(Section("overview", "Overview", kv_table(overview)))
    if s.get("config") is not None:
        page.sections.append(Section("config", "Config", pre(s["config"])))
    ds = _bands(d)  # UnsafePathError for a store that leads out or holds a link
    if ds is None:
        page.notes.append(
            f"no {PROBE_STORE} here (committed results keep summary.json and the figures): the curves are "
            "the per-layer bootstrap means of summary.json, the intervals are in the PNG figures below"
        )
    body, rows = [], []
    for name, title, ylabel, per_head in MEASURES:
        lines = {m: v for m in per_layer if (v := _values(per_layer[m], name)) is not None}
        if main not in lines:
            continue
        x = np.arange(1, len(lines[main]) + 1) if per_head else np.arange(len(lines[main]))
        fig_id = f"fig-probe-{name.replace('_', '-')}"
        band = _band_of(ds, name, per_head, main)
        xlabel = "layer (mean over heads)" if per_head else "depth (0 = embeddings)"
        page.figures[fig_id] = _figure(x, lines, main, band, title, xlabel, ylabel)
        body.append(f'<div class="plot" id="{fig_id}"></div>')
        same = [lines[m] for m in nulls if m in lines and len(lines[m]) == len(x)]
        null = np.nanmean(np.stack(same), axis=0) if same else None
        cells = ""
        for i in range(len(x)):
            extra = f" <span class='note'>({null[i]:.3g})</span>" if null is not None else ""
            cells += f"<td>{lines[main][i]:.3g}{extra}</td>"
        axis = "layer" if per_head else "depth"
        rows.append((len(x), f"<tr><th>{esc(name)}</th><td>{axis}</td>{cells}</tr>"))
    for name, title, ylabel in JACOBIANS:
        row = per_layer[main].get(name) if isinstance(per_layer[main], dict) else None
        if not isinstance(row, dict) or not row:
            continue
        try:
            lengths = sorted(int(n) for n in row)
            vals = np.asarray([[float(v) for v in row[str(n)]] for n in lengths])  # (length, layer)
        except (TypeError, ValueError, KeyError):
            continue
        traces = [
            {"type": "scatter", "mode": "lines+markers", "x": lengths, "y": json_safe(vals[:, k]),
             "name": f"layer {k + 1}"}
            for k in range(vals.shape[1])
        ]  # fmt: skip
        fig_id = f"fig-probe-{name.replace('_', '-')}"
        page.figures[fig_id] = {
            "data": traces,
            "layout": {
                "title": {"text": f"{main}: {title}", "font": {"size": 13}},
                "xaxis": {"type": "log", "title": {"text": "sequence length n"}},
                "yaxis": {"type": "log", "title": {"text": ylabel}},
                "height": 360,
                "margin": {"l": 60, "r": 20, "t": 40, "b": 45},
            },
        }
        body.append(f'<div class="plot" id="{fig_id}"></div>')
    if body:
        page.sections.append(
            Section(
                "measures",
                "Measures per layer",
                f"<p>{esc(main)} (blue; band: 95% bootstrap interval over sentences when {PROBE_STORE} is "
                "stored) against the same architecture at random initialisation (grey, dashed: "
                f"{esc(', '.join(nulls) or 'none')}). Per-head measures: mean over heads.</p>"
                + "".join(body),
            )
        )
    if rows:
        width = max(n for n, _ in rows)
        head = "".join(f"<th>{i}</th>" for i in range(width))
        table = (
            f"<p>per-layer bootstrap means of {esc(main)}; in brackets the mean over the random "
            "initialisations (summary.json <code>per_layer</code>)</p>"
            f"<table><thead><tr><th>measure</th><th>axis</th>{head}</tr></thead>"
            f"<tbody>{''.join(r for _, r in rows)}</tbody></table>"
        )
        page.sections.append(Section("tables", "Table", table))
    figs = s.get("figures")
    names = [str(v) for v in figs.values()] if isinstance(figs, dict) and figs else None
    fig = figures_section(d, page_dir, names)
    if fig:
        page.sections.append(fig)
    links = [link(d / f, page_dir, f) for f in (SUMMARY, PROBE_STORE) if (d / f).exists()]
    page.sections.append(Section("data", "Stored data", "<p>" + " &middot; ".join(links) + "</p>"))
    return page
