"""Review round 16 of the ``real_model_flows`` null-specificity labels (config ``specificity_same_depths``,
dated 2026-12-04): like with like. A null scored over its depths with room only is compared with the trained
record over the same depths (F1); a 'depends on X' record is compared at its main setting and says so (F2);
nulls that disagree leave specificity undecided (F6); a null's value names its seeds and steps (F3); a seed
check names where its all-depth intervals lie (F5). Fake arrays and entries; values checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

VID = "fitted-time-cos"


def _spec(**nulls) -> dict:
    return {nf: {VID: e} for nf, e in nulls.items()}


def test_f1_the_trained_record_over_the_nulls_depths_is_scored_with_its_own_controls():
    """A 'follows the model' gap over depths 1..3 of 6: the trained flow is 0.02 off at depths 1-3 and 0.5
    off at depth 6. Over all depths it fails; over the null's depths 1..3 it holds (value checked against
    NumPy)."""
    from attnflow.analysis.verdicts import Criterion
    from attnflow.studies.real_model_flows import FlowsConfig, _on_depths_outcome, _quantity, controls_of

    c = FlowsConfig(families=["tiny-bert"], bootstrap=50)
    rng = np.random.default_rng(0)
    means = np.array([0.1, 0.2, 0.35, 0.5, 0.6, 0.7, 0.75])
    m = means[None, :] + 0.005 * rng.standard_normal((12, 7))
    f = m + np.array([0, 0.02, 0.02, 0.02, 0.1, 0.1, -0.5])[None, :]
    crit = Criterion(quantity="gap", op="<=", threshold=0.1, declared_in="test")
    scoring = {
        "kind": "gap",
        "margin": 0.1,
        "rule": c.control_paired_rule,
        "collapse_pair": True,
        "headroom": None,
        "room": (0.1, 0.5),
        "room_fail_stands": True,
        "collapse_eps": None,
    }
    x = _on_depths_outcome(_quantity("gap"), [1, 2, 3], (m, f), crit, 50, 0, controls_of("gap", c), scoring)
    assert x["depths"] == [1, 2, 3]
    assert x["value"] == pytest.approx(float(np.mean(np.abs((f - m).mean(0)[1:4]))), abs=1e-12)
    assert x["outcome"] == "holds"


def test_f1_a_null_over_fewer_depths_cannot_contrast_where_the_trained_record_matches_it_there():
    from attnflow.studies.real_model_flows import specificity

    null = {
        "verdict": "holds",
        "value": 0.064,
        "depths": [1, 2, 3],
        "trained_on_depths": {
            "depths": [1, 2, 3],
            "value": 0.091,
            "ci95": [0.087, 0.099],
            "outcome": "inconclusive",
        },
    }
    lab = specificity(VID, _spec(**{"n-permuted": null}), "fails", "fails", like_with_like=True)
    assert lab == (
        "fails; specificity undecided: the null has room at fewer depths, and there the trained record has "
        "not its own outcome (n-permuted holds over its depths with room [1, 2, 3], where the trained "
        "record's value is 0.091 [0.087, 0.099] (inconclusive))"
    )
    # where the trained record keeps its outcome over those depths, the null speaks as before
    same = {**null, "trained_on_depths": {**null["trained_on_depths"], "outcome": "fails"}}
    assert specificity(VID, _spec(**{"n-permuted": same}), "fails", "fails", like_with_like=True).startswith(
        "fails; specific to training (holds in null n-permuted: 0.064, over its depths with room [1, 2, 3] "
        "(the trained record there: fails))"
    )
    # round 15's label
    assert specificity(VID, _spec(**{"n-permuted": null}), "fails", "fails").startswith(
        "fails; specific to training (holds in null n-permuted: 0.064)"
    )


def test_f2_a_depends_record_is_compared_at_its_main_setting_and_an_undecided_main_has_nothing_to_compare():
    from attnflow.studies.real_model_flows import specificity

    spec = _spec(**{"n-permuted": {"verdict": "holds", "value": 0.3}})
    v = "depends on stand-still margin"
    assert specificity(VID, spec, v, "holds", like_with_like=True) == (
        f"{v} (main holds), not specific to training at its main setting (the other settings of stand-still "
        "margin not compared) (also holds in null n-permuted: 0.300)"
    )
    assert specificity(VID, spec, v, "inconclusive", like_with_like=True).startswith("no outcome to compare")
    assert "whichever way stand-still margin is settled" in specificity(VID, spec, v, "inconclusive")


def test_f6_nulls_that_disagree_leave_specificity_undecided():
    from attnflow.studies.real_model_flows import specificity

    spec = _spec(
        **{
            "n-permuted": {"verdict": "holds", "value": 0.641},
            "n-random": {"verdict": "fails", "value": 0.068},
        }
    )
    assert specificity(VID, spec, "holds", "holds", like_with_like=True) == (
        "holds; specificity undecided: the nulls disagree (holds in null n-permuted: 0.641; fails in null "
        "n-random: 0.068)"
    )
    assert specificity(VID, spec, "holds", "holds").startswith("holds, not specific to training (also holds")


def test_f3_f5_a_null_value_names_its_seeds_and_a_seed_check_where_its_intervals_lie():
    from attnflow.studies.real_model_flows import specificity

    ns = {
        "check": "permutation seed",
        "K_main": 16,
        "source": "x.json",
        "threshold": 0.1,
        "per_K": {
            "16": {"seeds": [0, 1, 2], "outcomes": ["holds"] * 3},
            "4": {"seeds": [0, 1, 2], "outcomes": ["holds"] * 3},
        },
    }
    spec = _spec(**{"n-permuted": {"verdict": "holds", "value": 0.064, "seeds_check": ns}})
    assert specificity(VID, spec, "fails", "fails", like_with_like=True) == (
        "fails; specific to training (holds in null n-permuted: 0.064, the same at 3 permutation seeds "
        "(K = 16; K = 4))"
    )
    split = {
        **ns,
        "per_K": {
            "16": {
                "seeds": [0, 1, 2],
                "outcomes": ["fails", "void", "void"],
                "all_depths": [
                    {"value": 0.12, "ci95": [0.11, 0.13]},
                    {"value": 0.09, "ci95": [0.08, 0.095]},
                    {"value": 0.1, "ci95": [0.09, 0.11]},
                ],
            }
        },
    }
    spec = _spec(**{"n-permuted": {"verdict": "fails", "value": 0.12, "seeds_check": split}})
    lab = specificity(VID, spec, "fails", "fails", like_with_like=True)
    assert (
        "values 0.090-0.120, upper bounds <= 0.130; all-depth intervals: 1 below 0.1, 1 across it, 1 above"
        in lab
    )


def test_committed_labels_after_round_16():
    """The four labels round 16 changed, as committed; the trained value over the null's depths is recomputed
    here from the committed per-sentence arrays (NumPy)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "docs" / "studies" / "real_model_flows"

    def rec(d: str, rid: str) -> dict:
        s = json.loads((root / d / "summary.json").read_text())
        return next(v for v in s["verdicts"] if v["id"] == rid)

    fo = rec(".", "flows-minilm-frames-overclusters")["result"]["null_specificity"]
    vd = json.loads((root / "summary.json").read_text())["families"]["minilm"]["verdict_data"]
    # review round 17, F5: the trained flow at the null's main step count (16; the trained record reports 64)
    null = rec("permuted", "flows-minilm-permuted-frames-overclusters")
    K_null = null["result"]["robustness_K"]["main value"]
    lev = vd["step_ladder"]["levels"][str(K_null)]["sphere"]
    m, f = np.asarray(vd["stats"]["sphere"]["model"]["cos"]), np.asarray(lev["frames"]["cos"])
    over13 = float(np.mean((f.mean(0) - m.mean(0))[1:4]))
    assert f"where the trained record's value at K = {K_null} is {over13:.3f} [" in fo and "(fails))" in fo
    assert fo.split("; ")[1].startswith("specificity undecided at its main setting (the other settings of ")
    assert "the null has room at fewer depths" in fo
    nm = rec("smollm2", "flows-smollm2-no-mlp-network-overclusters")["result"]["null_specificity"]
    assert nm.startswith("holds; specificity undecided: the nulls disagree (holds in null smollm2-permuted")
    assert "fails in null smollm2-random: 0.068" in nm
    b = rec(".", "flows-minilm-l3-biases-overclusters")["result"]["null_specificity"]
    assert b.startswith("no outcome to compare")
    a = rec(".", "flows-minilm-l3-attention-overclusters")["result"]["null_specificity"]
    assert "not specific to training at its main setting (the other settings of stand-still margin not " in a
    assert "whichever way" not in a


def test_r17_f2_an_inconclusive_record_with_a_decided_main_is_compared_at_its_main_setting():
    from attnflow.studies.real_model_flows import specificity

    spec = _spec(**{"n-random": {"verdict": "fails", "value": 0.0026}})
    assert specificity(VID, spec, "inconclusive", "fails", like_with_like=True) == (
        "inconclusive (main fails), not specific to training at its main setting (the checks that leave it "
        "undecided not compared) (also fails in null n-random: 0.003)"
    )
    assert specificity(VID, spec, "inconclusive", "fails").startswith(
        "no outcome to compare (the trained record is inconclusive)"
    )
    # review round 17, F4: an undecided main is named
    v = "depends on stand-still margin"
    assert specificity(VID, spec, v, "inconclusive", like_with_like=True).startswith(
        f"no outcome to compare (the trained record's verdict is {v}, its main outcome inconclusive)"
    )


def test_r17_f1_f3_f6_the_label_says_what_decides_each_side():
    from attnflow.studies.real_model_flows import specificity

    td = {
        "depths": [1, 2, 3],
        "value": 0.091,
        "ci95": [0.087, 0.099],
        "outcome": "inconclusive",
        "outcome_flow": "holds",
        "holds_reachable": False,
    }
    lab = specificity(
        VID,
        _spec(**{"n-p": {"verdict": "holds", "value": 0.064, "depths": [1, 2, 3], "trained_on_depths": td}}),
        "fails",
        "fails",
        like_with_like=True,
    )
    assert lab.endswith(
        "value is 0.091 [0.087, 0.099] (inconclusive; holds by the criterion alone; a hold was out of reach "
        "there: the reference itself is too close to standing still))"
    )
    lab = specificity(
        VID,
        _spec(**{"n-r": {"verdict": "fails", "value": 0.068, "excess_over_room": 0.469}}),
        "fails",
        "fails",
        like_with_like=True,
    )
    assert "(also fails in null n-r: 0.068, 0.47 of a collapse's value over all depths)" in lab
    lab = specificity(
        VID,
        _spec(**{"n-p": {"verdict": "depends on permutation seed", "value": 0.1}}),
        "fails",
        "fails",
        like_with_like=True,
    )
    assert lab.startswith(
        "specificity untested (every null fails only by the guard 'too slow at T_l = 1', has "
        "no headroom, is inconclusive, depends on a choice (such as its seed), or is a"
    )


def test_r17_committed_labels():
    """Review round 17, F2: an inconclusive record with a decided main outcome is compared at its main
    setting; a null that does not speak is not named as a contrast on fewer depths."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "docs" / "studies" / "real_model_flows"
    recs = {v["id"]: v for v in json.loads((root / "summary.json").read_text())["verdicts"]}

    def rec(_d: str, rid: str) -> dict:
        return recs[rid]

    nm6 = rec(".", "flows-minilm-no-mlp-network-overclusters")["result"]["null_specificity"]
    assert nm6.startswith("inconclusive (main fails), not specific to training at its main setting")
    assert "minilm-random: 0.003" in nm6
    # a null that does not speak is not named as a contrast on fewer depths
    fn = rec(".", "flows-minilm-frames-follows-network-cos")["result"]["null_specificity"]
    assert fn.startswith("specificity untested") and "fewer depths" not in fn


def test_r17_f5_the_like_depth_comparison_names_its_step_count():
    from attnflow.studies.real_model_flows import specificity

    td = {"depths": [1, 2, 3], "value": 0.074, "ci95": [0.067, 0.081], "outcome": "fails", "K": 16}
    e = {"verdict": "fails", "value": -0.005, "depths": [1, 2, 3], "trained_on_depths": td}
    lab = specificity(VID, _spec(**{"n-p": e}), "holds", "holds", like_with_like=True)
    assert "where the trained record's value at K = 16 is 0.074 [0.067, 0.081] (fails))" in lab
