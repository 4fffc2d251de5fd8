"""The step rule of ``real_model_flows`` (review round 3, F2: K = 4 Euler steps per unit time was not
converged) and the permuted null's seed check with the trained embeddings kept (F6b)."""

from __future__ import annotations

import numpy as np
import pytest
from flows_helpers import fake_ladder, with_chosen

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_choose_step_picks_the_smallest_converged_rung_and_flags_the_rest():
    from attnflow.studies.real_model_flows import choose_step

    tol = {"a": 0.025, "b": 0.0625}  # 1/4 of the thresholds 0.1 and 0.25
    cands = [4, 16, 64]
    # the review's MiniLM-L6 "(f) follows (n)" ladder: 0.091, 0.117, 0.125 -> 4 -> 16 moves 0.026 >= 0.025
    vals = {4: {"a": 0.091, "b": 0.50}, 16: {"a": 0.117, "b": 0.51}, 64: {"a": 0.125, "b": 0.52}}
    assert choose_step({4: vals[4]}, tol, cands) is None  # one rung decides nothing
    assert choose_step({K: vals[K] for K in (4, 16)}, tol, cands) is None  # 4 not converged, rungs left
    pick = choose_step(vals, tol, cands)
    assert pick["chosen"] == 16 and pick["converged"] == {"a": True, "b": True}
    assert pick["moves"][4]["a"] == pytest.approx(0.026) and pick["moves"][16]["a"] == pytest.approx(0.008)
    # converged at the first rung: the ladder stops after two rungs
    early = choose_step({4: {"a": 0.1, "b": 0.5}, 16: {"a": 0.11, "b": 0.55}}, tol, cands)
    assert early["chosen"] == 4 and list(early["moves"]) == [4]
    # a move just at the tolerance is not converged (strict <); b never converges: the largest rung, b flagged
    bad = {4: {"a": 0.1, "b": 0.1}, 16: {"a": 0.2, "b": 0.3}, 64: {"a": 0.21, "b": 0.3625}}
    pick = choose_step(bad, tol, cands)
    assert pick["chosen"] == 64 and pick["converged"] == {"a": True, "b": False}


def test_records_report_the_ladder_and_mark_a_quantity_not_converged():
    """The records carry every rung's value and the chosen K; a record whose quantity still moves by >= 1/4
    of its threshold between the last two rungs is inconclusive ('step count: not converged'), however
    clearly it holds at the chosen step; the converged ones keep their verdict (no step check)."""
    from attnflow.studies.real_model_flows import FlowsConfig, records, verdict_tables

    c = FlowsConfig(families=["tiny-bert"], bootstrap=20)  # 20 resamples: values 0.02 vs threshold 0.1
    # (e)'s cosine gap: 0.02 + 0.0, 0.02 + 0.03, 0.02 + 0.06 -> moves 0.03 between every rung (>= 0.025);
    # the relative gaps of (e) move by 0.03 x 1 too (shift x), under their tolerance 0.0625
    fake = fake_ladder(drift=("mlp", lambda K: {4: 0.0, 16: 0.03, 64: 0.06}[K]))
    res = with_chosen(fake, 64)
    v = {r.id.split("tiny-bert-")[1]: r for r in records({}, c, {"tiny-bert": res})}
    r = v["mlp-cos"]
    lad = r.result["step_ladder"]
    assert lad["K"] == [4, 16, 64] and lad["chosen"] == 64 and lad["converged"] is False
    assert lad["values"] == pytest.approx([0.02, 0.05, 0.08], abs=1e-9)
    assert lad["move"] == pytest.approx(0.03) and lad["tolerance"] == pytest.approx(0.025)
    # review round 5 (F4, F6): the main value is unmeasured -- inconclusive with the reason, the value at
    # the rung the rule rejects is not the record's value, the checks are not combined
    assert r.result["value"] is None and r.result["outcome"] == "inconclusive"
    assert r.result["unmeasured_value"] == pytest.approx(0.08, abs=1e-9)
    assert r.result["outcome_if_measured"] == "holds" and r.robustness == []
    assert r.result["unmeasured_main"].startswith("step not converged at K = 64: K = 16 -> 64")
    assert r.verdict == "inconclusive" and r.notes.startswith("inconclusive: step not converged at K = 64")
    # the other records: converged, holding where they held, no step check
    for k in ("fitted-time-cos", "frames-mlp-cos"):
        assert v[k].result["step_ladder"]["converged"] is True, k
        assert not any(x.choice == "step count" for x in v[k].robustness), k
        assert v[k].verdict == "holds", k
    # (e)'s rank record converged in its own quantity, but flow (e) has not (review round 6, F4)
    assert v["mlp-erank"].result["step_ladder"]["converged"] is True
    assert v["mlp-erank"].verdict == "inconclusive"
    assert "flow (e) has not converged (mlp-cos: K = 16 -> 64" in v["mlp-erank"].result["unmeasured_main"]
    row = next(x for x in verdict_tables({"families": {"tiny-bert": {}},
                                          "verdicts": [x.to_json() for x in v.values()]})[0].rows
               if x["claim"] == "mlp-cos")  # fmt: skip
    assert row["steps"].startswith("K = 4: 0.020; K = 16: 0.050; K = 64: 0.080; chosen K = 64, NOT converged")


@pytest.fixture(scope="module")
def ladder_run():
    from attnflow.studies.real_model_flows import FlowsConfig, family_task

    # a ladder whose rungs differ from steps_per_layer (3): every computation must use the chosen rung
    c = FlowsConfig(families=["tiny-llama"], sentences=4, steps_per_layer=3, step_candidates=[1, 2],
                    max_time=1.0, bootstrap=10, split_seeds=[0], free_running_fit=False,
                    scale_alternatives=[], null_seeds=[0, 1], join_alternatives=[2])  # fmt: skip
    return c, family_task(c.model_dump(), "tiny-llama-permuted")


def test_family_task_runs_the_records_and_the_variants_at_the_chosen_step(ladder_run):
    from attnflow.bridge.nulls import permuted_null
    from attnflow.studies.real_model_flows import (
        STEP_FLOWS,
        _lite,
        _step_groups,
        choose_step,
        load_family,
        step_tolerances,
    )

    c, res = ladder_run
    lad = res["step_ladder"]
    K = lad["chosen"]  # the step rule per flow (step_per_flow, the default): flow -> K
    assert res["step"] == K and set(K) == {*STEP_FLOWS, "fitted_time"} and set(K.values()) <= {1, 2}
    # the rule, recomputed from the stored values flow by flow, gives the stored choice
    vals = {int(k): v for k, v in lad["values"].items()}
    tol = step_tolerances(c)
    for f, vids in _step_groups(res, c).items():
        sub = {k: {v: x[v] for v in vids} for k, x in vals.items() if vids[0] in x}
        assert choose_step(sub, tol, c.step_candidates)["chosen"] == K[f], f
    # the main statistics are the chosen rung's (the same code path, the same numbers)
    for f in STEP_FLOWS:
        at_k = lad["levels"][str(K[f])]["sphere"][f]["cos"]
        np.testing.assert_allclose(res["stats"]["sphere"][f]["cos"], at_k, rtol=0, atol=1e-12)
    K = K["attention"]
    # the null-seed variant: _lite at the chosen K through the seed-1 null (blocks permuted, embeddings kept)
    trained, tokenize, _ = load_family("tiny-llama", c.seed)
    from attnflow.studies.real_model import load_corpus

    corpus = load_corpus()
    ids = [tokenize(corpus[k]) for k in res["corpus_index"]]
    w1 = permuted_null(trained, 1, keep_embeddings=True)
    with torch.no_grad():
        at_k, at_1 = _lite(w1, ids, c, K), _lite(w1, ids, c)  # c: steps_per_layer 3
    alt = res["variants"]["permutation seed"]["1"]
    np.testing.assert_allclose(
        alt["sphere"]["attention"]["cos"], at_k["sphere"]["attention"]["cos"], atol=1e-12
    )
    assert not np.allclose(alt["sphere"]["attention"]["cos"], at_1["sphere"]["attention"]["cos"], atol=1e-6)
    # z_0 is the trained model's for every seed (the seed changes the weights only): equal depth-0 cosines
    z0_alt = np.asarray(alt["sphere"]["model"]["cos"])[:, 0]
    np.testing.assert_allclose(
        z0_alt, np.asarray(res["stats"]["sphere"]["model"]["cos"])[:, 0], rtol=0, atol=1e-12
    )
    # joined sentences: as many inputs as the main run
    assert len(res["variants"]["joined sentences"]["2"]["tokens"]) == len(res["tokens"]) == 4


def test_permuted_null_keep_embeddings_shuffles_the_blocks_only():
    """F6b: with keep_embeddings the embeddings, embedding norm and final norm are the trained tensors and
    the blocks are those of the default draw of the same seed; another seed moves the blocks, not z_0."""
    from attnflow.bridge import forward
    from attnflow.bridge.nulls import permuted_null
    from attnflow.studies.real_model_flows import load_family

    for fam in ("tiny-bert", "tiny-llama"):
        w, tokenize, _ = load_family(fam, 0)
        full, k0, k1 = permuted_null(w, 0), permuted_null(w, 0, keep_embeddings=True), permuted_null(
            w, 1, keep_embeddings=True)  # fmt: skip
        for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            a = getattr(w, name)
            if a is not None:
                assert torch.equal(getattr(k0, name), a) and torch.equal(getattr(k1, name), a), (fam, name)
                assert not torch.equal(getattr(full, name), a), (fam, name)  # the default shuffles them
        for name in ("embedding_ln", "final_ln"):
            if getattr(w, name) is not None:
                assert torch.equal(getattr(k0, name).weight, getattr(w, name).weight), (fam, name)
        for la, lb, l1 in zip(full.layers, k0.layers, k1.layers, strict=True):  # blocks: the default draw's
            for f, v in vars(la).items():
                if isinstance(v, torch.Tensor):
                    assert torch.equal(v, getattr(lb, f)), (fam, f)
                    if v.numel() > 1 and v.unique().numel() > 1:
                        assert not torch.equal(v, getattr(l1, f)), (fam, f)
        ids = tokenize("the cat sat on the mat today")
        with torch.no_grad():
            z = [forward(x, ids).tokens for x in (w, k0, k1, full)]
        assert torch.equal(z[0][0], z[1][0]) and torch.equal(z[0][0], z[2][0])  # same z_0 for every seed
        assert not torch.equal(z[1][-1], z[2][-1])  # other weights, other trajectory
        assert not torch.equal(z[0][0], z[3][0])  # the default draw moves z_0 too
        assert k0.name.endswith("(block entries permuted, seed 0)")
    with pytest.raises(ValueError, match="keep_embeddings must be True or False: got 1"):
        permuted_null(w, 0, keep_embeddings=1)


def test_an_outcome_flip_between_rungs_is_not_converged_and_the_finest_rung_is_reported():
    """Review round 4, F4: (e)'s cosine gap 0.09 at K = 4 (holds), 0.11 at K = 16 (fails): the move 0.02 is
    under the tolerance 0.025 but the outcome flips, so the quantity is not converged; the record reports
    the finest rung computed (K = 16), and says which values stay at the run's K = 4."""
    from attnflow.studies.real_model_flows import FlowsConfig, records

    c = FlowsConfig(families=["tiny-bert"], bootstrap=20)  # paired constant shifts: degenerate intervals
    fake = fake_ladder(drift=("mlp", lambda K: {4: 0.07, 16: 0.09}[K]), Ks=(4, 16))
    v = {r.id.split("tiny-bert-")[1]: r for r in records({}, c, {"tiny-bert": with_chosen(fake, 4)})}
    r = v["mlp-cos"]
    lad = r.result["step_ladder"]
    assert lad["move"] == pytest.approx(0.02) and lad["move"] < lad["tolerance"]
    assert lad["outcomes"]["4"]["outcome"] == "holds" and lad["outcomes"]["16"]["outcome"] == "fails"
    assert lad["converged"] is False and lad["reported_K"] == 16
    assert r.result["unmeasured_value"] == pytest.approx(0.11) and r.result["outcome_if_measured"] == "fails"
    assert "outcome holds -> fails" in r.result["unmeasured_main"] and r.verdict == "inconclusive"
    assert "main value at the finest rung computed, K = 16" in r.notes
    # the hidden states stay at the run's K = 4 (0.09): they disagree with the main value (not combined)
    rep = next(x for x in r.result["checks_not_combined"] if x["choice"] == "representation")
    assert rep["results"] == pytest.approx([0.11, 0.09])
    # a quantity that moves within the tolerance without a flip is converged and reported at K = 16
    assert v["frames-mlp-cos"].result["step_ladder"]["converged"] is True
    assert v["frames-mlp-cos"].result["step_ladder"]["reported_K"] == 16
