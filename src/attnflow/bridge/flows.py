r"""Flows that explain a model's layers (issue 26 part 3): five drifts on the sphere tokens, side by side.

Each flow moves the sphere tokens :math:`z \in S^{d-1}` of :func:`attnflow.bridge.forward` from the
model's own embeddings :math:`z_0`; layer l acts for a time :math:`T_l` (1 unless fitted), integrated by
projected Euler steps :math:`x \leftarrow \Pi(x + \delta t\,P^\perp(x) F_l(x))` (the scheme of arXiv
2605.18870, Sec. 6; :math:`\Pi` plays the norm's projection). The attention drift of layer l is the
model's own attention sub-layer read in token units (the construction of :mod:`attnflow.bridge.theta`):

.. math::

    F_l(z) = P_c\, S_l^{-1}\, \mathrm{Attn}_l(A_l z + b_l), \qquad A_l = \sqrt d\,\mathrm{diag}(\gamma_l),

with :math:`\gamma_l, b_l` the norm that feeds the attention, :math:`P_c = I - \tfrac1d\mathbf 1\mathbf
1^\top` for LayerNorm models (none for RMSNorm), :math:`S_l = A_l` for post-LN models (BERT: the update is
added to the LayerNorm output) and :math:`S_l = \rho_l I` for pre-LN ones (GPT-2, Llama: the residual
stream, :math:`\rho_l` its mean norm entering layer l on the sentence, :func:`~attnflow.bridge.stream_norms`).
For a LayerNorm model with absolute positions and no biases this is exactly the ascent field of
:func:`~attnflow.bridge.theta_from_weights` (eq. (10)); for a rotary model the scores
:math:`q_i^\top R_{j-i} k_j` depend on the positions, so the heads are a relative-position kernel, not a
position-free Theta_t, but the drift is the same sub-layer. The variants (:data:`VARIANTS`):

* ``attention``: the bias-free heads (b_l = 0, no projection biases), attention only;
* ``biases``: the LayerNorm shift b_l and the projection biases b_q, b_k, b_v, b_o kept (a Llama model
  has neither: this flow equals ``attention`` there);
* ``fitted_time``: ``attention`` with one time T_l per layer fitted to the model's layer output
  (:func:`layer_time_curve`, :func:`fit_layer_times`);
* ``model_scores``: the values of the bias-free heads moved by the model's own attention weights
  (``ForwardPass.attentions[l]``, fixed during layer l), which separates the scores from the values;
* ``mlp``: ``attention`` + each layer's MLP as a drift (:func:`~attnflow.bridge.mlp_drift`), Lie splitting:
  every attention step is followed by an MLP step;
* ``frames`` (f): ``attention`` with the block's LayerNorm affine maps applied where the network applies
  them -- the continuous-time analogue of the network with every MLP output 0 (:func:`without_mlp`).
  Post-LN (BERT), layer l: the attention flow moves x from z_l for T_l; the residual it was added to is
  rebuilt in the read frame, :math:`y = A_l x + b_l` (A_l, b_l: the LayerNorm that feeds the attention);
  the block's first LayerNorm projects it, :math:`z' = \Pi(P_c y)`, and writes it in its own frame
  :math:`u = A'_l z' + b'_l` (A'_l, b'_l: ``ln_attn``); the next sphere token is
  :math:`z_{l+1} = \Pi(P_c u)`, the point the block's output LayerNorm projects. (The attention reads
  :math:`A_l x` without the shift, as in ``attention``.) Pre-LN / RMSNorm (Llama, GPT-2): the only affine
  map on the attention's path is the gain on its read, which ``attention`` already applies
  (:math:`\mathrm{RMSNorm}(r) = A_l\,r/\|r\|`), and the residual stream is never normalised inside the
  stack, so ``frames`` *is* ``attention`` there (same code path, bit for bit);
* ``frames_mlp`` (g): ``frames`` + the MLP, in the network's order: after the attention flow (and, post-LN,
  the frame map to :math:`z'`), the MLP drift of :func:`~attnflow.bridge.mlp_drift` moves the token for
  T_l (post-LN: in the frame of ``ln_attn``, which is the frame that drift reads; then
  :math:`u = A'_l x' + b'_l`, :math:`z_{l+1} = \Pi(P_c u)`). Sequential, not Lie-split as ``mlp``: the
  analogue of the full model. Pre-LN: the attention flow then the MLP flow, no frames.

Layers from the network (``layer_flow(..., network_layers=..., model_tokens=...)``, review round 7, F1 (ii)):
at a listed layer the flow does not integrate; it takes the model's own tokens after that layer and flows on
from them (the "after-jump" reading of a layer whose MLP is a jump, ``mlp_jump_factor`` of the study).

Scales (pre-LN): :func:`stream_scales` with ``estimator="mean"`` (the declared default: the mean token
norm, :func:`~attnflow.bridge.stream_norms`) or ``"median_rest"`` (the median norm of tokens 2..n: a
decoder's first token can carry a norm 100x the others and inflate the mean).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import torch

from ..geometry.sphere import project, tangent_projection
from .checkpoint import TransformerWeights
from .passes import attention_sublayer, sphere_tokens
from .theta import attention_layer_norm, mlp_drift, stream_norms

__all__ = [
    "SCALE_ESTIMATORS",
    "VARIANTS",
    "attention_drift",
    "fit_free_running_times",
    "fit_layer_times",
    "hidden_readout",
    "layer_flow",
    "layer_time_curve",
    "mean_cosine",
    "stream_scales",
    "without_mlp",
]

#: the flows of :func:`layer_flow` (module docstring)
VARIANTS = ("attention", "biases", "fitted_time", "model_scores", "mlp", "frames", "frames_mlp")
#: the scale estimators of :func:`stream_scales` (the first is the declared default)
SCALE_ESTIMATORS = ("mean", "median_rest")


def _check_norms(weights: TransformerWeights, residual_norms) -> list[float] | None:
    if weights.arch == "post_ln":
        return None
    if residual_norms is None:
        raise ValueError(
            f"{weights.name} is pre-LN: its attention output is added to the residual stream, whose scale "
            "rho_l the flow needs; pass residual_norms=stream_norms(weights, forward(weights, ids)"
            ".hidden_states)"
        )
    vals = [float(v) for v in residual_norms]
    if len(vals) != weights.depth or not all(math.isfinite(v) and v > 0 for v in vals):
        raise ValueError(
            f"residual_norms must be {weights.depth} finite numbers > 0 (one per layer): got {vals}; "
            "use stream_norms(weights, hidden_states)"
        )
    return vals


def attention_drift(
    weights: TransformerWeights,
    layer: int,
    z: torch.Tensor,
    *,
    biases: bool = False,
    attention: torch.Tensor | None = None,
    residual_norm: float | None = None,
) -> torch.Tensor:
    r"""Layer ``layer``'s attention sub-layer as a drift on the sphere tokens (module docstring, F_l).

    Parameters
    ----------
    weights : TransformerWeights
    layer : int
    z : Tensor, shape=[n, d]
        Sphere tokens (unit norm).
    biases : bool
        Keep the norm's shift b_l and the projection biases.
    attention : Tensor or None, shape=[H, n, n]
        The model's attention weights of this layer (the ``model_scores`` flow); None: the heads' own.
    residual_norm : float or None
        Pre-LN models: rho_l (required there).

    Returns
    -------
    Tensor, shape=[n, d]
        :math:`F_l(z)` (not yet projected on the tangent space).
    """
    ln = attention_layer_norm(weights, layer)
    a = math.sqrt(weights.d) * ln.weight
    h = z * a + ln.bias if biases else z * a
    o, _ = attention_sublayer(h, weights, layer, biases=biases, attention=attention)
    if weights.arch == "post_ln":
        u = o / a
    else:
        if residual_norm is None:
            raise ValueError(f"{weights.name} is pre-LN: give residual_norm (rho_l of layer {layer})")
        u = o / residual_norm
    return u - u.mean(dim=-1, keepdim=True) if weights.norm == "layer" else u


def _step(x: torch.Tensor, v: torch.Tensor, dt: float) -> torch.Tensor:
    return project(x + dt * tangent_projection(x, v))


def layer_flow(
    weights: TransformerWeights,
    z0: torch.Tensor,
    *,
    variant: str,
    steps_per_layer: int,
    layer_times: Sequence[float] | None = None,
    attentions: torch.Tensor | None = None,
    residual_norms: Sequence[float] | None = None,
    network_layers: Sequence[int] = (),
    model_tokens: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""One of the flows of :data:`VARIANTS` from ``z0``, recorded at every layer boundary.

    Layer l runs :math:`m_l = \lceil T_l\,s\rceil` projected Euler steps of length :math:`T_l / m_l`
    (s = ``steps_per_layer``; T_l = 1 except for ``fitted_time``; T_l = 0 leaves the tokens unmoved).

    A layer of ``network_layers`` is taken from the network instead (review round 7, F1 (ii): a layer whose
    MLP is a jump, with no small-step limit at T_l = 1): the flow does not integrate there, its tokens after
    layer l are the model's own, :math:`x_{l+1} = z_{l+1}` (``model_tokens[l + 1]``), and the flow goes on
    from them through the next layers. Empty (the default): every layer is a flow (the flows before
    2026-12-04, bit for bit); every layer: the model's tokens at every depth.

    Parameters
    ----------
    weights : TransformerWeights
    z0 : Tensor, shape=[n, d]
        The model's sphere tokens at depth 0 (``ForwardPass.tokens[0]``).
    variant : str
        One of :data:`VARIANTS`.
    steps_per_layer : int
        Euler steps per unit time.
    layer_times : sequence of float or None, shape=[L]
        ``fitted_time`` only (required there): T_l >= 0.
    attentions : Tensor or None, shape=[L, H, n, n]
        ``model_scores`` only (required there): ``ForwardPass.attentions`` of the same sentence.
    residual_norms : sequence of float or None, shape=[L]
        Pre-LN models: rho_l (:func:`~attnflow.bridge.stream_norms`); ignored by post-LN models.
    network_layers : sequence of int
        Distinct layer indices in [0, L) taken from the network, not integrated (needs ``model_tokens``).
    model_tokens : Tensor or None, shape=[L + 1, n, d]
        The model's sphere tokens at every depth (``ForwardPass.tokens`` of the same sentence: its depth 0
        must be ``z0``); required when ``network_layers`` is not empty.

    Returns
    -------
    Tensor, shape=[L + 1, n, d]
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    if isinstance(steps_per_layer, bool) or not isinstance(steps_per_layer, int) or steps_per_layer < 1:
        raise ValueError(f"steps_per_layer must be an integer >= 1: got {steps_per_layer!r}")
    L = weights.depth
    rho = _check_norms(weights, residual_norms)
    if variant == "fitted_time":
        if layer_times is None or len(layer_times) != L:
            raise ValueError(
                f"variant 'fitted_time' needs layer_times, {L} numbers >= 0 (one per layer): got "
                f"{layer_times!r}; fit them with fit_layer_times"
            )
        times = [float(t) for t in layer_times]
        if not all(math.isfinite(t) and t >= 0 for t in times):
            raise ValueError(f"layer_times must be finite and >= 0: got {times}")
    else:
        times = [1.0] * L
    if variant == "model_scores" and (attentions is None or attentions.shape[0] != L):
        raise ValueError(
            f"variant 'model_scores' needs attentions of shape (L = {L}, H, n, n): got "
            f"{None if attentions is None else tuple(attentions.shape)}; pass ForwardPass.attentions"
        )
    net = _check_network_layers(network_layers, model_tokens, z0, L)
    mlps = None
    if variant in ("mlp", "frames_mlp"):
        mlps = [mlp_drift(weights, l, residual_norm=None if rho is None else rho[l]) for l in range(L)]
    post_frames = variant in ("frames", "frames_mlp") and weights.arch == "post_ln"
    x, out = z0, [z0]
    for l in range(L):
        if l in net:  # the network's own layer: its output tokens, and the flow goes on from them
            x = model_tokens[l + 1]
            out.append(x)
            continue
        m = math.ceil(times[l] * steps_per_layer - 1e-9)
        dt = times[l] / m if m else 0.0
        for _ in range(m):
            F = attention_drift(
                weights, l, x, biases=variant == "biases",
                attention=attentions[l] if variant == "model_scores" else None,
                residual_norm=None if rho is None else rho[l],
            )  # fmt: skip
            x = _step(x, F, dt)
            if variant == "mlp":
                x = _step(x, mlps[l](x), dt)
        if post_frames:  # the residual in the read frame, projected by ln_attn (module docstring, (f))
            x = sphere_tokens(_affine(attention_layer_norm(weights, l), x, weights.d))
        if variant == "frames_mlp":  # the MLP sub-layer after the attention sub-layer, as in the network
            for _ in range(m):
                x = _step(x, mlps[l](x), dt)
        if post_frames:  # ln_attn writes u = A' x + b'; the block's output LayerNorm projects it
            x = sphere_tokens(_affine(weights.layers[l].ln_attn, x, weights.d))
        out.append(x)
    return torch.stack(out)


def _check_network_layers(network_layers, model_tokens, z0: torch.Tensor, L: int) -> frozenset[int]:
    """Validate :func:`layer_flow`'s ``network_layers`` / ``model_tokens`` once; the set of those layers."""
    layers = list(network_layers)
    bad = [v for v in layers if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < L]
    if bad:
        raise ValueError(
            f"network_layers must be layer indices in [0, L) = [0, {L}): got {bad!r} in {layers!r}; "
            f"e.g. network_layers=(0,) for the first layer"
        )
    if len(set(layers)) != len(layers):
        dup = sorted({v for v in layers if layers.count(v) > 1})
        raise ValueError(
            f"network_layers must be distinct: {dup} repeated in {layers!r}; list each layer once"
        )
    if model_tokens is None:
        if layers:
            raise ValueError(
                f"network_layers {layers} are taken from the network, which needs its tokens: got "
                "model_tokens=None; pass model_tokens=forward(weights, ids).tokens"
            )
        return frozenset()
    want = (L + 1, *z0.shape)
    if tuple(model_tokens.shape) != want:
        raise ValueError(
            f"model_tokens must have shape (L + 1, n, d) = {want}: got {tuple(model_tokens.shape)}; pass "
            "ForwardPass.tokens of the sentence z0 comes from"
        )
    gap = float((model_tokens[0] - z0).abs().max())
    if not gap <= 1e-9:
        raise ValueError(
            f"model_tokens[0] must be z0 (the same sentence): max |model_tokens[0] - z0| = {gap:.3g} > 1e-9; "
            "pass z0 = ForwardPass.tokens[0] and model_tokens = ForwardPass.tokens of one forward pass"
        )
    return frozenset(layers)


def _affine(ln, x: torch.Tensor, d: int) -> torch.Tensor:
    r"""A LayerNorm's affine map on sphere tokens: :math:`\sqrt d\,\gamma\odot x + b` (its output for a
    centred input of direction x, norm epsilon -> 0)."""
    return math.sqrt(d) * ln.weight * x + ln.bias


def layer_time_curve(
    weights: TransformerWeights,
    z_in: torch.Tensor,
    z_out: torch.Tensor,
    layer: int,
    *,
    steps_per_layer: int,
    max_time: float,
    residual_norm: float | None = None,
) -> np.ndarray:
    r"""Agreement of layer ``layer``'s bias-free attention flow with the model's layer output, against time.

    Starting from the model's own tokens entering the layer (``z_in`` = ``tokens[l]``), the ``attention``
    drift of layer l is run with steps of length 1/``steps_per_layer`` up to ``max_time``; after m steps
    the agreement :math:`\frac1n\sum_i\langle x_i(m\,\delta t), z^{\rm out}_i\rangle` with the model's
    tokens leaving it (``z_out`` = ``tokens[l + 1]``) is recorded. The grid of :func:`fit_layer_times`.

    Returns
    -------
    ndarray, shape=[M + 1]
        M = round(max_time * steps_per_layer); entry m is the agreement at time m / steps_per_layer.
    """
    if not (math.isfinite(max_time) and max_time > 0):
        raise ValueError(f"max_time must be a finite number > 0: got {max_time!r}; e.g. max_time=4")
    M = round(max_time * steps_per_layer)
    dt = 1.0 / steps_per_layer
    x, agree = z_in, [float((z_in * z_out).sum(-1).mean())]
    for _ in range(M):
        x = _step(x, attention_drift(weights, layer, x, residual_norm=residual_norm), dt)
        agree.append(float((x * z_out).sum(-1).mean()))
    return np.asarray(agree)


def fit_layer_times(curves: np.ndarray, steps_per_layer: int) -> np.ndarray:
    r"""The time of each layer that maximises the mean agreement over the fit sentences.

    Parameters
    ----------
    curves : array, shape=[S, L, M + 1]
        :func:`layer_time_curve` of S fit sentences and L layers.
    steps_per_layer : int
        The grid's steps per unit time.

    Returns
    -------
    ndarray, shape=[L]
        :math:`T_l = \arg\max_m \frac1S\sum_s c_{s,l,m} / \text{steps\_per\_layer}` (the first maximiser).
    """
    c = np.asarray(curves, float)
    if c.ndim != 3 or c.shape[0] < 1:
        raise ValueError(f"curves must have shape (sentences >= 1, layers, grid): got {c.shape}")
    return c.mean(0).argmax(-1) / steps_per_layer


def hidden_readout(weights: TransformerWeights, depth: int, x: torch.Tensor) -> torch.Tensor:
    r"""The hidden state a model would output at ``depth`` for sphere tokens ``x`` (norm epsilon -> 0).

    Post-LN (BERT): the LayerNorm that ends depth l (the embedding LayerNorm at 0, the block's output
    LayerNorm after), :math:`\sqrt d\,\gamma\odot x + b`. Pre-LN: the residual stream itself up to a
    scale per token (cosines do not see it; ``x`` is returned), and after the last layer the final norm
    :math:`\sqrt d\,\gamma_f\odot x + b_f`.

    Parameters
    ----------
    x : Tensor, shape=[..., n, d]

    Returns
    -------
    Tensor, shape=[..., n, d]
    """
    L = weights.depth
    if not 0 <= depth <= L:
        raise ValueError(f"depth must lie in [0, {L}]: got {depth!r}")
    if weights.arch == "post_ln":
        ln = weights.embedding_ln if depth == 0 else weights.layers[depth - 1].ln_mlp
    elif depth == L:
        ln = weights.final_ln
    else:
        return x
    return math.sqrt(weights.d) * ln.weight * x + ln.bias


def without_mlp(weights: TransformerWeights) -> TransformerWeights:
    r"""The same network with every MLP output 0 (``W_out = 0``, ``b_out = 0``), everything else kept.

    Run by :func:`~attnflow.bridge.forward` it is the exact discrete attention-only network "(n)": every
    LayerNorm / RMSNorm with its gain and shift, every attention bias, the residuals and the final norm as
    in the model; only the MLP sub-layer adds nothing (post-LN: :math:`h \leftarrow \mathrm{LN}_2(u)`;
    pre-LN: :math:`r \leftarrow r + 0`).
    """
    layers = tuple(
        dataclasses.replace(lw, W_out=torch.zeros_like(lw.W_out), b_out=torch.zeros_like(lw.b_out))
        for lw in weights.layers
    )
    return dataclasses.replace(weights, name=f"{weights.name} without MLP", layers=layers)


def stream_scales(
    weights: TransformerWeights, hidden_states: torch.Tensor, estimator: str = "mean"
) -> list[float]:
    r"""The scale :math:`\rho_l` of the residual stream entering each layer of a pre-LN model, shape [L].

    ``"mean"`` (the declared default): the mean (centred, for LayerNorm) token norm,
    :func:`~attnflow.bridge.stream_norms`. ``"median_rest"``: the median norm of tokens 2..n, which a
    first token with a massive norm (an attention sink: SmolLM2's reaches 100x the median) does not move.
    For an even count n - 1 it is the lower median (the smaller middle value; :meth:`torch.Tensor.median`).

    Parameters
    ----------
    weights : TransformerWeights
        A pre-LN model.
    hidden_states : Tensor, shape=[L + 1, n, d]
        ``ForwardPass.hidden_states`` (the stream r_l for l < L), n >= 2.
    estimator : str
        One of :data:`SCALE_ESTIMATORS`.
    """
    if estimator not in SCALE_ESTIMATORS:
        raise ValueError(f"unknown scale estimator {estimator!r}; valid: {', '.join(SCALE_ESTIMATORS)}")
    if estimator == "mean":
        return stream_norms(weights, hidden_states)
    if weights.arch != "pre_ln":
        raise ValueError(f"stream_scales applies to pre-LN models: {weights.name} is {weights.arch}")
    r = hidden_states[: weights.depth]
    if r.shape[1] < 2:
        raise ValueError(f"estimator 'median_rest' needs n >= 2 tokens: got n = {r.shape[1]}; use 'mean'")
    c = r - r.mean(dim=-1, keepdim=True) if weights.norm == "layer" else r
    return [float(v) for v in torch.linalg.vector_norm(c[:, 1:], dim=-1).median(dim=-1).values]


def mean_cosine(x: torch.Tensor) -> torch.Tensor:
    r"""Mean pairwise inner product of unit tokens over distinct pairs, :math:`(\|\sum_i x_i\|^2 - n) /
    (n(n-1))` (the quantity of :func:`attnflow.observables.mean_pairwise_inner_product`, which this layer
    cannot import), shape=[...] for x of shape=[..., n, d]."""
    n = x.shape[-2]
    return (x.sum(dim=-2).pow(2).sum(dim=-1) - x.pow(2).sum(dim=(-1, -2))) / (n * (n - 1))


def fit_free_running_times(
    weights: TransformerWeights,
    starts: Sequence[torch.Tensor],
    target: Sequence[float],
    *,
    steps_per_layer: int,
    max_time: float,
    residual_norms: Sequence[Sequence[float]] | None = None,
) -> np.ndarray:
    r"""Times T_l of the free-running ``attention`` flow fitted to the model's mean-cosine profile, greedily.

    Unlike :func:`fit_layer_times` (teacher-forced: each layer from the model's own tokens), the flow runs
    from the depth-0 tokens of every fit sentence; layer by layer, T_l is the grid time (step
    1/``steps_per_layer``, up to ``max_time``) whose mean over the fit sentences of the flow's mean cosine
    at depth l + 1 is closest to ``target[l + 1]`` (the first such time), and the flow goes on from there.
    Greedy: depth l + 1 depends on T_0..T_l only, so each depth's gap is minimised given the earlier ones
    (the mean over depths of the gap is minimised whenever every depth can be matched).

    Parameters
    ----------
    starts : sequence of Tensor, shape=[n_s, d]
        The fit sentences' tokens at depth 0.
    target : sequence of float, shape=[L + 1]
        The model's mean cosine per depth, averaged over the same sentences.
    residual_norms : sequence or None
        Pre-LN: rho_l of each sentence (shape [S, L]).

    Returns
    -------
    ndarray, shape=[L]
    """
    if not (math.isfinite(max_time) and max_time > 0):
        raise ValueError(f"max_time must be a finite number > 0: got {max_time!r}; e.g. max_time=8")
    L = weights.depth
    if len(starts) < 1 or len(target) != L + 1:
        raise ValueError(
            f"need >= 1 start and a target of L + 1 = {L + 1} mean cosines: got {len(starts)} starts, "
            f"{len(target)} targets"
        )
    rhos = [
        _check_norms(weights, None if residual_norms is None else residual_norms[s])
        for s in range(len(starts))
    ]
    M = round(max_time * steps_per_layer)
    dt = 1.0 / steps_per_layer
    xs, times = list(starts), []
    for l in range(L):
        traj = []  # per sentence: the tokens at grid points 0..M
        for x, rho in zip(xs, rhos, strict=True):
            path = [x]
            for _ in range(M):
                F = attention_drift(weights, l, path[-1], residual_norm=None if rho is None else rho[l])
                path.append(_step(path[-1], F, dt))
            traj.append(torch.stack(path))
        cos = torch.stack([mean_cosine(p) for p in traj]).mean(0)  # (M + 1,)
        m = int(torch.argmin((cos - float(target[l + 1])).abs()))
        times.append(m / steps_per_layer)
        xs = [p[m] for p in traj]
    return np.asarray(times)
