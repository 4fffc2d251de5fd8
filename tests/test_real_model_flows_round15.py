"""Review round 14's last findings on the ``real_model_flows`` verdicts, applied in round 15 (rules dated
2026-12-04): a check value void for lack of room names its step count, the depths it is taken over and its
all-depth value (F6); the fitted-time reading cites a committed refit with a wider time grid in place of
'not refitted' (F3); a null record checked over more seeds speaks for the null-specificity label only if
every checked seed repeats its verdict (F2, config ``null_seeds_check``, reading rule declared before the
data). Fake arrays; values checked against NumPy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1] / "docs" / "studies" / "real_model_flows"


def _profiles(means: list[float], S: int = 12, seed: int = 0, sd: float = 0.01) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(means, float)[None, :] + sd * rng.standard_normal((S, len(means)))


def _gap_all(m: np.ndarray, f: np.ndarray) -> float:
    """Independent reference: mean over depths 1..L of |mean cos (flow) - mean cos (reference)|."""
    return float(np.mean(np.abs(f.mean(0)[1:] - m.mean(0)[1:])))


def test_r14_f6_a_value_void_for_lack_of_room_names_its_step_its_depths_and_its_all_depth_value():
    """(n) at 0.40 / 0.95 / 0.95 (room at depth 1 only: 1 of 3 depths, 2 needed), the alternative flow 0.02
    above it at K = 4: void for lack of room. Its text names K = 4, 'over depth 1, the 1 with room' and the
    value over all depths 1..3; the log keeps K, the depths and the all-depth value."""
    from attnflow.studies.real_model_flows import (
        FlowsConfig,
        StepPair,
        _check,
        _quantity,
        controls_of,
    )

    c = FlowsConfig(families=["tiny-bert"], bootstrap=50)
    m = _profiles([0.1, 0.40, 0.95, 0.95])
    f = _profiles([0.1, 0.42, 0.97, 0.99], seed=1)
    from attnflow.analysis.verdicts import Criterion

    crit = Criterion(quantity="gap", op="<=", threshold=0.1, declared_in="test")
    rules = {
        "controls": controls_of("gap", c),
        "kind": "gap",
        "margin": 0.1,
        "rule": c.control_paired_rule,
        "collapse_pair": True,
        "room": (0.1, c.room_min_depth_share),
        "room_fail_stands": True,
    }
    rob, log, unm, unm_o = [], {}, [], []
    _check(
        rob,
        crit,
        _quantity("gap"),
        50,
        0,
        "scale estimator",
        ["mean (declared)", "median_rest"],
        [StepPair((m, m + 0.3), 16), StepPair((m, f), 4)],
        log=log,
        unmeasured=unm,
        unmeasured_outcomes=unm_o,
        **rules,
    )
    depth1 = float(abs(f.mean(0)[1] - m.mean(0)[1]))
    assert len(unm) == 1, unm
    want = (
        f"scale estimator median_rest (K = 4): {depth1:.3f} over depth 1, the 1 with room (all depths 1..3: "
    )
    assert unm[0].startswith(want + f"{_gap_all(m, f):.3f}) (holds): no headroom"), unm[0]
    x = log["scale estimator"][1]
    assert x["K"] == 4 and x["depths"] == [1] and not x["measured"]
    assert x["value_all_depths"] == pytest.approx(_gap_all(m, f), abs=1e-12)
    assert log["scale estimator"][0]["K"] == 16
    # a plain tuple carries no step count: no tag
    log2, unm2 = {}, []
    _check(
        [],
        crit,
        _quantity("gap"),
        50,
        0,
        "x",
        ["a"],
        [(m, f)],
        log=log2,
        unmeasured=unm2,
        unmeasured_outcomes=[],
        **rules,
    )
    assert unm2[0].startswith(f"x a: {depth1:.3f} over depth 1") and "K" not in log2["x"][0]


def _fitted_res(times: list[float]) -> dict:
    return {
        "fitted": [
            {"split_seed": 0, "direction": "A->B", "times": times},
            {"split_seed": 0, "direction": "B->A", "times": times},
        ]
    }


TC = {
    "source": "review/round11/fit_scale_check_K4_T16.json",
    "fit": "split seed 0, fitted on half A, scored on half B",
    "K": 4,
    "declared_max_time": 8.0,
    "max_time": 16.0,
    "times": [1.0, 9.25, 2.0],
    "value_declared_cap": {"value": 0.2672, "ci95": [0.248, 0.287], "outcome": "fails"},
    "value": {"value": 0.2686, "ci95": [0.249, 0.289], "outcome": "fails"},
}


def test_r14_f3_r15_f5_the_time_cap_reading_names_every_capped_fit_and_cites_the_committed_refits():
    """Two fits at K = 4 reach the cap at layer 1 (0-based); a refit of one of them with a wider grid is
    cited, and the other is said not to be refitted; a ladder's main-value fit at K = 16 at the cap is counted
    too."""
    from attnflow.studies.real_model_flows import FlowsConfig, _caps, _quantity

    c = FlowsConfig(families=["tiny-bert"], bootstrap=20)
    res, q = _fitted_res([1.0, c.max_time, 2.0]), _quantity("gap")
    extra: dict = {}
    old = _caps({}, "tiny-bert", res, "fitted_time", "cos", "model", None, q, c, extra)
    assert old == (
        "the time grid's cap 8 binds at layer 1 (0-based) in 2 of 2 fits (seed 0 A->B, K = 4; seed 0 B->A, "
        "K = 4; a fit there may want more time; review round 8, F9; not refitted)"
    )
    summary = {"families": {"tiny-bert": {"time_cap_check": TC}}}
    extra = {}
    new = _caps(summary, "tiny-bert", res, "fitted_time", "cos", "model", None, q, c, extra)
    assert new.endswith(
        "refitted with the cap at 16: split seed 0, fitted on half A, scored on half B, K = 4 "
        "(review/round11/fit_scale_check_K4_T16.json): layer 1 9.25; the value 0.267 [0.248, 0.287] "
        "(fails) -> 0.269 [0.249, 0.289] (fails) (1 of the capped fits not refitted))"
    )
    assert extra["time_cap"]["refits"] == [TC]
    # the main value's fit at the reported K = 16 (a ladder rung) is counted, and a second refit cited
    res["step_ladder"] = {"levels": {"16": {"fitted": {"split_seed": 0, "direction": "A->B",
                                                        "times": [1.0, c.max_time, 2.0]}}}}  # fmt: skip
    ex16 = {"step_ladder": {"chosen": 4, "reported_K": 16}}
    tc16 = {**TC, "K": 16, "source": "k16.json"}
    both = {"families": {"tiny-bert": {"time_cap_check": [TC, tc16]}}}
    r16 = _caps(both, "tiny-bert", res, "fitted_time", "cos", "model", None, q, c, ex16)
    assert (
        "in 3 of 3 fits (seed 0 A->B, K = 4; seed 0 B->A, K = 4; seed 0 A->B, K = 16 (the main value's);"
        in r16
    )
    assert "K = 16 (k16.json): layer 1 9.25" in r16 and r16.endswith("(1 of the capped fits not refitted))")
    # a refit of another grid than the run's is not cited
    other = {"families": {"tiny-bert": {"time_cap_check": {**TC, "declared_max_time": 4.0}}}}
    assert _caps(other, "tiny-bert", res, "fitted_time", "cos", "model", None, q, c, {}).endswith(
        "not refitted)"
    )


def _ns(outcomes: list[str]) -> dict:
    return {
        "record": "frames-follows-network-cos",
        "check": "permutation seed",
        "K_main": 16,
        "source": "review/round15/null_seeds_smollm2.json (declared first)",
        "per_K": {
            "16": {"seeds": list(range(len(outcomes))), "outcomes": outcomes},
            "4": {"seeds": list(range(len(outcomes))), "outcomes": ["fails"] * len(outcomes)},
        },
    }


def test_r14_f2_a_null_speaks_only_if_every_checked_seed_repeats_its_verdict():
    from attnflow.studies.real_model_flows import null_seeds_reading, seeds_counts, specificity

    vid = "frames-follows-network-cos"
    split = _ns(["fails", "void", "fails", "holds"])
    by, all_fail = seeds_counts(split)
    assert by == {"fails": [0, 2], "void": [1], "holds": [3]} and not all_fail
    assert seeds_counts(split, 4) == ({"fails": [0, 1, 2, 3]}, True)
    assert null_seeds_reading(split).startswith(
        "over permutation seeds 0, 1, 2, 3 (review/round15/null_seeds_smollm2.json (declared first)), each "
        "scored by the study's rules: K = 16: fails at 2 of 4 (seeds 0, 2), holds at 1 of 4 (seed 3), "
        "void at 1 of 4 (seed 1); K = 4: fails at 4 of 4"
    )
    base = {"verdict": "fails", "value": 0.113}
    spec = {
        "n-permuted": {vid: {**base, "seeds_check": split}},
        "n-random": {vid: {"verdict": "inconclusive", "value": 0.07}},
    }
    lab = specificity(vid, spec, "fails", "fails")
    assert lab.startswith(
        "fails; specificity undecided: the null's outcome depends on its seed (n-permuted fails at the run's "
        "seed, but depends on permutation seed (K = 16: fails at 2 of 4, holds at 1 of 4, void at 1 of 4; "
        "K = 4: fails at 4 of 4; review/round15/null_seeds_smollm2.json), n-random inconclusive)"
    )
    # every seed fails at K = 16 but not at K = 4: both named, the null does not speak
    k4 = _ns(["fails"] * 4)
    k4["per_K"]["4"]["outcomes"] = ["fails", "void", "fails", "fails"]
    k4["per_K"]["16"]["all_depths"] = [
        {"value": 0.11 + 0.01 * i, "ci95": [0.105, 0.12 + 0.01 * i]} for i in range(4)
    ]
    lab4 = specificity(vid, {**spec, "n-permuted": {vid: {**base, "seeds_check": k4}}}, "fails", "fails")
    assert (
        "(K = 16: fails at 4 of 4; values 0.110-0.140, upper bounds <= 0.150; K = 4: fails at 3 of 4, "
        "void at 1 of 4;"
    ) in lab4
    assert "not specific" not in lab
    # every seed a measured fail: the null fails, as before
    same = {**spec, "n-permuted": {vid: {**base, "seeds_check": _ns(["fails"] * 4)}}}
    assert specificity(vid, same, "fails", "fails").startswith(
        "fails, not specific to training (also fails in null n-permuted: 0.113)"
    )
    # the rule off: round 14's label
    assert specificity(vid, spec, "fails", "fails", seeds=False).startswith(
        "fails, not specific to training (also fails in null n-permuted: 0.113)"
    )
    # another null that speaks still decides; the seed-dependent one is named as not speaking
    other = {**spec, "n-random": {vid: {"verdict": "holds", "value": 0.05}}}
    lab = specificity(vid, other, "fails", "fails")
    assert lab.startswith(
        "fails; specific to training (holds in null n-random: 0.050); not speaking: "
        "n-permuted fails at the run's seed, but depends on permutation seed"
    )


def test_null_outcomes_carries_a_null_records_seeds_check():
    from attnflow.studies.real_model_flows import null_outcomes

    ns = _ns(["fails", "void"])
    recs = [
        {
            "id": "flows-minilm-permuted-frames-follows-network-cos",
            "verdict": "fails",
            "result": {"value": 0.11, "null_seeds_check": ns},
        },
        {"id": "flows-minilm-permuted-attention-overclusters", "verdict": "holds", "result": {"value": 0.2}},
    ]
    out = null_outcomes(recs, ["minilm", "minilm-permuted"])["minilm-permuted"]
    assert out["frames-follows-network-cos"]["seeds_check"] == ns
    assert "seeds_check" not in out["attention-overclusters"]


def _record(d: str, rid: str) -> dict:
    s = json.loads((ROOT / d / "summary.json").read_text())
    return next(v for v in s["verdicts"] if v["id"] == rid)


def test_committed_records_read_the_committed_checks():
    """The SmolLM2 records as committed: the null's seeds check (every seed's outcome recomputed here from the
    check's per-seed values with the declared rule) decides the null line; the time-cap reading cites the
    refit; a void check value names its step and its depths."""
    x = json.loads((ROOT / "review" / "round15" / "null_seeds_smollm2.json").read_text())
    assert x["step1_match"]["ok"] and x["n_sentences"] == 24
    per = x["per_K"]["16"]["per_seed"]
    fails = [p["choice_value"] for p in per if p["measured"] and p["outcome"] == "fails"]
    rid = "flows-smollm2-permuted-frames-follows-network-cos"
    null = _record("permuted_smollm2", rid)
    assert null["result"]["null_seeds_check"]["per_K"]["16"]["outcomes"].count("fails") == len(fails)
    assert (
        f"K = 16: fails at {len(fails)} of 10 (seeds {', '.join(map(str, fails))})"
        in null["result"]["reading"]
    )
    trained = _record("smollm2", "flows-smollm2-frames-follows-network-cos")
    lab = trained["result"]["null_specificity"]
    if len(fails) == 10:  # the declared rule: every seed a measured fail keeps 'also fails in null'
        assert "not specific to training (also fails in null smollm2-permuted" in lab
    else:
        assert lab.startswith("fails; specificity undecided: the null's outcome depends on its seed")
        assert f"fails at {len(fails)} of 10" in lab and "not specific" not in lab
    assert (
        "scale estimator median_rest (K = 4): 0.072 over depth 1, the 1 with room (all depths 1..30: 0.079)"
        in (trained["notes"])
    )
    fit = _record("smollm2", "flows-smollm2-fitted-time-cos")
    assert (
        "in 3 of 3 fits (seed 0 A->B, K = 4; seed 0 B->A, K = 4; seed 0 A->B, K = 16 (the main value's)"
        in (fit["notes"])
    )
    assert (
        "-> 0.269 [0.249, 0.289] (fails)" in fit["notes"]
        and "-> 0.260 [0.240, 0.281] (fails)" in fit["notes"]
    )
    assert "(1 of the capped fits not refitted)" in fit["notes"]


def test_r14_f2_the_rule_reads_a_null_runs_own_seeds_where_no_wider_check_exists():
    """A null record whose run's three permutation seeds give fails, fails and a value void for lack of room
    does not speak as a fail; where all three fail it does."""
    from attnflow.studies.real_model_flows import null_outcomes, run_seeds_check, specificity

    def rec(third: dict) -> dict:
        cpv = [
            {"choice_value": 0, "value": 0.113, "outcome": "fails", "measured": True, "K": 16},
            {"choice_value": 1, "value": 0.118, "outcome": "fails", "measured": True, "K": 4},
            {"choice_value": 2, "value": 0.087, **third, "K": 4},
        ]
        return {
            "id": "flows-minilm-permuted-frames-follows-network-cos",
            "verdict": "fails",
            "result": {"value": 0.113, "controls_per_value": {"permutation seed": cpv}},
        }

    void = {"outcome": "holds", "measured": False, "no_headroom": True}
    sc = run_seeds_check(rec(void)["result"])
    assert sc["K_main"] == "the run's steps (seed 0 at K = 16, seed 1 at K = 4, seed 2 at K = 4)"
    assert sc["per_K"][sc["K_main"]]["outcomes"] == ["fails", "fails", "void for lack of room"]
    vid = "frames-follows-network-cos"
    spec = null_outcomes([rec(void)], ["minilm", "minilm-permuted"])
    lab = specificity(vid, spec, "fails", "fails")
    assert lab.startswith(
        "fails; specificity undecided: the null's outcome depends on its seed (minilm-permuted "
        "fails at the run's seed, but depends on permutation seed (the run's steps (seed 0 at K = 16, seed 1 "
        "at K = 4, seed 2 at K = 4): fails at 2 of 3, void for lack of room at 1 of 3; the run's null_seeds "
        "(controls_per_value)))"
    )
    spec = null_outcomes([rec({"outcome": "fails", "measured": True})], ["minilm", "minilm-permuted"])
    assert specificity(vid, spec, "fails", "fails").startswith(
        "fails, not specific to training (also fails in null minilm-permuted: 0.113)"
    )
    one = rec(void)
    one["result"]["controls_per_value"]["permutation seed"] = one["result"]["controls_per_value"][
        "permutation seed"
    ][:1]
    assert run_seeds_check(one["result"]) is None


def test_every_other_committed_null_that_speaks_repeats_its_verdict_at_its_seeds():
    """Applied to the committed runs after the data, the rule changes only SmolLM2's (f) vs (n) label: every
    other trained label still rests on nulls whose three seeds agree."""
    labs = {}
    for d in (".", "smollm2"):
        for v in json.loads((ROOT / d / "summary.json").read_text())["verdicts"]:
            lab = (v.get("result") or {}).get("null_specificity")
            if lab:
                labs[v["id"]] = lab
    undecided = sorted(k for k, v in labs.items() if "depends on its seed" in v)
    assert undecided == ["flows-smollm2-frames-follows-network-cos"]


def test_r15_f1_a_value_over_enough_depths_with_room_is_the_one_named_beside_its_outcome():
    """(n) at 0.40 / 0.60 / 0.95: depths 1 and 2 have room (2 of 3, 2 needed), so the record's value is taken
    over them; the notes name that value beside its outcome, not the all-depth one (review round 15, F1)."""
    from flows_helpers import fake_family, records_by_id

    res = fake_family({}, trend=0.1)
    rng = np.random.default_rng(0)
    for src, depths in (("no_mlp", [0.40, 0.60, 0.95]), ("frames", [0.45, 0.65, 0.80])):
        a = res["stats"]["sphere"][src]["cos"]
        a[:, 1:] = np.asarray(depths) + 0.005 * rng.standard_normal((a.shape[0], 3))
    m = np.asarray(res["stats"]["sphere"]["no_mlp"]["cos"], float)
    f = np.asarray(res["stats"]["sphere"]["frames"]["cos"], float)
    r = records_by_id(res, bootstrap=20)["frames-follows-network-cos"]
    kept = float(np.mean(np.abs(f.mean(0)[1:3] - m.mean(0)[1:3])))
    assert r.result["room_per_depth"]["kept"] == [1, 2]
    assert r.result["value"] == pytest.approx(kept, abs=1e-12)
    assert r.result["value_all_depths"] == pytest.approx(_gap_all(m, f), abs=1e-12)
    assert f"the value {kept:.3f} is " in r.notes
    assert f"the value {_gap_all(m, f):.3f} is " not in r.notes


def test_committed_minilm_fitted_time_null_holds_at_ten_seeds_but_over_fewer_depths():
    """Review round 15, F3: the null that made MiniLM-L6's fitted-time fail 'specific to training' holds at
    every permutation seed 0..9, at K = 16 and at K = 4 (recounted here from the check); review round 16, F1:
    it holds over its depths with room 1..3 only, where the trained record does not fail, so the label is
    undecided."""
    x = json.loads((ROOT / "review" / "round15" / "null_seeds_minilm_fitted.json").read_text())
    assert x["step1_match"]["ok"]
    for K in ("16", "4"):
        per = x["per_K"][K]["per_seed"]
        assert len(per) == 10 and all(p["measured"] and p["outcome"] == "holds" for p in per)
    null = _record("permuted", "flows-minilm-permuted-fitted-time-cos")
    assert "K = 16: holds at 10 of 10" in null["result"]["reading"]
    trained = _record(".", "flows-minilm-fitted-time-cos")["result"]["null_specificity"]
    assert trained.startswith("fails; specificity undecided: the null has room at fewer depths")
    assert "minilm-permuted holds over its depths with room [1, 2, 3]" in trained
