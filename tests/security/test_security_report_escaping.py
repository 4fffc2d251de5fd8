"""A run or regime name such as ``<!--<script>`` cannot break the report page's own script.

On the base commit ``<!--`` inside the embedded JSON opened an HTML comment that swallowed the page's
script: the page was dead (no figures, ``window.attnflowReport`` undefined).
"""

from __future__ import annotations

import json
import re

import pytest
from security_helpers import TINY_RUN, cfg

from attnflow.experiments.store import run_experiment
from attnflow.report import write_report
from attnflow.report.browser import Browser, find_chromium
from attnflow.report.html import _script_json

HOSTILE = "<!--<script>x</script>-->\u2028&"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("esc") / "run <!--<script>"  # the cloud is named after the directory
    c = cfg(TINY_RUN)
    c["name"] = HOSTILE
    run_experiment(c, out)
    return write_report(out)


def test_script_json_has_no_angle_bracket_and_round_trips():
    obj = {"name": HOSTILE, "nested": [HOSTILE, {"k<": "</script>"}]}
    text = _script_json(obj)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == obj


def test_every_embedded_json_of_a_page_is_free_of_angle_brackets(page):
    html = page.read_text()
    blocks = re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', html, flags=re.S)
    assert len(blocks) == 2
    for b in blocks:
        assert "<" not in b and ">" not in b
        json.loads(b)  # still JSON
    assert HOSTILE[:4] not in html.split("<main>")[1].split("<script")[0]  # escaped in the HTML body too


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium browser found (see test_report_browser.py)")
def test_a_page_with_a_hostile_name_is_live_in_chromium(page):
    with Browser(width=900, height=600, timeout=90) as b:
        b.open(page)
        state = b.evaluate("JSON.stringify(window.attnflowReport || null)")
        assert state not in (None, "null"), "the page's script did not run"
        state = json.loads(state)
        assert state["ready"] and state["clouds"] == 1 and len(state["figures"]) >= 2
        shown = b.evaluate("document.getElementById('cloud-run').options[0].textContent")
        assert shown.startswith("run <!--<script>")
        assert b.evaluate("document.title").startswith(f"run {HOSTILE}"[:10])
