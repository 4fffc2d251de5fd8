r"""Bridge to trained transformers: score and value heads (D_h, V_h, beta) of a real attention layer.

A multi-head self-attention layer with projections W_q, W_k, W_v (shape ``(H k, d)``, the
``torch.nn.Linear`` convention ``q = W_q x``) and W_o (shape ``(d, H k_v)``), no biases, computes for
head h with rows :math:`R_h = hk{:}(h+1)k` (and :math:`R'_h = hk_v{:}(h+1)k_v` for the values)

.. math::

    A^h_{ij} = \operatorname{softmax}_j \frac{\langle W_q^{R_h} x_i, W_k^{R_h} x_j\rangle}{\sqrt k}
             = \operatorname{softmax}_j \big(\beta\, x_i^\top D_h x_j\big),
    \qquad D_h = (W_q^{R_h})^\top W_k^{R_h}, \quad \beta = 1/\sqrt k,

    \mathrm{out}_i = W_o \operatorname{concat}_h \Big(\sum_j A^h_{ij} W_v^{R'_h} x_j\Big)
             = \sum_h W_o^{:,R'_h} W_v^{R'_h} \sum_j A^h_{ij} x_j
             = \frac1H \sum_h V_h \sum_j A^h_{ij} x_j,
    \qquad V_h = H\, W_o^{:,R'_h} W_v^{R'_h}.

The factor H in V_h undoes attnflow's head average (design.md: v_i = (1/H) sum_h P_perp(x_i) W^h_i),
so that ``out_i`` equals :attr:`attnflow.dynamics.field.FieldEval.raw_velocity` exactly (and
``velocity`` with ``geometry="flat"``; on the sphere the field is its tangent part P_perp(x_i) out_i).
A residual block ``x + attn(x)`` is then one explicit Euler step, dt = 1, of the flat ``ascent`` dynamics.

Convention chosen here: D_h is returned unscaled (exactly Q_h^T K_h, as :func:`attnflow.heads.from_qk`)
and the temperature 1/sqrt(k) is returned separately as ``beta``, to be given to
:class:`attnflow.TransformerModel`.
"""

from __future__ import annotations

import math
from typing import TypedDict

import numpy as np
import torch

from ..model.heads import from_qk

_DEFAULT_DTYPE = torch.float64


class AttentionHeads(TypedDict):
    """Result of a conversion (a plain dict).

    Attributes
    ----------
    D : Tensor, shape=[H, d, d]
        Score matrices D_h = Q_h^T K_h (unscaled).
    V : Tensor, shape=[H, d, d]
        Value matrices V_h = H W_o^h W_v^h.
    beta : float
        Inverse temperature (1/sqrt(k) unless overridden).
    notes : tuple of str
        Conventions used and everything the conversion dropped (biases, dropout).
    """

    D: torch.Tensor
    V: torch.Tensor
    beta: float
    notes: tuple[str, ...]


def _matrix(name: str, W, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(W, torch.Tensor):
        t = W.detach().to(dtype=dtype, device="cpu")
    else:
        t = torch.as_tensor(np.asarray(W), dtype=dtype)
    if t.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D matrix in the torch.nn.Linear convention (out_features, in_features): "
            f"got shape {tuple(t.shape)}; split fused or per-head weights into one matrix per projection"
        )
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite: found {int((~torch.isfinite(t)).sum())} non-finite entries")
    return t


def from_attention_weights(
    W_q,
    W_k,
    W_v,
    W_o,
    num_heads: int,
    *,
    scale: float | None = None,
    dtype: torch.dtype = _DEFAULT_DTYPE,
) -> AttentionHeads:
    r"""Convert the projection matrices of one self-attention layer to attnflow heads.

    .. math::

        D_h = (W_q^{R_h})^\top W_k^{R_h}, \qquad
        V_h = H\, W_o^{:,R'_h} W_v^{R'_h}, \qquad \beta = 1/\sqrt{k},

    with :math:`R_h = hk{:}(h+1)k`, :math:`R'_h = hk_v{:}(h+1)k_v` (see the module docstring for the
    derivation). The layer's output (biases zero) then equals
    ``evaluate_torch(TransformerModel(direction="ascent", geometry="flat", beta=beta), x, D, V, t,
    raw=True).raw_velocity``.

    Parameters
    ----------
    W_q, W_k : array-like, shape=[H k, d]
        Query and key projections, ``torch.nn.Linear`` convention (``q = W_q x``). Weights stored
        as ``x @ W`` (GPT-2's ``Conv1D``, most JAX/Flax ``Dense`` layers) must be transposed first.
    W_v : array-like, shape=[H k_v, d]
        Value projection.
    W_o : array-like, shape=[d, H k_v]
        Output projection.
    num_heads : int
        H; the rows of W_q, W_k, W_v are split into H consecutive blocks (PyTorch, GPT-2 layout).
    scale : float or None
        Softmax scale of the scores; None means 1/sqrt(k) (PyTorch, GPT-2, most models).
    dtype : torch.dtype
        Dtype of the returned matrices (the products are formed in it).

    Returns
    -------
    AttentionHeads
        ``dict(D=(H, d, d), V=(H, d, d), beta=float, notes=tuple[str, ...])``.

    Examples
    --------
    >>> import torch
    >>> from attnflow.bridge import from_attention_weights
    >>> d, H = 8, 2
    >>> W = torch.randn(3 * d, d)
    >>> heads = from_attention_weights(W[:d], W[d : 2 * d], W[2 * d :], torch.randn(d, d), H)
    >>> heads["D"].shape, heads["beta"] == 0.5
    (torch.Size([2, 8, 8]), True)
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be an integer >= 1: got {num_heads!r}")
    H = num_heads
    Wq, Wk, Wv, Wo = (
        _matrix(nm, W, dtype)
        for nm, W in zip(("W_q", "W_k", "W_v", "W_o"), (W_q, W_k, W_v, W_o), strict=True)
    )
    if Wq.shape != Wk.shape:
        raise ValueError(
            f"W_q and W_k must have the same shape (H k, d): got {tuple(Wq.shape)} and {tuple(Wk.shape)}"
        )
    d = Wq.shape[1]
    if Wv.shape[1] != d or Wo.shape[0] != d:
        raise ValueError(
            f"self-attention needs one token dimension d: W_q is (., {d}), so W_v must be (., {d}) and "
            f"W_o ({d}, .): got W_v {tuple(Wv.shape)}, W_o {tuple(Wo.shape)}"
        )
    if Wo.shape[1] != Wv.shape[0]:
        raise ValueError(
            f"W_o must have as many columns as W_v has rows (H k_v): got W_o {tuple(Wo.shape)}, "
            f"W_v {tuple(Wv.shape)}"
        )
    if Wq.shape[0] % H or Wv.shape[0] % H:
        raise ValueError(
            f"the projection rows must split into num_heads={H} equal blocks: W_q has {Wq.shape[0]} rows, "
            f"W_v has {Wv.shape[0]}; pass the layer's number of heads"
        )
    k, kv = Wq.shape[0] // H, Wv.shape[0] // H
    if scale is None:
        scale = 1.0 / math.sqrt(k)
    elif (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not (math.isfinite(scale) and scale > 0)
    ):
        raise ValueError(f"scale must be None (1/sqrt(k)) or a finite number > 0: got {scale!r}")

    D = from_qk(Wq.reshape(H, k, d), Wk.reshape(H, k, d))  # (H, d, d): Q_h^T K_h
    Wo_h = Wo.reshape(d, H, kv).permute(1, 0, 2)  # (H, d, kv): W_o[:, h kv:(h+1) kv]
    V = H * (Wo_h @ Wv.reshape(H, kv, d))  # (H, d, d)
    notes = (
        f"scores beta <x_i, D_h x_j> with D_h = Q_h^T K_h unscaled and beta = {scale:g}"
        + (" = 1/sqrt(k)" if math.isclose(scale, 1.0 / math.sqrt(k)) else " (given scale)"),
        f"V_h = H W_o^h W_v^h (H = {H}): attention output = (1/H) sum_h V_h sum_j A^h_ij x_j = "
        "FieldEval.raw_velocity (geometry='flat', direction='ascent')",
    )
    return AttentionHeads(D=D, V=V, beta=float(scale), notes=notes)


def heads_from_multihead_attention(
    mha: torch.nn.MultiheadAttention, *, ignore_bias: bool = False, dtype: torch.dtype = _DEFAULT_DTYPE
) -> AttentionHeads:
    r"""Convert a :class:`torch.nn.MultiheadAttention` (self-attention) to attnflow heads.

    ``in_proj_weight`` is split into its three row blocks W_q, W_k, W_v and passed with
    ``out_proj.weight`` to :func:`from_attention_weights`:

    .. math::

        D_h = (W_q^{h})^\top W_k^{h}, \qquad V_h = H\, W_o^{h} W_v^{h}, \qquad \beta = 1/\sqrt{d/H},

    so that ``mha(x, x, x)[0]`` equals the raw (unprojected) attnflow field of
    ``TransformerModel(direction="ascent", geometry="flat", beta=beta)`` with these D, V (with the
    same ``attn_mask=<upper-triangular -inf>`` <-> ``causal=True``). ``batch_first`` does not matter.
    Dropout is ignored (the conversion describes ``eval()`` mode).

    Parameters
    ----------
    mha : torch.nn.MultiheadAttention
        With ``kdim == vdim == embed_dim``, no ``bias_k``/``bias_v``, ``add_zero_attn=False``.
    ignore_bias : bool
        Drop nonzero ``in_proj_bias``/``out_proj.bias`` (recorded in ``notes``) instead of raising;
        the attnflow field has no bias term, so the result then differs from the module.
    dtype : torch.dtype

    Returns
    -------
    AttentionHeads
        ``dict(D=(H, d, d), V=(H, d, d), beta=float, notes=tuple[str, ...])``.

    Examples
    --------
    >>> import torch
    >>> from attnflow.bridge import heads_from_multihead_attention
    >>> heads = heads_from_multihead_attention(torch.nn.MultiheadAttention(8, 2))
    >>> heads["V"].shape, heads["beta"] == 0.5
    (torch.Size([2, 8, 8]), True)
    """
    if not isinstance(mha, torch.nn.MultiheadAttention):
        raise ValueError(
            f"mha must be a torch.nn.MultiheadAttention: got {type(mha).__name__}; for other layers "
            "use attnflow.bridge.from_attention_weights(W_q, W_k, W_v, W_o, num_heads)"
        )
    d = mha.embed_dim
    if mha.kdim != d or mha.vdim != d:
        raise ValueError(
            f"only self-attention with kdim == vdim == embed_dim converts (keys, values and queries live "
            f"in one token space): got embed_dim={d}, kdim={mha.kdim}, vdim={mha.vdim}; build the module "
            "without kdim/vdim"
        )
    if mha.bias_k is not None or mha.bias_v is not None or mha.add_zero_attn:
        raise ValueError(
            "add_bias_kv and add_zero_attn append an extra key/value token that attnflow's field does not "
            f"have: got add_bias_kv={mha.bias_k is not None}, add_zero_attn={mha.add_zero_attn}; "
            "build the module with add_bias_kv=False, add_zero_attn=False"
        )
    notes: list[str] = []
    for name, b in (("in_proj_bias", mha.in_proj_bias), ("out_proj.bias", mha.out_proj.bias)):
        if b is None:
            continue
        big = float(b.detach().abs().max())
        if big == 0.0:
            continue
        if not ignore_bias:
            raise ValueError(
                f"{name} must be zero (the attnflow field has no bias term): max |b| = {big:.3g}; "
                f"pass ignore_bias=True to drop it, or zero it (torch.nn.init.zeros_(mha.{name}))"
            )
        notes.append(f"dropped {name} (max |b| = {big:.3g}): the field differs from the module")
    if mha.dropout > 0:
        notes.append(f"dropout={mha.dropout} ignored: the conversion describes eval() mode")
    W = mha.in_proj_weight
    heads = from_attention_weights(
        W[:d], W[d : 2 * d], W[2 * d :], mha.out_proj.weight, mha.num_heads, dtype=dtype
    )
    heads["notes"] = heads["notes"] + tuple(notes)
    return heads
