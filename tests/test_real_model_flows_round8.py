"""Review round 8 of the ``real_model_flows`` verdicts (review8_findings.md; rules declared 2026-12-04,
round 8, in the config): the guard 'too slow at T_l = 1' only on flows with a time (F5), the room per
depth of the 'over-clusters' and cosine 'follows' records (F1, F2), the MLP-jump reading that compares
like with like (F4), the scale and time caps named (F3, F9). Fake per-sentence profiles only."""

from __future__ import annotations

import pytest
from flows_helpers import fake_family

pytest.importorskip("torch")
pytest.importorskip("transformers")

B = 20


def _recs(res: dict, fam: str = "tiny-bert", summary: dict | None = None, **cfg) -> dict:
    from attnflow.studies.real_model_flows import FlowsConfig, records

    c = FlowsConfig(families=["tiny-bert"], bootstrap=B, **cfg)
    return {r.id.removeprefix(f"flows-{fam}-"): r for r in records(summary or {}, c, {fam: res})}


def _nulls(res: dict, fam: str = "tiny-bert-permuted", **cfg) -> dict:
    from attnflow.studies.real_model_flows import null_outcomes

    recs = [r.to_json() for r in _recs(res, fam=fam, **cfg).values()]
    return {"null_outcomes": {"tiny-bert": null_outcomes(recs, [fam], {fam: True})}}


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
