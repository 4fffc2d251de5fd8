"""Sentences to token ids with a model's own tokenizer (``tokenizers``, offline, from ``tokenizer.json``)."""

from __future__ import annotations

from pathlib import Path

from .checkpoint import require_extra

__all__ = ["encode", "load_tokenizer"]


def load_tokenizer(directory: str | Path):
    """The ``tokenizers.Tokenizer`` stored as ``tokenizer.json`` in a model directory (nothing downloaded).

    Raises
    ------
    FileNotFoundError
        If the directory has no ``tokenizer.json``.
    ImportError
        If ``tokenizers`` is missing (``pip install attnflow[models]``).
    """
    path = Path(directory) / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no tokenizer.json in {Path(directory)}; pass a Hugging Face model directory that holds one, "
            "or give token ids directly"
        )
    tokenizers = require_extra("tokenizers", "tokenising text")
    return tokenizers.Tokenizer.from_file(str(path))


def encode(tokenizer, text: str, max_length: int) -> list[int]:
    """Token ids of one sentence, special tokens included (``[CLS] ... [SEP]`` for BERT).

    The tokenizer's padding and truncation are switched off (on the object passed): a sentence is never
    padded or cut silently.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer
    text : str
        A non-empty sentence.
    max_length : int
        The model's maximum length (:attr:`TransformerWeights.max_length`).

    Raises
    ------
    ValueError
        For empty text, or a sentence with more tokens than ``max_length`` (never truncated silently).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text must be a non-empty sentence: got {text!r}")
    tokenizer.no_truncation()
    tokenizer.no_padding()
    ids = tokenizer.encode(text).ids
    if len(ids) > max_length:
        raise ValueError(
            f"the sentence has {len(ids)} tokens, more than the model's maximum length {max_length}: "
            f"{text[:60]!r}...; shorten or split the sentence"
        )
    return list(ids)
