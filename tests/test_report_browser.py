"""A report in a real browser (issue 18): headless Chromium (Debian's ``chromium``, installed by
``scripts/setup.sh`` where it can be) loads a generated report, finds its sections and rendered plots,
moves the time slider, reads no console errors and takes a screenshot that is inspected here.

Skipped, with the reason, when no Chromium is found (the suite installs nothing at run time)."""

from __future__ import annotations

import io
import json
import re

import matplotlib.image as mpimg
import numpy as np
import pytest
from experiments_helpers import tiny

from attnflow.experiments.store import run_experiment
from attnflow.report import write_report
from attnflow.report.browser import Browser, BrowserError, find_chromium

needs_browser = pytest.mark.skipif(
    find_chromium() is None,
    reason="no Chromium browser found ($ATTNFLOW_CHROMIUM, chromium, chromium-browser, google-chrome); "
    "scripts/setup.sh installs Debian's chromium when it runs as root with apt",
)

WIDTH, HEIGHT = 1000, 700
TOKEN_RGB = np.array([214, 39, 40]) / 255  # the marker colour of the cloud (#d62728)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "run"
    run_experiment(tiny(tokens={"init": "octahedral", "n": 30, "d": 3}), out)
    return write_report(out)


@pytest.fixture(scope="module")
def browser():
    with Browser(width=WIDTH, height=HEIGHT, timeout=90) as b:
        yield b


@needs_browser
def test_report_loads_renders_and_the_slider_moves(report, browser, tmp_path):
    load_s = browser.open(report)
    assert 0 < load_s < 60
    state = browser.evaluate("JSON.stringify(window.attnflowReport)")
    assert state is not None, "the page's script did not finish"
    state = json.loads(state)
    assert state["ready"] and state["clouds"] == 1
    assert state["figures"] == ["fig-g2", "fig-ledger", "fig-clustering"]
    ids = browser.evaluate("Array.from(document.querySelectorAll('section')).map(s => s.id)")
    assert ids == ["notes", "overview", "config", "metadata", "ledger", "clustering", "tokens", "data"]
    # plotly drew every figure (its root element and at least one trace each)
    drawn = browser.evaluate(
        "['fig-g2', 'fig-ledger', 'fig-cloud', 'fig-clustering'].map(id => {"
        " const g = document.getElementById(id);"
        " return g.classList.contains('js-plotly-plot') ? g.data.length : 0; })"
    )
    assert drawn[0] >= 2 and drawn[1] >= 6 and drawn[2] == 2 and drawn[3] == 2
    clouds = json.loads(browser.evaluate("document.getElementById('af-clouds').textContent"))
    times = clouds[0]["times"]
    assert len(times) == 5
    # move the slider to the third frame as a user would (value + input event)
    browser.evaluate(
        "(() => { const s = document.getElementById('time-slider'); s.value = '2';"
        " s.dispatchEvent(new Event('input', {bubbles: true})); })()"
    )
    shown = browser.evaluate(
        "(() => { const g = document.getElementById('fig-cloud'); return {frame: g.dataset.frame,"
        " x: Array.from(g.data[1].x), label: document.getElementById('time-label').textContent}; })()"
    )
    assert shown["frame"] == "2"
    np.testing.assert_allclose(shown["x"], clouds[0]["x"][2], rtol=0, atol=0)
    assert shown["label"].startswith(f"t = {times[2]}") and "frame 3 of 5" in shown["label"]
    assert not np.allclose(clouds[0]["x"][2], clouds[0]["x"][0])  # the frame really changed the data
    assert browser.console_errors == []


@needs_browser
def test_screenshot_of_the_token_cloud(report, browser, tmp_path):
    browser.open(report)
    browser.evaluate("document.getElementById('tokens').scrollIntoView()")
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    png = browser.screenshot(tmp_path / "cloud.png")
    img = mpimg.imread(io.BytesIO(png), format="png")
    assert img.shape[:2] == (HEIGHT, WIDTH)
    rgb = img[..., :3]
    assert rgb.std() > 0.05, "blank screenshot"
    # the token markers (WebGL, software-rendered) are on screen: pixels of the marker colour
    close = np.abs(rgb - TOKEN_RGB).max(axis=-1) < 0.08
    assert close.sum() > 30, f"{close.sum()} token-coloured pixels"
    assert browser.console_errors == []


@needs_browser
def test_a_shared_plotly_page_works(report, browser, tmp_path):
    """Issue 31's light mode: the page loads plotly from plotly-<version>.min.js beside it (file://,
    relative), draws every figure and the cloud, with no console error."""
    page = write_report(report.parent, tmp_path / "shared.html", plotly="shared")
    assert "<script src=" in page.read_text() and page.stat().st_size < 400_000
    browser.console_errors.clear()
    browser.open(page)
    state = json.loads(browser.evaluate("JSON.stringify(window.attnflowReport)"))
    drawn = browser.evaluate(
        "['fig-g2', 'fig-ledger', 'fig-clustering', 'fig-cloud'].map(id => {"
        " const g = document.getElementById(id);"
        " return g.classList.contains('js-plotly-plot') ? g.data.length : 0; })"
    )
    assert state["ready"] and state["clouds"] == 1 and all(n > 0 for n in drawn), (state, drawn)
    assert browser.console_errors == []


@needs_browser
def test_console_errors_are_caught(browser, tmp_path):
    # the check above can fail: a page that throws is reported
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>x</p><script>console.error('bad'); undefinedName();</script>"
    )
    browser.console_errors.clear()
    browser.open(page)
    assert any("console.error: bad" in e for e in browser.console_errors), browser.console_errors
    assert any("undefinedName" in e for e in browser.console_errors), browser.console_errors
    with pytest.raises(BrowserError, match="the page raised .*nope"):
        browser.evaluate("(() => { throw new Error('nope'); })()")
    browser.console_errors.clear()


def test_missing_browser_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNFLOW_CHROMIUM", str(tmp_path / "no-such-chromium"))
    assert find_chromium() is None
    with pytest.raises(BrowserError, match="no Chromium found .*install one, e.g. apt-get install chromium"):
        Browser()


@needs_browser
def test_cli_check_loads_the_page(report, tmp_path):
    from typer.testing import CliRunner

    from attnflow.cli import app

    res = CliRunner().invoke(
        app, ["report", str(report.parent), "--output", str(tmp_path / "r.html"), "--check"]
    )
    assert res.exit_code == 0, res.output
    assert re.search(r"loaded in headless Chromium in \d+\.\d\d s, 0 console errors", res.output), res.output
