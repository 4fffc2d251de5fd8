"""The six multi-head studies (arXiv 2605.04279): quick variants through the study runner with the figures
the CLI injects, the numbers each must reproduce, and the refusal of out-of-range parameters.

Tolerances: particles (attnflow rk4, dt <= 0.05) against solve_ivp (rtol 1e-10) agree to ~1e-9 relative in
T_eps (measured 3e-11 to 2e-9); asserted at 1e-6 (the T_eps interpolation is a cubic spline, O(dt^4)).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from attnflow.cli import app
from attnflow.plot import figures_for
from attnflow.studies import StudyConfigError, available_studies, get_study, run_study
from attnflow.studies.render import markdown, table_from_json


def read_records(summary):
    """The summary's verdict records, validated by attnflow.analysis.verdicts, as JSON."""
    from attnflow.analysis.verdicts import read_records as _read

    return [r.to_json() for r in _read(summary)]


NAMES = (
    "monotonicity",
    "sufficient_condition",
    "critical_beta",
    "superadditivity",
    "relu_vs_softmax",
    "entropy",
)
PNG = b"\x89PNG\r\n\x1a\n"


def _run(name, tmp_path, **params):
    out = tmp_path / name
    return _checked(
        out, run_study(name, out, params=params, quick=True, progress=False, figures=figures_for(name))
    )


def _checked(out, s):
    """The checks every run of a multi-head study passes; ``s``."""
    assert s["status"] == "done"
    # table.md is the one renderer's Markdown of the Table specs kept in tables.json (issue 30)
    specs = json.loads((out / "tables.json").read_text())["tables"]
    assert specs and (out / "table.md").read_text() == markdown(map(table_from_json, specs))
    for f in s["figures"].values():
        assert (out / f).read_bytes()[:8] == PNG
    return s


def test_registered_with_figures():
    for name in NAMES:
        assert name in available_studies()
        assert figures_for(name) is not None
        plan = get_study(name).plan(get_study(name).config(quick=True))
        # every multi-head study runs its work as computation tasks on the run store (issue 30)
        assert plan and all(t.kind == "compute" for t in plan.values()), name


def test_monotonicity_quick(quick_study):
    s = _checked(*quick_study("monotonicity"))  # the session's quick run (tests/conftest.py), with figures
    rows = {(r["dt"], r["family"], r["attention"], r["geometry"]): r for r in s["rows"]}
    assert len(rows) == 32  # 16 rows at dt and at dt/2 (quick variant)
    for (dt, fam, kind, geo), r in rows.items():
        if kind == "usa" or fam == "identical":  # [derived] E_multi monotone
            assert r["multi_configs_violating"] == 0, (dt, fam, kind, geo)
        if fam == "orthogonal" and geo == "flat":  # [derived] per head monotone
            assert r["head_configs_violating"] == 0
    recs = {r["id"]: r for r in read_records(s)}
    assert recs["multi-energy-monotone-usa"]["class"] == "identity"  # a sum of squares: never a test
    assert [c["choice"] for c in recs["multi-energy-monotone-softmax-sphere"]["robustness"]][0] == "dt"
    sphere = recs["multi-energy-monotone-softmax-sphere"]
    assert [c["choice"] for c in sphere["robustness"]][-1] == "head scale beta |M_h|"
    assert [c["values"] for c in sphere["robustness"]][-1] == [1.0, 6.0]  # quick head_scales, beta = 1
    flat = recs["multi-energy-monotone-softmax-flat"]
    assert flat["uncertainty"]["samples"] == 6  # quick flat_multi_configs: the main value of the flat row
    assert s["flat_multi_row"]["dt"] == 0.01  # the quick variant's smallest step


def test_sufficient_condition_quick(quick_study):
    s = _checked(
        *quick_study("sufficient_condition")
    )  # the session's quick run (tests/conftest.py), with figures
    first = s["rows"][0]
    assert first["eps"] == 0.0 and first["defect"] < 1e-12
    for key in ("usa_flat", "softmax_flat"):
        assert first[key]["cross_over_self_max"] < 1e-10  # orthogonal heads: no cross term
        assert first[key]["violating_fraction"] == 0.0
    assert s["S2_implication_holds"] is True
    assert s["rows"][-1]["usa_flat"]["cross_over_self_max"] > 1e-3  # the defect shows
    recs = {r["id"]: r for r in read_records(s)}
    assert recs["s2-implication"]["class"] == "identity"  # Cauchy-Schwarz: true by construction
    assert recs["s1-cross-term-order-in-defect"]["class"] == "test"
    choices = [c["choice"] for c in recs["s1-cross-term-order-in-defect"]["robustness"]]
    assert "heads across eps (same: the study's; fresh per eps)" in choices
    assert recs["s1-per-head-monotone-under-defect"]["uncertainty"]["samples"] == 3 * 40  # quick robust rows


# critical_beta, superadditivity, relu_vs_softmax: quick variants and their verdict machinery are tested in
# tests/test_verdicts_reduced.py


def test_entropy_quick(quick_study):
    s = _checked(*quick_study("entropy"))  # the session's quick run (tests/conftest.py), with figures
    (eq,) = s["statistics"]["equiangular"]
    assert eq["max_abs_S_particles_vs_reduced"] < 1e-9 and eq["monotone"] and eq["min_rate"] > 0
    # the production identity against second-order differences of records 0.04 apart: O(h^2) ~ 1e-3
    assert s["statistics"]["base_run"]["fd_error"] < 2e-2
    recs = {r["id"]: r for r in read_records(s)}
    test = recs["entropy-monotone-random-starts"]
    assert test["class"] == "test" and test["uncertainty"]["samples"] == 12
    choices = {c["choice"] for c in test["robustness"]}
    assert {"entropy definition", "dt", "horizon", "n", "beta", "heads", "initial spread"} <= choices
    assert recs["entropy-monotone-equiangular"]["class"] == "identity"


def test_cli_runs_a_multihead_study(tmp_path):
    res = CliRunner().invoke(
        app, ["study", "run", "superadditivity", "--out", str(tmp_path / "s"), "--quick"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["run"]["figures"] == {
        "superadditivity": "superadditivity.png"
    }


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("critical_beta", {"n": [1]}, r"n\.0: must be greater than or equal to 3; got 1"),
        ("superadditivity", {"betas": [0.0]}, r"betas\.0: must be greater than 0; got 0\.0"),
        ("relu_vs_softmax", {"betas": [-1.0]}, r"betas\.0: must be greater than 0"),
        ("superadditivity", {"n": [2]}, r"n\.0: must be greater than or equal to 3; got 2"),
        ("monotonicity", {"H": 1}, r"H: must be greater than or equal to 2; got 1"),
        ("entropy", {"bta": [1.0]}, r"unknown parameter 'bta'"),
    ],
)
def test_study_parameters_refused(name, params, match):
    with pytest.raises(StudyConfigError, match=match):
        get_study(name).config(params, quick=True)
