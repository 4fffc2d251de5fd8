"""Review round 5 of the ``real_model_flows`` verdicts (docs/studies/real_model_flows/review/notes5.md): the
paired stand-still test (F1-F3), unmeasured values (F4), a null's failing flow (F5), the verdict's named
checks (F7), the nulls' specificity and guard (F8), the step rule per flow, the post-LN frames wording.
Fake per-sentence profiles only (no model, no flow): each test well under 2 s."""

from __future__ import annotations

import numpy as np
import pytest
from flows_helpers import fake_family, records_by_id

pytest.importorskip("torch")
pytest.importorskip("transformers")

# 20 resamples throughout: the flows are the model + a constant shift (paired values exact in every
# resample) and the stand-still's values are >= 4 interval half-widths (noise 0.02 / sqrt(12)) from the
# margins used below, so the outcomes asserted do not depend on the draw
B = 20


def _recs(res: dict, fam: str = "tiny-bert", summary: dict | None = None, **cfg) -> dict:
    # the round-5 rules (review round 6 made them config choices: no margin check, the asymmetric paired
    # test, no collapse outcome); tests/test_real_model_flows_round6.py tests the round-6 defaults
    round5 = {"control_margin_variants": [], "control_paired_rule": "asymmetric", "collapse_outcome": False}
    return records_by_id(res, fam, summary, bootstrap=B, **(round5 | cfg))


def test_over_clusters_is_decided_by_flow_minus_stand_still_against_the_margin():
    """F1, F2: a model that de-clusters (-0.1 a layer): standing still 'over-clusters' by 0.2 on its own.
    A flow 0.45 above the model exceeds standing still by 0.25 >= 0.1: holds (round 4: inconclusive). A flow
    0.25 above the model exceeds it by 0.05 only: fails, although it is above the model by 0.25."""
    res = fake_family({"attention": 0.45, "model_scores": 0.25, "biases": 0.0}, trend=-0.1)
    v = _recs(res)
    m = np.asarray(res["stats"]["sphere"]["model"]["cos"], float).mean(0)
    a = v["attention-overclusters"]
    ss = a.result["stand_still"]
    assert ss["outcome"] == "holds" and ss["value"] == pytest.approx(np.mean(m[0] - m[1:]), abs=1e-12)
    # independent reference of the paired difference: mean over depths 1..L of the flow's cosine - z_0's
    f = np.asarray(res["stats"]["sphere"]["attention"]["cos"], float).mean(0)
    assert ss["paired_test"]["value"] == pytest.approx(np.mean(f[1:]) - m[0], abs=1e-12)
    assert ss["paired_test"]["named"] == "over-clusters more than standing still by the margin"
    assert a.result["outcome"] == "holds" and a.verdict == "holds"
    d = v["model-scores-overclusters"]
    assert (
        d.result["outcome_flow"] == "holds" and d.result["stand_still"]["paired_test"]["outcome"] == "fails"
    )
    assert d.result["outcome"] == "fails" and d.verdict == "fails"
    # the margin is the config's (declared): at 0.02 the main excess (0.06) holds
    assert (
        _recs(res, control_margin_overcluster=0.02)["model-scores-overclusters"].result["outcome"] == "holds"
    )


def test_follows_records_name_better_no_better_worse_than_standing_still():
    """F3: 'better than standing still' holds; 'no better than standing still' fails where standing still
    itself fails the criterion; 'worse than standing still' fails even where the flow meets the criterion."""
    from attnflow.studies.real_model_flows import paired_outcome

    # the model moves 0.07 a layer: stand-still gap 0.14 (fails 0.1); (e) on the model, (g) 0.08 off it
    v = _recs(fake_family({"mlp": 0.0, "frames_mlp": 0.08}, trend=0.07))
    e, g = v["mlp-cos"], v["frames-mlp-cos"]
    assert e.result["stand_still"]["paired_test"]["named"] == "better than standing still"
    assert e.verdict == "holds"
    assert g.result["outcome_flow"] == "holds"  # 0.08 <= 0.1, but only 0.06 closer than standing still
    assert g.result["stand_still"]["paired_test"]["named"] == "no better than standing still"
    # at the last depth the stand-still is 0.21 off and (g) is better by 0.13: the record depends on it
    assert g.result["outcome"] == "fails" and g.verdict == "depends on depth summary"
    # a model that moves 0.02 a layer (stand-still gap 0.04, holds): (e) 0.09 off it meets the criterion but
    # is farther from the model than standing still
    w = _recs(fake_family({"mlp": 0.09}, trend=0.02))["mlp-cos"]
    assert w.result["outcome_flow"] == "holds"
    assert w.result["stand_still"]["paired_test"]["named"] == "worse than standing still"
    assert w.verdict == "fails"
    # the rule on its own (independent of the data): intervals against the margin 0.1
    assert paired_outcome("gap", -0.2, (-0.25, -0.15), 0.1, "fails")["outcome"] == "holds"
    assert paired_outcome("gap", -0.05, (-0.08, -0.02), 0.1, "holds")["outcome"] == "inconclusive"
    assert paired_outcome("gap", -0.1, (-0.12, -0.08), 0.1, "fails")["named"] == (
        "not decided against standing still"
    )
    assert paired_outcome("over", 0.1, (0.09, 0.11), 0.1, "fails")["outcome"] == "inconclusive"


def test_unmeasured_main_value_makes_the_record_inconclusive_and_checks_are_not_combined():
    """F4: a model whose mean cosine is 1 from depth 1 on: the collapse control follows it exactly, so the
    main value of a 'follows' record is unmeasured: inconclusive with that reason (not 'holds', not
    'depends on'), its checks kept apart."""
    res = fake_family({"mlp": 0.01}, trend=0.0)
    for src in res["stats"]["sphere"].values():
        src["cos"][:, 1:] = 1.0 - 0.001 * (src is not res["stats"]["sphere"]["model"])
    r = _recs(res)["mlp-cos"]
    assert r.result["value"] is None and r.result["outcome"] == "inconclusive" and r.verdict == "inconclusive"
    assert r.result["unmeasured_main"].startswith("main value unmeasured: 0.001")
    assert "the collapse control does not fail there" in r.result["unmeasured_main"]
    assert r.robustness == [] and r.result["checks_not_combined"] == []  # every value unmeasured too
    assert len(r.result["unmeasured"]) >= 5 and r.result["outcome_if_measured"] == "holds"
    assert r.result["unmeasured_value"] == pytest.approx(0.001, abs=1e-9)


def test_a_null_flow_that_fails_is_a_failing_test_not_a_description():
    """F5: in a null whose model does not move (the stand-still does not fail), a flow 0.3 off the model
    fails: a test record 'fails' (round 4: a description); a flow on the model stays a description."""
    v = _recs(fake_family({"mlp": 0.3, "frames_mlp": 0.0}, trend=0.0), fam="tiny-bert-random")
    assert v["mlp-cos"].klass == "test" and v["mlp-cos"].verdict == "fails"
    assert v["mlp-cos"].result["stand_still"]["outcome"] == "holds"
    assert v["frames-mlp-cos"].klass == "description"


def test_trained_holds_say_whether_the_null_holds_too_and_null_fails_carry_their_guard():
    """F8: a trained record that holds says 'not specific to training' where its null holds the same claim
    (from the summary's null_outcomes, built by null_outcomes()); a null's over-clusters fail says it is a
    fail at T_l = 1 ('too slow'), not evidence."""
    from attnflow.studies.real_model_flows import null_outcomes

    nul = _recs(fake_family({"attention": 0.3, "mlp": 0.0}), fam="tiny-bert-permuted")
    assert nul["mlp-cos"].verdict == "holds" and nul["model-scores-overclusters"].verdict == "fails"
    assert "too slow at T_l = 1" in nul["model-scores-overclusters"].result["null_fail_guard"]
    assert "null_fail_guard" not in nul["attention-overclusters"].result  # it holds
    outs = null_outcomes([r.to_json() for r in nul.values()], ["tiny-bert-permuted"])
    assert outs["tiny-bert-permuted"]["mlp-cos"]["verdict"] == "holds"
    summary = {"null_outcomes": {"tiny-bert": outs}}
    v = _recs(fake_family({"attention": 0.3, "mlp": 0.0}), summary=summary)
    assert v["mlp-cos"].verdict == "holds"  # the verdict itself is the criterion's
    lab = v["mlp-cos"].result["null_specificity"]
    assert lab.startswith("holds, not specific to training (also holds in null tiny-bert-permuted: 0.000")
    assert (
        v["attention-overclusters"].result["null_specificity"]
        == ("holds; in the null(s): tiny-bert-permuted holds")
        or "not specific" in v["attention-overclusters"].result["null_specificity"]
    )
    # the rule off: no label
    assert (
        "null_specificity"
        not in _recs(fake_family({"mlp": 0.0}), summary=summary, null_specificity=False)["mlp-cos"].result
    )


def test_step_rule_per_flow_runs_only_the_flows_not_converged():
    """The step rule per flow (config step_per_flow): a flow converged 4 -> 16 is not run at 64; the
    other climbs on; per family (step_per_flow False) every flow runs at every rung and gets one K."""
    from attnflow.studies.real_model_flows import FlowsConfig, step_ladder

    groups = {"a": ["a-cos"], "b": ["b-cos"], "c": []}
    tol = {"a-cos": 0.025, "b-cos": 0.025}
    q = {"a-cos": {4: 0.10, 16: 0.11, 64: 0.111}, "b-cos": {4: 0.1, 16: 0.2, 64: 0.21}}
    for per_flow, want in ((True, {"a": 4, "b": 16, "c": 4}), (False, dict.fromkeys("abc", 16))):
        calls, levels = [], {}

        def level(K, flows, kept, calls=calls):
            calls.append((K, sorted(flows)))
            kept.append(dict.fromkeys(flows, K))  # one sentence: its 'trajectory' is the rung
            return {"flows": list(flows)}

        def values(K, calls=calls):
            run = calls[-1][1]
            return {v: q[v][K] for f in run for v in groups[f]}

        c = FlowsConfig(step_per_flow=per_flow)
        picks, vals, kept = step_ladder(level, values, levels, groups, tol, c)
        assert {f: p["chosen"] for f, p in picks.items()} == want, per_flow
        if per_flow:
            assert calls == [(4, ["a", "b", "c"]), (16, ["a", "b"]), (64, ["b"])]
            assert vals[64] == {"b-cos": 0.21} and picks["a"]["converged"] == {"a-cos": True}
        else:
            assert calls == [(4, ["a", "b", "c"]), (16, ["a", "b", "c"]), (64, ["a", "b", "c"])]
        # the trajectories kept are those of each flow's chosen rung only
        assert all(kept[want[f]][0][f] == want[f] for f in "abc")
        assert sorted(levels) == ["16", "4", "64"]


def test_frames_identity_of_a_post_ln_model_gives_the_post_ln_reason():
    """Review rounds 4/5: a random-init BERT's (f) is (a) because its LayerNorms are the identity, not for
    the pre-LN reason the records gave."""
    res = fake_family({"frames": 0.0, "attention": 0.0, "biases": 0.3})
    res["model"] = {"name": "fake", "arch": "post_ln"}
    r = _recs(res)["frames-overclusters"]
    assert r.klass == "identity" and "post-LN with every LayerNorm gain 1 and shift 0" in r.notes
    assert "pre-LN" not in r.notes
    res["model"] = {"name": "fake", "arch": "pre_ln"}
    assert "pre-LN / RMSNorm" in _recs(res)["frames-overclusters"].notes


def test_declared_rule_outcomes_in_the_shared_record_format():
    """verdicts: a robustness check's and a record's outcomes may come from a rule declared with the
    criterion (here: the paired test); bad outcomes are refused."""
    from attnflow.analysis.verdicts import Criterion, RobustnessCheck, VerdictError, combine, record_test

    c = Criterion(quantity="x", op="<=", threshold=0.1, declared_in="config: x")
    chk = RobustnessCheck.from_values(c, "dt", [1, 2], [0.05, 0.05], outcomes=["holds", "fails"])
    assert chk.outcomes == ["holds", "fails"] and chk.verdict == "depends on dt"
    r = record_test(id="x", statement="x", source="derived: x 1", criterion=c, value=0.05, samples=3,
                    method="none", outcome="fails")  # fmt: skip
    assert r.result["outcome"] == "fails" and r.verdict == "fails"
    with pytest.raises(VerdictError, match=r"outcomes \['maybe'\] must give one of"):
        RobustnessCheck.from_values(c, "dt", [1], [0.05], outcomes=["maybe"])
    with pytest.raises(VerdictError, match="outcome must be one of .*got 'maybe'"):
        record_test(id="x", statement="x", source="derived: x 1", criterion=c, value=0.05, samples=3,
                    method="none", outcome="maybe")  # fmt: skip
    # F7: with an inconclusive main outcome only the check whose own values disagree is named
    ok = RobustnessCheck.from_values(c, "N", [8], [0.05])
    assert combine("inconclusive", [ok, chk]) == "depends on dt"


def test_a_run_without_the_step_rule_is_not_reported_at_an_unconverged_step():
    """F6: a run without the ladder (SmolLM2's nulls: K = 4 with the check 'step count' at 16): a record
    whose value moves by >= 1/4 of its threshold between them is inconclusive 'step not converged at K =
    16', not reported at K = 4; a converged one keeps its verdict and its check."""
    from attnflow.studies.real_model_flows import STEP_FLOWS

    res = fake_family({})
    at16 = fake_family({"mlp": 0.05}, seed=0)  # the same noise draw: (e) moves by 0.05 >= 0.025
    fit = at16["fitted"][0]
    fitted = {"report": fit["report"], "stats": {"sphere": fit["stats"]["sphere"]}}
    res["steps_alt"] = {
        "16": {"sphere": {f: at16["stats"]["sphere"][f] for f in STEP_FLOWS}, "fitted": fitted}
    }
    v = _recs(res, step_candidates=[], steps_per_layer=4)
    r = v["mlp-cos"]
    assert r.verdict == "inconclusive" and r.result["value"] is None
    assert r.result["unmeasured_main"].startswith("step not converged at K = 16: the run's K = 4 -> 16")
    assert r.result["step_unconverged"]["values"] == pytest.approx([0.0, 0.05], abs=1e-9)
    # erank moves by 0.05 x 1 < 0.0625, but it is flow (e)'s, which has not converged in cosine: since review
    # round 6 (F4) a flow converges only as a whole
    assert v["mlp-erank"].verdict == "inconclusive"
    assert "flow (e) has not converged (mlp-cos" in v["mlp-erank"].result["unmeasured_main"]
    assert any(x.choice == "step count" for x in v["attention-overclusters"].robustness)


def test_verdict_data_keeps_a_ladder_rung_without_the_refit():
    """The step rule per flow: (c) converged at a lower rung is not run at the next one, so that rung has
    no 'fitted' entry; the summary's verdict data keep it as it is (the SmolLM2 rerun's analysis failed on
    it)."""
    from attnflow.studies.real_model_flows import STEP_FLOWS, _verdict_data

    res = fake_family({})
    for f in res["fitted"]:
        f["times"] = [1.0, 1.0, 1.0]
    sph = {f: res["stats"]["sphere"][f] for f in STEP_FLOWS}
    fit = {**res["fitted"][0], "stats": {"sphere": res["fitted"][0]["stats"]["sphere"]}}
    res |= {"fitted_free": None, "scale_alt": {}, "steps_alt": {}, "variants": {}, "step": {"mlp": 16},
            "step_ladder": {"candidates": [4, 16], "chosen": {"mlp": 16}, "cpu_s": {"4": 1.0, "16": 1.0},
                            "levels": {"4": {"sphere": sph, "fitted": fit},
                                       "16": {"sphere": {"mlp": sph["mlp"]}}}}}  # fmt: skip
    levels = _verdict_data(res)["step_ladder"]["levels"]
    assert (
        "fitted" in levels["4"] and "fitted" not in levels["16"] and list(levels["16"]["sphere"]) == ["mlp"]
    )
