"""Hugging Face ``transformers`` models to check the from-scratch pass against (offline, float64).

* :func:`random_gpt2`: a randomly initialised ``GPT2Model`` (seeded), when no GPT-2 checkpoint is on disk;
* :func:`hf_model`: the ``transformers`` model of all-MiniLM-L6-v2 or of a local directory;
* :func:`hf_hidden_states`: its hidden states for one sequence;
* :func:`relative_error`: the largest per-token relative difference of two stacks of hidden states.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .checkpoint import minilm_path, require_extra

__all__ = ["hf_hidden_states", "hf_model", "random_gpt2", "relative_error"]


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
    model = transformers.AutoModel.from_pretrained(
        str(path), local_files_only=True, attn_implementation="eager"
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
