"""Issue 31, the report a newcomer expects: ``write_report`` takes the in-memory Dataset that
``attnflow.simulate`` returns and writes the page where it is told (no run directory), and a light mode,
``plotly="shared"`` (``attnflow report --plotly shared``), writes one ``plotly-<version>.min.js`` beside many
pages instead of 4.6 MiB of plotly.js in each (still no network). The numbers on the page are checked
against the Dataset with numpy; a shared page is loaded in headless Chromium in
``test_report_browser.py::test_a_shared_plotly_page_works`` (with the browser already started there)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnflow as af
from attnflow.cli import app
from attnflow.report import NotReportableError, write_report
from attnflow.report.html import plotly_file_name, plotly_js

runner = CliRunner()
#: a shared-mode page holds the data only: these tiny runs make pages of ~20-60 kB; 400 kB is far below
#: the 4.6 MiB plotly.js an inline page carries and far above any of these pages
SHARED_PAGE_MAX = 400_000


@pytest.fixture(scope="module")
def ds():
    model = af.TransformerModel(
        direction="descent", attention="softmax", beta=1.0, weights=af.OrnsteinUhlenbeck(sigma2=0.5),
        backend="torch",
    )  # fmt: skip
    x0 = af.tokens.octahedral(paths=3, n=12, d=3, seed=0)
    D0 = af.heads.symmetric_gaussian(paths=3, heads=2, d=3, seed=0)
    return af.simulate(model, x0, D0, t1=0.2, dt=0.02, record_every=2, seed=0)


def _embedded(page: Path, element: str):
    text = page.read_text()
    m = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>', text, re.S)
    assert m, element
    return json.loads(m.group(1))


def test_a_dataset_is_reported_to_the_path_given(ds, tmp_path):
    out = write_report(ds, tmp_path / "sim.html")
    assert out == tmp_path / "sim.html" and sorted(p.name for p in tmp_path.iterdir()) == ["sim.html"]
    text = out.read_text()
    assert "report of an in-memory Dataset" in text and "<script src=" not in text
    assert out.stat().st_size > 4 * 2**20  # plotly.js inlined (the default)
    figs = _embedded(out, "af-figures")
    assert set(figs) == {"fig-g2", "fig-ledger", "fig-clustering"}
    # the G^2 line is the mean over the 3 paths of the Dataset's G2 (6-digit rounding on the page)
    line = next(t for t in figs["fig-g2"]["data"] if t.get("name") == "G2")
    np.testing.assert_allclose(line["x"], ds.time.values, rtol=1e-6)
    np.testing.assert_allclose(line["y"], ds.G2.mean("path").values, rtol=1e-5)
    # the cloud's first frame: path 0 at t = 0, coordinates rounded to 1e-4
    cloud = _embedded(out, "af-clouds")[0]
    x0 = ds.positions.isel(path=0, time=0).values
    np.testing.assert_allclose(cloud["x"][0], x0[:, 0], atol=5.1e-5)
    np.testing.assert_allclose(cloud["z"][0], x0[:, 2], atol=5.1e-5)


def test_shared_plotly_is_written_once_beside_many_pages(ds, tmp_path):
    a = write_report(ds, tmp_path / "a.html", plotly="shared")
    lib = tmp_path / plotly_file_name()
    stamp = lib.stat().st_mtime_ns
    b = write_report(ds.isel(path=[0, 1]), tmp_path / "b.html", plotly="shared")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.html", "b.html", lib.name])
    assert lib.read_bytes() == plotly_js().encode("utf-8") and lib.stat().st_mtime_ns == stamp
    for page in (a, b):
        text = page.read_text()
        assert f'<script src="{lib.name}"></script>' in text
        assert page.stat().st_size < SHARED_PAGE_MAX, page.stat().st_size


def test_the_cli_writes_a_shared_page_of_a_run_directory(tmp_path):
    from experiments_helpers import tiny

    from attnflow.experiments.store import run_experiment

    run = tmp_path / "run"
    run_experiment(tiny(), run)
    r = runner.invoke(app, ["report", str(run), "--plotly", "shared"])
    assert r.exit_code == 0, r.output
    assert (run / plotly_file_name()).is_file() and (run / "report.html").stat().st_size < SHARED_PAGE_MAX
    r = runner.invoke(app, ["report", str(run), "--plotly", "cdn"])
    assert r.exit_code == 2 and r.output.startswith("error: --plotly must be inline or shared: got 'cdn'")


def test_refusals(ds, tmp_path):
    with pytest.raises(ValueError, match=r"in-memory Dataset has no directory .*pass output="):
        write_report(ds)
    with pytest.raises(ValueError, match=r"plotly must be one of \('inline', 'shared'\): got 'cdn'"):
        write_report(ds, tmp_path / "x.html", plotly="cdn")
    with pytest.raises(
        NotReportableError, match=r"needs the xarray.Dataset that attnflow.simulate returns.*DataArray"
    ):
        write_report(ds.G2, tmp_path / "x.html")
    with pytest.raises(NotReportableError, match=r"'time' dimension"):
        write_report(ds.isel(time=slice(0, 0)), tmp_path / "x.html")
    with pytest.raises(FileNotFoundError, match=r"does not exist"):
        write_report(ds, tmp_path / "missing" / "x.html")
