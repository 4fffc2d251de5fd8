"""The quick variant of the study ``numerics_checks`` end to end: its tasks on the run store, the typed
result (records, one verdict table rendered from its Table spec) and the table of a committed summary."""

from __future__ import annotations

import json
from pathlib import Path

from attnflow.studies import get_study
from attnflow.studies.numerics_checks import records, tables
from attnflow.studies.render import markdown, table_from_json

ROOT = Path(__file__).resolve().parents[1]


def test_quick_numerics_checks_study(quick_study):
    d, s = quick_study("numerics_checks")  # the session's quick run (tests/conftest.py), shared
    assert s["run"]["status"] == "done" and set(s["results"]) == {
        "lie",
        "jko",
        "heat",
        "memory",
        "first_variation",
    }
    ids = [r["id"] for r in s["verdicts"]]
    assert ids[:3] == ["lie-order-lie-euler", "lie-order-rkmk2", "lie-order-rkmk4"] and len(ids) == 7
    specs = json.loads((d / "tables.json").read_text())["tables"]
    assert [t["id"] for t in specs] == ["verdicts"] and len(specs[0]["rows"]) == len(ids)
    assert (d / "table.md").read_text() == markdown([table_from_json(t) for t in specs])


def test_the_committed_table_is_the_rendering_of_the_committed_summary():
    docs = ROOT / "docs" / "studies" / "numerics_checks"
    meta = json.loads((docs / "study.json").read_text())
    summary = json.loads((docs / "summary.json").read_text())
    config = get_study("numerics_checks").Config.model_validate(meta["config"])
    specs = tables(summary, config)
    # one row per committed record, in the records' order, with their verdicts
    rows = specs[0].rows
    assert [r["id"] for r in rows] == [r["id"] for r in summary["verdicts"]]
    assert [r["verdict"] for r in rows] == [r["verdict"] for r in summary["verdicts"]]
    assert [r.to_json() for r in records(summary, config)] == summary["verdicts"]
    assert (docs / "table.md").read_text() == markdown(specs)
    assert "N in [8, 16, 32, 64]" in specs[0].note  # the sizes of the committed config
