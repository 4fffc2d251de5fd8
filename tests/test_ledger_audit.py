"""Trajectory ledger helpers and the audit of identity (147) (attnflow.analysis.edi), quick sizes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

import attnflow as af
from attnflow.analysis import edi
from attnflow.analysis.edi import audit_configs, check_edi, check_edi_cli, check_edi_table, run_audit
from attnflow.observables.ledger import TERMS, ledger_table, ledger_terms, residual_order

QUICK = {"n": 12, "paths": 2, "T": 0.5, "dts": (2e-2, 1e-2, 5e-3), "seed": 0}


@pytest.fixture(scope="module")
def ou_run():
    model = af.TransformerModel(direction="descent", weights=af.OrnsteinUhlenbeck(), backend="torch")
    x0 = af.tokens.octahedral(3, 8, 3, seed=1)
    D0 = af.heads.symmetric_gaussian(3, 3, 3, seed=1)
    return af.simulate(model, x0, D0, t1=0.2, dt=0.01, seed=2, record_every=5)


# ------------------------------------------------------------------------------------------------
# ledger_terms / ledger_table / residual_order
# ------------------------------------------------------------------------------------------------
def test_ledger_terms_add_up_and_table_is_mean_and_std(ou_run) -> None:
    terms = ledger_terms(ou_run)
    assert set(terms.data_vars) == set(TERMS) and terms.delta_energy.dims == ("path", "time")
    for kind in ("paper", "exact"):
        rhs = terms.int_dtE + terms[f"dissipation_{kind}"] + terms.martingale + terms[f"residual_{kind}"]
        assert_allclose(rhs.values, terms.delta_energy.values, rtol=0, atol=1e-12)
    assert_allclose(terms.dissipation_exact.values, -ou_run.int_Ghat2.values)  # descent: s = -1
    table = ledger_table(ou_run)
    assert list(table.stat.values) == ["mean", "std"] and table.sizes["time"] == ou_run.sizes["time"]
    for k in TERMS:
        vals = terms[k].values
        assert_allclose(table[k].sel(stat="mean").values, vals.mean(0), rtol=1e-12, atol=1e-15)
        assert_allclose(table[k].sel(stat="std").values, vals.std(0, ddof=1), rtol=1e-12, atol=1e-15)


def test_ledger_terms_reject_runs_without_ledger_or_initial_record(ou_run) -> None:
    with pytest.raises(ValueError, match="lacks the ledger variables"):
        ledger_terms(ou_run.drop_vars("int_G2"))
    with pytest.raises(ValueError, match="is not the initial time"):
        ledger_terms(ou_run.isel(time=slice(1, None)))
    with pytest.raises(TypeError, match="must be an xarray.Dataset"):
        ledger_table({"energy": 1})
    no_attrs = ou_run.copy()
    no_attrs.attrs = {}
    with pytest.raises(ValueError, match="lacks the attribute 'sign'"):
        ledger_terms(no_attrs)


def test_residual_order_recovers_power_law() -> None:
    h = np.array([0.04, 0.02, 0.01, 0.005])
    fit = residual_order(h, 3.0 * h**1.5)
    assert_allclose([fit["order"], fit["prefactor"]], [1.5, 3.0], rtol=1e-12)
    assert fit["stderr"] < 1e-10
    assert math.isnan(residual_order(h[:2], [1.0, 1.0])["stderr"])  # two points: no error estimate
    assert math.isnan(residual_order(h[:2], [0.0, 1.0])["order"])
    with pytest.raises(ValueError, match="same length >= 2"):
        residual_order([0.1], [1.0])
    with pytest.raises(ValueError, match="distinct finite numbers > 0"):
        residual_order([0.1, 0.1], [1.0, 2.0])
    with pytest.raises(ValueError, match="residuals must be finite"):
        residual_order([0.1, 0.2], [1.0, float("nan")])


# ------------------------------------------------------------------------------------------------
# check_edi
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("H,weights", [(1, "frozen"), (3, "frozen"), (3, "oscillating")])
def test_exact_residual_is_first_order_for_deterministic_weights(H: int, weights: str) -> None:
    res = check_edi(H, weights, **QUICK)
    # Projected Euler with left Riemann sums: each step's defect is O(dt^2) (Taylor remainder of E
    # along the step, retraction and weight drift), so R_exact = c dt + O(dt^2). Over dt in
    # [0.005, 0.02] the fitted slope is measured at 1.01-1.02; the band [0.9, 1.1] allows an O(dt)
    # curvature of the fit while excluding order 1/2 or 2.
    assert 0.9 < res["order_exact"]["order"] < 1.1
    for r in res["per_dt"]:
        assert r["exact_max_abs"] >= r["exact_mean_abs"] > 0
    if H == 1:  # one symmetric head: G^2 = Ghat^2, the two residuals coincide
        for r in res["per_dt"]:
            assert r["gap_mean_abs"] < 1e-12 * r["delta_energy_mean_abs"]


@pytest.mark.parametrize(
    "H,weights,symmetric", [(3, "frozen", True), (4, "oscillating", True), (1, "frozen", False)]
)
def test_paper_residual_does_not_converge_for_distinct_heads(H: int, weights: str, symmetric: bool) -> None:
    res = check_edi(H, weights, symmetric=symmetric, **QUICK)
    per = res["per_dt"]
    # The paper's residual tends to the non-zero limit s int (Ghat^2 - G^2): fitted order ~ 0 (|p| < 0.2
    # where a discretisation error would give p ~ 1), the gap does not shrink with dt (within 10 %),
    # and at the finest dt it is over 10 times the exact residual.
    assert abs(res["order_paper"]["order"]) < 0.2
    assert abs(res["order_gap"]["order"]) < 0.1
    gaps = [r["gap_mean_abs"] for r in per]
    assert max(gaps) < 1.1 * min(gaps)
    fine = per[-1]
    assert fine["paper_mean_abs"] > 10 * fine["exact_mean_abs"]


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["frozen", "oscillating"])
def test_full_size_audit_orders(weights: str) -> None:
    # The two claims above at the audit's full sizes (n = 32, T = 1, five dt down to 1.25e-3), H = 10
    # (3 s each single-threaded, 15 s with a thread pool). Over the longer dt range the fitted slopes
    # are sharper: measured exact order 1.005-1.008 (stderr 0.002), gap order 0.007-0.016.
    res = check_edi(10, weights, **edi.AUDIT_FULL)
    assert abs(res["order_exact"]["order"] - 1.0) < 0.03
    assert abs(res["order_gap"]["order"]) < 0.05
    fine = res["per_dt"][-1]
    assert fine["paper_mean_abs"] > 10 * fine["exact_mean_abs"]


def test_finest_dt_reproduces_simulate_with_the_same_seed() -> None:
    # The Brownian path is drawn from the per-path noise streams, so at the finest dt check_edi runs
    # exactly what attnflow.simulate runs with that seed.
    res = check_edi(2, "ou", n=8, paths=2, T=0.1, dts=(2e-2, 1e-2), seed=3)
    model = af.TransformerModel(
        direction="descent", weights=af.OrnsteinUhlenbeck(sigma2=1.0), backend="torch"
    )
    x0 = af.tokens.octahedral(2, 8, 3, seed=3)
    D0 = af.heads.symmetric_gaussian(2, 2, 3, seed=3)
    ds = af.simulate(model, x0, D0, t1=0.1, dt=1e-2, seed=3, record_every=10)
    R = ds.residual_exact.isel(time=-1).values
    assert_allclose(res["per_dt"][-1]["exact_mean_abs"], np.abs(R).mean(), rtol=1e-12)
    assert_allclose(res["per_dt"][-1]["exact_max_abs"], np.abs(R).max(), rtol=1e-12)


def test_check_edi_rejects_bad_configurations() -> None:
    with pytest.raises(ValueError, match="unknown weights 'sinus'; valid: frozen, ou"):
        check_edi(2, "sinus")
    with pytest.raises(ValueError, match="unknown noise 'pink'"):
        check_edi(2, "ou", noise="pink")
    with pytest.raises(ValueError, match="whole multiple of the finest"):
        check_edi(2, dts=(0.03, 0.02))
    with pytest.raises(ValueError, match="at least two distinct step sizes"):
        check_edi(2, dts=(0.01,))
    with pytest.raises(ValueError, match="whole number of steps"):
        check_edi(2, dts=(0.2, 0.1), T=0.25)
    with pytest.raises(ValueError, match="H must be an integer >= 1"):
        check_edi(0)
    with pytest.raises(ValueError, match="direction must be one of"):
        check_edi(1, direction="up")
    with pytest.raises(ValueError, match="T must be a finite number > 0"):
        check_edi(1, T=-1.0)
    with pytest.raises(ValueError, match="defined for d = 2 or 3"):
        check_edi(1, "oscillating", d=4, n=4, paths=1, T=0.02, dts=(0.02, 0.01))
    with pytest.raises(ValueError, match="unknown weights 'x'"):
        audit_configs(weights=["x"])
    with pytest.raises(ValueError, match="every H must be an integer >= 1"):
        audit_configs(H=[0])
    with pytest.raises(ValueError, match="each configuration must be a dict"):
        check_edi_table([3])


def test_simulator_step_rejects_wrongly_shaped_noise() -> None:
    model = af.TransformerModel(direction="descent", weights=af.OrnsteinUhlenbeck())
    sim = af.Simulator(model, af.tokens.uniform(2, 4, 3, seed=0), af.heads.identity(2, 2, 3), dt=0.01)
    with pytest.raises(ValueError, match=r"z must have shape \(P, H, d, d\)"):
        sim.step(torch.zeros(2, 3, 3, 3))


def test_run_audit_quick_writes_json_and_table(tmp_path, capsys) -> None:
    path = tmp_path / "edi.json"
    table = check_edi_cli(str(path), True, [2], ["frozen"])
    assert capsys.readouterr().out.strip() == table.strip()
    payload = json.loads(path.read_text())
    assert payload["quick"] is True and len(payload["rows"]) == 2  # symmetric and non-symmetric heads
    assert "n = 12" in table and "| 2 | frozen | sym |" in table and "| 2 | frozen | non-sym |" in table
    assert table == payload["markdown"]
    assert run_audit(None, quick=True, H=[1], weights=["frozen"]).count("\n| 1 |") == 2


@pytest.mark.parametrize("threads,expected_inside", [(1, 1), (None, 3)])
def test_run_audit_runs_with_the_thread_count_it_reports_and_restores_the_callers(
    tmp_path, monkeypatch, threads, expected_inside
) -> None:
    # The caller's count (3) differs from the audit's (1), so both the switch and the restore are
    # observed; the spy reads the count while the audit's rows are computed.
    real = edi.check_edi_table
    seen: list[int] = []

    def spy(configs):
        seen.append(torch.get_num_threads())
        if torch.get_num_threads() != 1:  # do not run the cases with a contended pool
            return canned
        return real(configs)

    canned = real(audit_configs(True, [1], ["frozen"]))
    monkeypatch.setattr(edi, "check_edi_table", spy)
    saved = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        path = tmp_path / "edi.json"
        run_audit(path, quick=True, H=[1], weights=["frozen"], threads=threads)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(saved)
    assert seen == [expected_inside]
    assert json.loads(path.read_text())["torch_threads"] == expected_inside
    assert after == 3
