"""Review round 6 of the ``real_model_flows`` verdicts (docs/studies/real_model_flows/review/notes6.md), the
lead's rules: the margin as a robustness check (F1), the symmetric paired test (F2), the verdict in words
(F3, F6), convergence per flow and the outcome 'collapses' (F4), the pairing against the collapse and the
uninformative paired test (F5), 'specificity untested' (F7), the table's step text (F8). Fake per-sentence
profiles only (no model, no flow): each test a few seconds at most."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from flows_helpers import fake_family, fake_ladder, records_by_id, with_chosen

pytest.importorskip("torch")
pytest.importorskip("transformers")

# 20 resamples: the flows are the model + a constant (paired values exact in every resample) and every
# decided interval below is >= 4 half-widths (noise 0.02 / sqrt(12)) from the margin it is compared with
B = 20


_recs = partial(records_by_id, bootstrap=B)


def test_f1_the_margin_is_a_robustness_check_and_the_record_says_what_its_paired_test_tests():
    """A model that de-clusters (-0.1 a layer: standing still 'over-clusters' by 0.2); a flow 0.32 above the
    model exceeds standing still by 0.12: holds at the margin 0.1 and at x0.5 (0.05), fails at x1.5 (0.15),
    so the record depends on the margin (and on the depth summary: at the last depth standing still is 0.3
    above the model); 0.45 above (0.25 over standing still, 0.15 at the last depth) survives both."""
    v = _recs(fake_family({"attention": 0.32, "biases": 0.45}, trend=-0.1), margin_within_threshold=False)
    a = v["attention-overclusters"]
    assert a.result["outcome"] == "holds" and a.verdict == "depends on depth summary, stand-still margin"
    chk = next(x for x in a.robustness if x.choice == "stand-still margin")
    assert chk.values == ["x0.5 (0.05)", "x1.5 (0.15)"] and chk.outcomes == ["holds", "fails"]
    # the whole record at each factor (every value re-decided): at x1.5 every value fails
    assert a.result["margin_variants"] == {"x0.5 (0.05)": "depends on depth summary", "x1.5 (0.15)": "fails"}
    assert a.result["paired_test_tests"].startswith(
        "the flow raises the mean cosine above the stand-still's (z_0's) by >= 0.1"
    )
    b = v["biases-overclusters"]
    assert b.verdict == "holds" and set(b.result["margin_variants"].values()) == {"holds"}
    # no variants declared: no check (the round-5 records)
    off = _recs(fake_family({"attention": 0.32}, trend=-0.1), control_margin_variants=[])
    assert off["attention-overclusters"].verdict == "depends on depth summary"


def test_f2_worse_than_standing_still_needs_the_margin_as_better_does():
    """A model that moves 0.02 a layer (stand-still gap 0.04, holds); (e) 0.09 off it meets the criterion and
    is 0.05 farther than standing still: round 5 said 'worse' (fails), the symmetric rule 'no better'
    (inconclusive); the asymmetric rule stays available for the report."""
    from attnflow.studies.real_model_flows import paired_outcome

    res = fake_family({"mlp": 0.09}, trend=0.02)
    w = _recs(res)["mlp-cos"]
    assert w.result["stand_still"]["paired_test"]["named"] == "no better than standing still"
    assert w.result["outcome"] == "inconclusive" and w.verdict != "fails"
    old = _recs(res, control_paired_rule="asymmetric")["mlp-cos"]
    assert old.result["stand_still"]["paired_test"]["named"] == "worse than standing still"
    assert old.verdict == "fails"
    # the rule itself: worse only from +margin (whole interval), symmetric to 'better'
    assert paired_outcome("gap", 0.15, (0.12, 0.18), 0.1, "holds")["named"] == "worse than standing still"
    assert paired_outcome("gap", 0.15, (0.12, 0.18), 0.1, "holds")["outcome"] == "fails"
    assert paired_outcome("gap", 0.06, (0.04, 0.08), 0.1, "fails")["outcome"] == "inconclusive"
    assert paired_outcome("gap", 0.06, (0.04, 0.08), 0.1, "fails", rule="asymmetric")["outcome"] == "fails"
    with pytest.raises(ValueError, match="rule must be 'symmetric' or 'asymmetric'.*got 'both'"):
        paired_outcome("gap", 0.0, (0.0, 0.0), 0.1, "holds", rule="both")


def test_f3_an_inconclusive_record_with_a_decided_main_says_which_values_are_undecided():
    """A model that clusters (+0.1 a layer); flow (a) on the model's cosine on sphere tokens (fails: 0 < 0.1),
    0.1 above it in the hidden states with noise (undecided): combine gives 'inconclusive' (its class
    unchanged), the reading says the main fails and names the undecided values."""
    import copy

    from attnflow.studies.real_model_flows import _reading

    res = fake_family({}, trend=0.1)
    res["stats"]["hidden"] = copy.deepcopy(res["stats"]["sphere"])
    noise = 0.02 * np.random.default_rng(1).standard_normal((12, 4))
    h = res["stats"]["hidden"]
    h["attention"]["cos"] = h["model"]["cos"] + 0.1 + noise - noise.mean(0)
    a = _recs(res)["attention-overclusters"]
    assert a.result["outcome"] == "fails" and a.verdict == "inconclusive"
    assert a.result["reading"] == (
        "main fails; undecided: representation hidden, depth summary last depth L, hidden states"
        # review round 12, F6: the undecided values are all hidden-state ones
        " [sphere tokens (declared) alone: fails; the rest rests on hidden-state values]"
    )
    assert a.notes.startswith("reading: main fails; undecided: representation hidden")
    # a decided record reads as its verdict
    assert _reading("holds", "holds", [], [], None, None) == "holds"


def test_f4_a_flow_converges_only_as_a_whole_and_a_collapse_is_named():
    """(e) moves 0.03 in cosine from K = 16 to 64 (>= 0.025) and 0.03 in rank (< 0.0625): the rank record
    is inconclusive too (one flow); (g) converged in every quantity keeps its verdict. A flow whose tokens are
    one point from depth 1 is 'collapses' (fails: the collapse fails the criterion), whatever the step; a flow
    that collapses in cosine but follows the rank cannot hold."""
    fake = fake_ladder(drift=("mlp", lambda K: {4: 0.0, 16: 0.03, 64: 0.06}[K]))
    v = _recs(with_chosen(fake, 64))
    assert v["mlp-erank"].result["step_ladder"]["converged"] is True
    assert v["mlp-erank"].verdict == "inconclusive"
    why = v["mlp-erank"].result["unmeasured_main"]
    assert why.startswith("step not converged at K = 64: flow (e) has not")
    assert v["frames-mlp-erank"].verdict == "holds"
    res = fake_family({}, trend=0.1)
    e = res["stats"]["sphere"]["mlp"]
    e["cos"][:, 1:], e["erank"][:, 1:], e["clusters"][:, 1:] = 1.0, 1.0, 1.0
    g = res["stats"]["sphere"]["frames_mlp"]
    g["cos"][:, 1:] = 1.0  # collapsed in cosine, the rank the model's
    v = _recs(res, collapse_symmetric=False)  # the round-6 rule (round 7, F6: unmeasured either way)
    for k in ("mlp-cos", "mlp-erank"):
        r = v[k]
        assert r.result["flow_collapses"]["depth1_mean_cos"] == 1.0 and r.verdict == "fails", k
        assert r.result["reading"] == "collapses: the flow drives every token to one point (fails)", k
        assert r.robustness == [] and r.result["checks_not_combined"], k
        assert r.result["value"] == pytest.approx(r.result["collapse"]["value"], abs=1e-12), k
    assert v["frames-mlp-erank"].result["outcome_flow"] == "holds"
    assert v["frames-mlp-erank"].result["outcome"] == "inconclusive"
    assert "cannot hold" in v["frames-mlp-erank"].notes and v["frames-mlp-erank"].verdict != "holds"


def test_f5_follows_values_are_paired_against_the_collapse_and_over_clusters_say_when_the_test_is_empty():
    """A model at mean cosine 0.85 from depth 1 (from 0.3): a collapse is 0.15 off it (fails the criterion)
    and beats standing still (0.55 off); a flow 0.08 off it meets the criterion but is not 0.1 closer than the
    collapse: it cannot hold, and 'better than standing still' is not printed. A model that clusters
    (+0.1 a layer): the stand-still sits 0.2 below it, so the over-clusters paired test cannot fail."""
    res = fake_family({}, trend=0.1)
    m = res["stats"]["sphere"]["model"]["cos"]
    m[:, 1:] = 0.85 + m[:, 1:] - m[:, 1:].mean(0)
    res["stats"]["sphere"]["mlp"]["cos"] = m + 0.08
    r = _recs(res)["mlp-cos"]
    assert r.result["outcome_flow"] == "holds" and r.verdict != "holds"
    named = r.result["stand_still"]["paired_test"]["named"]
    assert named == "closer than standing still, but so is a collapse"
    assert r.result["collapse"]["paired"]["named"] == "no better than a collapse"
    assert r.result["collapse"]["vs_stand_still"]["outcome"] == "holds"
    assert _recs(res, collapse_outcome=False)["mlp-cos"].verdict == "holds"
    up = _recs(fake_family({"attention": 0.3}, trend=0.1))["attention-overclusters"]
    why = up.result["paired_test_uninformative"]
    assert why.startswith("paired test uninformative here: the stand-still")
    down = _recs(fake_family({"attention": 0.45}, trend=-0.1))["attention-overclusters"]
    assert "paired_test_uninformative" not in down.result


def test_f6_a_fail_with_unmeasured_values_reads_fails_where_measurable():
    """The model reaches mean cosine 0.97 at its last depth, where a collapse meets the criterion: (e) on the
    model there and 0.4 off it at depths 1, 2 fails on the mean over depths; its last-depth values are
    unmeasured (they would hold): 'fails where measurable (2 values unmeasured, ...)'."""
    res = fake_family({}, trend=0.1)
    m = res["stats"]["sphere"]["model"]["cos"]
    m[:, 3] += 0.97 - m[:, 3].mean()
    res["stats"]["sphere"]["mlp"]["cos"] = m + np.array([0.0, 0.4, 0.4, 0.0])
    r = _recs(res)["mlp-cos"]
    assert r.verdict == "fails" and len(r.result["unmeasured"]) == 2
    assert r.result["unmeasured_outcomes"] == ["holds", "holds"]
    want = "fails where measurable (2 values unmeasured, which would hold on their own)"
    assert r.result["reading"] == want


def test_f7_specificity_untested_by_the_guard_or_without_the_ladder():
    """A trained 'over-clusters' hold whose null fails only by the guard (too slow at T_l = 1) is
    'specificity untested'; a null run without the step ladder never labels it; a null that fails a
    'follows' claim still says so."""
    from attnflow.studies.real_model_flows import null_outcomes, specificity

    nul = _recs(fake_family({"mlp": 0.3}), fam="tiny-bert-permuted")
    assert nul["attention-overclusters"].result["null_fail_guard"] and nul["mlp-cos"].verdict == "fails"
    recs = [r.to_json() for r in nul.values()]
    trained = fake_family({"attention": 0.3})
    for ladder, want in (
        (True, "specificity untested (every null fails only by the guard 'too slow at T_l = 1', has no "
               "headroom, is inconclusive, depends on a choice (such as its seed), or is a description or an "
               "identity: tiny-bert-permuted fails (only by the guard 'too slow at T_l = 1'))"),  # r7, 8, 17
        (False, "specificity untested (nulls not run under the step ladder: tiny-bert-permuted)"),
    ):  # fmt: skip
        outs = null_outcomes(recs, ["tiny-bert-permuted"], {"tiny-bert-permuted": ladder})
        v = _recs(trained, summary={"null_outcomes": {"tiny-bert": outs}})
        assert v["attention-overclusters"].verdict == "holds"
        assert v["attention-overclusters"].result["null_specificity"] == want
        # review round 7 (F2): every usable null fails a 'follows' hold -> 'specific to training'
        follows = "holds; specific to training (fails in null tiny-bert-permuted: 0.300)" if ladder else want
        assert v["mlp-cos"].result["null_specificity"] == follows
    assert specificity("x", {"n": {"x": {"verdict": "holds", "value": 0.5, "ladder": True}}}) == (
        "holds, not specific to training (also holds in null n: 0.500)"
    )


def test_f8_the_step_text_prints_the_comparison_made_and_the_tolerance_in_full():
    """(e)'s rank moves 0.0625 x ... : the table prints '>=' for a move at or above the tolerance, '<' below,
    the tolerance 0.0625 in full, and each record says at which K its checks are."""
    from attnflow.studies.real_model_flows import verdict_tables

    fake = fake_ladder(drift=("mlp", lambda K: {4: 0.0, 16: 0.1, 64: 0.2}[K]))
    v = _recs(with_chosen(fake, 4) | {"step": {"mlp": 4}})
    rows = {x["claim"]: x for x in verdict_tables(
        {"families": {"tiny-bert": {}}, "verdicts": [r.to_json() for r in v.values()]})[0].rows}  # fmt: skip
    assert "NOT converged (move 0.100 >= 0.0625)" in rows["mlp-erank"]["steps"]
    assert "converged (move 0.000 < 0.025)" in rows["frames-mlp-cos"]["steps"]
    assert "value reported at K = 64, checks at K = 4" in rows["frames-mlp-cos"]["steps"]
    rk = v["frames-mlp-cos"].result["robustness_K"]
    assert rk["main value"] == 64 and rk[next(k for k in rk if k.startswith("the other checks"))] == 4
