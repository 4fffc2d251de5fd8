"""The flows that explain a model's layers (issue 26 part 3): ``attnflow.bridge.flows`` and the study
``real_model_flows``.

References: the attention flow of :func:`attnflow.bridge.theta_from_weights` integrated by attnflow's own
``simulate`` (``studies.real_model.attention_flow``), a separate code path; the attention weights
``transformers`` returns (through the pass, checked against it in test_real_model / test_bridge_formats);
flows written so that the answer is known (a model built from the flow itself, for the time fit).
Tiny random BERT / GPT-2 / Llama models in float64; nothing is downloaded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnflow.bridge import (  # noqa: E402
    VARIANTS,
    attention_drift,
    attention_sublayer,
    fit_layer_times,
    forward,
    from_hf_model,
    hidden_readout,
    layer_flow,
    layer_time_curve,
    mlp_drift,
    stream_norms,
    theta_from_weights,
)
from attnflow.bridge.theta import attention_layer_norm  # noqa: E402
from attnflow.studies.real_model import attention_flow  # noqa: E402

IDS = [3, 17, 42, 8, 8, 59, 0, 21, 33, 5]


def _randomise(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if (
                name.endswith("norm.weight")
                or "LayerNorm.weight" in name
                or name.endswith(("ln_1.weight", "ln_2.weight"))
            ):
                p.uniform_(0.5, 1.5)  # trained norms are not the identity
            elif name.endswith("bias"):
                p.normal_(0, 0.1)
            elif p.ndim == 2:
                p.normal_(0, 0.3)  # large enough that attention is far from uniform
    return from_hf_model(model)


def _bert(seed=0):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
        max_position_embeddings=16, type_vocab_size=2, attn_implementation="eager",
    )  # fmt: skip
    return _randomise(transformers.BertModel(cfg, add_pooling_layer=False).double().eval())


def _gpt2(seed=0):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(vocab_size=60, n_positions=16, n_embd=24, n_layer=2, n_head=3,
                                  attn_implementation="eager")  # fmt: skip
    return _randomise(transformers.GPT2Model(cfg).double().eval())


def _llama(seed=0):
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=40, max_position_embeddings=16, rope_theta=100.0, attn_implementation="eager",
    )  # fmt: skip
    return _randomise(transformers.LlamaModel(cfg).double().eval())


# -- the flows against independent references ------------------------------------------------------------
@pytest.mark.parametrize("build", [_bert, _gpt2])
def test_bias_free_flows_equal_the_theta_flow_of_simulate(build):
    """(a) and (e) against attnflow's simulate on theta_from_weights (eq. (10)): another code path."""
    w = build()
    fp = forward(w, IDS)
    rho = stream_norms(w, fp.hidden_states) if w.arch == "pre_ln" else None
    theta = theta_from_weights(w, residual_norms=rho)
    drifts = [mlp_drift(w, k, residual_norm=None if rho is None else rho[k]) for k in range(w.depth)]
    for variant, mlp in (("attention", None), ("mlp", drifts)):
        ours = layer_flow(w, fp.tokens[0], variant=variant, steps_per_layer=3, residual_norms=rho)
        ref = attention_flow(theta, fp.tokens[0], layers=w.depth, steps_per_layer=3, mlp=mlp)
        # the same Euler scheme evaluated two ways: float64 round-off over 6 steps
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
        assert float((ours[-1] - fp.tokens[0]).abs().max()) > 1e-2  # the tokens did move


def test_biases_kept_heads_give_the_models_attention_at_its_tokens():
    """At the model's own sphere tokens the bias-kept heads read exactly the LayerNorm output the model's
    attention reads (up to LayerNorm's epsilon), so their attention is the model's; the bias-free heads'
    is not."""
    w = _bert()
    fp = forward(w, IDS)
    for layer in range(w.depth):
        ln = attention_layer_norm(w, layer)
        a = math.sqrt(w.d) * ln.weight
        _, A_b = attention_sublayer(fp.tokens[layer] * a + ln.bias, w, layer, biases=True)
        _, A_0 = attention_sublayer(fp.tokens[layer] * a, w, layer, biases=False)
        # epsilon = 1e-12 against a variance ~1 perturbs the LayerNorm output at ~1e-12 relative
        torch.testing.assert_close(A_b, fp.attentions[layer], rtol=0, atol=1e-9)
        assert float((A_0 - fp.attentions[layer]).abs().max()) > 1e-2
    x_a = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=2)
    x_b = layer_flow(w, fp.tokens[0], variant="biases", steps_per_layer=2)
    assert float((x_a - x_b).abs().max()) > 1e-3


def test_llama_has_no_biases_so_flow_b_is_flow_a():
    w = _llama()
    fp = forward(w, IDS)
    rho = stream_norms(w, fp.hidden_states)
    x_a = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=2, residual_norms=rho)
    x_b = layer_flow(w, fp.tokens[0], variant="biases", steps_per_layer=2, residual_norms=rho)
    torch.testing.assert_close(x_a, x_b, rtol=0, atol=0)
    assert float((x_a[-1] - fp.tokens[0]).abs().max()) > 1e-2
    torch.testing.assert_close(x_a.norm(dim=-1), torch.ones(3, len(IDS), dtype=torch.float64))


def test_rotary_attention_drift_is_the_models_attention_sublayer():
    """Llama: rho_l times the drift at the model's tokens is the attention output the pass adds to the
    stream (RMSNorm read as sqrt(d) gamma z: equal up to RMSNorm's epsilon)."""
    w = _llama()
    fp = forward(w, IDS)
    from attnflow.bridge import layer_norm

    for layer in range(w.depth):
        r = fp.hidden_states[layer]
        o, _ = attention_sublayer(layer_norm(r, w.layers[layer].ln_attn), w, layer)
        F = attention_drift(w, layer, fp.tokens[layer], residual_norm=2.0)
        # eps = 1e-6 against mean r^2 ~ 1e-2..1: relative 1e-4 at most
        torch.testing.assert_close(2.0 * F, o, rtol=1e-3, atol=1e-4)


def test_model_scores_flow_is_the_values_under_given_attention():
    """Fed the bias-free heads' own attention at each layer's start, one step per layer, flow (d) is flow (a)
    exactly; fed the model's attention (biases, other tokens) it is not."""
    w = _bert()
    fp = forward(w, IDS)
    x_a = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=1)
    own = []
    for layer in range(w.depth):
        a = math.sqrt(w.d) * attention_layer_norm(w, layer).weight
        own.append(attention_sublayer(x_a[layer] * a, w, layer, biases=False)[1])
    x_d = layer_flow(w, fp.tokens[0], variant="model_scores", steps_per_layer=1, attentions=torch.stack(own))
    torch.testing.assert_close(x_d, x_a, rtol=0, atol=1e-14)
    x_m = layer_flow(w, fp.tokens[0], variant="model_scores", steps_per_layer=1, attentions=fp.attentions)
    assert float((x_m - x_a).abs().max()) > 1e-3


def test_time_fit_recovers_a_known_layer_time():
    """A 'model' whose layer outputs are flow (a) run for T* = (0.75, 1.5) per layer: the fit finds T*."""
    w = _bert()
    fp = forward(w, IDS)
    T_true = [0.75, 1.5]
    target = layer_flow(w, fp.tokens[0], variant="fitted_time", steps_per_layer=4, layer_times=T_true)
    curves = np.stack(
        [layer_time_curve(w, target[k], target[k + 1], k, steps_per_layer=4, max_time=3.0) for k in range(2)]
    )
    assert curves.shape == (2, 13)
    np.testing.assert_allclose(curves[np.arange(2), [3, 6]], 1.0, atol=1e-12)  # exact at m = 4 T*
    np.testing.assert_array_equal(fit_layer_times(curves[None], 4), T_true)
    # zero time leaves the tokens where they are
    x0 = layer_flow(w, fp.tokens[0], variant="fitted_time", steps_per_layer=4, layer_times=[0.0, 0.0])
    torch.testing.assert_close(x0[-1], fp.tokens[0], rtol=0, atol=0)


def test_hidden_readout_is_the_models_norm():
    w = _bert()
    fp = forward(w, IDS)
    for depth in range(w.depth + 1):  # LayerNorm eps 1e-12: equal to ~1e-10
        torch.testing.assert_close(hidden_readout(w, depth, fp.tokens[depth]), fp.hidden_states[depth],
                                   rtol=0, atol=1e-8)  # fmt: skip
    wl = _llama()
    fl = forward(wl, IDS)
    assert torch.equal(hidden_readout(wl, 0, fl.tokens[0]), fl.tokens[0])  # the stream, up to a scale
    h = hidden_readout(wl, wl.depth, fl.tokens[-1])
    cos = (
        h
        / h.norm(dim=-1, keepdim=True)
        * fl.hidden_states[-1]
        / fl.hidden_states[-1].norm(dim=-1, keepdim=True)
    )
    torch.testing.assert_close(cos.sum(-1), torch.ones(len(IDS), dtype=torch.float64), rtol=0, atol=1e-8)


# -- errors ------------------------------------------------------------------------------------------------
def test_flow_errors():
    w, wl = _bert(), _llama()
    z = forward(w, IDS).tokens[0]
    with pytest.raises(ValueError, match="unknown variant 'attn'; valid: " + ", ".join(VARIANTS)):
        layer_flow(w, z, variant="attn", steps_per_layer=1)
    with pytest.raises(ValueError, match="steps_per_layer must be an integer >= 1: got 0"):
        layer_flow(w, z, variant="attention", steps_per_layer=0)
    with pytest.raises(ValueError, match="'fitted_time' needs layer_times, 2 numbers >= 0.*fit_layer_times"):
        layer_flow(w, z, variant="fitted_time", steps_per_layer=1)
    with pytest.raises(ValueError, match=r"layer_times must be finite and >= 0: got \[-1.0, 1.0\]"):
        layer_flow(w, z, variant="fitted_time", steps_per_layer=1, layer_times=[-1.0, 1.0])
    with pytest.raises(ValueError, match="'model_scores' needs attentions of shape.*got None"):
        layer_flow(w, z, variant="model_scores", steps_per_layer=1)
    with pytest.raises(
        ValueError, match=r"attention must have shape \(H, n, n\) = \(3, 10, 10\).*got \(3, 9, 9\)"
    ):
        attention_sublayer(z, w, 0, attention=torch.ones(3, 9, 9, dtype=torch.float64) / 9)
    zl = forward(wl, IDS).tokens[0]
    with pytest.raises(ValueError, match="is pre-LN.*pass residual_norms=stream_norms"):
        layer_flow(wl, zl, variant="attention", steps_per_layer=1)
    with pytest.raises(ValueError, match=r"residual_norms must be 2 finite numbers > 0.*got \[1.0\]"):
        layer_flow(wl, zl, variant="attention", steps_per_layer=1, residual_norms=[1.0])
    with pytest.raises(ValueError, match="is pre-LN: give residual_norm"):
        attention_drift(wl, 0, zl)
    with pytest.raises(ValueError, match="max_time must be a finite number > 0: got 0"):
        layer_time_curve(w, z, z, 0, steps_per_layer=2, max_time=0)
    with pytest.raises(
        ValueError, match=r"curves must have shape \(sentences >= 1, layers, grid\): got \(2, 3\)"
    ):
        fit_layer_times(np.zeros((2, 3)), 2)
    with pytest.raises(ValueError, match=r"depth must lie in \[0, 2\]: got 3"):
        hidden_readout(w, 3, z)


# -- the study's verdicts: the machinery says "fails" on a world where the claim is false ----------------
def _fake_results(shift: dict[str, float], S=12, L=3, seed=0, trend=0.1) -> dict:
    """Per-sentence arrays of a fake family: every flow equals the model plus ``shift[flow]`` in mean
    cosine (clusters and effective rank scaled by 1 + shift), with sentence-level noise."""
    from attnflow.studies.real_model_flows import FLOWS, _halves

    rng = np.random.default_rng(seed)
    # the model moves with depth (cosine +0.1 a layer, rank and counts -15% a layer), so that the stand-still
    # control (tokens left at z_0) fails every criterion here (stand_still_control; review round 3, F1)
    d = trend * np.arange(L + 1)
    base = {"cos": 0.3 + d + 0.02 * rng.standard_normal((S, L + 1)),
            "erank": 5.0 * (1 - 1.5 * d) + 0.1 * rng.standard_normal((S, L + 1)),
            "clusters": 4.0 * (1 - 1.5 * d)[:, None] + 0.1 * rng.standard_normal((S, L + 1, 3)),
            "agree": np.ones((S, L + 1))}  # fmt: skip

    def shifted(x):
        return {"cos": base["cos"] + x, "erank": base["erank"] * (1 + x),
                "clusters": base["clusters"] * (1 + x), "agree": base["agree"]}  # fmt: skip

    stats = {r: {"model": dict(base), **{f: shifted(shift.get(f, 0.0)) for f in (*FLOWS, "no_mlp")
                                         if f != "fitted_time"}}
             for r in ("sphere", "hidden")}  # fmt: skip
    fitted = []
    for s in (0, 1):
        A, B = _halves(S, s)
        for name, rep in (("A->B", B), ("B->A", A)):
            st = {r: {k: np.asarray(v)[rep] for k, v in shifted(shift.get("fitted_time", 0.0)).items()}
                  for r in ("sphere", "hidden")}  # fmt: skip
            fitted.append({"split_seed": s, "direction": name, "report": rep, "stats": st})
    return {"tokens": [10] * S, "model": {"name": "fake"}, "stats": stats, "fitted": fitted}


def test_study_verdicts_fail_when_the_claims_are_false():
    from attnflow.studies.real_model_flows import FlowsConfig, records

    # 40 resamples: the shifts tested (0 against 0.4) are 20 sentence-noise sd apart, far outside any interval
    c = FlowsConfig(families=["tiny-bert"], bootstrap=40)
    # (b) differs from (a) by a hair: bit-identical flows give an identity record instead (test below)
    close = {"attention": 0.0, "biases": 0.001, "model_scores": 0.0, "fitted_time": 0.0, "mlp": 0.0,
             "frames": 0.002}  # fmt: skip
    # far: every flow 0.4 above the model, the no-MLP network on it: (f) does not follow (n)
    far = {"attention": 0.4, "biases": 0.41, "model_scores": 0.4, "fitted_time": 0.4, "mlp": 0.4,
           "frames": 0.405, "frames_mlp": 0.4}  # fmt: skip
    v_close = {
        r.id.split("tiny-bert-")[1]: r.verdict for r in records({}, c, {"tiny-bert": _fake_results(close)})
    }
    v_far = {
        r.id.split("tiny-bert-")[1]: r.verdict for r in records({}, c, {"tiny-bert": _fake_results(far)})
    }
    over = (
        "attention-overclusters",
        "biases-overclusters",
        "model-scores-overclusters",
        "frames-overclusters",
    )
    follow = ("fitted-time-cos", "mlp-cos", "mlp-clusters", "mlp-erank", "frames-mlp-cos",
              "frames-mlp-clusters", "frames-mlp-erank", "frames-follows-network-cos")  # fmt: skip
    assert all(v_close[k] == "fails" for k in over) and all(v_close[k] == "holds" for k in follow)
    assert all(v_far[k] == "holds" for k in over) and all(v_far[k] == "fails" for k in follow)
    assert v_close["no-mlp-network-overclusters"] == v_far["no-mlp-network-overclusters"] == "fails"
    v_net = {r.id: r.verdict for r in records({}, c, {"tiny-bert": _fake_results({"no_mlp": 0.4})})}
    assert v_net["flows-tiny-bert-no-mlp-network-overclusters"] == "holds"
    recs = records({}, c, {"tiny-bert": _fake_results(far)})
    choices = {r.id: [x.choice for x in r.robustness] for r in recs}
    # the last check: the paired test's margin at x0.5 / x1.5 (review round 6, F1)
    assert choices["flows-tiny-bert-fitted-time-cos"] == [
        "representation", "time-fit split", "depth summary", "stand-still margin"
    ]  # fmt: skip
    assert choices["flows-tiny-bert-mlp-clusters"] == [
        "representation", "corpus subsample", "depth summary", "cluster radius", "stand-still margin"
    ]  # fmt: skip
    assert all(r.criterion.declared_in.startswith("config: criterion_") for r in recs)


def test_study_verdicts_identity_and_depth_summary():
    """Review of issue 26 part 3: a flow (b) equal to (a) bit for bit is an identity, not a test; a gap
    that only opens at the last depth is diluted by the mean over depths and the depth check says so."""
    from attnflow.studies.real_model_flows import FlowsConfig, records

    c = FlowsConfig(families=["tiny-bert"], bootstrap=100)
    res = _fake_results({"attention": 0.0, "biases": 0.0, "mlp": 0.0})
    v = {r.id.split("tiny-bert-")[1]: r for r in records({}, c, {"tiny-bert": res})}
    assert v["biases-overclusters"].verdict == "identity"
    assert v["biases-overclusters"].result == {"same_as": "flows-tiny-bert-attention-overclusters"}
    assert v["attention-overclusters"].verdict == "fails"
    # the MLP flow off by 0.25 at depth L only (L = 3): mean over depths 1..3 is 0.083 <= 0.1, last 0.25
    for r in ("sphere", "hidden"):
        cos = np.array(res["stats"][r]["mlp"]["cos"], float)
        cos[:, -1] += 0.25
        res["stats"][r]["mlp"]["cos"] = cos
    rec = {x.id: x for x in records({}, c, {"tiny-bert": res})}["flows-tiny-bert-mlp-cos"]
    dep = next(x for x in rec.robustness if x.choice == "depth summary")
    assert dep.values == ["mean over depths 1..L, sphere tokens", "last depth L, sphere tokens",
                          "last depth L, hidden states"]  # fmt: skip
    assert dep.outcomes == ["holds", "fails", "fails"] and rec.verdict == "depends on depth summary"
    with pytest.raises(ValueError, match="depths must be 'all' \\(1..L\\) or 'last' \\(L\\): got 'first'"):
        from attnflow.studies.real_model_flows import _quantity

        _quantity("gap", "first")


def test_study_records_say_when_frames_is_attention():
    """Review 2 of issue 26 part 3: for a pre-LN model (f) is (a) bit for bit, so "(f) follows (n)" and the
    (g) records test no LayerNorm frame; their statements must say so (a post-LN (f) keeps the wording)."""
    from attnflow.studies.real_model_flows import FlowsConfig, records

    c = FlowsConfig(families=["tiny-bert"], bootstrap=20)

    def recs(shift):
        return {r.id.split("tiny-bert-")[1]: r for r in records({}, c, {"tiny-bert": _fake_results(shift)})}

    same = recs({"frames": 0.0})
    assert same["frames-overclusters"].verdict == "identity"
    for k in ("frames-follows-network-cos", "frames-mlp-cos", "frames-mlp-clusters", "frames-mlp-erank"):
        assert "here flow (f) is flow (a) bit for bit (no LayerNorm frame acts" in same[k].statement
    assert "(g) is flow (a) then the MLP flow" in same["frames-mlp-cos"].statement
    assert "(g) is flow (a)" not in same["frames-follows-network-cos"].statement
    other = recs({"frames": 0.01})
    assert other["frames-overclusters"].verdict != "identity"
    assert all("bit for bit" not in r.statement for r in other.values())


def test_study_config_errors():
    from attnflow.studies.real_model_flows import FlowsConfig, load_family

    with pytest.raises(ValueError, match="families must be distinct names among minilm, minilm-l3"):
        FlowsConfig(families=["bert"])
    with pytest.raises(ValueError, match="thresholds must be distinct: got"):
        FlowsConfig(thresholds=[1.0, 1.0])
    with pytest.raises(ValueError, match="unknown family 'gpt'; valid: minilm"):
        load_family("gpt")


@pytest.mark.slow
def test_flows_study_quick(tmp_path):
    from attnflow.plot import figures_for
    from attnflow.studies import run_study

    s = run_study("real_model_flows", tmp_path, quick=True, params={"sentences": 6},
                  figures=figures_for("real_model_flows"))  # fmt: skip
    fam = s["families"]["tiny-bert"]
    L = fam["model"]["layers"]
    for rep in ("sphere", "hidden"):
        cos = fam["per_depth"][rep]
        # every flow starts from the model's own embeddings
        assert all(cos[f]["cos"]["mean"][0] == pytest.approx(cos["model"]["cos"]["mean"][0], abs=1e-12)
                   for f in ("attention", "biases", "model_scores", "mlp"))  # fmt: skip
        assert len(cos["model"]["cos"]["mean"]) == L + 1
    # tiny-llama has no biases: its flow (b) is (a) bit for bit, an identity record
    # and its flow (f) is (a) (pre-LN: no frame beyond the read's gain); saturated radii give descriptions
    assert len(s["verdicts"]) == 26 and {v["class"] for v in s["verdicts"]} <= {
        "test",
        "identity",
        "description",
    }
    ids = [v["id"] for v in s["verdicts"] if v["class"] == "identity"]
    assert ids == ["flows-tiny-llama-biases-overclusters", "flows-tiny-llama-frames-overclusters"]
    assert (
        "| depth | model | (n) no-MLP network | (a) bias-free attention |"
        in (tmp_path / "table.md").read_text()
    )
    assert sorted(s["figures"]) == ["real_model_flows_tiny-bert", "real_model_flows_tiny-llama"]


# -- review of issue 26 part 3: the no-MLP network, the LayerNorm frames, scales, free-running fit, nulls ----
def _zero_mlp_hf(model):
    """The ``transformers`` model with every MLP output projection (weight and bias) set to 0."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if (".output.dense." in name and "attention" not in name) or "mlp.down_proj" in name:
                p.zero_()
    return model


@pytest.mark.parametrize("build", [_bert, _llama])
def test_without_mlp_is_transformers_with_the_mlp_output_zeroed(build):
    from attnflow.bridge.flows import without_mlp
    from attnflow.bridge.reference import hf_hidden_states, relative_error, to_hf_model

    w = build()
    hf = _zero_mlp_hf(to_hf_model(w, exact=True))  # softmax and rotary in float64 too
    ours = forward(without_mlp(w), IDS).hidden_states
    # float64 on both sides: round-off (the pass matches transformers to ~1e-15, test_bridge_formats)
    assert relative_error(ours, hf_hidden_states(hf, IDS)) <= 1e-10
    # and it is a different network from the model's (the MLPs do act)
    assert relative_error(forward(w, IDS).hidden_states, hf_hidden_states(hf, IDS)) > 1e-2


def test_frames_flow_is_the_network_when_attention_and_mlp_are_zero():
    """Post-LN: with W_o = b_o = 0 and the MLP output 0 the network is its LayerNorm frames alone; (f) and
    (g) must reproduce it (the frame maps are the only thing left), (a) must not (it drops them)."""
    import dataclasses

    from attnflow.bridge.flows import without_mlp

    w = without_mlp(_bert())
    w = dataclasses.replace(w, layers=tuple(
        dataclasses.replace(lw, W_o=torch.zeros_like(lw.W_o), b_o=torch.zeros_like(lw.b_o)) for lw in w.layers
    ))  # fmt: skip
    fp = forward(w, IDS)
    for v in ("frames", "frames_mlp"):
        x = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=3)
        # the forward pass's LayerNorm eps (1e-12) against the flow's eps -> 0: relative 1e-12
        torch.testing.assert_close(x, fp.tokens, atol=1e-9, rtol=0)
    x = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=3)
    assert float((x[-1] - fp.tokens[-1]).abs().max()) > 1e-2  # (a) has no frames: it does not move at all


def test_frames_is_attention_for_pre_ln():
    """Pre-LN (Llama): the only affine map on the attention's path is the read's gain, which (a) applies;
    (f) is (a) bit for bit, and (g) is the attention flow for T then the MLP flow for T (not Lie-split)."""
    from attnflow.bridge.flows import _step

    w = _llama()
    fp = forward(w, IDS)
    rho = stream_norms(w, fp.hidden_states)
    a = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=2, residual_norms=rho)
    f = layer_flow(w, fp.tokens[0], variant="frames", steps_per_layer=2, residual_norms=rho)
    assert torch.equal(a, f)
    g = layer_flow(w, fp.tokens[0], variant="frames_mlp", steps_per_layer=2, residual_norms=rho)
    e = layer_flow(w, fp.tokens[0], variant="mlp", steps_per_layer=2, residual_norms=rho)
    x = fp.tokens[0]
    for layer in range(w.depth):  # the network's order: attention sub-layer, then the MLP sub-layer
        for _ in range(2):
            x = _step(x, attention_drift(w, layer, x, residual_norm=rho[layer]), 0.5)
        m = mlp_drift(w, layer, residual_norm=rho[layer])
        for _ in range(2):
            x = _step(x, m(x), 0.5)
    torch.testing.assert_close(g[-1], x, atol=1e-14, rtol=0)  # the same arithmetic, written out
    assert float((g[-1] - e[-1]).abs().max()) > 1e-4  # the order matters: (g) is not (e)


def test_stream_scales_median_of_the_other_tokens():
    from attnflow.bridge.flows import stream_scales

    w = _llama()
    L, n, d = w.depth, 5, w.d
    r = torch.randn(L + 1, n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    r[:, 0] *= 100.0  # a massive first token: the mean follows it, the median of tokens 2..n does not
    norms = r[:L].norm(dim=-1).numpy()
    # the lower median (torch's: the smaller middle value of the n - 1 = 4 norms)
    lower = np.sort(norms[:, 1:], axis=1)[:, (n - 2) // 2]
    np.testing.assert_allclose(stream_scales(w, r, "median_rest"), lower, rtol=1e-14)
    np.testing.assert_allclose(stream_scales(w, r, "mean"), norms.mean(1), rtol=1e-14)
    assert min(np.asarray(stream_scales(w, r, "mean")) / stream_scales(w, r, "median_rest")) > 10
    with pytest.raises(ValueError, match="unknown scale estimator 'max'; valid: mean, median_rest"):
        stream_scales(w, r, "max")
    with pytest.raises(ValueError, match="stream_scales applies to pre-LN models: .* is post_ln"):
        stream_scales(_bert(), r, "median_rest")
    with pytest.raises(ValueError, match="'median_rest' needs n >= 2 tokens: got n = 1; use 'mean'"):
        stream_scales(w, r[:, :1], "median_rest")


def test_free_running_fit_recovers_known_times():
    """A 'model' whose mean-cosine profile is the flow's own with known T_l: the greedy fit finds T_l."""
    from attnflow.bridge.flows import fit_free_running_times, mean_cosine
    from attnflow.observables import mean_pairwise_inner_product

    w = _bert()
    starts = [forward(w, ids).tokens[0] for ids in (IDS, IDS[::-1], IDS[2:])]
    truth = [0.5, 1.5]
    runs = [layer_flow(w, z, variant="fitted_time", steps_per_layer=2, layer_times=truth) for z in starts]
    torch.testing.assert_close(mean_cosine(runs[0]), mean_pairwise_inner_product(runs[0]), atol=1e-14, rtol=0)
    target = torch.stack([mean_cosine(x) for x in runs]).mean(0).tolist()
    T = fit_free_running_times(w, starts, target, steps_per_layer=2, max_time=3.0)
    np.testing.assert_array_equal(T, truth)
    with pytest.raises(ValueError, match="max_time must be a finite number > 0: got -1"):
        fit_free_running_times(w, starts, target, steps_per_layer=2, max_time=-1)
    with pytest.raises(
        ValueError, match="need >= 1 start and a target of L \\+ 1 = 3 mean cosines: got 3 starts, 2"
    ):
        fit_free_running_times(w, starts, target[:2], steps_per_layer=2, max_time=3.0)


@pytest.mark.parametrize("build", [_bert, _llama])
def test_permuted_null_keeps_every_tensors_entries(build):
    from attnflow.bridge.nulls import permuted_null

    w = build()
    p0, p0b, p1 = permuted_null(w, 0), permuted_null(w, 0), permuted_null(w, 1)

    def tensors(x):
        out = {"word": x.word_embeddings, "pos": x.position_embeddings, "type": x.token_type_embeddings}
        for ln in ("embedding_ln", "final_ln"):
            p = getattr(x, ln)
            if p is not None:
                out[f"{ln}.w"], out[f"{ln}.b"] = p.weight, p.bias
        for i, lw in enumerate(x.layers):
            for k, v in vars(lw).items():
                if isinstance(v, torch.Tensor):
                    out[f"{i}.{k}"] = v
                elif v is not None:
                    out[f"{i}.{k}.w"], out[f"{i}.{k}.b"] = v.weight, v.bias
        return {k: v for k, v in out.items() if v is not None}

    t, t0, t0b, t1 = tensors(w), tensors(p0), tensors(p0b), tensors(p1)
    assert t.keys() == t0.keys() and len(t) > 10
    for k in t:
        assert t0[k].shape == t[k].shape
        assert torch.equal(t0[k].reshape(-1).sort().values, t[k].reshape(-1).sort().values), (
            k
        )  # same multiset
        assert torch.equal(t0[k], t0b[k]), k  # same seed, same weights
    moved = [k for k in t if t[k].numel() > 1 and t[k].unique().numel() > 1]
    assert all(not torch.equal(t0[k], t[k]) for k in moved)  # every non-constant tensor is shuffled
    assert all(not torch.equal(t0[k], t1[k]) for k in moved)  # and another seed shuffles it otherwise
    assert p0.name.endswith("(entries permuted, seed 0)") and p0.arch == w.arch
    with pytest.raises(ValueError, match="seed must be an integer: got 0.5"):
        permuted_null(w, 0.5)


def test_study_saturated_radii_are_reported_not_tested_and_new_checks_appear():
    """Review: a radius where the model's count sits at n or at 1 says nothing; (c) gets its free-running
    variant; a pre-LN family gets the scale-estimator check, which flips when the other scale changes the
    answer."""
    from attnflow.studies.real_model_flows import SCALE_FLOWS, FlowsConfig, records, saturated_radii

    c = FlowsConfig(families=["tiny-bert"], bootstrap=40)
    res = _fake_results({"mlp": 0.4, "attention": 0.0})
    for r in ("sphere", "hidden"):  # tokens 10: radius 0.6 at n (9.5), radius 1.2 at one cluster (1.05)
        for src in res["stats"][r]:
            cl = np.array(res["stats"][r][src]["clusters"], float)
            cl[..., 0], cl[..., 2] = 9.5, 1.05
            res["stats"][r][src]["clusters"] = cl
    assert saturated_radii(res, c) == [0.6, 1.2]
    rec = {x.id: x for x in records({}, c, {"tiny-bert": res})}["flows-tiny-bert-mlp-clusters"]
    radius = next(x for x in rec.robustness if x.choice == "cluster radius")
    assert radius.values == [1.0] and rec.result["saturated_radii"] == [0.6, 1.2]
    # the declared radius itself saturated: a description, not a test
    c12 = FlowsConfig(families=["tiny-bert"], bootstrap=40, cluster_threshold=1.2)
    rec = {x.id: x for x in records({}, c12, {"tiny-bert": res})}["flows-tiny-bert-mlp-clusters"]
    assert rec.klass == "description" and "saturated" in rec.statement
    # free-running time fit and the scale estimator
    res = _fake_results({"attention": 0.0, "fitted_time": 0.0})
    res["fitted_free"] = {**res["fitted"][0], "stats": {r: {k: np.asarray(v) + (0.3 if k == "cos" else 0.0)
                                                           for k, v in res["fitted"][0]["stats"][r].items()}
                                                       for r in ("sphere", "hidden")}}  # fmt: skip
    res["scale_alt"] = {"median_rest": {"sphere": {v: {k: np.asarray(x) + (0.4 if k == "cos" else 0.0)
                                                       for k, x in res["stats"]["sphere"][v].items()}
                                                   for v in SCALE_FLOWS}}}  # fmt: skip
    v = {x.id.split("tiny-bert-")[1]: x for x in records({}, c, {"tiny-bert": res})}
    # review round 3, F3: the free-running fit (fitted to the tested quantity) is reported, it cannot flip
    assert not any(x.choice == "time fit" for x in v["fitted-time-cos"].robustness)
    free = v["fitted-time-cos"].result["free_running_fit"]
    # review round 7, F8: a description (class, no outcome); its value still 0.3 off the model
    assert free["class"] == "description" and "outcome" not in free
    assert free["value"] == pytest.approx(0.3, abs=0.02)
    assert v["fitted-time-cos"].verdict == "holds"
    sc = next(x for x in v["attention-overclusters"].robustness if x.choice == "scale estimator")
    assert sc.values == ["mean (declared)", "median_rest"] and sc.outcomes == ["fails", "holds"]
    assert v["attention-overclusters"].verdict == "depends on scale estimator"
    assert not any(x.choice == "scale estimator" for x in v["no-mlp-network-overclusters"].robustness)


def _with_steps(res: dict, K: int, shift: dict[str, float]) -> dict:
    """``res`` with the flows at K steps per unit time: each flow's sphere statistics at the declared step
    plus ``shift[flow]`` in mean cosine (clusters, effective rank scaled by 1 + shift); (c): main split."""
    from attnflow.studies.real_model_flows import STEP_FLOWS

    def moved(d, x):
        return {"cos": np.asarray(d["cos"]) + x, "erank": np.asarray(d["erank"]) * (1 + x),
                "clusters": np.asarray(d["clusters"]) * (1 + x)}  # fmt: skip

    fit = res["fitted"][0]
    res["steps_alt"] = {str(K): {
        "sphere": {v: moved(res["stats"]["sphere"][v], shift.get(v, 0.0)) for v in STEP_FLOWS},
        "fitted": {**fit, "stats": {"sphere": moved(fit["stats"]["sphere"], shift.get("fitted_time", 0.0))}},
    }}  # fmt: skip
    return res


def test_study_step_count_check_on_every_flow_record_and_its_flip():
    """Review 2 of issue 26 part 3, amended by review round 5 (F6 for runs without the step rule):
    every record of a flow gets the robustness check "step count" (not the discrete network (n), not the
    identities); a record whose quantity moves by >= 1/4 of its threshold, or changes outcome, from K = 4
    to 16 is inconclusive "step not converged at K = 16" (its checks listed, not combined); one that stays
    within the tolerance keeps its verdict."""
    from attnflow.studies.real_model_flows import FlowsConfig, records

    c = FlowsConfig(families=["tiny-bert"], bootstrap=40)
    close = {"attention": 0.0, "biases": 0.001, "model_scores": 0.0, "fitted_time": 0.0, "mlp": 0.0,
             "frames": 0.002}  # fmt: skip
    # at K = 16: (f) 0.3 above (n) (the gap criterion is <= 0.1), (c) 0.3 off the model, (e) 0.05
    # (same side of 0.1, but a move over the tolerance 0.025 = 1/4 of it); sentence noise 0.02 sd keeps
    # every interval far from the thresholds (0.1 against shifts 0 / 0.3), 40 resamples suffice
    res = _with_steps(_fake_results(close), 16, {"frames": 0.3, "fitted_time": 0.3, "mlp": 0.05})
    v = {r.id.split("tiny-bert-")[1]: r for r in records({}, c, {"tiny-bert": res})}
    # review round 6, F4: a flow converges as a whole, so every record of (e) follows mlp-cos
    not_converged = {"fitted-time-cos", "mlp-cos", "mlp-clusters", "mlp-erank", "frames-overclusters",
                     "frames-follows-network-cos"}  # fmt: skip
    for k, r in v.items():
        checks = r.robustness if k not in not_converged else r.result["checks_not_combined"]
        choice = (lambda x: x.choice) if k not in not_converged else (lambda x: x["choice"])
        has = [x for x in checks if choice(x) == "step count"]
        if k == "no-mlp-network-overclusters":
            assert not has
        else:
            vals = has[0].values if k not in not_converged else has[0]["values"]
            assert len(has) == 1 and vals == [4, 16], k
        if k in not_converged:
            assert r.verdict == "inconclusive" and not r.robustness, k
            assert r.result["unmeasured_main"].startswith("step not converged at K = 16"), k
    listed = v["frames-follows-network-cos"].result["checks_not_combined"]
    step = next(x for x in listed if x["choice"] == "step count")
    assert step["outcomes"] == ["holds", "fails"] and step["results"][1] == pytest.approx(0.3, abs=0.02)
    assert "0.002 -> 0.302" in v["frames-follows-network-cos"].result["unmeasured_main"]
    assert "0.000 -> 0.050" in v["mlp-cos"].result["unmeasured_main"]  # same side, moved over the tolerance
    assert v["attention-overclusters"].verdict == "fails"
    assert v["frames-mlp-erank"].verdict == "holds"  # not shifted at K = 16: converged, keeps its verdict
    assert "flow (e) has not converged (mlp-cos" in v["mlp-erank"].result["unmeasured_main"]
    # the generated verdict table names the reason
    from attnflow.studies.real_model_flows import verdict_tables

    t = verdict_tables({"families": {"tiny-bert": {}}, "verdicts": [r.to_json() for r in v.values()]})[0]
    row = next(r for r in t.rows if r["claim"] == "frames-follows-network-cos")
    assert row["verdict"] == "inconclusive (step not converged at K = 16)" and row["value"] is None
    # a family whose name is a prefix of another's ('minilm', 'minilm-l3') gets only its own records
    two = [r.to_json() for r in records({}, c, {"tiny-bert": res, "tiny-bert-x": res})]
    t2 = verdict_tables({"families": {"tiny-bert": {}, "tiny-bert-x": {}}, "verdicts": two})
    assert [len(t.rows) for t in t2] == [len(t.rows)] * 2
    # the same records without the shift at K = 16: no flip
    res = _with_steps(_fake_results(close), 16, {})
    v = {r.id.split("tiny-bert-")[1]: r.verdict for r in records({}, c, {"tiny-bert": res})}
    assert v["frames-follows-network-cos"] == v["fitted-time-cos"] == "holds"
    with pytest.raises(ValueError, match=r"steps_alternatives must be distinct: got \[16, 16\]"):
        FlowsConfig(steps_alternatives=[16, 16])


def test_study_step_count_flows_are_the_flows_of_a_run_declared_at_that_step():
    """The flows at an alternative step (family_task) are those of a run whose declared step is that one:
    (a)-(g) from the same z_0, and (c) refitted on the main split's fit half (same T_l, same statistics)."""
    from attnflow.studies.real_model_flows import STEP_FLOWS, FlowsConfig, family_task

    # step_candidates []: the check "step count" of the runs without the step rule
    base = {"families": ["tiny-llama"], "sentences": 4, "max_time": 2.0, "bootstrap": 10, "split_seeds": [0],
            "free_running_fit": False, "scale_alternatives": [], "join_alternatives": [],
            "step_candidates": []}  # fmt: skip
    two = family_task(
        FlowsConfig(**base, steps_per_layer=2, steps_alternatives=[2, 3]).model_dump(), "tiny-llama"
    )
    three = family_task(
        FlowsConfig(**base, steps_per_layer=3, steps_alternatives=[]).model_dump(), "tiny-llama"
    )
    assert list(two["steps_alt"]) == ["3"] and three["steps_alt"] == {}
    alt = two["steps_alt"]["3"]
    for v in STEP_FLOWS:
        for k in ("cos", "erank", "clusters"):  # the same code path: equal to rounding
            np.testing.assert_allclose(
                alt["sphere"][v][k], three["stats"]["sphere"][v][k], rtol=0, atol=1e-12
            )
    assert alt["fitted"]["times"] == three["fitted"][0]["times"]
    assert alt["fitted"]["report"] == three["fitted"][0]["report"]
    np.testing.assert_allclose(alt["fitted"]["stats"]["sphere"]["cos"],
                               three["fitted"][0]["stats"]["sphere"]["cos"], rtol=0, atol=1e-12)  # fmt: skip
    # and the step matters: the flows at 2 and 3 steps differ
    assert not np.allclose(two["stats"]["sphere"]["mlp"]["cos"], alt["sphere"]["mlp"]["cos"])


# -- layers taken from the network (review round 7, F1 (ii): the after-jump reading) -----------------------
def _flow_inputs(w, fp):
    rho = stream_norms(w, fp.hidden_states) if w.arch == "pre_ln" else None
    return rho, {"fitted_time": {"layer_times": [0.7, 1.3]}, "model_scores": {"attentions": fp.attentions}}


@pytest.mark.parametrize("build", [_bert, _gpt2, _llama])
def test_network_layers_all_give_the_models_tokens_and_none_gives_the_flow(build):
    w = build()
    fp = forward(w, IDS)
    rho, extra = _flow_inputs(w, fp)
    for v in VARIANTS:
        kw = {"residual_norms": rho, **extra.get(v, {})}
        every = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=3, network_layers=(1, 0),
                           model_tokens=fp.tokens, **kw)  # fmt: skip
        assert torch.equal(every, fp.tokens)
        plain = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=3, **kw)
        empty = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=3, network_layers=(),
                           model_tokens=fp.tokens, **kw)  # fmt: skip
        assert torch.equal(empty, plain)
        assert float((plain[-1] - fp.tokens[-1]).abs().max()) > 1e-3  # the flow is not the model


@pytest.mark.parametrize("build", [_bert, _gpt2, _llama])
def test_network_layer_0_is_the_flow_of_the_later_layers_from_the_models_tokens(build):
    """Independent route (layer0_ladder.py's): the network without its first layer, flowed from tokens[1].
    Post-LN: layer 1's attention reads layer 0's output LayerNorm, so that becomes the cut network's
    embedding LayerNorm."""
    import dataclasses

    w = build()
    fp = forward(w, IDS)
    rho, extra = _flow_inputs(w, fp)
    rest = dataclasses.replace(w, layers=w.layers[1:])
    if w.arch == "post_ln":
        rest = dataclasses.replace(rest, embedding_ln=w.layers[0].ln_mlp)
    extra_rest = {"fitted_time": {"layer_times": [1.3]}, "model_scores": {"attentions": fp.attentions[1:]}}
    for v in VARIANTS:
        ours = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=3, residual_norms=rho,
                          network_layers=(0,), model_tokens=fp.tokens, **extra.get(v, {}))  # fmt: skip
        rho_rest = None if rho is None else rho[1:]
        ref = layer_flow(rest, fp.tokens[1], variant=v, steps_per_layer=3, residual_norms=rho_rest,
                         **extra_rest.get(v, {}))  # fmt: skip
        assert torch.equal(ours[0], fp.tokens[0])
        torch.testing.assert_close(ours[1:], ref, rtol=0, atol=0)
        assert float((ours[2] - fp.tokens[2]).abs().max()) > 1e-3  # layer 1 is a flow, not the model
        # layer 1 from the network: depths 0..1 are the plain flow's
        last = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=3, residual_norms=rho,
                          network_layers=[1], model_tokens=fp.tokens, **extra.get(v, {}))  # fmt: skip
        plain = layer_flow(
            w, fp.tokens[0], variant=v, steps_per_layer=3, residual_norms=rho, **extra.get(v, {})
        )
        assert torch.equal(last[:2], plain[:2]) and torch.equal(last[2], fp.tokens[2])


def test_network_layers_errors():
    w = _bert()
    fp = forward(w, IDS)
    z, toks = fp.tokens[0], fp.tokens
    with pytest.raises(
        ValueError, match=r"network_layers must be layer indices in \[0, L\) = \[0, 2\): got \[2\]"
    ):
        layer_flow(w, z, variant="mlp", steps_per_layer=1, network_layers=(0, 2), model_tokens=toks)
    with pytest.raises(ValueError, match=r"layer indices .*got \[-1\]"):
        layer_flow(w, z, variant="mlp", steps_per_layer=1, network_layers=(-1,), model_tokens=toks)
    with pytest.raises(ValueError, match=r"layer indices .*got \[True\]"):
        layer_flow(w, z, variant="mlp", steps_per_layer=1, network_layers=(True,), model_tokens=toks)
    with pytest.raises(ValueError, match=r"network_layers must be distinct: \[0\] repeated in \[0, 1, 0\]"):
        layer_flow(w, z, variant="mlp", steps_per_layer=1, network_layers=(0, 1, 0), model_tokens=toks)
    with pytest.raises(
        ValueError, match=r"needs its tokens: got model_tokens=None; pass model_tokens=forward"
    ):
        layer_flow(w, z, variant="mlp", steps_per_layer=1, network_layers=(0,))
    with pytest.raises(
        ValueError, match=r"model_tokens must have shape \(L \+ 1, n, d\) = \(3, 10, 24\): got \(2, 10, 24\)"
    ):
        layer_flow(w, z, variant="mlp", steps_per_layer=1, network_layers=(0,), model_tokens=toks[:2])
    with pytest.raises(
        ValueError, match=r"model_tokens\[0\] must be z0 \(the same sentence\): max .* > 1e-9"
    ):
        layer_flow(w, z, variant="mlp", steps_per_layer=1, network_layers=(0,), model_tokens=toks.flip(1))
