"""Hugging Face ``transformers`` models to check the from-scratch pass against (offline, float64).

* :func:`random_gpt2`: a randomly initialised ``GPT2Model`` (seeded), when no GPT-2 checkpoint is on disk;
* :func:`hf_model`: the ``transformers`` model of all-MiniLM-L6-v2 or of a local directory;
* :func:`hf_hidden_states`: its hidden states for one sequence;
* :func:`relative_error`: the largest per-token relative difference of two stacks of hidden states;
* :func:`to_hf_model`: a ``transformers`` model (BERT, GPT-2, Llama) holding loaded weights, optionally with
  RMSNorm, softmax and rotary tables in float64 (``exact=True``), the reference for ONNX and GGUF weights.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from .checkpoint import TransformerWeights, minilm_path, require_extra

__all__ = ["hf_config", "hf_hidden_states", "hf_model", "random_gpt2", "relative_error", "to_hf_model"]


def random_gpt2(
    *,
    d: int = 384,
    layers: int = 6,
    heads: int = 12,
    vocab: int = 30522,
    max_length: int = 512,
    seed: int = 0,
) -> torch.nn.Module:
    """A randomly initialised ``transformers.GPT2Model`` (its own initialisation, seeded), float64, eval mode.

    Parameters
    ----------
    d, layers, heads, vocab, max_length : int
        ``n_embd``, ``n_layer``, ``n_head``, ``vocab_size``, ``n_positions``.
    seed : int
        Seed of ``torch.manual_seed`` before construction; the global RNG state is restored afterwards.
    """
    transformers = require_extra("transformers", "building a random GPT-2")
    config = transformers.GPT2Config(
        vocab_size=vocab, n_positions=max_length, n_embd=d, n_layer=layers, n_head=heads,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(int(seed))
        model = transformers.GPT2Model(config)
    finally:
        torch.random.set_rng_state(state)
    return model.to(torch.float64).eval()


def hf_model(source: str | Path = "minilm") -> torch.nn.Module:
    """The ``transformers`` model of ``source`` (``"minilm"`` or a local directory), float64, eval mode.

    Eager attention is requested so that the attention weights are the plain softmax; nothing is downloaded
    (``local_files_only=True``).
    """
    transformers = require_extra("transformers", "the Hugging Face reference model")
    path = minilm_path() if str(source) == "minilm" else Path(source)
    if not (path / "model.safetensors").is_file():
        raise ValueError(f"{path}: no model.safetensors; attnflow reads safetensors only (never a pickle)")
    model = transformers.AutoModel.from_pretrained(
        str(path),
        local_files_only=True,
        attn_implementation="eager",
        trust_remote_code=False,
        use_safetensors=True,
    )
    return model.to(torch.float64).eval()


def hf_hidden_states(model: torch.nn.Module, input_ids) -> torch.Tensor:
    """Hidden states of ``model`` on one sequence, shape=[L + 1, n, d] (``output_hidden_states=True``)."""
    ids = torch.as_tensor(input_ids, dtype=torch.int64).reshape(1, -1)
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    return torch.stack(out.hidden_states)[:, 0]


def relative_error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    r"""Largest per-token relative difference, :math:`\max_{l,i} \|a_{l,i} - b_{l,i}\| / \|b_{l,i}\|`.

    Parameters
    ----------
    ours, reference : Tensor, shape=[L + 1, n, d]
    """
    if ours.shape != reference.shape:
        raise ValueError(
            f"hidden states must have the same shape: got {tuple(ours.shape)} and {tuple(reference.shape)}"
        )
    ref = reference.to(torch.float64)
    num = torch.linalg.vector_norm(ours.to(torch.float64) - ref, dim=-1)
    return float((num / torch.linalg.vector_norm(ref, dim=-1)).max())


def hf_config(weights: TransformerWeights):
    """The ``transformers`` configuration of the architecture of ``weights`` (BERT, GPT-2 or Llama)."""
    transformers = require_extra("transformers", "building a transformers model")
    L, d, H = weights.depth, weights.d, weights.num_heads
    m = int(weights.layers[0].W_in.shape[0])
    vocab = int(weights.word_embeddings.shape[0])
    if weights.positions == "rotary":
        ln = weights.layers[0].ln_attn
        return transformers.LlamaConfig(
            vocab_size=vocab, hidden_size=d, intermediate_size=m, num_hidden_layers=L,
            num_attention_heads=H, num_key_value_heads=weights.kv_heads, rms_norm_eps=ln.eps,
            max_position_embeddings=weights.max_length, rope_theta=weights.rope_theta,
            tie_word_embeddings=True, attention_bias=False, mlp_bias=False, hidden_act="silu",
            attn_implementation="eager", bos_token_id=None, eos_token_id=None, pad_token_id=None,
        )  # fmt: skip
    if weights.arch == "post_ln":
        types = 0 if weights.token_type_embeddings is None else int(weights.token_type_embeddings.shape[0])
        return transformers.BertConfig(
            vocab_size=vocab, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
            intermediate_size=m, max_position_embeddings=weights.max_length, type_vocab_size=max(types, 1),
            hidden_act="gelu" if weights.activation == "gelu" else "gelu_new",
            layer_norm_eps=weights.embedding_ln.eps, attn_implementation="eager",
        )  # fmt: skip
    return transformers.GPT2Config(
        vocab_size=vocab, n_positions=weights.max_length, n_embd=d, n_layer=L, n_head=H, n_inner=m,
        activation_function="gelu_new" if weights.activation == "gelu_tanh" else "gelu",
        layer_norm_epsilon=weights.final_ln.eps, attn_implementation="eager", bos_token_id=0, eos_token_id=0,
    )  # fmt: skip


def _state_dict(weights: TransformerWeights) -> dict[str, torch.Tensor]:
    sd: dict[str, torch.Tensor] = {}
    if weights.positions == "rotary":
        sd["embed_tokens.weight"] = weights.word_embeddings
        sd["norm.weight"] = weights.final_ln.weight
        for i, lw in enumerate(weights.layers):
            a = f"layers.{i}."
            sd.update({
                a + "self_attn.q_proj.weight": lw.W_q, a + "self_attn.k_proj.weight": lw.W_k,
                a + "self_attn.v_proj.weight": lw.W_v, a + "self_attn.o_proj.weight": lw.W_o,
                a + "mlp.gate_proj.weight": lw.W_gate, a + "mlp.up_proj.weight": lw.W_in,
                a + "mlp.down_proj.weight": lw.W_out, a + "input_layernorm.weight": lw.ln_attn.weight,
                a + "post_attention_layernorm.weight": lw.ln_mlp.weight,
            })  # fmt: skip
        return sd
    if weights.arch == "post_ln":
        e = "embeddings."
        sd[e + "word_embeddings.weight"] = weights.word_embeddings
        sd[e + "position_embeddings.weight"] = weights.position_embeddings
        tte = weights.token_type_embeddings
        sd[e + "token_type_embeddings.weight"] = (
            tte if tte is not None else torch.zeros(1, weights.d, dtype=weights.word_embeddings.dtype)
        )
        sd[e + "LayerNorm.weight"] = weights.embedding_ln.weight
        sd[e + "LayerNorm.bias"] = weights.embedding_ln.bias
        for i, lw in enumerate(weights.layers):
            a = f"encoder.layer.{i}."
            for mod, W, b in (
                ("attention.self.query", lw.W_q, lw.b_q), ("attention.self.key", lw.W_k, lw.b_k),
                ("attention.self.value", lw.W_v, lw.b_v), ("attention.output.dense", lw.W_o, lw.b_o),
                ("intermediate.dense", lw.W_in, lw.b_in), ("output.dense", lw.W_out, lw.b_out),
                ("attention.output.LayerNorm", lw.ln_attn.weight, lw.ln_attn.bias),
                ("output.LayerNorm", lw.ln_mlp.weight, lw.ln_mlp.bias),
            ):  # fmt: skip
                sd[a + mod + ".weight"], sd[a + mod + ".bias"] = W, b
        return sd
    sd["wte.weight"], sd["wpe.weight"] = weights.word_embeddings, weights.position_embeddings
    sd["ln_f.weight"], sd["ln_f.bias"] = weights.final_ln.weight, weights.final_ln.bias
    for i, lw in enumerate(weights.layers):
        a = f"h.{i}."
        sd[a + "attn.c_attn.weight"] = torch.cat([lw.W_q, lw.W_k, lw.W_v]).T  # Conv1D: (in, out)
        sd[a + "attn.c_attn.bias"] = torch.cat([lw.b_q, lw.b_k, lw.b_v])
        sd[a + "attn.c_proj.weight"], sd[a + "attn.c_proj.bias"] = lw.W_o.T, lw.b_o
        sd[a + "mlp.c_fc.weight"], sd[a + "mlp.c_fc.bias"] = lw.W_in.T, lw.b_in
        sd[a + "mlp.c_proj.weight"], sd[a + "mlp.c_proj.bias"] = lw.W_out.T, lw.b_out
        for ln, p in (("ln_1", lw.ln_attn), ("ln_2", lw.ln_mlp)):
            sd[a + ln + ".weight"], sd[a + ln + ".bias"] = p.weight, p.bias
    return sd


def to_hf_model(
    weights: TransformerWeights, *, dtype: torch.dtype = torch.float64, exact: bool = False
) -> torch.nn.Module:
    """A ``transformers`` model (``BertModel``, ``GPT2Model`` or ``LlamaModel``) holding ``weights``.

    The independent reference of the from-scratch pass for weights read from ONNX or GGUF, and the model
    whose own forward pass :mod:`attnflow.analysis.probe` reads.

    Parameters
    ----------
    weights : TransformerWeights
    dtype : torch.dtype
    exact : bool
        Llama only: run RMSNorm, softmax and the rotary tables in float64 (``transformers`` keeps those
        three in float32 even in a float64 model, ~1e-7 relative; ``docs/real_models.md``). The model's
        own code is kept; the three pieces are replaced by float64 versions of the same formulas.

    Returns
    -------
    torch.nn.Module
        In eval mode, eager attention (``output_attentions`` returns the softmax weights).
    """
    transformers = require_extra("transformers", "building a transformers model")
    config = hf_config(weights)
    cls = {"llama": transformers.LlamaModel, "bert": transformers.BertModel, "gpt2": transformers.GPT2Model}[
        config.model_type
    ]
    kwargs = {"add_pooling_layer": False} if config.model_type == "bert" else {}
    model = cls(config, **kwargs)
    missing, unexpected = model.load_state_dict(
        {k: v.detach().to(torch.float32) for k, v in _state_dict(weights).items()}, strict=False
    )
    missing = [k for k in missing if not k.endswith((".attn.bias", ".attn.masked_bias", "position_ids"))]
    if missing or unexpected:
        raise ValueError(f"building {cls.__name__}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model = model.to(dtype).eval()
    with torch.no_grad():  # set again in the target dtype: no float32 round trip of the weights
        params = dict(model.named_parameters())
        for k, v in _state_dict(weights).items():
            if k in params:
                params[k].copy_(v.to(dtype))
    if exact and config.model_type == "llama":
        _float64_llama(model)
    return model


def _float64_llama(model: torch.nn.Module) -> None:
    import types

    from transformers import AttentionInterface

    def rms(self, x):
        x64 = x.to(torch.float64)
        y = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (self.weight.to(torch.float64) * y).to(x.dtype)

    for mod in model.modules():
        if type(mod).__name__.endswith("RMSNorm"):
            mod.forward = types.MethodType(rms, mod)
    rope = model.rotary_emb
    k = model.config.hidden_size // model.config.num_attention_heads
    base = float(model.config.rope_parameters["rope_theta"])

    def rotary(self, x, position_ids):
        inv = 1.0 / base ** (torch.arange(0, k, 2, dtype=torch.float64) / k)
        ang = position_ids[..., None].to(torch.float64) * inv
        ang = torch.cat([ang, ang], dim=-1)
        return ang.cos().to(x.dtype), ang.sin().to(x.dtype)

    rope.forward = types.MethodType(rotary, rope)

    def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        g = module.num_key_value_groups
        key, value = key.repeat_interleave(g, dim=1), value.repeat_interleave(g, dim=1)
        w = torch.matmul(query, key.transpose(2, 3)) * scaling
        if attention_mask is None:  # the mask of a custom implementation may be left to it: causal
            n, m = w.shape[-2:]
            causal = torch.ones(n, m, dtype=torch.bool).tril(m - n)
            w = w.masked_fill(~causal, -math.inf)
        elif attention_mask.dtype == torch.bool:
            w = w.masked_fill(~attention_mask, -math.inf)
        else:
            w = w + attention_mask
        w = torch.softmax(w.to(torch.float64), dim=-1).to(query.dtype)
        return torch.matmul(w, value).transpose(1, 2).contiguous(), w

    AttentionInterface.register("attnflow_float64", attention)
    model.config._attn_implementation = "attnflow_float64"
