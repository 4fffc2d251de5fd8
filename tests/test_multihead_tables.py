"""The multi-head study pages are rendered from Table specs (issue 30): no hand-written Markdown.

* every committed page ``docs/studies/<name>/table.md`` is what the study's table function makes of the
  committed ``summary.json`` (rendered by the one renderer), and its ``tables.json`` holds those specs;
* the number-preservation check of ``scripts/regen_tables_multihead.py`` finds a number that vanished;
* ``verdict_tables`` keeps every record and robustness value.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

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
    spec = importlib.util.spec_from_file_location(
        "regen_tables_multihead", ROOT / "scripts/regen_tables_multihead.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def assert_rendered_from_specs(out: Path) -> list:
    """``out/table.md`` is the one renderer's Markdown of the specs in ``out/tables.json``; the specs."""
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert specs, out
    assert (out / "table.md").read_text() == markdown([table_from_json(t) for t in specs])
    return specs


@pytest.mark.parametrize("name", PAGES)
def test_committed_page_is_rendered_from_the_committed_summary(name):
    d = ROOT / "docs" / "studies" / name
    text, specs = _script().regenerate(d)
    assert (d / "table.md").read_text() == text  # regenerate: python scripts/regen_tables_multihead.py DIR
    assert json.loads((d / "tables.json").read_text())["tables"] == specs
    assert_rendered_from_specs(d)


def test_number_check_finds_a_vanished_number():
    mod = _script()
    old = "| n | T |\n|---|---|\n| 8 | 2.0513 |\n| 16 | 1.0e-10 |\nS2 in rho0 = 0.5\n"
    assert mod.numbers(old) == {8.0, 2.0513, 16.0, 1e-10, 0.5}  # S2, rho0 are names, not numbers
    assert mod.vanished(old, "8, 16 and 2.0513 at 1e-10, 0.50") == []  # same numbers, other format
    assert mod.vanished(old, "8, 16 and 2.051 at 1e-10, 0.5") == [2.0513]  # a lost digit is a lost number


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
