"""The multi-head study pages are rendered from Table specs (issue 30): no hand-written Markdown.

* every committed page ``docs/studies/<name>/table.md`` is what the study's table function makes of the
  committed ``summary.json`` (rendered by the one renderer), and its ``tables.json`` holds those specs;
* ``verdict_tables`` keeps every record and robustness value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_script

from attnflow.studies.render import markdown, table_from_json

ROOT = Path(__file__).resolve().parents[1]
PAGES = (
    "critical_beta",
    "superadditivity",
    "relu_vs_softmax",
    "monotonicity",
    "sufficient_condition",
    "entropy",
)


def _script():
    return load_script(ROOT / "scripts" / "regen_tables.py")


def assert_rendered_from_specs(out: Path) -> list:
    """``out/table.md`` is the one renderer's Markdown of the specs in ``out/tables.json``; the specs."""
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert specs, out
    assert (out / "table.md").read_text() == markdown([table_from_json(t) for t in specs])
    return specs


@pytest.mark.parametrize("name", PAGES)
def test_committed_page_is_rendered_from_the_committed_summary(name):
    d = ROOT / "docs" / "studies" / name
    regen = _script()
    assert (d / "table.md").read_text() == regen.regenerate(
        d
    )  # regenerate: python scripts/regen_tables.py DIR
    assert json.loads((d / "tables.json").read_text()) == regen.specs(d)
    assert_rendered_from_specs(d)


def test_verdict_tables_keep_every_record_and_robustness_value():
    from attnflow.studies.multihead_common import verdict_tables

    rec = {
        "id": "r1",
        "class": "test",
        "verdict": "depends on dt",
        "criterion": {"quantity": "fraction", "op": "<=", "threshold": 0.01},
        "result": {"value": 0.5942, "ci95": [0.4641, 0.7152]},
        "robustness": [
            {
                "choice": "dt",
                "values": [0.01, 0.005],
                "results": [0.5942, None],
                "outcomes": ["fails", "holds"],
            }
        ],
    }
    ident = {
        "id": "r2",
        "class": "identity",
        "verdict": "identity",
        "criterion": None,
        "result": {},
        "robustness": [],
    }
    verdicts, rob = verdict_tables([rec, ident], ".3g", robustness=True)
    md = markdown([verdicts, rob])
    assert "| r1 | depends on dt | test | fraction <= | 0.01 | 0.594 | 0.464, 0.715 |" in md
    assert "| r2 | identity | identity |  |  |  |  |" in md
    assert "| r1 | dt | 0.01 | 0.594 | fails |" in md and "| r1 | dt | 0.005 |  | holds |" in md
    assert len(verdict_tables([rec, ident])) == 1  # no robustness table unless asked
