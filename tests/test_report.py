"""``attnflow report DIR`` (issue 18) on a run, a sweep, a reproduction and every committed study: the
page is self-contained, its numbers equal the stored data (read here independently with zarr/numpy),
the thinning keeps what it says, bad input gets a clear error. The browser checks are in
``test_report_browser.py``."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import zarr
from experiments_helpers import tiny
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.experiments.store import run_experiment
from attnflow.experiments.sweep import run_sweep
from attnflow.report import NotReportableError, ReportLimits, collect, detect_kind, page_html, write_report
from attnflow.report.collect import collect_verdicts, theory_check_sections
from attnflow.report.markdown import markdown_to_html
from attnflow.report.thin import even_indices
from attnflow.studies.massucco2026 import reproduce

DOCS = Path(__file__).resolve().parents[1] / "docs"
COMMITTED = sorted(p for p in (DOCS / "studies").iterdir() if (p / "study.json").is_file())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    run_experiment(tiny(), out)
    return out


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "sweep"
    summary = run_sweep(tiny(), {"heads.H": [1, 3]}, out, workers=1)
    assert summary["done"] == 2
    return out


@pytest.fixture(scope="module")
def repro_dir(tmp_path_factory):
    # the reproduction's own code path at the smallest sizes: 3 regimes x H in {1, 2}, one path, 6 tokens
    out = tmp_path_factory.mktemp("report") / "repro"
    reproduce("massucco2026", out, quick=True, progress=False, paths=1, n=6, t1=0.2, H=[1, 2])
    return out


def _embedded(text: str, element_id: str):
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', text, re.S)
    assert m, element_id
    return json.loads(m.group(1))


def _section_ids(text: str) -> list[str]:
    return re.findall(r'<section[^>]* id="([\w-]+)"', text)


def _stored(run: Path, var: str) -> np.ndarray:
    """A variable of the run's Zarr store read with zarr alone (not through attnflow or xarray)."""
    return np.asarray(zarr.open_group(run / "data.zarr", mode="r")[var][...])


# -- kinds and errors ------------------------------------------------------------------------------
def test_detect_kind(run_dir, sweep_dir, repro_dir, tmp_path):
    assert detect_kind(run_dir) == "run"
    assert detect_kind(sweep_dir) == "sweep"
    assert detect_kind(repro_dir) == "reproduction"
    assert detect_kind(DOCS / "studies" / "longtime") == "study"
    with pytest.raises(
        NotReportableError, match=r"holds no tasks.json \(sweep\), study.json .* pass a directory"
    ):
        detect_kind(tmp_path)
    with pytest.raises(NotReportableError, match="no such directory"):
        detect_kind(tmp_path / "nope")


def test_limits_and_output_errors(run_dir, tmp_path):
    with pytest.raises(ValueError, match=r"max_tokens must be an integer >= 1: got 0; pass a positive limit"):
        ReportLimits(max_tokens=0)
    with pytest.raises(ValueError, match=r"max_points must be >= 2: got 1"):
        ReportLimits(max_points=1)
    with pytest.raises(FileNotFoundError, match=r"its directory .*missing does not exist; create it first"):
        write_report(run_dir, tmp_path / "missing" / "r.html")


def test_even_indices_against_reference():
    for n in range(0, 30):
        for k in (1, 2, 3, 7, 40):
            got = even_indices(n, k)
            if n <= k:
                np.testing.assert_array_equal(got, np.arange(n))
                continue
            assert len(got) <= k and got[-1] == n - 1 and (k == 1 or got[0] == 0)
            assert np.all(np.diff(got) > 0)
            # evenly spread: no gap larger than the ideal spacing rounded up
            if k > 1:
                assert np.diff(got).max() <= int(np.ceil((n - 1) / (k - 1)))
    with pytest.raises(ValueError, match="k >= 1"):
        even_indices(5, 0)


# -- a run -----------------------------------------------------------------------------------------
def test_run_report_is_self_contained_and_matches_the_store(run_dir):
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    text = path.read_text()
    # self-contained: no external script, stylesheet, image or frame
    assert not re.search(r'<(script|img|link|iframe)[^>]+(src|href)="(https?:)?//', text)
    assert "<script src" not in text and "Plotly.newPlot" in text and "plotly.js" in text.lower()
    assert _section_ids(text) == [
        "notes", "overview", "config", "metadata", "ledger", "clustering", "tokens", "data"
    ]
    figs = _embedded(text, "af-figures")
    g2 = _stored(run_dir, "G2")  # (path, time)
    t = _stored(run_dir, "time")
    mean = next(tr for tr in figs["fig-g2"]["data"] if tr["name"] == "G2")
    np.testing.assert_allclose(mean["x"], t, rtol=1e-6)
    np.testing.assert_allclose(mean["y"], g2.mean(axis=0), rtol=1e-5)  # 6 significant digits on the page
    band = next(tr for tr in figs["fig-g2"]["data"] if tr["name"] == "G2 10-90%")
    hi, lo = np.quantile(g2, 0.9, axis=0), np.quantile(g2, 0.1, axis=0)
    np.testing.assert_allclose(band["y"], np.concatenate([hi, lo[::-1]]), rtol=1e-5)
    names = {tr["name"] for tr in figs["fig-ledger"]["data"]}
    assert {"energy", "residual_paper", "residual_exact"} <= names
    (cloud,) = _embedded(text, "af-clouds")
    pos = _stored(run_dir, "positions")  # (path, time, token, dim)
    np.testing.assert_allclose(cloud["times"], t, rtol=1e-6)
    for c, key in enumerate("xyz"):
        np.testing.assert_allclose(cloud[key], pos[0, :, :, c], atol=5.1e-5)  # rounded to 1e-4
    assert cloud["note"] == "path 0 of 2; 8 of 8 tokens; 5 of 5 recorded times; coordinates rounded to 1e-4"
    assert 'href="config.yaml"' in text and 'href="data.zarr/"' in text


def test_run_report_thinned_as_stated(run_dir, tmp_path):
    lim = ReportLimits(max_tokens=3, max_frames=2, max_points=3)
    out = write_report(run_dir, tmp_path / "thin.html", limits=lim)
    text = out.read_text()
    (cloud,) = _embedded(text, "af-clouds")
    pos = _stored(run_dir, "positions")
    t = _stored(run_dir, "time")
    tok = [0, 3, 6]  # ceil(8/3) = 3: every 3rd token
    np.testing.assert_allclose(cloud["times"], t[[0, -1]], rtol=1e-6)
    np.testing.assert_allclose(cloud["x"], pos[0][[0, -1]][:, tok, 0], atol=5.1e-5)
    assert (
        "3 of 8 tokens (every 3-th); 2 of 5 recorded times (evenly spaced, first and last kept)"
        in cloud["note"]
    )
    assert "curves: at most 3 of 5 recorded times per run (evenly spaced)" in text
    mean = next(tr for tr in _embedded(text, "af-figures")["fig-g2"]["data"] if tr["name"] == "G2")
    np.testing.assert_allclose(mean["x"], t[[0, 2, 4]], rtol=1e-6)
    # links are relative to where the page is written
    href = re.search(r'href="([^"]*config\.yaml)"', text).group(1)
    assert (tmp_path / href).resolve() == (run_dir / "config.yaml").resolve()


# -- a sweep ---------------------------------------------------------------------------------------
def test_sweep_report(sweep_dir):
    text = write_report(sweep_dir).read_text()
    assert _section_ids(text) == [
        "notes", "overview", "config", "tasks", "ledger", "clustering", "tokens", "data"
    ]
    tasks = sorted(p.name for p in sweep_dir.iterdir() if p.name.startswith("task-"))
    assert len(tasks) == 2
    clouds = _embedded(text, "af-clouds")
    assert [c["name"] for c in clouds] == tasks
    figs = _embedded(text, "af-figures")
    for task in tasks:
        tr = next(tr for tr in figs["fig-g2"]["data"] if tr["name"] == f"{task}: G2")
        np.testing.assert_allclose(tr["y"], _stored(sweep_dir / task, "G2").mean(axis=0), rtol=1e-5)
    # several runs: one figure per variable, one mean line (and band) per run
    assert list(figs) == [
        "fig-g2", "fig-ghat2", "fig-energy", "fig-residual-paper", "fig-residual-exact", "fig-clustering"
    ]
    for task in tasks:
        tr = next(tr for tr in figs["fig-residual-exact"]["data"] if tr["name"] == f"{task}: residual_exact")
        np.testing.assert_allclose(
            tr["y"], _stored(sweep_dir / task, "residual_exact").mean(axis=0), rtol=1e-5, atol=1e-12
        )
    assert "heads.H=1" in text and "heads.H=3" in text
    only_one = write_report(sweep_dir, sweep_dir / "one.html", limits=ReportLimits(max_runs=1)).read_text()
    assert len(_embedded(only_one, "af-clouds")) == 1
    assert "curves and token clouds of the first 1 of 2 runs with data (--max-runs 1)" in only_one


# -- the reproduction ------------------------------------------------------------------------------
def test_reproduction_report(repro_dir):
    text = write_report(repro_dir).read_text()
    ids = _section_ids(text)
    for sid in ("overview", "config", "tables", "verdicts", "g2-vs-h", "ledger", "tokens", "data"):
        assert sid in ids, sid
    summary = json.loads((repro_dir / "summary.json").read_text())
    trace = next(
        tr
        for tr in _embedded(text, "af-figures")["fig-g2-h"]["data"]
        if tr["name"] == summary["regimes"]["ou"]["label"]
    )
    per_h = summary["regimes"]["ou"]["per_H"]
    assert trace["x"] == [1, 2]
    np.testing.assert_allclose(trace["y"], [per_h["1"]["G2_mean"], per_h["2"]["G2_mean"]], rtol=1e-5)
    assert len(_embedded(text, "af-clouds")) == 6  # 3 regimes x 2 head counts
    # drawn without figures (the committed reproduction, docs/studies/massucco2026, has its three inlined)
    assert "figures" not in ids and '<img alt="' not in text
    header = next(ln for ln in (repro_dir / "table.md").read_text().splitlines() if ln.startswith("|"))
    assert header.split("|")[1].strip() in text


# -- every committed study -------------------------------------------------------------------------
@pytest.mark.parametrize("study", COMMITTED, ids=lambda p: p.name)
def test_committed_study_reports(study, tmp_path):
    page = collect(study, page_dir=tmp_path, theory_checks=DOCS / "theory_checks.md")
    ids = [s.id for s in page.sections]
    assert ids[:2] == ["overview", "config"] and "verdicts" in ids and "data" in ids
    assert "tables" in ids
    text = page_html(page)
    pngs = sorted(study.glob("*.png"))
    # every committed figure is shown (numerics_checks, a table of convergence orders, draws none)
    assert text.count('<img alt="') == len(pngs) and (len(pngs) > 0 or study.name == "numerics_checks")
    for anim in study.glob("*.mp4"):  # animations are linked, never inlined as images
        assert "MP4 file: " in text and anim.name in text
    assert any("run directories not stored here" in n for n in page.notes)
    verdicts = next(s for s in page.sections if s.id == "verdicts").body
    blocks = theory_check_sections(
        (DOCS / "theory_checks.md").read_text(), page.title.split()[-1], study.name
    )
    assert blocks, f"docs/theory_checks.md has no section on {study.name}"
    assert verdicts.count('<div class="verdict">') == len(blocks)


def test_default_theory_checks_found_two_levels_up(tmp_path):
    out = write_report(DOCS / "studies" / "longtime", tmp_path / "lt.html").read_text()
    assert "docs/studies/longtime/" in out  # its section of the generated theory-checks page


def test_verdict_helpers():
    assert collect_verdicts({"a": [{"verdict": "holds", "x": {"verdict_h": "fails"}}], "verdict": 3}) == {
        "a[0].verdict": "holds",
        "a[0].x.verdict_h": "fails",
    }
    text = "# T\n\n## A: `alpha`\nx\n### B\nsee docs/studies/beta/ here\n### C\nnothing\n"
    assert theory_check_sections(text, "alpha", "zzz") == ["## A: `alpha`\nx"]
    assert theory_check_sections(text, "q", "beta") == ["### B\nsee docs/studies/beta/ here"]
    text2 = "### D\n**Measured** (`gamma`, 3 runs): x\n### E\nalso `gamma` here\n"
    assert theory_check_sections(text2, "gamma", "zzz") == ["### D\n**Measured** (`gamma`, 3 runs): x"]


def test_markdown_subset_escapes_everything_else():
    html = markdown_to_html(
        "# Title\n\n| a | b |\n|---|---:|\n| <script>x</script> | **bold** |\n\n"
        "- one `a<b`\n- [two](docs/x.md) [bad](javascript:alert(1))\n\ntext *em*"
    )
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert "<h3>Title</h3>" in html and "<strong>bold</strong>" in html and "<em>em</em>" in html
    assert "<code>a&lt;b</code>" in html and '<a href="docs/x.md">two</a>' in html
    assert "javascript:" not in re.findall(r'href="([^"]*)"', html)[-1]
    assert "<table><thead><tr><th>a</th><th>b</th></tr></thead>" in html


def test_script_data_cannot_close_the_script_element(run_dir, tmp_path):
    page = collect(run_dir, page_dir=tmp_path)
    page.figures["fig-g2"]["layout"]["title"]["text"] = "</script><script>alert(1)</script>"
    text = page_html(page)
    assert text.count("</script>") == 4  # the two JSON blocks, plotly.js and the page's script
    assert _embedded(text, "af-figures")["fig-g2"]["layout"]["title"]["text"].startswith("</script>")


# -- command line ----------------------------------------------------------------------------------
def test_cli_report(run_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli.html"
    res = runner.invoke(app, ["report", str(run_dir), "--output", str(out), "--max-frames", "2"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(str(out)) and "MiB" in res.output
    assert "2 of 5 recorded times" in out.read_text()
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "holds nothing attnflow writes" in res.output
    res = runner.invoke(app, ["report", str(run_dir), "--output", str(tmp_path / "no" / "x.html")])
    assert res.exit_code == 2 and "does not exist" in res.output
    res = runner.invoke(app, ["report", str(run_dir), "--max-tokens", "0"])
    assert res.exit_code == 2 and "--max-tokens" in res.output


def test_report_size_is_plotly_plus_thinned_data(run_dir, tmp_path):
    from attnflow.report.html import plotly_js

    size = os.path.getsize(write_report(run_dir, tmp_path / "s.html"))
    assert len(plotly_js()) < size < len(plotly_js()) + 200_000


def test_run_without_positions_has_no_cloud(tmp_path):
    out = tmp_path / "nopos"
    run_experiment(tiny(record={"every": 5, "positions": False}), out)
    page = collect(out)
    assert "tokens" not in [s.id for s in page.sections] and page.clouds == []
    assert "no run recorded token positions: no token cloud" in page.notes
    assert "ledger" in [s.id for s in page.sections]


def test_thin_cloud_errors_and_low_dimensions():
    import xarray as xr

    from attnflow.report.thin import thin_cloud

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4, 5, 2))
    ds = xr.Dataset(
        {"positions": (("path", "time", "token", "dim"), x)}, coords={"time": np.linspace(0, 1, 4)}
    )
    cf = thin_cloud(ds, path=1)
    np.testing.assert_array_equal(cf.frames[..., :2], x[1])
    np.testing.assert_array_equal(cf.frames[..., 2], 0.0)
    assert "d = 2: drawn in the plane z = 0" in cf.note and cf.note.startswith("path 1 of 2")
    x5 = rng.normal(size=(1, 2, 3, 5))
    cf5 = thin_cloud(
        xr.Dataset({"positions": (("path", "time", "token", "dim"), x5)}, coords={"time": [0.0, 1.0]})
    )
    np.testing.assert_array_equal(cf5.frames, x5[0, :, :, :3])
    assert "first 3 of 5 coordinates" in cf5.note
    with pytest.raises(ValueError, match=r"path must lie in \[0, 1\]: got 2; choose a recorded path"):
        thin_cloud(ds, path=2)
    with pytest.raises(ValueError, match=r"max_tokens and max_frames must be >= 1: got 0, 60"):
        thin_cloud(ds, max_tokens=0)
    with pytest.raises(ValueError, match=r"recorded no token positions .* record.positions: true"):
        thin_cloud(ds.drop_vars("positions"))
