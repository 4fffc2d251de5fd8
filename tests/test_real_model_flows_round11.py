"""Review round 11 of the ``real_model_flows`` verdicts (review11_findings.md; rules declared 2026-12-04,
round 11, in the config): a 'follows' record whose perfect flow would not pass the paired stand-still test
could not have held, and a null that holds is then no contrast to its fail (F5, ``holds_reachable_check``);
the fitted-time statement names its fit (F3, F8, ``statement_names_fit``). Fake per-sentence profiles only;
the values are checked against NumPy."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from flows_helpers import fake_family, records_by_id

pytest.importorskip("torch")
pytest.importorskip("transformers")

B = 20
_recs = partial(records_by_id, bootstrap=B)


def _gap(m: np.ndarray, f: np.ndarray) -> float:
    """The independent reference: mean over depths 1..L of |flow - reference| mean cosine."""
    return float(np.mean(np.abs(np.asarray(f, float).mean(0)[1:] - np.asarray(m, float).mean(0)[1:])))


def _null(vid: str, verdict: str, value: float) -> dict:
    entry = {vid: {"verdict": verdict, "value": value}}
    return {"null_outcomes": {"tiny-bert": {"tiny-bert-permuted": entry}}}


def test_f5_a_model_that_barely_moves_leaves_no_room_to_hold():
    """The model's mean cosine rises by 0.02 a layer: standing still misses it by 0.04 on average, under the
    stand-still margin 0.1, so even the model itself is 'no better than standing still': the MLP flow, 0.3
    off, fails and says it could not have held; a null that holds the claim is no contrast."""
    res = fake_family({"mlp": 0.3}, trend=0.02)
    m = np.asarray(res["stats"]["sphere"]["model"]["cos"])
    still = np.repeat(m[:, :1], m.shape[1], axis=1)
    r = _recs(res)["mlp-cos"]
    assert r.verdict == "fails"
    hr = r.result["holds_reachable"]
    assert hr["reachable"] is False
    assert hr["perfect_minus_stand_still"]["value"] == pytest.approx(-_gap(m, still), abs=1e-9)
    assert hr["perfect_minus_stand_still"]["ci95"][1] > -0.1
    assert "could not have held" in r.notes
    # review round 12, F7: a fail's contrast is a null that does not fail; the label is unchanged
    lab = _recs(res, summary=_null("mlp-cos", "holds", 0.05))["mlp-cos"].result["null_specificity"]
    assert lab.startswith("fails; specific to training (holds in null")
    old = _recs(res, holds_reachable_check=False)["mlp-cos"]
    assert "holds_reachable" not in old.result and "could not have held" not in old.notes
    # a null that fails too: 'not specific'
    both = _recs(res, summary=_null("mlp-cos", "fails", 0.4))["mlp-cos"].result["null_specificity"]
    assert both.startswith("fails, not specific to training (also fails in null")


def test_f5_a_model_that_moves_leaves_room_to_hold():
    """The model's mean cosine rises by 0.1 a layer (standing still misses by 0.2): the perfect flow passes
    the paired test, the record could hold, and a null that holds makes the fail specific to training."""
    res = fake_family({"mlp": 0.3}, trend=0.1)
    r = _recs(res, summary=_null("mlp-cos", "holds", 0.05))["mlp-cos"]
    assert r.verdict == "fails"
    assert r.result["holds_reachable"]["reachable"] is True
    assert r.result["holds_reachable"]["perfect_minus_stand_still"]["ci95"][1] <= -0.1
    assert "could not have held" not in r.notes
    assert r.result["null_specificity"].startswith("fails; specific to training (holds in null")


def test_f3_f8_the_fitted_time_statement_names_its_fit():
    res = fake_family({"fitted_time": 0.3, "attention": 0.3})
    r = _recs(res)["fitted-time-cos"]
    assert "by the teacher-forced fit (T_l maximising token-wise agreement" in r.statement
    assert "a fail is this fit's, not that of every per-layer time" in r.statement
    old = _recs(res, statement_names_fit=False)["fitted-time-cos"]
    assert "teacher-forced" not in old.statement
    assert old.verdict == r.verdict and old.result["value"] == r.result["value"]


def test_f5_the_reading_beside_the_verdict_says_it_could_not_have_held():
    res = fake_family({"mlp": 0.3}, trend=0.02)
    r = _recs(res)["mlp-cos"]
    want = "the declared value could not have held (the reference itself beats standing still by only 0.0"
    assert want in r.result["reading"]
    moving = _recs(fake_family({"mlp": 0.3}, trend=0.1))["mlp-cos"]
    assert "could not have held" not in moving.result["reading"]


def _set_cos(res: dict, src: str, depths: list[float], seed: int = 0) -> None:
    a = res["stats"]["sphere"][src]["cos"]
    noise = 0.005 * np.random.default_rng(seed).standard_normal((a.shape[0], len(depths)))
    a[:, 1:] = np.minimum(np.asarray(depths) + noise, 1.0)


def _no_room_network(arch: str) -> dict:
    """(n) at 0.40 / 0.95 / 0.95 (1 of 3 depths with room for 0.1, 2 needed), flow (f) 0.3-0.35 below it."""
    res = fake_family({}, trend=0.1)
    res["model"]["arch"] = arch
    _set_cos(res, "no_mlp", [0.40, 0.95, 0.95])
    _set_cos(res, "frames", [0.10, 0.60, 0.60], seed=1)
    return res


SC = {
    "K": 16, "source": "review/round11/scale_check_x_K16.json", "margin": 0.1,
    "flow_at_model_scale": {"value": 0.255, "ci95": [0.222, 0.284]},
    "flow_at_n_scale": {"value": 0.030, "ci95": [0.023, 0.038]},
    "collapse": {"value": 0.046, "ci95": [0.040, 0.054]},
    "flow_at_n_scale_minus_collapse": {"value": -0.017, "ci95": [-0.018, -0.015]},
}  # fmt: skip


def test_f1_a_pre_ln_record_against_the_no_mlp_network_names_the_scale_and_keeps_its_fail():
    """Round 11 kept the pre-LN fail from standing without room; review round 12 (F1): a rule that could only
    remove fails. Now the statement names the scale, the reading gives the stored scale check, and the
    all-depth fail stands as in a post-LN model (room_fail_stands)."""
    vid = "frames-follows-network-cos"
    post = _recs(_no_room_network("post_ln"))[vid]
    assert post.verdict == "fails" and "room_fail_stands" in post.result
    assert "stream scale" not in post.statement
    fams = {"families": {"tiny-bert": {"scale_source_check": SC}}}
    pre = _recs(_no_room_network("pre_ln"), summary=fams)[vid]
    assert pre.verdict == "fails" and "room_fail_stands" in pre.result
    assert pre.result["value"] == post.result["value"]
    want = "stream scale rho_l (its 'mean' token norm), while (n) runs on its own "
    assert want in pre.statement
    assert "at (n)'s own 0.030 [0.023, 0.038], a collapse 0.046" in pre.result["reading"]
    # the collapse itself is within the margin of (n) (0.046 < 0.1): no comparison with it could pass
    assert "a collapse is itself within the margin 0.1 of (n), so no flow can be told from it" in (
        pre.result["reading"])
    assert pre.result["scale_source_check"] == SC
    old = _recs(_no_room_network("pre_ln"), summary=fams, scale_source_rule=False)[vid]
    assert old.verdict == "fails" and "stream scale" not in old.statement
    assert "scale_source_check" not in old.result
    # a flow at (n)'s scale that beats the collapse by the margin is named so
    sc = {**SC, "collapse": {"value": 0.3, "ci95": [0.28, 0.32]},
          "flow_at_n_scale_minus_collapse": {"value": -0.2, "ci95": [-0.25, -0.15]}}
    fams = {"families": {"tiny-bert": {"scale_source_check": sc}}}
    r = _recs(_no_room_network("pre_ln"), summary=fams)[vid]
    assert ": better than a collapse (margin 0.1" in r.result["reading"]


def test_r12_r13_f2_a_value_without_room_is_named_with_its_own_outcome():
    """(n) at 0.40 / 0.95 / 0.95 (room at depth 1 only), flow (f) within 0.02 of it: 'no headroom'. The
    record's value stays the declared all-depth one (review round 13, F2); the depth-1 value, whose outcome
    is reported, is named beside it (review round 12, F2) and kept in value_over_room; the record could not
    have held (too few depths with room: review round 13, F3)."""
    res = fake_family({}, trend=0.1)
    _set_cos(res, "no_mlp", [0.40, 0.95, 0.95])
    _set_cos(res, "frames", [0.42, 0.97, 0.97], seed=1)
    m, f = res["stats"]["sphere"]["no_mlp"]["cos"], res["stats"]["sphere"]["frames"]["cos"]
    r = _recs(res)["frames-follows-network-cos"]
    assert r.verdict == "inconclusive" and "no headroom" in r.result["reading"]
    depth1 = float(np.abs(np.asarray(f, float).mean(0)[1] - np.asarray(m, float).mean(0)[1]))
    assert r.result["unmeasured_value"] == pytest.approx(_gap(m, f), abs=1e-9)
    assert r.result["value_over_room"]["value"] == pytest.approx(depth1, abs=1e-9)
    assert r.result["value_over_room"]["outcome"] == "holds"
    want = f"so the value {depth1:.3f} over the depths with room [1] (the declared value over [1, 2, 3]: "
    assert want in r.result["unmeasured_main"]
    hr = r.result["holds_reachable"]
    assert hr["reachable"] is False and hr["short"].startswith("only 1 of 3 depths have room, 2 needed")
    old = _recs(res, room_value_named=False)["frames-follows-network-cos"]
    assert "value_over_room" not in old.result
    assert f"so the value {_gap(m, f):.3f} (holds by the criterion)" in old.result["unmeasured_main"]


def test_r12_f8_the_fit_is_worse_than_a_constant_time_by_a_paired_interval():
    """(c) 0.3 off the model and flow (a) (T = 1) 0.05 off: fit - T = 1 is +0.25, paired, wholly above 0;
    standing still (0.2 off) is also beaten by the fit's 0.3: fit - T = 0 about +0.1."""
    res = fake_family({"fitted_time": 0.3, "attention": 0.05})
    r = _recs(res)["fitted-time-cos"]
    g = r.result["fit_grid"]
    rep = np.asarray(res["fitted"][0]["report"])
    m = np.asarray(res["stats"]["sphere"]["model"]["cos"])[rep]
    a = np.asarray(res["stats"]["sphere"]["attention"]["cos"])[rep]
    fc = np.asarray(res["fitted"][0]["stats"]["sphere"]["cos"])
    d1 = g["values"]["T = 1 (flow (a))"]["fit_minus_this"]
    assert d1["value"] == pytest.approx(_gap(m, fc) - _gap(m, a), abs=1e-9)
    assert d1["ci95"][0] > 0 and "T = 1 (flow (a))" in g["better_than_fit"]
    assert "(paired fit - constant: T = 0 +0.0" in g["reading"] and ", T = 1 +0.250 [" in g["reading"]
    assert "fitted on one half of the sentences by the teacher-forced fit" in r.statement


def test_r13_f1_a_null_specificity_label_says_it_holds_under_the_declared_estimator_only():
    """(a) 0.05 over the model with the declared estimator (fails), 0.3 with median_rest (holds): the record
    depends on the estimator, so its null-specificity label says it is the declared estimator's."""
    import copy

    res = fake_family({"attention": 0.05}, trend=-0.1)
    alt = copy.deepcopy(res["stats"]["sphere"])
    alt["attention"]["cos"] = alt["model"]["cos"] + 0.3
    res["scale_alt"] = {"median_rest": {"sphere": alt}}
    vid = "attention-overclusters"
    r = _recs(res, summary=_null(vid, "fails", 0.02))[vid]
    assert "depends_on_estimator" in r.result
    assert r.result["null_specificity"].endswith(
        "-- with the declared scale estimator (mean) only: the record depends on it")
    plain = _recs(fake_family({"attention": 0.05}, trend=-0.1), summary=_null(vid, "fails", 0.02))[vid]
    assert "declared scale estimator" not in plain.result["null_specificity"]


def test_r12_f6_a_verdict_that_depends_only_through_hidden_state_values_says_so():
    """A 'depth summary' check whose only 'holds' is the hidden-state last-depth value (MiniLM-L6
    frames-mlp-cos: 0.055 inconclusive, last depth sphere 0.161 fails, hidden 0.008 holds): the verdict
    'depends on depth summary' is not the sphere tokens' (inconclusive), and the reading says so."""
    from attnflow.analysis.verdicts import Criterion, RobustnessCheck, combine
    from attnflow.studies.real_model_flows import _choice_reading, _sphere_only

    crit = Criterion(quantity="gap", op="<=", threshold=0.1, declared_in="test")
    vals = ["mean over depths 1..L, sphere tokens", "last depth L, sphere tokens",
            "last depth L, hidden states"]
    rob = [RobustnessCheck.from_values(crit, "depth summary", vals, [0.055, 0.161, 0.008],
                                       outcomes=["inconclusive", "fails", "holds"])]  # fmt: skip
    verdict = combine("inconclusive", rob)
    assert verdict == "depends on depth summary"
    sphere = combine("inconclusive", _sphere_only(rob, crit))
    assert sphere != verdict and not sphere.startswith("depends")
    assert _sphere_only(rob, crit)[0].values == vals[:2]
    extra = {"reading": verdict}
    out = _choice_reading(extra, {}, verdict, None, True, 0.1, 0.1, (), sphere_verdict=sphere)
    tail = f" [sphere tokens (declared) alone: {sphere}; the rest rests on hidden-state values]"
    assert out == verdict + tail
    assert extra["sphere_only_verdict"] == sphere
    # without hidden-state values nothing is added
    rob2 = [RobustnessCheck.from_values(crit, "depth summary", vals[:2], [0.055, 0.161],
                                        outcomes=["inconclusive", "fails"])]  # fmt: skip
    v2 = combine("inconclusive", rob2)
    assert _choice_reading({"reading": v2}, {}, v2, None, True, 0.1, 0.1, (),
                           sphere_verdict=combine("inconclusive", _sphere_only(rob2, crit))) == v2


def test_r13_f5_the_fitted_time_reading_says_the_fit_is_worse_than_a_constant_time():
    res = fake_family({"fitted_time": 0.3, "attention": 0.05})
    r = _recs(res)["fitted-time-cos"]
    d = r.result["fit_grid"]["values"]["T = 1 (flow (a))"]["fit_minus_this"]
    want = "this fit is worse than a constant time of its grid (T = 0 (standing still): paired fit - it "
    assert want in r.result["reading"]
    assert f"T = 1 (flow (a)): paired fit - it {d['value']:+.3f}" in r.result["reading"]
    old = _recs(res, statement_names_fit=False)["fitted-time-cos"]
    assert "worse than a constant time" not in old.result["reading"]


def test_r14_f1_a_value_void_for_lack_of_room_does_not_make_a_record_depend_on_its_choice():
    """SmolLM2 (f) vs (n): median_rest 0.072 'holds' over depth 1 alone, void for lack of room (1 of 30
    depths): no estimator could hold there, so the reading does not say 'depends on scale estimator'."""
    from attnflow.studies.real_model_flows import _choice_reading

    log = {"scale estimator": [
        {"choice_value": "mean (declared)", "value": 0.255, "outcome": "fails", "measured": True},
        {"choice_value": "median_rest", "value": 0.072, "outcome": "holds", "measured": False,
         "outcome_without_collapse": "holds", "no_headroom": True}]}  # fmt: skip
    extra = {"reading": "fails"}
    assert _choice_reading(extra, log, "fails", "fails", True, 0.1, 0.1, ()) == "fails"
    assert "depends_on_estimator" not in extra
    del log["scale estimator"][1]["no_headroom"]  # void by the collapse control: read by its own outcome
    assert _choice_reading({"reading": "fails"}, log, "fails", "fails", True, 0.1, 0.1, ()).startswith(
        "depends on scale estimator: mean (declared) fails 0.255, median_rest holds 0.072")


def test_r14_f4_the_representation_bracket_needs_every_hidden_state_value_to_agree():
    """MiniLM-L3 frames-overclusters: the representation check's hidden value fails at every margin, but the
    depth summary's hidden last-depth value is undecided: no 'hidden states: fails at every margin' bracket;
    the sphere tokens' own verdict is named instead."""
    from attnflow.studies.real_model_flows import _choice_reading

    hid = {"choice_value": "hidden", "value": 0.090, "outcome": "fails", "measured": True,
           "outcome_margin": {"x0.5": "fails", "x1.5": "fails"}}  # fmt: skip
    last = {"choice_value": "last depth L, hidden states", "value": 0.100, "outcome": "inconclusive",
            "measured": True, "outcome_margin": {"x0.5": "inconclusive", "x1.5": "inconclusive"}}  # fmt: skip
    sph = {"choice_value": "sphere", "value": 0.083, "outcome": "fails", "measured": True}
    log = {"representation": [sph, hid], "depth summary": [last]}
    extra = {"reading": "inconclusive"}
    out = _choice_reading(extra, log, "inconclusive", "fails", True, 0.1, 0.1, (), sphere_verdict="fails")
    assert "representation_reading" not in extra
    assert out == ("inconclusive [sphere tokens (declared) alone: fails; the rest rests on hidden-state "
                   "values]")
    agree = {"x0.5": "fails", "x1.5": "fails"}
    log["depth summary"] = [{**last, "outcome": "fails", "outcome_margin": agree}]
    extra = {"reading": "holds"}
    _choice_reading(extra, log, "holds", "holds", True, 0.1, 0.1, (), sphere_verdict="holds")
    assert extra["representation_reading"] == (
        "sphere tokens (declared): holds; hidden states: fails at every margin (0.090)")


def test_r14_f5_every_hidden_state_value_in_the_committed_records_is_one_sphere_only_drops():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "docs" / "studies" / "real_model_flows"
    seen = set()
    for p in sorted(root.rglob("summary.json")):
        if "review" in p.parts:
            continue
        for r in json.loads(p.read_text()).get("verdicts", []):
            for ch in r.get("robustness") or []:
                seen |= {str(v) for v in ch["values"] if "hidden" in str(v).lower()}
    assert seen, "no hidden-state value found in the committed records"
    assert all(v == "hidden" or "hidden states" in v for v in seen), seen
