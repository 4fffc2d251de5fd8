"""The theory-checks page is generated from the committed study summaries' verdict records
(:mod:`attnflow.studies.pages`): the committed page must equal a regeneration, and a record's numbers
decide what the page says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnflow.analysis.verdicts import (
    Criterion,
    RobustnessCheck,
    VerdictError,
    record_description,
    record_test,
)
from attnflow.studies.pages import generate, main

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_page_is_the_regeneration_of_the_committed_summaries():
    committed = (ROOT / "docs" / "theory_checks.md").read_text()
    assert committed == generate(ROOT / "docs"), "stale: run `python -m attnflow.studies.pages docs`"


def _docs(tmp_path: Path, value: float, *, explain: str | None = None) -> Path:
    docs = tmp_path / "docs"
    crit = Criterion(
        quantity="b, the exponent", op="within", threshold=(-1.2, -0.8), declared_in="config: band"
    )
    rec = record_test(
        id="g2-in-h",
        statement="late-time G^2 decays like 1/H",
        source="2605.18870, Sec. 6",
        criterion=crit,
        value=value,
        ci95=(value - 0.05, value + 0.05),
        samples=20,
        method="t interval of the fit",
        robustness=[RobustnessCheck.from_values(crit, "dt", [0.01, 0.005], [value, value])],
    )
    desc = record_description(id="rates", statement="the rates per law", source="2605.18870, Sec. 6")
    a = docs / "studies" / "a_study"
    a.mkdir(parents=True)
    (a / "summary.json").write_text(
        json.dumps({"verdicts": [rec.to_json(), desc.to_json()], "run": {"description": "claim A"}})
    )
    if explain is not None:
        (a / "explain.md").write_text(explain)
    b = docs / "studies" / "b_study"
    b.mkdir(parents=True)
    (b / "summary.json").write_text(json.dumps({"description": "claim B", "verdicts": {"old": "holds"}}))
    return docs


def test_the_page_says_what_the_records_say(tmp_path):
    page = generate(_docs(tmp_path, -0.97, explain="### Method\n\nWhy the exponent is -1.\n"))
    assert (
        "2 records from 1 of 2 studies: 1 tests, 0 identities, 1 descriptions. Tests: 1 hold, 0 fail" in page
    )
    assert (
        "| late-time G^2 decays like 1/H | a_study: g2-in-h | 2605.18870, Sec. 6 | test | b, the exponent "
        "within [-1.2, -0.8] (config: band) | -0.97 [-1.02, -0.92] (holds) | dt: holds | **holds** |"
    ) in page
    assert "No verdict records yet: `b_study`." in page and "*no verdict records yet.*" in page
    assert "#### Method\n\nWhy the exponent is -1." in page  # the prose, its headings under the study's
    # the same procedure on a false claim: the page says fails
    false = generate(_docs(tmp_path / "f", -0.5))
    assert "-0.5 [-0.55, -0.45] (fails) | dt: fails | **fails** |" in false and "0 hold, 1 fail" in false


def test_a_bad_record_is_refused_naming_the_study(tmp_path):
    docs = _docs(tmp_path, -0.97)
    path = docs / "studies" / "a_study" / "summary.json"
    data = json.loads(path.read_text())
    data["verdicts"][0]["verdict"] = "holds, trust me"
    path.write_text(json.dumps(data))
    with pytest.raises(VerdictError, match=r"a_study.*verdicts\[0\]"):
        generate(docs)
    with pytest.raises(FileNotFoundError, match="holds no study summary"):
        generate(tmp_path / "empty")


def test_the_command_line_writes_and_checks(tmp_path, capsys):
    docs = _docs(tmp_path, -0.97)
    assert main([str(docs), "--check"]) == 1 and "is stale" in capsys.readouterr().err
    assert main([str(docs)]) == 0 and (docs / "theory_checks.md").read_text() == generate(docs)
    assert main([str(docs), "--check"]) == 0
