"""Review round 9 of the ``real_model_flows`` verdicts (review9_findings.md; rules declared 2026-12-04,
round 9, in the config): a 'follows' value that fails over all depths stands where too few depths have
room (F2, ``room_fail_stands``); a fitted-time fail that a constant time of the fit's own grid beats is the
fit objective's (F1, ``fit_grid_check``); a margin above the threshold is reported, not combined (F7,
``margin_within_threshold``). Fake per-sentence profiles only; the values are checked against NumPy."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from flows_helpers import fake_family, records_by_id

pytest.importorskip("torch")
pytest.importorskip("transformers")

B = 20
_recs = partial(records_by_id, bootstrap=B)


def _set_cos(res: dict, src: str, depths: list[float], seed: int = 0) -> None:
    a = res["stats"]["sphere"][src]["cos"]
    noise = 0.005 * np.random.default_rng(seed).standard_normal((a.shape[0], len(depths)))
    a[:, 1:] = np.minimum(np.asarray(depths) + noise, 1.0)


def _gap(m: np.ndarray, f: np.ndarray) -> float:
    """The independent reference: mean over depths 1..L of |flow - reference| mean cosine."""
    return float(np.mean(np.abs(np.asarray(f, float).mean(0)[1:] - np.asarray(m, float).mean(0)[1:])))


def test_f2_a_follows_value_that_fails_over_all_depths_stands_without_room():
    """A reference at 0.40 / 0.95 / 0.95 (1 of 3 depths with room for 0.1, 2 needed) and an MLP flow at
    0.10 / 0.60 / 0.60, 0.3-0.35 off at every depth: round 8 read it 'no headroom'; it fails over all
    depths, and a collapse-level reference voids only a 'holds', so round 9 says fails."""
    res = fake_family({}, trend=0.1)
    _set_cos(res, "model", [0.40, 0.95, 0.95])
    _set_cos(res, "mlp", [0.10, 0.60, 0.60], seed=1)
    m, f = res["stats"]["sphere"]["model"]["cos"], res["stats"]["sphere"]["mlp"]["cos"]
    r = _recs(res)["mlp-cos"]
    assert r.verdict == "fails"
    assert r.result["value"] == pytest.approx(_gap(m, f), abs=1e-9)
    rf = r.result["room_fail_stands"]
    assert (rf["depths_with_room"], rf["depths"], rf["min_depths"]) == (1, 3, 2)
    assert rf["ci95"][0] > 0.1
    assert ("a reference with no room voids a 'holds', and a fail over its depths with room alone, not a "
            "fail over all depths (config room_fail_stands") in r.notes  # fmt: skip
    # review round 10, F4: the controls are scored on the same all-depth quantity as the value
    still = np.repeat(np.asarray(m)[:, :1], np.asarray(m).shape[1], axis=1)
    ss = r.result["stand_still"]
    assert ss["value"] == pytest.approx(_gap(m, still), abs=1e-9)
    assert ss["paired_test"]["value"] == pytest.approx(_gap(m, f) - _gap(m, still), abs=1e-9)
    old = _recs(res, room_fail_stands=False)["mlp-cos"]
    assert old.verdict == "inconclusive" and "no headroom" in old.result["reading"]


def test_f2_a_follows_value_that_holds_without_room_stays_no_headroom():
    """The same reference, a flow within 0.02 of it: a collapse would follow it too; still 'no headroom'."""
    res = fake_family({}, trend=0.1)
    _set_cos(res, "model", [0.40, 0.95, 0.95])
    _set_cos(res, "mlp", [0.42, 0.97, 0.97], seed=1)
    r = _recs(res)["mlp-cos"]
    assert r.verdict == "inconclusive" and "no headroom" in r.result["reading"]
    assert "room_fail_stands" not in r.result


def test_f1_a_fitted_time_fail_beaten_by_a_constant_time_of_its_grid_is_the_fit_objectives():
    """(c) 0.3 above the model (fails 0.1); flow (a), T = 1, is the model itself (gap 0) and standing still
    misses by 0.2: both beat the fit, so the fail is the fit objective's (inconclusive), both values given."""
    res = fake_family({"fitted_time": 0.3, "attention": 0.0})
    r = _recs(res)["fitted-time-cos"]
    assert r.verdict == "inconclusive"
    assert r.result["unmeasured_main"].startswith("fit objective: the fitted times (token-wise agreement")
    g = r.result["fit_grid"]
    rep = np.asarray(res["fitted"][0]["report"])
    m = np.asarray(res["stats"]["sphere"]["model"]["cos"])[rep]
    a = np.asarray(res["stats"]["sphere"]["attention"]["cos"])[rep]
    still = np.repeat(m[:, :1], m.shape[1], axis=1)
    assert g["values"]["T = 1 (flow (a))"]["value"] == pytest.approx(_gap(m, a), abs=1e-9)
    assert g["values"]["T = 0 (standing still)"]["value"] == pytest.approx(_gap(m, still), abs=1e-9)
    assert sorted(g["better_than_fit"]) == ["T = 0 (standing still)", "T = 1 (flow (a))"]
    assert g["holds_the_criterion"] == ["T = 1 (flow (a))"]  # standing still (0.2) fails the threshold 0.1
    assert r.result["outcome_if_measured"] == "fails"
    old = _recs(res, fit_grid_check=False)["fitted-time-cos"]
    assert old.verdict == "fails" and "fit_grid" not in old.result


def test_f1_a_fitted_time_fail_that_no_constant_time_beats_stands():
    """(c) 0.15 off (fails 0.1); standing still misses by 0.2, (a) by 0.4: the fit is the best of the three,
    its fail stands, with the grid's values recorded."""
    res = fake_family({"fitted_time": 0.15, "attention": 0.4})
    r = _recs(res)["fitted-time-cos"]
    assert r.verdict == "fails"
    g = r.result["fit_grid"]
    assert g["better_than_fit"] == []
    assert g["values"]["T = 0 (standing still)"]["value"] == pytest.approx(0.2, abs=0.02)
    assert g["values"]["T = 1 (flow (a))"]["value"] == pytest.approx(0.4, abs=1e-9)
    assert "the fitted times (token-wise agreement" in r.notes


def test_f1_a_fitted_time_fail_whose_better_constant_times_fail_too_stands():
    """(c) 0.3 off; (a) 0.25 and standing still 0.2 are better but fail the threshold 0.1 as well: the flow
    fails at every time checked, so the fail stands."""
    res = fake_family({"fitted_time": 0.3, "attention": 0.25})
    r = _recs(res)["fitted-time-cos"]
    assert r.verdict == "fails"
    g = r.result["fit_grid"]
    assert sorted(g["better_than_fit"]) == ["T = 0 (standing still)", "T = 1 (flow (a))"]
    assert g["holds_the_criterion"] == []
    assert "the fit is worse than T = 0 (standing still) and T = 1 (flow (a))" in r.notes


def test_f1_a_constant_time_below_the_threshold_only_by_its_point_estimate_does_not_cancel_a_fail():
    """Review round 10, F1: (a) at 0.095 over the model with a wide spread across sentences (interval across
    0.1): it beats the fit (0.3) but does not hold the criterion, so the fitted-time fail stands."""
    res = fake_family({"fitted_time": 0.3, "attention": 0.095})
    a = res["stats"]["sphere"]["attention"]["cos"]
    a[:, 1:] += 0.08 * np.random.default_rng(5).standard_normal(a[:, 1:].shape)
    r = _recs(res)["fitted-time-cos"]
    t1 = r.result["fit_grid"]["values"]["T = 1 (flow (a))"]
    assert t1["value"] < r.result["value"] and t1["ci95"][0] <= 0.1 < t1["ci95"][1]
    assert t1["outcome"] != "holds" and r.verdict == "fails"


def test_f7_a_margin_above_the_threshold_is_reported_not_combined():
    """A flat model and (a) 0.12 above it: over-clusters by 0.12 >= 0.1, and exceeds standing still by 0.12:
    it passes the margin 0.1 and x0.5 (0.05) but not x1.5 (0.15 > the threshold 0.1). Round 8 said 'depends
    on stand-still margin'; round 9 combines only the margins within the threshold: holds, x1.5 reported."""
    res = fake_family({"attention": 0.12}, trend=0.0)
    r = _recs(res, margin_within_threshold=True)["attention-overclusters"]
    assert r.verdict == "holds"
    assert r.result["margin_variants"]["x1.5 (0.15)"] == "fails"
    nc = r.result["margin_variants_not_combined"]
    assert nc["variants"] == ["x1.5 (0.15)"] and "stronger claim" in nc["why"]
    # off by default since review round 10 (F5: with x1.5 dropped the check could never challenge a holds)
    assert _recs(res)["attention-overclusters"].verdict == "depends on stand-still margin"
