"""Write a :class:`~attnflow.report.collect.Page` as one self-contained HTML file (or, with
``plotly="shared"``, a page that loads ``plotly-<version>.min.js`` from its own directory).

No network at view time: plotly.js (the ``plotly`` package's bundled minified build) is inlined once,
the figures and token clouds are embedded as JSON, PNG figures as base64 ``data:`` URIs. Why plotly:
the 3-D token cloud needs WebGL scatter with rotation and zoom, and the ledger plots need filled bands
and log axes; plotly is maintained, already an optional dependency (``attnflow[report]``), and one file
of ~4.6 MiB, the bulk of every page (measured sizes and load times: ``docs/report.md``). A hand-written
canvas viewer would be smaller but is not a maintained library.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from .._version import __version__
from ..experiments.files import write_output
from .page import Page

__all__ = ["PLOTLY_MODES", "REPORT_FILE", "page_html", "plotly_file_name", "plotly_js", "write_page"]

#: the default file name of a report, written into the reported directory
REPORT_FILE = "report.html"

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#223;color:#fff;padding:14px 24px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#ccd}
nav{position:sticky;top:0;background:#eef;padding:6px 24px;border-bottom:1px solid #ccd;z-index:5}
nav a{margin-right:14px;color:#224;text-decoration:none}main{padding:8px 24px 40px;max-width:1200px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 16px;margin:14px 0}
h2{font-size:18px;margin:8px 0}table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}thead th{background:#f0f0f4}
table.kv th{background:#f7f7fa;white-space:nowrap}pre{background:#f6f6f8;padding:8px;overflow:auto;
max-height:420px;font-size:12px}figure{margin:10px 0}figure img{max-width:100%;border:1px solid #eee}
.notes{background:#fff8e1;border:1px solid #f0d890;border-radius:6px;padding:6px 16px}
.note{color:#555;font-size:12px}.plot{width:100%;min-height:420px}.cloud{height:560px}
.cloud-controls{display:flex;gap:18px;align-items:center;flex-wrap:wrap}#time-slider{width:320px}
.verdict{border-left:4px solid #88a;padding-left:10px;margin:8px 0}
"""

_JS = """
(function () {
  var FIGS = JSON.parse(document.getElementById("af-figures").textContent);
  var CLOUDS = JSON.parse(document.getElementById("af-clouds").textContent);
  var cfg = {responsive: true, displaylogo: false};
  var ids = Object.keys(FIGS);
  ids.forEach(function (id) { Plotly.newPlot(id, FIGS[id].data, FIGS[id].layout, cfg); });
  var state = {run: 0, frame: 0};
  function guide(flat) {
    var x = [], y = [], z = [], i, k, a, b;
    if (flat) {
      for (i = 0; i <= 96; i++) {
        a = 2 * Math.PI * i / 96; x.push(Math.cos(a)); y.push(Math.sin(a)); z.push(0);
      }
      return {x: x, y: y, z: z};
    }
    for (k = 1; k < 6; k++) {            // parallels
      b = Math.PI * k / 6 - Math.PI / 2;
      for (i = 0; i <= 48; i++) { a = 2 * Math.PI * i / 48;
        x.push(Math.cos(b) * Math.cos(a)); y.push(Math.cos(b) * Math.sin(a)); z.push(Math.sin(b)); }
      x.push(null); y.push(null); z.push(null);
    }
    for (k = 0; k < 6; k++) {            // meridians
      a = Math.PI * k / 6;
      for (i = 0; i <= 48; i++) { b = 2 * Math.PI * i / 48;
        x.push(Math.cos(b) * Math.cos(a)); y.push(Math.cos(b) * Math.sin(a)); z.push(Math.sin(b)); }
      x.push(null); y.push(null); z.push(null);
    }
    return {x: x, y: y, z: z};
  }
  function showFrame(k) {
    var c = CLOUDS[state.run];
    k = Math.max(0, Math.min(k, c.times.length - 1));
    state.frame = k;
    Plotly.restyle("fig-cloud", {x: [c.x[k]], y: [c.y[k]], z: [c.z[k]]}, [1]);
    document.getElementById("time-label").textContent =
      "t = " + c.times[k] + "  (frame " + (k + 1) + " of " + c.times.length + ")";
    document.getElementById("fig-cloud").dataset.frame = String(k);
  }
  function showRun(r) {
    var c = CLOUDS[r], flat = c.z.every(function (f) { return f.every(function (v) { return v === 0; }); });
    state.run = r;
    var g = guide(flat);
    var data = [
      {type: "scatter3d", mode: "lines", x: g.x, y: g.y, z: g.z, hoverinfo: "skip", showlegend: false,
       line: {color: "#bbb", width: 1}},
      {type: "scatter3d", mode: "markers", x: c.x[0], y: c.y[0], z: c.z[0], name: "tokens",
       marker: {size: 3, color: "#d62728"}}
    ];
    var ax = {range: [-1.1, 1.1], title: {text: ""}};
    var layout = {height: 560, margin: {l: 0, r: 0, t: 10, b: 0}, showlegend: false,
      scene: {aspectmode: "cube", xaxis: ax, yaxis: ax, zaxis: ax}};
    Plotly.newPlot("fig-cloud", data, layout, cfg);
    var s = document.getElementById("time-slider");
    s.max = String(c.times.length - 1);
    s.value = "0";
    document.getElementById("cloud-note").textContent = "shown: " + c.name + "; " + c.note;
    showFrame(0);
  }
  if (CLOUDS.length) {
    var sel = document.getElementById("cloud-run");
    CLOUDS.forEach(function (c, i) {
      var o = document.createElement("option");
      o.value = String(i); o.textContent = c.name; sel.appendChild(o);
    });
    sel.addEventListener("change", function () { showRun(parseInt(sel.value, 10)); });
    document.getElementById("time-slider").addEventListener("input", function (e) {
      showFrame(parseInt(e.target.value, 10));
    });
    showRun(0);
  }
  window.attnflowReport = {ready: true, figures: ids, clouds: CLOUDS.length, state: state,
    renderedMs: performance.now()};
})();
"""


def plotly_js() -> str:
    """The minified plotly.js bundled with the ``plotly`` package.

    Raises
    ------
    ImportError
        If plotly is not installed (``pip install attnflow[report]``).
    """
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as exc:  # pragma: no cover - plotly is in the test extra
        raise ImportError(
            "attnflow report needs plotly (the interactive plots are inlined plotly.js): got "
            f"{exc}; install it with pip install 'attnflow[report]'"
        ) from None
    return get_plotlyjs()


def _script_json(obj) -> str:
    """JSON for a ``<script type="application/json">`` element: every ``<`` is written ``\\u003c`` (the same
    JSON string), so no name or value can end the element (``</script>``) or open an HTML comment
    (``<!--``, which would swallow the page's own script); ``>`` and ``&`` likewise, and the line
    separators U+2028/U+2029."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    for ch, esc in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, esc)
    return text


#: how a page carries plotly.js: ``inline`` (in the page, self-contained) or ``shared`` (one
#: ``plotly-<version>.min.js`` next to the pages, referenced relatively: no network either)
PLOTLY_MODES = ("inline", "shared")


def plotly_file_name() -> str:
    """``plotly-<version>.min.js``: the shared copy's name (pages of two plotly versions do not clash)."""
    from plotly.offline import get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js"


def page_html(page: Page, *, plotly: str = "inline") -> str:
    """The HTML text of a report page.

    Parameters
    ----------
    page : Page
    plotly : {"inline", "shared"}
        ``inline`` (default): plotly.js inside the page, which then references no other resource;
        ``shared``: ``<script src="plotly-<version>.min.js">``, a file in the page's directory
        (:func:`write_page` writes it).
    """
    if plotly not in PLOTLY_MODES:
        raise ValueError(f"plotly must be one of {PLOTLY_MODES}: got {plotly!r}; use 'inline' or 'shared'")
    esc = html.escape
    source = (
        f"the {esc(page.kind)} directory <code>{esc(page.directory)}</code>"
        if page.directory
        else "an in-memory Dataset"
    )
    lib = (
        f"<script>{plotly_js()}</script>"
        if plotly == "inline"
        else f'<script src="{esc(plotly_file_name())}"></script>'
    )
    nav = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in page.sections)
    notes = ""
    if page.notes:
        items = "".join(f"<li>{esc(n)}</li>" for n in page.notes)
        notes = f'<section class="notes" id="notes"><h2>What this page shows</h2><ul>{items}</ul></section>'
    body = "".join(
        f'<section id="{esc(s.id)}"><h2>{esc(s.title)}</h2>{s.body}</section>' for s in page.sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="attnflow {esc(__version__)}">'
        f"<title>{esc(page.title)} - attnflow report</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{esc(page.title)}</h1><p>attnflow {esc(__version__)} report of {source}</p></header>"
        f"<nav>{nav}</nav><main>{notes}{body}</main>"
        f'<script type="application/json" id="af-figures">{_script_json(page.figures)}</script>'
        f'<script type="application/json" id="af-clouds">{_script_json(page.clouds)}</script>'
        f"{lib}<script>{_JS}</script></body></html>\n"
    )


def write_page(
    page: Page, path: str | Path, *, root: str | Path | None = None, plotly: str = "inline"
) -> Path:
    """Write ``page`` to ``path`` (UTF-8) and return the path.

    The page goes to a new tmp file of the target's directory and replaces ``path`` atomically; a symlink
    at ``path`` is refused, and so is a ``path`` outside ``root`` when given
    (:func:`attnflow.experiments.files.write_output`). With ``plotly="shared"`` the page's directory gets
    ``plotly-<version>.min.js`` (written the same way, once: a copy with the same bytes is kept), which
    every page written there with this mode references.
    """
    text = page_html(page, plotly=plotly).encode("utf-8")
    if plotly == "shared":
        lib = Path(path).parent / plotly_file_name()
        js = plotly_js().encode("utf-8")
        if not (
            lib.is_file()
            and not lib.is_symlink()
            and lib.stat().st_size == len(js)
            and lib.read_bytes() == js
        ):
            write_output(lib, lambda fh: fh.write(js), root=root, what="shared plotly.js")
    return write_output(path, lambda fh: fh.write(text), root=root, what="report")
