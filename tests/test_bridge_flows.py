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
def _fake_results(shift: dict[str, float], S=12, L=3, seed=0) -> dict:
    """Per-sentence arrays of a fake family: every flow equals the model plus ``shift[flow]`` in mean
    cosine (clusters and effective rank scaled by 1 + shift), with sentence-level noise."""
    from attnflow.studies.real_model_flows import FLOWS, _halves

    rng = np.random.default_rng(seed)
    base = {"cos": 0.3 + 0.02 * rng.standard_normal((S, L + 1)),
            "erank": 5.0 + 0.1 * rng.standard_normal((S, L + 1)),
            "clusters": 4.0 + 0.1 * rng.standard_normal((S, L + 1, 3)),
            "agree": np.ones((S, L + 1))}  # fmt: skip

    def shifted(x):
        return {"cos": base["cos"] + x, "erank": base["erank"] * (1 + x),
                "clusters": base["clusters"] * (1 + x), "agree": base["agree"]}  # fmt: skip

    stats = {r: {"model": dict(base), **{f: shifted(shift.get(f, 0.0)) for f in FLOWS if f != "fitted_time"}}
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

    c = FlowsConfig(families=["tiny-bert"], bootstrap=100)
    # (b) differs from (a) by a hair: bit-identical flows give an identity record instead (test below)
    close = {"attention": 0.0, "biases": 0.001, "model_scores": 0.0, "fitted_time": 0.0, "mlp": 0.0}
    far = {"attention": 0.4, "biases": 0.41, "model_scores": 0.4, "fitted_time": 0.4, "mlp": 0.4}
    v_close = {
        r.id.split("tiny-bert-")[1]: r.verdict for r in records({}, c, {"tiny-bert": _fake_results(close)})
    }
    v_far = {
        r.id.split("tiny-bert-")[1]: r.verdict for r in records({}, c, {"tiny-bert": _fake_results(far)})
    }
    over = ("attention-overclusters", "biases-overclusters", "model-scores-overclusters")
    follow = ("fitted-time-cos", "mlp-cos", "mlp-clusters", "mlp-erank")
    assert all(v_close[k] == "fails" for k in over) and all(v_close[k] == "holds" for k in follow)
    assert all(v_far[k] == "holds" for k in over) and all(v_far[k] == "fails" for k in follow)
    recs = records({}, c, {"tiny-bert": _fake_results(far)})
    choices = {r.id: [x.choice for x in r.robustness] for r in recs}
    assert choices["flows-tiny-bert-fitted-time-cos"] == ["representation", "time-fit split", "depth summary"]
    assert choices["flows-tiny-bert-mlp-clusters"] == [
        "representation", "corpus subsample", "depth summary", "cluster radius"
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
    assert dep.values == ["mean over depths 1..L", "last depth L"]
    assert dep.outcomes == ["holds", "fails"] and rec.verdict == "depends on depth summary"
    with pytest.raises(ValueError, match="depths must be 'all' \\(1..L\\) or 'last' \\(L\\): got 'first'"):
        from attnflow.studies.real_model_flows import _quantity

        _quantity("gap", "first")


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
    assert len(s["verdicts"]) == 14 and {v["class"] for v in s["verdicts"]} == {"test", "identity"}
    ids = [v["id"] for v in s["verdicts"] if v["class"] == "identity"]
    assert ids == ["flows-tiny-llama-biases-overclusters"]
    assert "| depth | model | (a) bias-free attention |" in (tmp_path / "table.md").read_text()
    assert sorted(s["figures"]) == ["real_model_flows_tiny-bert", "real_model_flows_tiny-llama"]
