"""Review round 8 of the ``real_model_flows`` verdicts (review8_findings.md; rules declared 2026-12-04,
round 8, in the config): the guard 'too slow at T_l = 1' only on flows with a time (F5), the room per
depth of the 'over-clusters' and cosine 'follows' records (F1, F2), the MLP-jump reading that compares
like with like (F4), the scale and time caps named (F3, F9). Fake per-sentence profiles only."""

from __future__ import annotations

from functools import partial

import pytest
from flows_helpers import fake_family, records_by_id

pytest.importorskip("torch")
pytest.importorskip("transformers")

B = 20


_recs = partial(records_by_id, bootstrap=B)


def _nulls(res: dict, fam: str = "tiny-bert-permuted", **cfg) -> dict:
    from attnflow.studies.real_model_flows import null_outcomes

    recs = [r.to_json() for r in _recs(res, fam=fam, **cfg).values()]
    return {"null_outcomes": {"tiny-bert": null_outcomes(recs, [fam], {fam: True})}}


def _trained_with_null(null: dict, flow: str, rid: str) -> tuple:
    """Record ``rid`` of a trained family whose ``flow`` is 0.3 above the model, labelled with the null
    ``null``'s outcomes: under the round-8 room per depth, then under the round-7 rule (no room per depth)."""
    trained = fake_family({flow: 0.3})
    return tuple(_recs(trained, summary=_nulls(null, **cfg))[rid] for cfg in ({}, {"room_per_depth": False}))


def _set_cos(res: dict, src: str, depths: list[float], seed: int = 0) -> None:
    """Sentence profiles of ``src``: depth 0 as stored, depths 1..L the given mean cosines + noise 0.005."""
    import numpy as np

    a = res["stats"]["sphere"][src]["cos"]
    noise = 0.005 * np.random.default_rng(seed).standard_normal((a.shape[0], len(depths)))
    a[:, 1:] = np.minimum(np.asarray(depths) + noise, 1.0)


def test_f5_the_guard_is_not_attached_to_the_no_mlp_network():
    """A slow null (every flow the model + 0.05: fails, last depth far below 0.9): its attention flow
    (a) keeps the guard 'too slow at T_l = 1', the no-MLP network (n), which has no time, does not; so
    the trained (n) fail is 'not specific to training' (the null fails too), where round 7 said
    'specificity untested'."""
    null = fake_family({"attention": 0.05, "no_mlp": 0.05})
    nul = _recs(null, fam="tiny-bert-permuted")
    assert nul["attention-overclusters"].verdict == "fails"
    assert nul["attention-overclusters"].result["null_fail_guard"]
    n = nul["no-mlp-network-overclusters"]
    assert n.verdict == "fails" and "null_fail_guard" not in n.result
    old = _recs(null, fam="tiny-bert-permuted", guard_time_flows_only=False)["no-mlp-network-overclusters"]
    assert old.verdict == "fails" and old.result["null_fail_guard"]  # round 7: the guard on (n) too

    t = _recs(fake_family({}), summary=_nulls(null))["no-mlp-network-overclusters"]
    assert t.verdict == "fails"
    assert t.result["null_specificity"].startswith(
        "fails, not specific to training (also fails in null tiny-bert-permuted: 0.05"
    )
    s7 = _nulls(null, guard_time_flows_only=False)
    t7 = _recs(fake_family({}), summary=s7)["no-mlp-network-overclusters"]
    assert t7.result["null_specificity"].startswith("specificity untested")


def _masked_mean(res: dict, flow: str, depths: list[int], ref: str = "model") -> float:
    """The independent reference: mean over ``depths`` of (flow - reference) mean cosine (numpy only)."""
    import numpy as np

    f = np.asarray(res["stats"]["sphere"][flow]["cos"], float).mean(0)
    m = np.asarray(res["stats"]["sphere"][ref]["cos"], float).mean(0)
    return float(np.mean([f[d] - m[d] for d in depths]))


def test_f1_room_per_depth_takes_the_value_over_the_depths_with_room():
    """A null model at 0.50 / 0.85 / 0.95 (room 0.50, 0.15, 0.05): depth 3 has no room for 0.1. Its flow at
    0.62 / 0.97 / 0.99 over-clusters by 0.12 at depths 1-2 (holds there) and 0.093 over 1..3 (fails by
    the round-7 mean, the flow being fast). Round 8 takes depths 1-2 (2 of 3 >= ceil(1.5))."""
    res = fake_family({}, trend=0.1)
    _set_cos(res, "model", [0.50, 0.85, 0.95])
    _set_cos(res, "attention", [0.62, 0.97, 0.99], seed=1)
    a = _recs(res, fam="tiny-bert-permuted")["attention-overclusters"]
    assert a.result["room_per_depth"]["kept"] == [1, 2]
    assert a.result["value"] == pytest.approx(_masked_mean(res, "attention", [1, 2]), abs=1e-9)
    assert a.result["value_all_depths"] == pytest.approx(_masked_mean(res, "attention", [1, 2, 3]), abs=1e-9)
    assert a.verdict == "holds"
    old = _recs(res, fam="tiny-bert-permuted", room_per_depth=False)["attention-overclusters"]
    assert old.verdict == "fails" and old.result["value"] == pytest.approx(a.result["value_all_depths"])
    # the reviewer's alternative, descriptive: excess over the declared depths / the collapse's value there
    room = 1.0 - (0.50 + 0.85 + 0.95) / 3
    assert a.result["excess_over_room"] == pytest.approx(a.result["value_all_depths"] / room, abs=0.01)
    # a trained family whose every depth has room is unchanged by the rule
    t = fake_family({"attention": 0.3})
    assert _recs(t)["attention-overclusters"].result["value"] == pytest.approx(
        _recs(t, room_per_depth=False)["attention-overclusters"].result["value"]
    )


def test_f1_too_few_depths_with_room_is_no_headroom_and_the_null_falls_silent():
    """A null model at 0.60 / 0.95 / 0.95: mean room 0.167 passes round 7's test, but only 1 of 3 depths has
    room (2 needed). Its fast flow's fail (0.077) was 'specific to training' evidence in round 7; in round 8
    the null has no headroom and the trained hold's specificity is untested."""
    res = fake_family({}, trend=0.1)
    _set_cos(res, "model", [0.60, 0.95, 0.95])
    _set_cos(res, "attention", [0.75, 0.99, 0.99], seed=1)
    a = _recs(res, fam="tiny-bert-permuted")["attention-overclusters"]
    assert a.verdict == "inconclusive"
    assert a.result["reading"] == "inconclusive: no headroom"
    assert a.result["unmeasured_main"].startswith("no headroom: only 1 of 3 depths have room")
    old = _recs(res, fam="tiny-bert-permuted", room_per_depth=False)["attention-overclusters"]
    assert old.verdict == "fails"
    t, t7 = _trained_with_null(res, "attention", "attention-overclusters")
    assert t.verdict == "holds" and t.result["null_specificity"].startswith("specificity untested")
    assert t7.result["null_specificity"].startswith("holds; specific to training (fails in null")


def test_f2_a_cosine_follows_value_of_a_collapsing_null_has_no_room():
    """A null model at 0.40 / 0.95 / 0.95 whose MLP flow (e) follows it within 0.02: it 'holds' by round 7
    (its collapse control, 0.233 off, fails); but at depths 2-3 a collapse follows the model within 0.05
    too, and only 1 of 3 depths has room: no headroom in round 8. The trained fail (0.3 off) loses its
    'specific to training' label."""
    res = fake_family({}, trend=0.1)
    _set_cos(res, "model", [0.40, 0.95, 0.95])
    _set_cos(res, "mlp", [0.42, 0.97, 0.97], seed=1)
    e = _recs(res, fam="tiny-bert-permuted")["mlp-cos"]
    assert e.verdict == "inconclusive" and "no headroom" in e.result["reading"]
    e7 = _recs(res, fam="tiny-bert-permuted", room_per_depth=False)["mlp-cos"]
    assert e7.verdict == "holds"
    t, t7 = _trained_with_null(res, "mlp", "mlp-cos")
    assert t.verdict == "fails" and t.result["null_specificity"].startswith("specificity untested")
    assert t7.result["null_specificity"].startswith("fails; specific to training (holds in null")


def _table(speed: list[float], angle: list[float], t1: list[float]) -> dict:
    return {"network_angle": angle, "flow_speed": speed, "flow_angle_T1": t1}


def test_f4_the_factor_range_that_flags_the_same_layers():
    """Ratios 1.8 / 1.0 (family a) and 6.12 / 0.5 (family b): factor 3 flags b's layer 0 only, and so does
    any factor in [1.8, 6.12)."""
    from attnflow.studies.real_model_flows import mlp_factor_range, mlp_jumps

    tabs = {"a": _table([1.8, 0.3], [1.0, 0.3], [1.0, 0.3]), "b": _table([6.12, 0.1], [1.0, 0.2], [1.5, 0.1])}
    r = mlp_factor_range(tabs, 3.0)
    assert r["low"] == pytest.approx(1.8) and r["high"] == pytest.approx(6.12)
    assert r["low_at"] == "a layer 0" and r["high_at"] == "b layer 0"
    for f in (1.81, 3.0, 6.11):  # the same layers anywhere in the range
        assert [mlp_jumps(t, f) for t in tabs.values()] == [[], [0]]
    assert mlp_jumps(tabs["b"], 6.2) == [] and mlp_jumps(tabs["a"], 1.7) == [0]  # outside it: others


def test_f4_the_jump_reading_compares_the_turn_after_one_unit_of_time_and_the_direction():
    """(e), (g) sit at one point from depth 1 and layer 0 is a jump (10 rad per unit time against 1.00); its
    turn after one unit of time is 1.02 rad: the reading compares 1.02 with 1.00, and the flow's depth-1
    mean cosine (1.000) with the model's, and names the factor range from the summary."""
    from attnflow.studies.real_model_flows import mlp_factor_range

    res = fake_family({}, trend=0.1)
    for f in ("mlp", "frames_mlp"):
        res["stats"]["sphere"][f]["cos"][:, 1:] = 1.0
    res["mlp_layers"] = _table([10.0, 0.4, 0.3], [1.0, 0.3, 0.3], [1.02, 0.35, 0.3])
    rng = mlp_factor_range({"tiny-bert": res["mlp_layers"]}, 3.0)
    m1 = float(res["stats"]["sphere"]["model"]["cos"][:, 1].mean())
    v = _recs(res, summary={"mlp_factor_range": rng})
    for k in ("mlp-cos", "frames-mlp-cos", "mlp-erank"):  # erank too: the mean cosines, not the ranks
        r = v[k]
        assert r.verdict == "inconclusive"  # the class stays combine's; counted apart as unmeasured
        assert r.result["reading"].startswith(
            "unmeasured (collapses at layer 0): after one unit of time layer 0's MLP flow turns each token "
            "by 1.02 rad, the network by 1.00; the direction differs: every token goes to one point "
            f"(depth-1 mean cosine 1.000 against the model's {m1:.3f})"
        )
        assert "any mlp_jump_factor in (1.33, 10.00) flags the same layers" in r.result["unmeasured_main"]
        assert r.result["mlp_jump"]["factor_range_same_layers"]["low"] == pytest.approx(0.4 / 0.3)
    old = _recs(res, summary={"mlp_factor_range": rng}, mlp_jump_reading=False)["mlp-cos"]
    want = "inconclusive: layer 0's MLP is a jump (10.0 rad per unit time against 1.00)"
    assert old.result["reading"] == want


def test_f4_a_table_made_at_k0_has_no_turn_and_the_reading_says_so():
    """The study's own run stores the MLP table at K = 0 (no T = 1 integration: flow_angle_T1 None). The
    records must not divide None (a SmolLM2 rerun crashed there after the round-8 merge) and the reading says
    the flow's turn is not in the table, giving the network's turn and the direction."""
    res = fake_family({}, trend=0.1)
    for f in ("mlp", "frames_mlp"):
        res["stats"]["sphere"][f]["cos"][:, 1:] = 1.0
    res["mlp_layers"] = _table([10.0, 0.4, 0.3], [1.0, 0.3, 0.3], [None, None, None])
    m1 = float(res["stats"]["sphere"]["model"]["cos"][:, 1].mean())
    r = _recs(res)["mlp-cos"]
    assert r.verdict == "inconclusive"
    assert r.result["mlp_jump"]["flow_angle_T1"] == [None]
    assert r.result["mlp_jump"]["flow_angle_T1_over_network"] == [None]
    assert r.result["reading"].startswith(
        "unmeasured (collapses at layer 0): the network turns each token by 1.00 rad in layer 0 (the flow's "
        "turn after one unit of time is not in this run's table: made at K = 0); the direction differs: "
        f"every token goes to one point (depth-1 mean cosine 1.000 against the model's {m1:.3f})"
    )


def test_f9_a_fitted_time_record_names_where_the_time_cap_binds():
    """One of the four fits has T_l = max_time (8) at layer 1: the (c) record says the grid binds there."""
    res = fake_family({"fitted_time": 0.3})
    for i, x in enumerate(res["fitted"]):
        x["times"] = [1.0, 8.0 if i == 0 else 3.0, 2.0]
    r = _recs(res)["fitted-time-cos"]
    # review round 15, F5: the fits are named with their step count, the layers counted from 0
    assert r.result["time_cap"] == {"max_time": 8.0, "layers_at_cap": {"seed 0 A->B, K = 4": [1]},
                                    "layers": "0-based"}  # fmt: skip
    assert (  # review round 13, F5 appends how much worse the fit is than a constant time
        "the time grid's cap 8 binds at layer 1 (0-based) in 1 of 4 fits (seed 0 A->B, K = 4; a fit there "
        "may want more time; review round 8, F9; not refitted)" in r.result["reading"]
    )
    assert "time_cap" not in _recs(res, caps_named=False)["fitted-time-cos"].result
