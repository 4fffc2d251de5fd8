"""After-jump check of the ``real_model_flows`` verdicts (issue #26; review round 7, F1 (ii); review/round8/
after_jump.md): the 'after jump' robustness value of the MLP records (config ``after_jump_check``, declared
2026-12-04 round 8): the flows (e), (g) with the jump layers taken from the network, read on the depths after
the jump. The flows on the tiny random models against an independent route (the network cut after the jump
layer, flowed from the model's tokens there); the records on fake profiles."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from flows_helpers import fake_family

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_after_jump_start():
    from attnflow.studies.real_model_flows import after_jump_start

    assert [after_jump_start(j) for j in ([0], [0, 1], [0, 2], [1], [])] == [2, 3, 2, 1, 1]


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-bert"])
def test_after_jump_flows_are_the_cut_network_from_the_models_tokens(family):
    """Jump layer 0: per sentence, (e) and (g) from the network's depth-1 tokens through layers 1..L-1, by the
    network without its first layer (post-LN: its embedding LayerNorm is layer 0's output LayerNorm, the one
    layer 1's attention reads), the flows with no layer from the network."""
    from attnflow.bridge import forward, layer_flow
    from attnflow.bridge.flows import stream_scales
    from attnflow.observables import gram_effective_rank, mean_pairwise_inner_product
    from attnflow.studies.real_model_flows import FlowsConfig, after_jump_flows, load_family

    w, tok, _ = load_family(family, 0)
    ids = [tok("the cat sat on the mat today"), tok("a b c d e")]
    c = FlowsConfig(families=[family])
    K = {"mlp": 3, "frames_mlp": 2}
    aj = after_jump_flows(w, ids, c, K, [0])
    assert aj["layers"] == [0] and aj["start_depth"] == 2
    rest = dataclasses.replace(w, layers=w.layers[1:])
    if w.arch == "post_ln":
        rest = dataclasses.replace(rest, embedding_ln=w.layers[0].ln_mlp)
    for v in ("mlp", "frames_mlp"):
        for i, t in enumerate(ids):
            fp = forward(w, t)
            rho = stream_scales(w, fp.hidden_states, c.scale_estimator) if w.arch == "pre_ln" else None
            ref = layer_flow(rest, fp.tokens[1], variant=v, steps_per_layer=K[v],
                             residual_norms=None if rho is None else rho[1:])  # fmt: skip
            cos = np.asarray(aj["sphere"][v]["cos"][i])
            mpi = mean_pairwise_inner_product
            np.testing.assert_allclose(cos[2:], mpi(ref[1:]).numpy(), rtol=0, atol=1e-12)
            np.testing.assert_allclose(cos[:2], mpi(fp.tokens[:2]).numpy(), rtol=0, atol=1e-12)
            er = np.asarray(aj["sphere"][v]["erank"][i])
            np.testing.assert_allclose(er[2:], gram_effective_rank(ref[1:]).numpy(), rtol=0, atol=1e-10)
            assert abs(cos[-1] - float(mpi(fp.tokens[-1]))) > 1e-4  # a flow, not the model


def _after(res: dict, shift: float, st: int = 2) -> dict:
    """An 'after jump' entry whose (e), (g) are the model from depth st - 1 on plus ``shift`` in mean cosine
    at depths st..L (effective rank x (1 + shift), clusters x (1 + shift))."""
    m = res["stats"]["sphere"]["model"]
    out = {}
    for v in ("mlp", "frames_mlp"):
        d = {k: np.array(a, float, copy=True) for k, a in m.items() if k in ("cos", "erank", "clusters")}
        d["cos"][:, st:] += shift
        d["erank"][:, st:] *= 1 + shift
        d["clusters"][:, st:] *= 1 + shift
        out[v] = d
    return {"layers": list(range(st - 1)), "start_depth": st, "sphere": out}


def _recs(res: dict, **cfg) -> dict:
    from attnflow.studies.real_model_flows import FlowsConfig, records

    c = FlowsConfig(families=["tiny-bert"], bootstrap=20, **cfg)
    return {r.id.removeprefix("flows-tiny-bert-"): r for r in records({}, c, {"tiny-bert": res})}


def test_after_jump_is_a_robustness_value_of_the_mlp_records():
    """(e), (g) 0.3 off the model at every depth (fail); after the jump 0.04 off on depths 2..3: the value
    'after jump' is the record's own quantity over depths 2..L (numpy here), and it holds; the other records
    carry no such value; config after_jump_check=False: the round-7 records."""
    res = fake_family({"mlp": 0.3, "frames_mlp": 0.3})
    res["after_jump"] = _after(res, 0.04)
    m = res["stats"]["sphere"]["model"]
    r = _recs(res)
    for vid, stat in (("mlp-cos", "cos"), ("frames-mlp-cos", "cos"), ("mlp-erank", "erank")):
        rob = {x.choice: x for x in r[vid].robustness}["after jump"]
        f = res["after_jump"]["sphere"]["mlp"][stat].mean(0)[2:]
        gap = np.abs(f - m[stat].mean(0)[2:]).mean()
        want = gap if stat == "cos" else gap / m[stat].mean(0)[2:].mean()
        assert rob.values[1] == "layers [0] from the network, depths 2..L"
        assert rob.results[1] == pytest.approx(want, rel=1e-12)
        assert rob.results[1] == pytest.approx(0.04, rel=1e-9)  # cos: + 0.04; rank: |0.04 m| / m
        assert rob.outcomes == ["fails", "holds"] and r[vid].verdict.startswith("depends on")
        assert r[vid].result["after_jump"]["value"] == pytest.approx(want, rel=1e-12)
    assert "after jump" not in {x.choice for x in r["attention-overclusters"].robustness}
    off = _recs(res, after_jump_check=False)
    assert "after jump" not in {x.choice for x in off["mlp-cos"].robustness}
    assert off["mlp-cos"].verdict == "fails" and "after_jump" not in off["mlp-cos"].result


def test_the_study_run_stores_the_after_jump_flows_and_the_records_read_them(tmp_path, monkeypatch):
    """The tiny models have no jump (flow speed / network turn 0.95-1.15, factor 3), so the rule is replaced
    by one that makes layer 0 a jump (the rule itself: test_real_model_flows_round7): the run keeps (e), (g)
    with layer 0 from the network in verdict_data.after_jump, the same arrays as after_jump_flows on the
    run's sentences at the run's steps, and the MLP records carry the value; the declared rule: no value."""
    import attnflow.studies.real_model_flows as rmf
    from attnflow.studies import run_study

    def run(name):
        return run_study("real_model_flows", tmp_path / name, quick=True,
                         params={"sentences": 6, "families": ["tiny-llama"]})  # fmt: skip

    s = run("declared")
    assert s["families"]["tiny-llama"]["verdict_data"]["after_jump"] is None
    assert not any(x["choice"] == "after jump" for v in s["verdicts"] for x in v.get("robustness") or [])
    monkeypatch.setattr(rmf, "mlp_jumps", lambda table, factor: [0] if table else [])
    s = run("forced")
    fam = s["families"]["tiny-llama"]
    vd, aj = fam["verdict_data"], fam["verdict_data"]["after_jump"]
    assert aj["layers"] == [0] and aj["start_depth"] == 2
    # the stored arrays: after_jump_flows on the run's sentences, each flow at the step the run chose for it
    w, tok, _ = rmf.load_family("tiny-llama", 0)
    from attnflow.studies.real_model import load_corpus

    corpus = load_corpus()
    ids = [tok(corpus[k]) for k in fam["corpus_index"]]
    c = rmf.FlowsConfig(**{k: v for k, v in s["config"].items() if k in rmf.FlowsConfig.model_fields})
    ref = rmf.after_jump_flows(w, ids, c, vd["step_ladder"]["chosen"], [0])
    for v in ("mlp", "frames_mlp"):
        np.testing.assert_allclose(aj["sphere"][v]["cos"], ref["sphere"][v]["cos"], rtol=0, atol=1e-6)
    recs = {v["id"]: v for v in s["verdicts"]}
    m = np.asarray(vd["stats"]["sphere"]["model"]["cos"], float)
    for vid, flow in (("mlp-cos", "mlp"), ("frames-mlp-cos", "frames_mlp")):
        rob = {x["choice"]: x for x in recs[f"flows-tiny-llama-{vid}"]["robustness"]}["after jump"]
        f = np.asarray(aj["sphere"][flow]["cos"], float)
        assert rob["values"][1] == "layers [0] from the network, depths 2..L"
        assert rob["results"][1] == pytest.approx(np.abs(f.mean(0)[2:] - m.mean(0)[2:]).mean(), abs=1e-9)
