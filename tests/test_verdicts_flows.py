"""The verdict records of the flow studies (issue 25): each study's record builder, fed a synthetic result
that violates its claim, says "fails" (and one that satisfies it says "holds"); identities are never tests.

Studies: ``entropy``, ``monotonicity``, ``sufficient_condition``, ``numerics_checks``, ``jko_stability``,
``layer_scaling``. The builders are pure functions of the numbers, so no simulation runs here.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnflow.analysis.verdicts import VerdictRecord, count_records
from attnflow.studies import get_study
from attnflow.studies.jko_stability import records as jko_records
from attnflow.studies.layer_scaling import records as layer_scaling_records
from attnflow.studies.multihead_common import binomial_ci, verdict_tables
from attnflow.studies.multihead_entropy import entropy_records, entropy_statistics
from attnflow.studies.multihead_flows import (
    configs_needed,
    monotonicity_records,
    sufficient_condition_records,
)
from attnflow.studies.numerics_checks import numerics_records


def _by_id(records):
    return {r.id: r for r in records}


# -- binomial intervals ---------------------------------------------------------------------------------
def test_binomial_ci_is_clopper_pearson():
    # closed forms of the exact interval at the edges: k = 0 gives [0, 1 - 0.025^(1/m)]
    lo, hi = binomial_ci(0, 1000)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 1000), rel=1e-9)
    lo, hi = binomial_ci(1000, 1000)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 1000), rel=1e-9)
    lo, hi = binomial_ci(300, 1000)
    assert lo < 0.3 < hi and hi - lo < 0.06  # +- 1.96 sqrt(0.21/1000) = 0.028 each side


@pytest.mark.parametrize(("k", "m"), [(-1, 10), (11, 10), (0, 0)])
def test_binomial_ci_refuses_bad_counts(k, m):
    with pytest.raises(ValueError, match="binomial_ci needs 0 <= k <= m"):
        binomial_ci(k, m)


# -- entropy --------------------------------------------------------------------------------------------
def _entropy_run(P=1000, falling=0, K=50, seed=0):
    """A synthetic run: every cloud's mean entropy rises, ``falling`` clouds dip once at a late record."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 10, K)
    rate = np.exp(-t)[:, None] * (1 + rng.random((K, P)))
    rate[K - 5, :falling] = -0.5
    S = np.cumsum(rate, axis=0) * (t[1] - t[0])
    return {
        "t": t, "mean_S": S, "mean_rate": rate, "row_rate_min": rate.copy(),
        "row_rate_scale": np.abs(rate).max(0), "received_S": S.copy(), "clusters": np.ones(P, int),
        "n": 16, "fd_error": 1e-3,
    }  # fmt: skip


def _entropy_stats(run, config):
    tol = config.decrease_tol
    defs = ("mean_row_rate", "mean_row_differences", "every_row_rate", "received_differences")
    base = entropy_statistics(run, "mean_row_rate", tol)
    return {
        "base": base,
        "robustness": {
            "entropy definition": {
                "values": list(defs), "stats": [entropy_statistics(run, d, tol) for d in defs]
            },
            "horizon": {"values": [5.0, 10.0], "stats": [entropy_statistics(run, "mean_row_rate", tol, h)
                                                          for h in (5.0, 10.0)]},
            "dt": {"values": [0.01, 0.005], "stats": [base, base]},
        },
        "equiangular": [{"max_abs_S_particles_vs_reduced": 1e-10, "min_rate": 0.01}],
        "base_run": {"fd_error": 1e-3, "final": {"S_final_over_log_n_mean": 1.0}},
    }  # fmt: skip


def test_entropy_verdict_fails_when_a_third_of_the_clouds_decrease():
    config = get_study("entropy").config()
    recs = _by_id(entropy_records(_entropy_stats(_entropy_run(falling=333), config), config))
    r = recs["entropy-monotone-random-starts"]
    assert r.klass == "test" and r.result["outcome"] == "fails"
    # the late dip is missed by a horizon that ends before it: that choice disagrees, so the record says so
    assert r.verdict == "depends on horizon"
    assert r.result["last_decrease_time"]["max"] > 9
    assert recs["entropy-monotone-equiangular"].verdict == "identity"
    assert recs["entropy-production-identity"].verdict == "identity"


def test_entropy_verdict_holds_for_a_monotone_world_and_not_for_sixteen_clouds():
    config = get_study("entropy").config()
    r = _by_id(entropy_records(_entropy_stats(_entropy_run(), config), config))[
        "entropy-monotone-random-starts"
    ]
    assert r.verdict == "holds" and r.result["ci95"][1] < 0.01
    # 0 of 16 cannot support "at most 1%": the Clopper-Pearson interval reaches 0.21
    r16 = _by_id(entropy_records(_entropy_stats(_entropy_run(P=16), config), config))
    assert r16["entropy-monotone-random-starts"].verdict == "inconclusive"


def test_entropy_definitions_differ_on_a_dip_of_one_row():
    run = _entropy_run(P=10)
    run["row_rate_min"][20, :4] = -1.0  # four clouds have one row falling while the mean rises
    assert entropy_statistics(run, "every_row_rate", 1e-6)["decreasing"] == 4
    assert entropy_statistics(run, "mean_row_rate", 1e-6)["decreasing"] == 0
    with pytest.raises(ValueError, match="unknown entropy definition 'nope'"):
        entropy_statistics(run, "nope", 1e-6)


# -- monotonicity ---------------------------------------------------------------------------------------
def _mono_rows(dt, *, multi=0, head=400, radial=None):
    rows = []
    for fam in ("symmetric", "orthogonal", "identical", "approx_orthogonal"):
        for kind in ("usa", "softmax"):
            for geo in ("sphere", "flat"):
                het = fam != "identical" and kind == "softmax"
                orth_sphere = fam in ("orthogonal", "symmetric") and geo == "sphere"
                h = head if orth_sphere else 0
                r_ = h if radial is None else radial
                rows.append({
                    "dt": dt, "family": fam, "attention": kind, "geometry": geo, "max_move_per_step": 0.05,
                    "multi_configs_violating": multi if het else 0, "multi_worst_relative": 0.0,
                    "head_configs_violating": h,
                    "responsible": {"radial_term": r_, "cross_term": h - r_},
                })  # fmt: skip
    return rows


def test_monotonicity_records_fail_on_a_world_where_the_claims_are_false():
    # 400 configurations: 0/400 has the upper bound 0.009, below both thresholds (0/64 would be inconclusive)
    c = get_study("monotonicity").config({"configs": 400})
    # claim 1 false for SA heterogeneous heads (400/400 decrease); claim 2 false: no per-head violation
    rows = {dt: _mono_rows(dt, multi=400, head=0) for dt in (0.01, 0.005, 0.0025)}
    recs = _by_id(monotonicity_records(rows, c))
    assert recs["multi-energy-monotone-softmax-sphere"].verdict == "fails"
    assert recs["multi-energy-monotone-softmax-flat"].verdict == "fails"
    assert recs["per-head-monotonicity-fails-orthogonal-sphere-usa"].verdict == "fails"
    # the culprit share has no contrast (non-violating pairs are not counted): a description with its numbers
    recs = _by_id(monotonicity_records({dt: _mono_rows(dt, head=240, radial=0) for dt in (0.01, 0.005)}, c))
    culprit = recs["radial-shadow-responsible-softmax"]
    assert culprit.verdict == "description"
    assert culprit.result["by_dt"]["0.01"] == {"radial": 0, "pairs": 240}
    assert culprit.result["by_family"]["symmetric"] == {"radial": 0, "pairs": 240}
    assert recs["multi-energy-monotone-usa"].verdict == "identity"
    assert recs["per-head-monotone-orthogonal-flat"].verdict == "identity"
    assert recs["radial-shadow-only-negative-term-orthogonal-usa"].verdict == "identity"


def test_monotonicity_verdict_depends_on_dt_when_the_violations_vanish_at_small_steps():
    c = get_study("monotonicity").config({"configs": 400})
    rows = {0.01: _mono_rows(0.01, multi=40), 0.005: _mono_rows(0.005, multi=0), 0.0025: _mono_rows(0.0025)}
    r = _by_id(monotonicity_records(rows, c))["multi-energy-monotone-softmax-sphere"]
    assert r.verdict.startswith("depends on") and "dt" in r.verdict
    # with 64 configurations 0/64 cannot show "at most 1%": the same world is inconclusive
    c64 = get_study("monotonicity").config()
    rows = {dt: _mono_rows(dt, multi=0, head=64) for dt in (0.01, 0.005)}
    assert (
        _by_id(monotonicity_records(rows, c64))["multi-energy-monotone-softmax-sphere"].verdict
        == "inconclusive"
    )


def _scale_row(k):
    return {"multi_configs_violating": k}


def test_monotonicity_sphere_record_depends_on_the_head_scale():
    # 0/400 at small heads (holds), 160/400 at |M| = 6 (fails): the record names the head scale
    c = get_study("monotonicity").config({"configs": 400})
    rows = {dt: _mono_rows(dt, multi=160) for dt in (0.01, 0.005)}
    scales = {1.0: _scale_row(0), 1.5: _scale_row(0), 3.0: _scale_row(0), 6.0: _scale_row(160)}
    r = _by_id(monotonicity_records(rows, c, scales))["multi-energy-monotone-softmax-sphere"]
    assert r.verdict == "depends on head scale beta |M_h|"
    chk = [x for x in r.robustness if x.choice == "head scale beta |M_h|"][0]
    assert chk.outcomes == ["holds", "holds", "holds", "fails"]
    assert "suitable conditions" in r.statement and "{1.0: 0, 1.5: 0, 3.0: 0, 6.0: 160}" in r.notes
    # every scale fails: the record fails
    scales = {s: _scale_row(160) for s in scales}
    assert (
        _by_id(monotonicity_records(rows, c, scales))["multi-energy-monotone-softmax-sphere"].verdict
        == "fails"
    )


def test_monotonicity_flat_main_value_from_the_large_row_and_its_power():
    # 64 configurations in the dt / family rows, 400 in the flat row: 0/400 holds, the 0/64 values stay
    # inconclusive, so the record is inconclusive but its main value holds and the notes give the power
    c = get_study("monotonicity").config()
    rows = {dt: _mono_rows(dt, multi=0, head=64) for dt in (0.01, 0.005)}
    flat = {"multi_configs_violating": 0, "dt": 0.0025, "max_move_per_step": 0.04, "blew_up": False}
    r = _by_id(monotonicity_records(rows, c, None, flat))["multi-energy-monotone-softmax-flat"]
    assert r.result["outcome"] == "holds" and r.uncertainty["samples"] == 400
    assert f"m >= {configs_needed(0.01)}" in r.notes and "the main value has m = 400" in r.notes
    flat["multi_configs_violating"] = 40
    r = _by_id(monotonicity_records(rows, c, None, flat))["multi-energy-monotone-softmax-flat"]
    assert r.result["outcome"] == "fails"
    s = _by_id(monotonicity_records(rows, c))["multi-energy-monotone-softmax-sphere"]
    assert "can only read 'fails' or 'inconclusive'" in s.notes


def test_configs_needed_is_the_least_deciding_sample():
    from attnflow.studies.multihead_common import binomial_ci

    m = configs_needed(0.01)
    assert binomial_ci(0, m)[1] < 0.01 <= binomial_ci(0, m - 1)[1]
    assert 300 < m < 400  # 1 - 0.025^(1/m) < 0.01 gives m ~ ln(40) / 0.01 = 369
    with pytest.raises(ValueError, match="needs more than 10 configurations"):
        configs_needed(0.01, cap=10)


# -- sufficient_condition -------------------------------------------------------------------------------
def _suff_rows(order=1.0, violating=0.0):
    eps = [0.0, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0]
    rows = []
    for e in eps:
        flat = {
            "cross_over_self_max": 30 * e**order,
            "cross_over_self_median": 3 * e**order,
            "violating_fraction": violating,
        }
        sph = {"radial_neg_over_self_max": 2.0, "violating_fraction": 0.03}
        rows.append({"eps": e, "usa_flat": flat, "softmax_flat": flat, "usa_sphere": sph,
                     "softmax_sphere": sph,
                     "S2": {"condition_fraction": 1.0, "violations_with_condition": 0}})  # fmt: skip
    return rows


def test_sufficient_condition_records_fail_on_a_square_root_defect_and_on_violations():
    c = get_study("sufficient_condition").config()
    good = _by_id(sufficient_condition_records(_suff_rows(), c))
    assert good["s1-cross-term-order-in-defect"].verdict == "holds"
    assert good["s1-per-head-monotone-under-defect"].verdict == "holds"
    bad = _by_id(sufficient_condition_records(_suff_rows(order=0.5, violating=0.2), c))
    assert bad["s1-cross-term-order-in-defect"].verdict == "fails"
    assert bad["s1-per-head-monotone-under-defect"].verdict == "fails"
    assert bad["s2-implication"].verdict == "identity"
    # monotone at uniform states, violated at clustered ones: the record says which choice decides
    mixed = _by_id(sufficient_condition_records(_suff_rows(), c, clustered=_suff_rows(violating=0.2)))
    assert mixed["s1-per-head-monotone-under-defect"].verdict == "depends on token states"
    # the large robust rows decide the main value and the token-states check (2000 states)
    rob = (_suff_rows(violating=0.0013), _suff_rows(violating=0.0163))
    r = _by_id(sufficient_condition_records(_suff_rows(), c, _suff_rows(), robust=rob))[
        "s1-per-head-monotone-under-defect"
    ]
    assert r.uncertainty["samples"] == 3 * c.robust_configs and r.result["outcome"] == "holds"
    assert r.verdict == "depends on token states"
    # fresh heads per eps with a square-root order: the order record names that choice
    r = _by_id(sufficient_condition_records(_suff_rows(), c, fresh=_suff_rows(order=0.5)))[
        "s1-cross-term-order-in-defect"
    ]
    assert r.verdict == "depends on heads across eps (same: the study's; fresh per eps)"
    assert "p = 0.500" in r.notes


# -- numerics_checks ------------------------------------------------------------------------------------
def _num_res(lie_slope=None, heat=0.003, memory=0.0):
    def lie(shift=0.0):
        out = {}
        for name, p in (("lie_euler", 1), ("rkmk2", 2), ("rkmk4", 4)):
            b = (lie_slope if lie_slope is not None else p) + shift
            out[name] = {"dts": [0.1, 0.05, 0.025], "errors": [1e-3, 1e-4, 1e-5], "order": b,
                         "order_ci": [b - 0.02, b + 0.02], "declared": p}  # fmt: skip
        return out

    order = {
        "dts": [0.1, 0.05, 0.025],
        "errors": [1e-2, 5e-3, 2.5e-3],
        "order": 1.0,
        "order_ci": [0.97, 1.03],
    }
    hk = [{"d": d, "dt": dt, "l": l, "mean": 0.37, "exact": 0.37 - heat, "difference": heat,
           "ci95": [heat - 0.005, heat + 0.005], "samples": 16000}
          for d, dt, l in ((3, 0.05, 1), (3, 0.025, 1), (3, 0.05, 2), (2, 0.05, 1))]  # fmt: skip
    mem = {
        "steps": [8, 16, 32],
        "saved_bytes": [1, 2, 4],
        "exponent": memory,
        "exponent_ci": [memory, memory],
    }
    auto = {"steps": [8, 16, 32], "saved_bytes": [1, 2, 4], "exponent": 1.0, "exponent_ci": [0.99, 1.01]}
    return {
        "lie": {"softmax": lie(), "softmax_half": lie(), "softmax_scale2": lie()},
        "jko": {"softmax": order, "usa": order},
        "heat": hk,
        "memory": {"adjoint": mem, "autograd": auto},
        "first_variation": 3e-16,
    }


def test_numerics_records_hold_on_the_declared_orders_and_fail_otherwise():
    c = get_study("numerics_checks").config()
    good = _by_id(numerics_records(_num_res(), c))
    assert all(good[k].verdict == "holds" for k in good if good[k].klass == "test"), {
        k: r.verdict for k, r in good.items()
    }
    # the control (plain autograd) fails the memory criterion in every world
    assert good["adjoint-memory-constant-in-depth"].result["control_autograd"]["outcome"] == "fails"
    bad = _by_id(numerics_records(_num_res(lie_slope=0.5, heat=0.2, memory=1.0), c))
    for k in (
        "lie-order-rkmk2",
        "lie-order-rkmk4",
        "brownian-tokens-heat-kernel",
        "adjoint-memory-constant-in-depth",
    ):
        assert bad[k].verdict == "fails", (k, bad[k].verdict)
    assert good["training-first-variation"].verdict == "identity"


# -- identities of jko_stability and layer_scaling ------------------------------------------------------
def test_jko_and_layer_scaling_are_identities_and_descriptions_only():
    jko_summary = {
        "results": {
            "euler_dt0p5": {"method": "euler", "dt": 0.5, "min_energy_increment": -0.1, "monotone": False,
                            "energy_T": 1.2},
            "jko_dt0p5": {"method": "jko", "dt": 0.5, "min_energy_increment": 0.0, "monotone": True,
                          "energy_T": 1.85},
        },
        "euler_limit": 0.25,
    }  # fmt: skip
    per_h = {"1": {"depth_exponent": {"mean": 0.1}, "mean_inner_product_T": {"mean": 0.02}}}
    ls_summary = {
        "variants": {"ascent_scaled": {"per_H": per_h, "fit_M_T_vs_H": {"b": -0.97, "b_ci": [-1, -0.9]}}}
    }
    recs = jko_records(jko_summary) + layer_scaling_records(ls_summary)
    counts = count_records(recs)
    assert counts["class"]["test"] == 0 and counts["class"]["identity"] == 3
    for r in recs:
        VerdictRecord.model_validate(r.to_json())


def test_verdict_table_lists_every_record_with_its_robustness():
    c = get_study("sufficient_condition").config()
    recs = sufficient_condition_records(_suff_rows(), c)
    verdicts, robustness = verdict_tables(recs, ".3g", robustness=True)
    assert [r["id"] for r in verdicts.rows] == [r.id for r in recs]
    first = verdicts.rows[0]
    assert (first["id"], first["verdict"]) == ("s1-cross-term-order-in-defect", "holds")
    n_values = sum(len(ch.values) for r in recs for ch in r.robustness)
    assert len(robustness.rows) == n_values
    assert any(r["choice"].startswith("eps fit range") for r in robustness.rows)


# -- refusals -------------------------------------------------------------------------------------------
def test_bad_inputs_of_the_flow_studies_are_refused(monkeypatch):
    import torch

    import attnflow.studies.numerics_checks as nc
    from attnflow.studies.multihead_entropy import random_start_run
    from attnflow.studies.multihead_flows import _every

    cfg = get_study("numerics_checks").config(quick=True).model_dump(mode="json")
    with pytest.raises(ValueError, match="unknown numerics task kind 'nope'"):
        nc.numerics_task(cfg, "nope")
    from attnflow.studies.multihead_flows import sufficient_condition_rows

    with pytest.raises(ValueError, match="states must be 'uniform' or 'clustered': got 'x'"):
        sufficient_condition_rows(get_study("sufficient_condition").config(quick=True), "x")
    with pytest.raises(ValueError, match="record spacing / dt must be a whole number"):
        _every(0.1, 0.03)
    with pytest.raises(ValueError, match="record_spacing / dt must be a whole number"):
        random_start_run(clouds=2, n=4, beta=1.0, heads="identity", scale=1.0, spread=0.0, t1=0.1, dt=0.03,
                         record_spacing=0.1, seed=0)  # fmt: skip

    class Failed:
        success, message = False, "step size too small"

    import attnflow.analysis.numerics_checks as anc

    monkeypatch.setattr(anc, "solve_ivp", lambda *a, **k: Failed())
    x0 = torch.eye(3, dtype=torch.float64)[None]
    with pytest.raises(RuntimeError, match="the DOP853 reference failed: step size too small"):
        anc._reference_solution("softmax", 1.0, x0, torch.zeros(1, 1, 3, 3, dtype=torch.float64), 0.1)


def test_the_flow_studies_plan_computations():
    for name in ("entropy", "monotonicity", "sufficient_condition", "numerics_checks"):
        plan = get_study(name).plan(get_study(name).config(quick=True))
        assert plan and all(t.kind == "compute" for t in plan.values()), name
    plan = get_study("monotonicity").plan(get_study("monotonicity").config())
    assert sorted(t.params["dt"] for t in plan.values() if "dt" in t.params) == [0.0025, 0.005, 0.01]
    assert {"head_scales", "flat_multi"} <= set(plan)  # the head-scale check and the 400-config flat row
    plan = get_study("sufficient_condition").plan(get_study("sufficient_condition").config())
    assert {"rows_fresh_heads", "robust_uniform", "robust_clustered"} <= set(plan)
    assert plan["robust_uniform"].params["config"]["configs"] == 2000


# -- review notes: computed from the numbers, not written by hand ---------------------------------------
def test_numerics_notes_give_the_ranges_and_the_power_of_the_heat_band():
    c = get_study("numerics_checks").config()
    res = _num_res()
    # a declared range whose slope interval straddles the band edge, a halved range that decides
    res["lie"]["softmax"]["rkmk4"] = {**res["lie"]["softmax"]["rkmk4"], "order": 4.1, "order_ci": [3.9, 4.3]}
    recs = _by_id(numerics_records(res, c))
    r4 = recs["lie-order-rkmk4"]
    assert r4.verdict == "inconclusive" and "the declared steps are coarse" in r4.notes
    assert "p = 4.100 [3.900, 4.300]" in r4.notes and "p = 4.000 [3.980, 4.020]" in r4.notes
    assert "coarse" not in recs["lie-order-rkmk2"].notes  # its declared range decides
    # heat: ci half-width 0.005 -> se = 0.005 / 1.96; band 0.02 is 7.8 se; exact 0.367, l(l+d-2) eps t = 1:
    # a relative error 0.02 / 0.367 = 5.4% in the diffusion constant stays inside the band
    heat = recs["brownian-tokens-heat-kernel"].notes
    assert "7.8 standard errors" in heat and "off by up to 5.4%" in heat


def test_entropy_note_names_the_symmetric_heads_value():
    config = get_study("entropy").config()
    stats = _entropy_stats(_entropy_run(), config)
    r = _by_id(entropy_records(stats, config))["entropy-monotone-random-starts"]
    assert r.notes == ""  # no symmetric-heads value, no note
    stats["robustness"]["heads"] = {"values": ["symmetric"], "stats": [entropy_statistics(
        _entropy_run(falling=333), "mean_row_rate", config.decrease_tol)]}  # fmt: skip
    r = _by_id(entropy_records(stats, config))["entropy-monotone-random-starts"]
    assert "(333/1000 clouds decreasing" in r.notes and "need not bring the cloud to one cluster" in r.notes
