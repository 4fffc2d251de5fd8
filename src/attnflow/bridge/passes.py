r"""A from-scratch forward pass of a loaded stack (:class:`~attnflow.bridge.checkpoint.TransformerWeights`).

Embeddings, multi-head attention, MLP, LayerNorm and residuals written out in PyTorch, so that every
comparison with the attention flow rests on the model's own computation: in float64 the hidden states
equal those of the Hugging Face model to round-off (``tests/test_real_model.py`` measures it).

Besides the hidden states (in the Hugging Face convention of ``output_hidden_states``), the pass returns
the **sphere tokens** of every depth: the vector each LayerNorm projects, centred and normalised,

.. math:: z = \frac{y - \bar y\,\mathbf 1}{\|y - \bar y\,\mathbf 1\|} \in S^{d-1}, \qquad
          \mathrm{LN}(y) = \sqrt d\,\gamma \odot z + b \quad (\epsilon \to 0),

i.e. LayerNorm read as the projection onto the sphere of radius :math:`\sqrt d` after centring, followed by
a fixed affine map. For a ``post_ln`` model (BERT) ``y`` is the residual sum entering the block's output
LayerNorm (the embedding sum at depth 0); for a ``pre_ln`` model (GPT-2) it is the residual stream.
These are the tokens attnflow's flow moves (:mod:`attnflow.bridge.theta`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ..model.attention import attention_weights, causal_mask
from .checkpoint import LayerNormParams, LayerWeights, TransformerWeights

__all__ = [
    "ForwardPass",
    "apply_rotary",
    "attention_sublayer",
    "block",
    "check_input_ids",
    "forward",
    "gelu",
    "layer_norm",
    "mlp",
    "rotary_tables",
    "sphere_tokens",
]


@dataclass(frozen=True)
class ForwardPass:
    """What :func:`forward` returns.

    Attributes
    ----------
    hidden_states : Tensor, shape=[L + 1, n, d]
        As ``transformers`` returns them with ``output_hidden_states=True``: the embedding output, then
        each block's output (GPT-2: the last one after the final LayerNorm).
    tokens : Tensor, shape=[L + 1, n, d]
        Sphere tokens (module docstring) at depth 0..L: unit norm, orthogonal to the all-ones vector
        (RMSNorm models: not centred). Not the hidden states and not token ids; also ``sphere_tokens``.
    attention_inputs : Tensor, shape=[L, n, d]
        What each layer's attention reads (a LayerNorm output).
    attentions : Tensor, shape=[L, H, n, n]
        Attention weights of every layer and head (with the model's biases), as ``transformers`` returns
        them with ``output_attentions=True``.
    """

    hidden_states: torch.Tensor
    tokens: torch.Tensor
    attention_inputs: torch.Tensor
    attentions: torch.Tensor

    @property
    def sphere_tokens(self) -> torch.Tensor:
        """The sphere tokens (same tensor as :attr:`tokens`, under a name that cannot be misread)."""
        return self.tokens


def layer_norm(x: torch.Tensor, p: LayerNormParams) -> torch.Tensor:
    r"""LayerNorm (or RMSNorm, ``p.rms``) over the last axis.

    .. math:: \gamma \odot (x - \bar x)/\sqrt{\tfrac1d\textstyle\sum_k (x_k - \bar x)^2 + \epsilon} + b,
              \qquad \text{RMSNorm: } \gamma \odot x/\sqrt{\tfrac1d\textstyle\sum_k x_k^2 + \epsilon}
    """
    if p.rms:
        return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + p.eps) * p.weight
    mu = x.mean(dim=-1, keepdim=True)
    c = x - mu
    var = c.pow(2).mean(dim=-1, keepdim=True)
    return c / torch.sqrt(var + p.eps) * p.weight + p.bias


def sphere_tokens(y: torch.Tensor, *, centred: bool = True) -> torch.Tensor:
    r"""Centre over the last axis and normalise: the sphere point a LayerNorm projects ``y`` onto.

    Parameters
    ----------
    y : Tensor, shape=[..., d]
    centred : bool
        False for an RMSNorm model (RMSNorm projects onto the sphere without centring): :math:`y/\|y\|`.

    Returns
    -------
    Tensor, shape=[..., d]
        :math:`(y - \bar y)/\|y - \bar y\|`.
    """
    c = y - y.mean(dim=-1, keepdim=True) if centred else y
    return c / torch.linalg.vector_norm(c, dim=-1, keepdim=True)


def gelu(x: torch.Tensor, kind: str) -> torch.Tensor:
    r"""GELU (Hendrycks & Gimpel, 2016).

    ``"gelu"``: :math:`\frac x2(1 + \operatorname{erf}(x/\sqrt2))` (BERT); ``"gelu_tanh"``:
    :math:`\frac x2(1 + \tanh(\sqrt{2/\pi}(x + 0.044715 x^3)))` (GPT-2's ``gelu_new``).
    """
    if kind == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    raise ValueError(f"unknown activation {kind!r}; valid: gelu, gelu_tanh")


def rotary_tables(n: int, k: int, base: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Cosines and sines of rotary positions (Su et al., 2021), the half-split layout of Llama.

    Position p rotates the coordinate pairs (i, i + k/2) of each query and key by the angle
    :math:`p\,\theta_i`, :math:`\theta_i = \text{base}^{-2i/k}`, i < k/2; computed in float64.

    Returns
    -------
    cos, sin : Tensor, shape=[n, k]
        Cached per (n, k, base, dtype) (a flow calls this at every step): read them, never write in place.
    """
    return _rotary_tables(int(n), int(k), float(base), dtype)


@functools.lru_cache(maxsize=256)
def _rotary_tables(n: int, k: int, base: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / base ** (torch.arange(0, k, 2, dtype=torch.float64) / k)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the rows of ``x`` (shape=[..., n, k]) by the tables of :func:`rotary_tables`."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


def attention_sublayer(
    h: torch.Tensor,
    weights: TransformerWeights,
    layer: int,
    *,
    biases: bool = True,
    attention: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer ``layer``'s multi-head attention on its input ``h`` (shape=[n, d], a norm's output).

    Returns the sub-layer's output (after ``W_o``, with its bias; shape=[n, d]) and the attention weights
    (shape=[H, n, n]). Rotary positions, grouped-query attention and the causal mask are applied as the
    model declares them.

    Parameters
    ----------
    h : Tensor, shape=[n, d]
    weights : TransformerWeights
    layer : int
    biases : bool
        False drops the projection biases b_q, b_k, b_v, b_o (the bias-free heads of Theta_t).
    attention : Tensor or None, shape=[H, n, n]
        Attention weights to use instead of the ones the scores give (the "scores from the model" flow of
        :mod:`attnflow.bridge.flows`): only the values ``W_o (A (h W_v^T))`` are computed from ``h``.
    """
    lw, H = weights.layers[layer], weights.num_heads
    n, d = h.shape
    k = lw.W_q.shape[0] // H
    g = H // weights.kv_heads

    def proj(W, b, heads):
        y = h @ W.T + b if biases else h @ W.T
        return y.reshape(n, heads, k).transpose(0, 1)

    v = proj(lw.W_v, lw.b_v, weights.kv_heads)
    if g > 1:  # grouped-query attention: query head h reads key/value head h // g
        v = v.repeat_interleave(g, dim=0)
    if attention is None:
        q, kk = proj(lw.W_q, lw.b_q, H), proj(lw.W_k, lw.b_k, weights.kv_heads)
        if weights.positions == "rotary":
            cos, sin = rotary_tables(n, k, weights.rope_theta, h.dtype)
            q, kk = apply_rotary(q, cos, sin), apply_rotary(kk, cos, sin)
        if g > 1:
            kk = kk.repeat_interleave(g, dim=0)
        scores = q @ kk.transpose(-1, -2) / math.sqrt(k)  # (H, n, n)
        if weights.causal:
            scores = scores.masked_fill(~causal_mask(n, h.device), -math.inf)
        A = attention_weights(scores, torch.logsumexp(scores, dim=-1), "softmax")
    else:
        if tuple(attention.shape) != (H, n, n):
            raise ValueError(
                f"attention must have shape (H, n, n) = {(H, n, n)} (layer {layer} of {weights.name}): got "
                f"{tuple(attention.shape)}; pass ForwardPass.attentions[layer] of the same sentence"
            )
        A = attention.to(h.dtype)
    out = (A @ v).transpose(0, 1).reshape(n, -1)  # concat over heads
    return (out @ lw.W_o.T + lw.b_o if biases else out @ lw.W_o.T), A


def mlp(u: torch.Tensor, lw: LayerWeights, activation: str) -> torch.Tensor:
    r"""The block's MLP on the rows of ``u`` (shape=[n, d]).

    .. math:: W_{out}\,\mathrm{gelu}(W_{in} u + b_{in}) + b_{out}, \qquad
              \text{SwiGLU: } W_{out}\,(\mathrm{silu}(W_{gate} u) \odot W_{in} u)
    """
    if lw.W_gate is not None:
        return (torch.nn.functional.silu(u @ lw.W_gate.T) * (u @ lw.W_in.T + lw.b_in)) @ lw.W_out.T + lw.b_out
    return gelu(u @ lw.W_in.T + lw.b_in, activation) @ lw.W_out.T + lw.b_out


def block(weights: TransformerWeights, layer: int, h: torch.Tensor) -> torch.Tensor:
    """One whole block on its input state (shape=[n, d]): the map whose Jacobian a probe measures.

    ``post_ln``: the LayerNorm output entering the block to the one leaving it; ``pre_ln``: the residual
    stream entering to the residual stream leaving.
    """
    lw = weights.layers[layer]
    if weights.arch == "post_ln":
        u = layer_norm(h + attention_sublayer(h, weights, layer)[0], lw.ln_attn)
        return layer_norm(u + mlp(u, lw, weights.activation), lw.ln_mlp)
    r = h + attention_sublayer(layer_norm(h, lw.ln_attn), weights, layer)[0]
    return r + mlp(layer_norm(r, lw.ln_mlp), lw, weights.activation)


def check_input_ids(weights: TransformerWeights, input_ids) -> torch.Tensor:
    """Validate a sequence of token ids against the model's vocabulary and maximum length.

    Returns
    -------
    Tensor, shape=[n], dtype=int64

    Raises
    ------
    ValueError
        For an empty or multi-dimensional sequence, ids outside the vocabulary, or a sequence longer than
        the model's maximum length (its position embeddings).
    """
    ids = torch.as_tensor(input_ids).to(torch.int64)
    if ids.ndim != 1 or ids.numel() < 1:
        raise ValueError(
            "input_ids must be one non-empty sequence of token ids, shape (n,): got shape "
            f"{tuple(ids.shape)}; run one sentence at a time"
        )
    n, vocab = ids.numel(), weights.word_embeddings.shape[0]
    if n > weights.max_length:
        raise ValueError(
            f"the sentence has {n} tokens, more than the model's maximum length {weights.max_length} "
            f"(its position embeddings, {weights.name}); shorten or split the sentence"
        )
    if int(ids.min()) < 0 or int(ids.max()) >= vocab:
        raise ValueError(
            f"token ids must lie in [0, {vocab - 1}] (the vocabulary of {weights.name}): got "
            f"min {int(ids.min())}, max {int(ids.max())}; encode the text with the model's own tokenizer"
        )
    return ids


def forward(weights: TransformerWeights, input_ids, token_type_ids=None) -> ForwardPass:
    r"""Run the loaded stack on one sequence, from scratch, in the weights' dtype.

    ``post_ln`` (BERT): :math:`h_0 = \mathrm{LN}_e(E_w + E_p + E_t)`, then per layer
    :math:`u = \mathrm{LN}_1(h + \mathrm{Attn}(h))`, :math:`h \leftarrow \mathrm{LN}_2(u + \mathrm{MLP}(u))`.
    ``pre_ln`` (GPT-2): :math:`r_0 = E_w + E_p`, :math:`r \leftarrow r + \mathrm{Attn}(\mathrm{LN}_1 r)`,
    :math:`r \leftarrow r + \mathrm{MLP}(\mathrm{LN}_2 r)`, causal attention, final LayerNorm. Attention is
    :math:`\mathrm{softmax}(q_i\cdot k_j/\sqrt k)` per head (log-sum-exp), concatenated, output projection.

    Parameters
    ----------
    weights : TransformerWeights
    input_ids : array-like of int, shape=[n]
        Token ids (special tokens included, as the tokenizer returns them).
    token_type_ids : array-like of int or None, shape=[n]
        BERT segment ids (None: all 0).

    Returns
    -------
    ForwardPass

    Raises
    ------
    ValueError
        Bad ids or a sequence longer than the model's maximum length (:func:`check_input_ids`).
    """
    ids = check_input_ids(weights, input_ids)
    n = ids.numel()
    x = weights.word_embeddings[ids]
    if weights.position_embeddings is not None:
        x = x + weights.position_embeddings[:n]
    centred = weights.norm == "layer"
    hidden, tokens, inputs, attns = [], [], [], []
    if weights.arch == "post_ln":
        if weights.token_type_embeddings is not None:
            tt = (
                torch.zeros(n, dtype=torch.int64)
                if token_type_ids is None
                else torch.as_tensor(token_type_ids)
            )
            x = x + weights.token_type_embeddings[tt.to(torch.int64)]
        tokens.append(sphere_tokens(x))
        h = layer_norm(x, weights.embedding_ln)
        hidden.append(h)
        for i, lw in enumerate(weights.layers):
            a, A = attention_sublayer(h, weights, i)
            inputs.append(h)
            attns.append(A)
            u = layer_norm(h + a, lw.ln_attn)
            y = u + mlp(u, lw, weights.activation)
            tokens.append(sphere_tokens(y))
            h = layer_norm(y, lw.ln_mlp)
            hidden.append(h)
    else:
        r = x
        tokens.append(sphere_tokens(r, centred=centred))
        hidden.append(r)
        for i, lw in enumerate(weights.layers):
            h = layer_norm(r, lw.ln_attn)
            a, A = attention_sublayer(h, weights, i)
            inputs.append(h)
            attns.append(A)
            r = r + a
            r = r + mlp(layer_norm(r, lw.ln_mlp), lw, weights.activation)
            tokens.append(sphere_tokens(r, centred=centred))
            hidden.append(r)
        hidden[-1] = layer_norm(r, weights.final_ln)
    return ForwardPass(
        hidden_states=torch.stack(hidden),
        tokens=torch.stack(tokens),
        attention_inputs=torch.stack(inputs),
        attentions=torch.stack(attns),
    )
