r"""Theta_t from a trained stack: layer l's heads as the weights of the flow on [l T, (l + 1) T).

The flow moves the sphere tokens :math:`z_i \in S^{d-1}` of :mod:`attnflow.bridge.passes` (LayerNorm read as
the projection onto the sphere of radius :math:`\sqrt d` after centring). Layer l's attention reads the
LayerNorm output :math:`\sqrt d\,\gamma_l \odot z + b_l = A_l z + b_l` with :math:`A_l = \sqrt d
\operatorname{diag}(\gamma_l)` (the LayerNorm that feeds it: BERT's embedding LayerNorm, then each block's
output LayerNorm; GPT-2's ``ln_1``). Dropping every bias (the LayerNorm shift b_l and the projections'
b_q, b_k, b_v, b_o), head h's score and value maps become, in the variables z (the derivation of
:mod:`attnflow.bridge.attention` applied to the inputs :math:`A_l z`),

.. math::

    \beta \langle z_i, D^l_h z_j\rangle, \qquad D^l_h = A_l Q_h^\top K_h A_l, \qquad \beta = 1/\sqrt k,

    V^l_h = H\, P_c\, S_l^{-1} O_h V^{\rm proj}_h A_l, \qquad P_c = I - \tfrac1d \mathbf 1 \mathbf 1^\top,

where :math:`O_h V^{\rm proj}_h` is head h's value-output product (:math:`W_o^{:,R_h} W_v^{R_h}`) and
:math:`S_l` the scale of the state the attention output is added to: ``post_ln`` (BERT) adds it to
:math:`A_l z + b_l`, so :math:`S_l = A_l` (an update :math:`o` of the LayerNorm output is :math:`A_l^{-1} o`
in z); ``pre_ln`` (GPT-2) adds it to the residual stream, whose norm varies with the sentence and the
depth, and the choice made here is :math:`S_l = \sqrt d\, I` (the stream taken at LayerNorm's radius).
:math:`P_c` is the centring every LayerNorm applies, so the flow stays on the sphere of the hyperplane
:math:`\perp \mathbf 1` where the model's tokens live. The attention-only flow of layer l is then
attnflow's ``ascent`` dynamics (arXiv 2605.18870, eq. (10)) with these heads, ``geometry="sphere"`` (the
retraction plays LayerNorm's projection), for a time ``layer_time``; one Euler step of length 1 is the
residual block with its MLP removed.

D is held by a :class:`~attnflow.model.weights.PiecewiseConstant` process (the core's layer process); the
value matrices, which the simulator holds fixed within a run, move with the same layer index
(:meth:`ModelTheta.values_at`). Past the model's depth the heads are either frozen at the last layer
(``beyond="frozen"``, the process's own rule) or the stack is repeated (``beyond="repeat"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..model.weights import PiecewiseConstant
from .checkpoint import LayerNormParams, TransformerWeights
from .passes import mlp

__all__ = ["BEYOND", "ModelTheta", "attention_layer_norm", "mlp_drift", "stream_norms", "theta_from_weights"]

#: what the weights do past the model's depth
BEYOND = ("frozen", "repeat")


@dataclass(frozen=True)
class ModelTheta:
    """The weights of a trained stack as a time-dependent Theta_t (module docstring).

    Attributes
    ----------
    process : PiecewiseConstant
        Score matrices, ``process.layers`` of shape=[L, H, d, d]; ``process.layer_time`` = T.
    values : Tensor, shape=[L, H, d, d]
        Value matrices V^l_h of each layer.
    beta : float
        1/sqrt(k).
    causal : bool
        Decoder stacks attend to j <= i.
    notes : tuple of str
        Every choice and everything dropped, by name.
    """

    process: PiecewiseConstant
    values: torch.Tensor
    beta: float
    causal: bool
    notes: tuple[str, ...]

    @property
    def depth(self) -> int:
        """Number of layers L."""
        return int(self.process.layers.shape[0])

    @property
    def layer_time(self) -> float:
        """T, the time one layer lasts."""
        return float(self.process.layer_time)

    def layer_index(self, t: float, beyond: str = "frozen") -> int:
        """Index of the layer at time t: floor(t / T); past the depth frozen at L - 1 or taken mod L."""
        if beyond not in BEYOND:
            raise ValueError(f"unknown beyond {beyond!r}; valid: {', '.join(BEYOND)}")
        k = max(int(math.floor(t / self.layer_time + 1e-9)), 0)
        return min(k, self.depth - 1) if beyond == "frozen" else k % self.depth

    def heads_at(self, t: float, beyond: str = "frozen") -> torch.Tensor:
        """D^l_h of the layer acting at time t, shape=[H, d, d] (``frozen`` equals ``process.value_at``)."""
        return self.process.layers[self.layer_index(t, beyond)]

    def values_at(self, t: float, beyond: str = "frozen") -> torch.Tensor:
        """V^l_h of the layer acting at time t, shape=[H, d, d]."""
        return self.values[self.layer_index(t, beyond)]


def attention_layer_norm(weights: TransformerWeights, layer: int) -> LayerNormParams:
    """The LayerNorm whose output layer ``layer``'s attention reads (BERT: embedding LN or the previous
    block's output LN; GPT-2: the block's ``ln_1``)."""
    if weights.arch == "pre_ln":
        return weights.layers[layer].ln_attn
    return weights.embedding_ln if layer == 0 else weights.layers[layer - 1].ln_mlp


def _check_stream_norms(weights: TransformerWeights, norms) -> list[float] | None:
    if norms is None:
        return None
    if weights.arch != "pre_ln":
        raise ValueError(
            "residual_norms applies to pre-LN models (GPT-2), whose updates are added to the residual "
            f"stream; {weights.name} is {weights.arch} (its updates are added to a LayerNorm output); "
            "pass None"
        )
    vals = [float(v) for v in norms]
    if len(vals) != weights.depth or not all(math.isfinite(v) and v > 0 for v in vals):
        raise ValueError(
            f"residual_norms must be {weights.depth} finite numbers > 0 (one per layer): got {vals}; "
            "e.g. the mean centred norm of the stream entering each layer"
        )
    return vals


def _check_flow_layout(weights: TransformerWeights) -> None:
    if weights.positions != "absolute" or weights.norm != "layer":
        raise ValueError(
            f"{weights.name}: Theta_t is built for LayerNorm models with absolute positions (bert, gpt2); "
            f"this one has {weights.positions} positions and {weights.norm} norms, whose heads are not "
            "position-free maps of the sphere tokens; probe it with attnflow.analysis.probe instead"
        )


def theta_from_weights(
    weights: TransformerWeights, *, layer_time: float = 1.0, residual_norms=None
) -> ModelTheta:
    r"""Build Theta_t (module docstring) from a loaded stack.

    Parameters
    ----------
    weights : TransformerWeights
    layer_time : float
        T > 0, the duration of one layer (layer l acts on [l T, (l + 1) T)).
    residual_norms : sequence of float or None, shape=[L]
        Pre-LN models only: the scale S_l = rho_l I of the residual stream entering each layer (e.g. the
        mean centred norm measured by :func:`attnflow.bridge.forward` on a sentence, ``stream_norms``);
        None takes S_l = sqrt(d) I.

    Returns
    -------
    ModelTheta

    Examples
    --------
    >>> from attnflow.bridge import load_minilm, theta_from_weights
    >>> theta = theta_from_weights(load_minilm())  # doctest: +SKIP
    >>> theta.process.layers.shape, theta.beta  # doctest: +SKIP
    (torch.Size([6, 12, 384, 384]), 0.17677669529663687)
    """
    if (
        isinstance(layer_time, bool)
        or not isinstance(layer_time, (int, float))
        or not (math.isfinite(layer_time) and layer_time > 0)
    ):
        raise ValueError(f"layer_time must be a finite number > 0: got {layer_time!r}; e.g. layer_time=1.0")
    _check_flow_layout(weights)
    d, H, k = weights.d, weights.num_heads, weights.head_dim
    rho = _check_stream_norms(weights, residual_norms)
    Ds, Vs = [], []
    for layer in range(weights.depth):
        m = weights.head_matrices(layer)
        a = math.sqrt(d) * attention_layer_norm(weights, layer).weight  # diagonal of A_l
        QK = m["Q"].transpose(-1, -2) @ m["K"]  # (H, d, d) Q_h^T K_h in model space
        Ds.append(a[:, None] * QK * a[None, :])
        OV = m["O"] @ m["V"]  # (H, d, d) W_o^h W_v^h
        if weights.arch == "post_ln":
            inv_s = (1.0 / a)[:, None]
        else:
            inv_s = 1.0 / (math.sqrt(d) if rho is None else rho[layer])
        M = H * (inv_s * OV * a[None, :])
        Vs.append(M - M.mean(dim=-2, keepdim=True))  # P_c M: the centring of the output rows
    notes = (
        "tokens: the centred, normalised vector each LayerNorm projects (radius "
        f"sqrt(d) = {math.sqrt(d):.4g} before the affine map); "
        "attention reads A_l z with A_l = sqrt(d) diag(gamma_l)",
        "scores beta <z_i, D_h z_j>, D_h = A_l Q_h^T K_h A_l unscaled, "
        f"beta = 1/sqrt(k) = {1 / math.sqrt(k):.6g}",
        "values V_h = H P_c S^-1 W_o^h W_v^h A_l, P_c the centring; S = A_l (post-LN: the update is added to "
        "the LayerNorm output)"
        if weights.arch == "post_ln"
        else (
            "values V_h = H P_c W_o^h W_v^h A_l / sqrt(d), P_c the centring: the residual stream is "
            "taken at LayerNorm's radius sqrt(d) (pre-LN; the true stream norm varies with depth)"
            if rho is None
            else "values V_h = H P_c W_o^h W_v^h A_l / rho_l, P_c the centring, rho_l the given norm of the "
            f"residual stream entering layer l (pre-LN): {', '.join(f'{r:.4g}' for r in rho)}"
        ),
        "dropped: the LayerNorm shift b_l, the projection biases b_q, b_k, b_v, b_o, the MLP (attention-only "
        "drift), LayerNorm's epsilon",
        f"layer l acts on [l T, (l + 1) T), T = {layer_time:g}; direction 'ascent' (the residual adds the "
        "attention output)" + ("; causal (decoder)" if weights.causal else ""),
    )
    return ModelTheta(
        process=PiecewiseConstant(layers=torch.stack(Ds), layer_time=float(layer_time)),
        values=torch.stack(Vs),
        beta=1.0 / math.sqrt(k),
        causal=weights.causal,
        notes=notes,
    )


def mlp_drift(weights: TransformerWeights, layer: int, *, residual_norm: float | None = None):
    r"""Layer ``layer``'s MLP as a drift on the sphere tokens (the "attention + MLP" choice of Theta_t).

    The MLP reads the LayerNorm output :math:`A z + b` (BERT: the block's first LayerNorm ``ln_attn``;
    GPT-2: ``ln_2``; :math:`A = \sqrt d \operatorname{diag}\gamma`) and its output is added to the state
    of scale S (BERT: that LayerNorm output, S = A; GPT-2: the residual stream, S = sqrt(d) I, the choice of
    :func:`theta_from_weights`), so in the tokens z it moves them at

    .. math:: m(z) = P_c\, S^{-1}\, \mathrm{MLP}(A z + b),

    with every MLP weight, bias and the LayerNorm shift b kept (the MLP is nonlinear; they define it).
    The flow adds :math:`P^\perp(z) m(z)` to the attention field. RMSNorm models (Llama: no shift, no
    centring) drop :math:`P_c`; the MLP acts token by token, so a rotary model's MLP is a drift too.

    Parameters
    ----------
    weights : TransformerWeights
    layer : int
    residual_norm : float or None
        Pre-LN only: S = residual_norm I instead of sqrt(d) I (as ``residual_norms`` of
        :func:`theta_from_weights`).

    Returns
    -------
    callable
        ``m(z)`` for tokens of shape=[n, d], returning shape=[n, d].
    """
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < weights.depth:
        raise ValueError(f"layer must be an integer in [0, {weights.depth - 1}]: got {layer!r}")
    # the MLP acts token by token, so rotary positions do not enter it; RMSNorm models are not centred
    centred = weights.norm == "layer"
    lw, d = weights.layers[layer], weights.d
    ln = lw.ln_attn if weights.arch == "post_ln" else lw.ln_mlp
    a = math.sqrt(d) * ln.weight
    if residual_norm is not None:
        rho = _check_stream_norms(weights, [residual_norm] * weights.depth)[0]
    else:
        rho = math.sqrt(d)
    scale = a if weights.arch == "post_ln" else torch.full_like(a, rho)

    def drift(z: torch.Tensor) -> torch.Tensor:
        out = mlp(z * a + ln.bias, lw, weights.activation) / scale
        return out - out.mean(dim=-1, keepdim=True) if centred else out  # P_c (LayerNorm models)

    return drift


def stream_norms(weights: TransformerWeights, hidden_states: torch.Tensor) -> list[float]:
    r"""Mean centred norm of the residual stream entering each layer of a pre-LN model, shape [L].

    :math:`\rho_l = \frac1n\sum_i \|r_{l,i} - \bar r_{l,i}\mathbf 1\|` from the hidden states of
    :func:`attnflow.bridge.forward` (for a pre-LN model ``hidden_states[l]`` is the stream r_l, l < L);
    RMSNorm models (not centred): :math:`\rho_l = \frac1n\sum_i \|r_{l,i}\|`.
    """
    if weights.arch != "pre_ln":
        raise ValueError(f"stream_norms applies to pre-LN models (GPT-2): {weights.name} is {weights.arch}")
    r = hidden_states[: weights.depth]
    c = r - r.mean(dim=-1, keepdim=True) if weights.norm == "layer" else r
    return [float(v) for v in torch.linalg.vector_norm(c, dim=-1).mean(dim=-1)]
