r"""Nulls at the trained weights' scale (issue 26 part 3): the trained network with its entries shuffled.

A randomly initialised model of the same architecture (``transformers``' own initialisation) is a weak null
for a trained one: its weights are far smaller, its attention near uniform and its updates tiny, so every
flow "follows" it. :func:`permuted_null` keeps each trained tensor's multiset of entries -- its scale, its
spread, its heavy tails -- and destroys only their arrangement (which entry multiplies which).
"""

from __future__ import annotations

import dataclasses

import torch

from .checkpoint import LayerNormParams, TransformerWeights

__all__ = ["permuted_null"]


def _perm(t: torch.Tensor | None, g: torch.Generator) -> torch.Tensor | None:
    if t is None:
        return None
    flat = t.reshape(-1)
    return flat[torch.randperm(flat.numel(), generator=g)].reshape(t.shape).clone()


def _perm_ln(p: LayerNormParams | None, g: torch.Generator) -> LayerNormParams | None:
    if p is None:
        return None
    return dataclasses.replace(p, weight=_perm(p.weight, g), bias=_perm(p.bias, g))


def permuted_null(
    weights: TransformerWeights, seed: int, *, keep_embeddings: bool = False
) -> TransformerWeights:
    r"""The trained weights with the entries of every tensor permuted by a seeded random permutation.

    Every matrix and vector of the blocks is shuffled on its own (all its entries, across rows and
    columns): the attention projections W_q, W_k, W_v, W_o and their biases, the MLP's W_in, W_gate, W_out
    and biases, every block's LayerNorm / RMSNorm gain and shift. With ``keep_embeddings=False`` (the
    default) the embeddings are shuffled too (word, position, token type, the embedding norm and the final
    norm): the tokens the flows start from are then those of the shuffled embeddings, so another seed
    changes the start z_0 as well as the weights. With ``keep_embeddings=True`` the embeddings, the
    embedding norm and the final norm are the trained ones and only the blocks are shuffled: every seed
    starts from the trained model's z_0, so a seed changes the weights the tokens move under and nothing
    else (what ``real_model_flows`` uses since its review round 3, F6b: its permutation-seed check mixed a
    new z_0 -- mean cosine 0.054 / 0.065 / 0.211 at depth 0 for MiniLM-L6 seeds 0 / 1 / 2 -- with new
    weights). Scalars and structure are kept: eps, the norm kind, heads, positions, activation, causality.
    One :class:`torch.Generator` seeded with ``seed`` draws the permutations in a fixed order (the blocks
    first, then the embeddings), so the same seed gives the same weights.

    Parameters
    ----------
    weights : TransformerWeights
    seed : int
    keep_embeddings : bool
        Keep the trained embeddings, embedding norm and final norm (permute the blocks only).

    Returns
    -------
    TransformerWeights
        Named ``"<name> (entries permuted, seed <seed>)"`` (``keep_embeddings``: ``"<name> (block entries
        permuted, seed <seed>)"``; its blocks are those of the default draw with the same seed).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer: got {seed!r}; e.g. permuted_null(weights, 0)")
    if not isinstance(keep_embeddings, bool):
        raise ValueError(f"keep_embeddings must be True or False: got {keep_embeddings!r}")
    g = torch.Generator().manual_seed(seed)
    layers = []
    for lw in weights.layers:
        fields = {}
        for f in dataclasses.fields(lw):
            v = getattr(lw, f.name)
            fields[f.name] = _perm_ln(v, g) if isinstance(v, LayerNormParams) else _perm(v, g)
        layers.append(dataclasses.replace(lw, **fields))
    if keep_embeddings:
        return dataclasses.replace(
            weights, name=f"{weights.name} (block entries permuted, seed {seed})", layers=tuple(layers)
        )
    return dataclasses.replace(
        weights,
        name=f"{weights.name} (entries permuted, seed {seed})",
        word_embeddings=_perm(weights.word_embeddings, g),
        position_embeddings=_perm(weights.position_embeddings, g),
        token_type_embeddings=_perm(weights.token_type_embeddings, g),
        embedding_ln=_perm_ln(weights.embedding_ln, g),
        final_ln=_perm_ln(weights.final_ln, g),
        layers=tuple(layers),
    )
