"""CLI wiring of the audit and the reproduction (the functions themselves are tested elsewhere)."""

import json

from typer.testing import CliRunner

from attnflow.cli import app

runner = CliRunner()


def test_check_edi_quick_writes_json_and_table(tmp_path):
    out = tmp_path / "edi.json"
    res = runner.invoke(
        app, ["check-edi", "--quick", "--H", "1", "--H", "3", "--weights", "frozen", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "| H | weights |" in res.output
    data = json.loads(out.read_text())
    assert data, "the audit JSON must not be empty"


def test_check_edi_rejects_unknown_weights():
    res = runner.invoke(app, ["check-edi", "--quick", "--weights", "bogus"])
    assert res.exit_code == 2
    assert "unknown weights 'bogus'; valid: frozen, ou, oscillating, oscillating_shared" in res.output


def test_reproduce_rejects_unknown_name(tmp_path):
    res = runner.invoke(app, ["reproduce", "nosuchpaper", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "unknown reproduction 'nosuchpaper'; available: massucco2026" in res.output
