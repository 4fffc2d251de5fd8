"""Review round 7 of the ``real_model_flows`` verdicts (review7_findings.md, F1-F8; the rules declared
2026-12-04 in the config): specificity for every verdict and 'null cannot test this' (F2, F7), the collapse
read the same way both ways (F6), the MLP jump at T_l = 1 (F1), 'no headroom' and the guard only where the
flow is slow (F3), the free-running fit as a description (F8), the reading that names the estimator /
representation and the margin above the threshold (F4, F5). Fake per-sentence profiles only (no model, no
flow): each test a few seconds at most."""

from __future__ import annotations

from functools import partial

import pytest
from flows_helpers import fake_family, records_by_id

pytest.importorskip("torch")
pytest.importorskip("transformers")

B = 20  # as round 6: the flows are the model + a constant, every decided interval far from its boundary


_recs = partial(records_by_id, bootstrap=B)


def _nulls(res: dict, fam: str = "tiny-bert-permuted") -> dict:
    from attnflow.studies.real_model_flows import null_outcomes

    recs = [r.to_json() for r in _recs(res, fam=fam).values()]
    return {"null_outcomes": {"tiny-bert": null_outcomes(recs, [fam], {fam: True})}}


def test_f2_f7_specificity_is_printed_for_every_verdict_and_a_null_that_cannot_test_says_so():
    """The null over-clusters with (a) (+0.3, holds) and its (e) is 0.3 off the model (fails); its (d) is its
    (a) bit for bit (the fake's flows are model + shift), so it cannot test 'the model's scores'. Trained:
    (e) 0.3 off (fails: the null fails too -> not specific), (a) +0.32 over a de-clustering model ('depends
    on ...' with main holds: the null holds -> not specific whichever way it is settled), (d) holds (+0.45)
    -> 'null cannot test this'."""
    nul = _recs(fake_family({"attention": 0.3, "model_scores": 0.3, "mlp": 0.3}), fam="tiny-bert-permuted")
    assert (
        nul["model-scores-overclusters"].result["null_cannot_test"].startswith("its flow (d) is its flow (a)")
    )
    assert "null_cannot_test" not in nul["attention-overclusters"].result
    null = fake_family({"attention": 0.3, "model_scores": 0.3, "mlp": 0.3})
    head = 1.0 - float(null["stats"]["sphere"]["model"]["cos"][:, 1:].mean())  # the null model's ceiling (F3)
    summary = _nulls(null)
    v = _recs(fake_family({"attention": 0.32, "model_scores": 0.45, "mlp": 0.3}, trend=-0.1), summary=summary)
    e = v["mlp-cos"]
    assert e.verdict == "fails"
    assert e.result["null_specificity"] == (
        "fails, not specific to training (also fails in null tiny-bert-permuted: 0.300)"
    )
    a = v["attention-overclusters"]
    assert a.verdict.startswith("depends on") and a.result["outcome"] == "holds"
    # review round 16, F2: compared at the main setting only, and it says so
    assert a.result["null_specificity"] == (
        f"{a.verdict} (main holds), not specific to training at its main setting (the other settings of "
        f"{a.verdict.removeprefix('depends on ')} not compared) (also holds in null tiny-bert-permuted: "
        f"0.300, headroom {head:.3f})"
    )
    d = v["model-scores-overclusters"]
    assert d.result["null_specificity"].startswith("null cannot test this (tiny-bert-permuted: its flow (d)")
    # the null's (d) 0.01 away from its (a): testable, and it holds as the trained record does
    summary = _nulls(fake_family({"attention": 0.3, "model_scores": 0.31, "mlp": 0.3}))
    d = _recs(fake_family({"model_scores": 0.45}, trend=-0.1), summary=summary)["model-scores-overclusters"]
    assert d.result["null_specificity"].startswith("holds, not specific to training (also holds in null")
    # the rule off: only records that hold are labelled (round 6)
    off = _recs(fake_family({"mlp": 0.3}), summary=summary, specificity_every_verdict=False)
    assert "null_specificity" not in off["mlp-cos"].result


def test_f2_specific_when_every_null_has_the_other_outcome():
    from attnflow.studies.real_model_flows import specificity

    spec = {"n": {"x": {"verdict": "fails", "value": 0.02, "ladder": True}}}
    assert specificity("x", spec, "holds", "holds") == "holds; specific to training (fails in null n: 0.020)"
    both = spec | {"m": {"x": {"verdict": "fails", "value": 0.01, "ladder": True, "guard": True}}}
    assert specificity("x", both, "holds", "holds") == (
        "holds; specific to training (fails in null n: 0.020); not speaking: m fails (only by the guard 'too "
        "slow at T_l = 1')"
    )
    guard = {"n": {"x": {"verdict": "fails", "value": 0.02, "ladder": True, "guard": True}}}
    assert specificity("x", guard, "holds", "holds").startswith("specificity untested")
    assert specificity("x", spec, "inconclusive", "inconclusive") == (
        "no outcome to compare (the trained record is inconclusive); in the null(s): n fails"
    )


def test_f6_a_collapse_is_unmeasured_whichever_way_the_collapse_control_goes():
    """(e) one point from depth 1 (the collapse control fails the criterion: the model is at 0.4-0.6): round 6
    said 'fails (collapses)', round 7 'unmeasured (collapses)'; (g) at 0.99 from depth 1 (below the depth-1
    detector's 0.9995) is the collapse's value within the resolution (flow - collapse = -0.01 on every
    sentence, within +-0.025): unmeasured too, where round 6 counted a measured fail."""
    res = fake_family({}, trend=0.1)
    e, g = res["stats"]["sphere"]["mlp"], res["stats"]["sphere"]["frames_mlp"]
    e["cos"][:, 1:] = 1.0
    g["cos"][:, 1:] = 0.99
    v, old = _recs(res), _recs(res, collapse_symmetric=False)
    assert old["mlp-cos"].verdict == "fails" and old["frames-mlp-cos"].verdict == "fails"
    assert "flow_collapses" not in old["frames-mlp-cos"].result  # the depth-1 detector misses (g)
    for k in ("mlp-cos", "frames-mlp-cos"):
        r = v[k]
        assert r.verdict == "inconclusive" and r.result["outcome"] == "inconclusive", k
        assert r.result["reading"] == "unmeasured (collapses): the flow drives every token to one point", k
    ic = v["frames-mlp-cos"].result["value_is_collapse"]
    assert ic["flow_minus_collapse"] == pytest.approx(-0.01, abs=1e-9) and ic["eps"] == pytest.approx(0.025)
    # a flow 0.05 from the collapse is measured (outside +-0.025): it fails as before
    g["cos"][:, 1:] = 0.95
    assert _recs(res)["frames-mlp-cos"].verdict == "fails"


def _table(speed: list[float], angle: list[float]) -> dict:
    return {"network_angle": angle, "flow_speed": speed, "flow_angle_T1": [min(x, 3.14) for x in speed]}


def test_f1_a_record_decided_only_through_a_jump_layer_is_inconclusive():
    """Layer 0's MLP flow moves 10 rad per unit time against the network's 1 (a jump at factor 3) and (e), (g)
    sit at one point from depth 1: inconclusive, 'layer 0's MLP is a jump (10.0 rad per unit time against
    1.00)'. The same flows with layer 0 at 2.5 against 1 (no jump): 'unmeasured (collapses)' (F6). A jump at
    layer 1 only: the record keeps its verdict and names the jump."""
    from attnflow.studies.real_model_flows import mlp_jumps

    assert mlp_jumps(_table([10.0, 0.4, 0.3], [1.0, 0.3, 0.3]), 3.0) == [0]
    assert mlp_jumps(_table([2.5, 0.4, 0.3], [1.0, 0.3, 0.3]), 3.0) == []
    assert mlp_jumps(None, 3.0) == []
    res = fake_family({}, trend=0.1)
    for f in ("mlp", "frames_mlp"):
        res["stats"]["sphere"][f]["cos"][:, 1:] = 1.0
    res["mlp_layers"] = _table([10.0, 0.4, 0.3], [1.0, 0.3, 0.3])
    v = _recs(res, mlp_jump_reading=False)  # round 7's reading (round 8, F4: mlp_jump_reading)
    for k in ("mlp-cos", "frames-mlp-cos"):
        r = v[k]
        assert r.verdict == "inconclusive", k
        assert (
            r.result["reading"]
            == "inconclusive: layer 0's MLP is a jump (10.0 rad per unit time against 1.00)"
        )
        assert r.result["mlp_jump"]["layers"] == [0] and r.result["mlp_jump"]["decided_only_through_jumps"]
    res["mlp_layers"] = _table([2.5, 0.4, 0.3], [1.0, 0.3, 0.3])
    assert _recs(res)["mlp-cos"].result["reading"].startswith("unmeasured (collapses)")
    res["mlp_layers"] = _table([0.5, 4.0, 0.3], [1.0, 0.3, 0.3])  # a jump at layer 1 only
    r = _recs(res)["mlp-cos"]
    assert r.result["mlp_jump"]["layers"] == [1] and not r.result["mlp_jump"]["decided_only_through_jumps"]
    assert r.result["reading"].startswith("unmeasured (collapses)")


def test_f1_the_mlp_layer_table_of_a_tiny_model():
    """The table's shape and its small-step sense on a tiny random Llama (small MLP: the flow's speed and its
    angle at T = 1 agree with the network's turn to first order, and nothing is a jump)."""
    from attnflow.studies.real_model_flows import load_family, mlp_jumps, mlp_layer_table

    w, _, _ = load_family("tiny-llama", 0)
    tab = mlp_layer_table(w, [[1, 2, 3, 4, 5], [3, 4, 5, 6]], K=16)
    assert len(tab["flow_speed"]) == w.depth == len(tab["network_angle"]) == len(tab["flow_angle_T1"])
    for v, a, t1 in zip(tab["flow_speed"], tab["network_angle"], tab["flow_angle_T1"], strict=True):
        assert 0 < a < 0.5 and v == pytest.approx(a, rel=0.5) and t1 == pytest.approx(v, rel=0.1)
    assert mlp_jumps(tab, 3.0) == []


def _set_cos(res: dict, src: str, depths: list[float], seed: int = 0) -> None:
    """Sentence profiles of ``src``: depth 0 as stored, depths 1..L the given mean cosines + noise 0.005."""
    import numpy as np

    a = res["stats"]["sphere"][src]["cos"]
    noise = 0.005 * np.random.default_rng(seed).standard_normal((a.shape[0], len(depths)))
    a[:, 1:] = np.minimum(np.asarray(depths) + noise, 1.0)


def test_f3_no_headroom_and_the_guard_only_where_the_flow_is_slow():
    """A null whose model sits at 0.95 from depth 1 (headroom 0.05 < 0.1): a flow at 0.99 'fails' by the
    criterion (0.04) but reads 'no headroom' (inconclusive). A null whose model leaves headroom (0.80, 0.85,
    0.90: 0.15) and whose flow is fast (0.85, 0.90, 0.95: last depth >= 0.9) fails without the guard 'too
    slow'; a slow flow (last depth 0.65) keeps it. The trained hold is then 'specific to training'."""
    res = fake_family({}, trend=0.1)
    _set_cos(res, "model", [0.95, 0.95, 0.95])
    _set_cos(res, "attention", [0.99, 0.99, 0.99], seed=1)
    a = _recs(res, fam="tiny-bert-permuted")["attention-overclusters"]
    assert a.verdict == "inconclusive" and a.result["reading"].startswith(
        "inconclusive: no headroom (1 - the"
    )
    assert a.result["no_headroom"]["headroom"] == pytest.approx(0.05, abs=0.01)
    old = _recs(res, fam="tiny-bert-permuted", headroom_rule=False, room_per_depth=False)[
        "attention-overclusters"
    ]  # round 6: both ceiling rules off (round 8's room_per_depth would also say 'no headroom')
    assert old.verdict == "fails" and old.result["null_fail_guard"]  # round 6: a fail with the guard

    fast = fake_family({}, trend=0.1)
    _set_cos(fast, "model", [0.80, 0.85, 0.90])
    _set_cos(fast, "attention", [0.85, 0.90, 0.95], seed=1)
    a = _recs(fast, fam="tiny-bert-permuted")["attention-overclusters"]
    assert a.verdict == "fails" and "null_fail_guard" not in a.result
    assert a.result["null_fail_not_slow"].startswith("the flow is not slow: mean cosine 0.95")
    slow = _recs(fake_family({"attention": 0.05}), fam="tiny-bert-permuted")["attention-overclusters"]
    assert slow.verdict == "fails" and slow.result["null_fail_guard"]

    # a ceiling at the last depth only (0.95): that value is 'no headroom'; the record holds where measurable
    top = fake_family({}, trend=0.1)
    _set_cos(top, "model", [0.50, 0.60, 0.95])
    _set_cos(top, "attention", [0.70, 0.80, 0.99], seed=1)
    a = _recs(top, fam="tiny-bert-permuted")["attention-overclusters"]
    assert a.verdict == "holds"
    assert (
        a.result["reading"]
        == "holds where measurable (2 values unmeasured, none of which would hold on its own)"
    )
    off = _recs(top, fam="tiny-bert-permuted", headroom_rule=False, room_per_depth=False)  # round 6
    assert off["attention-overclusters"].verdict == "depends on depth summary"

    summary = _nulls(fast)
    t = _recs(fake_family({"attention": 0.3}), summary=summary)["attention-overclusters"]
    assert t.verdict == "holds"
    assert t.result["null_specificity"].startswith(
        "holds; specific to training (fails in null tiny-bert-permuted"
    )


def test_f8_the_free_running_fit_is_a_description_and_the_teacher_forced_fit_the_test():
    """The (c) record's free-running fit (T_l fitted to the profile it is scored on) has class 'description'
    and no outcome; the record's own value (teacher-forced) still decides, here 'fails' (0.3 off)."""
    import copy

    res = fake_family({"fitted_time": 0.3})
    res["fitted_free"] = copy.deepcopy(res["fitted"][0]) | {"times": [0.5, 0.5, 0.5]}
    st = res["fitted_free"]["stats"]["sphere"]  # the same dict as "hidden" in the fake
    st["cos"] = st["cos"] - 0.3  # the free-running fit lands on the model
    r = _recs(res, fit_grid_check=False)["fitted-time-cos"]  # round 9's fit-grid rule: its own test
    fr = r.result["free_running_fit"]
    assert (
        fr["class"] == "description" and "outcome" not in fr and fr["value"] == pytest.approx(0.0, abs=1e-9)
    )
    assert r.klass == "test" and r.verdict == "fails"
    old = _recs(res, free_running_description=False)["fitted-time-cos"].result["free_running_fit"]
    assert old["outcome"] == "holds" and "class" not in old


def test_f4_f5_the_reading_names_the_estimator_and_the_representation_and_the_margin_above_threshold():
    """(F4) (a) 0.05 over the model with the declared estimator (fails), 0.3 with 'median_rest' (holds): the
    reading says 'depends on scale estimator'. (F5) (d) on a de-clustering model, +0.32 on sphere tokens
    (depends on the stand-still margin) and +0.45 in the hidden states (holds at every margin): the reading
    names both representations and says that the x1.5 margin (0.15) exceeds the threshold 0.1."""
    import copy

    res = fake_family({"attention": 0.05, "model_scores": 0.32}, trend=-0.1)
    res["stats"]["hidden"] = copy.deepcopy(res["stats"]["sphere"])
    h = res["stats"]["hidden"]
    h["model_scores"]["cos"] = h["model"]["cos"] + 0.45
    alt = copy.deepcopy(res["stats"]["sphere"])
    alt["attention"]["cos"] = alt["model"]["cos"] + 0.3
    res["scale_alt"] = {"median_rest": {"sphere": alt}}
    v = _recs(res, margin_within_threshold=False)  # round 9 F7 drops x1.5 from the combination
    a = v["attention-overclusters"]
    assert a.result["outcome"] == "fails"
    assert a.result["reading"].startswith(
        "depends on scale estimator: mean (declared) fails 0.050, median_rest holds 0.3"
    )
    d = v["model-scores-overclusters"]
    assert "stand-still margin" in d.verdict
    assert d.result["representation_reading"] == (
        f"sphere tokens (declared): {d.verdict}; hidden states: holds at every margin (0.450)"
    )
    assert d.result["margin_above_threshold"].startswith("x1.5 (0.15) exceeds the criterion's threshold 0.1")
    assert d.result["flow_minus_z0_per_depth"][1] == pytest.approx(0.32 - 0.1, abs=0.02)
    off = _recs(res, reading_names_choice=False, margin_within_threshold=False)
    assert "depends_on_estimator" not in off["attention-overclusters"].result
    assert "representation_reading" not in off["model-scores-overclusters"].result


def test_f1_the_study_run_skips_the_angle_at_t1_and_keeps_what_the_rule_reads():
    from attnflow.studies.real_model_flows import load_family, mlp_layer_table

    w, _, _ = load_family("tiny-llama", 0)
    ids = [[1, 2, 3, 4, 5], [3, 4, 5, 6]]
    full, quick = mlp_layer_table(w, ids, K=16), mlp_layer_table(w, ids, K=0)
    assert quick["flow_angle_T1"] == [None] * w.depth
    assert quick["flow_speed"] == full["flow_speed"] and quick["network_angle"] == full["network_angle"]


def test_f4_an_unmeasured_estimator_value_is_read_by_its_own_outcome():
    """The median_rest value is left unmeasured by the collapse control (its outcome with the collapse
    pairing 'inconclusive', on its own 'holds'): the reading still says the verdict depends on the
    estimator."""
    from attnflow.studies.real_model_flows import _choice_reading

    log = {"scale estimator": [
        {"choice_value": "mean (declared)", "value": 0.255, "outcome": "fails", "measured": True},
        {"choice_value": "median_rest", "value": 0.079, "outcome": "inconclusive", "measured": False,
         "outcome_without_collapse": "holds"}]}  # fmt: skip
    extra = {"reading": "fails"}
    out = _choice_reading(extra, log, "fails", "fails", True, 0.1, 0.1, (0.5, 1.5))
    assert out == (
        "depends on scale estimator: mean (declared) fails 0.255, median_rest holds 0.079 (unmeasured: the "
        "collapse control passes there too)"
    )
    # a main value that is itself unmeasured (collapse, jump, step) is not re-read
    assert _choice_reading({"reading": "x"}, log, "inconclusive", None, False, 0.1, 0.1, ()) == "x"
