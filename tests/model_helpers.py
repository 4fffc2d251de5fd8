"""Tiny random `transformers` models shared by the bridge and probe tests (float64, eager attention)."""

from __future__ import annotations

import torch
import transformers


def tiny_bert(seed: int = 0, *, bias_std: float = 0.1) -> transformers.BertModel:
    """A 2-layer, 3-head BERT of width 24 with LayerNorm gains in [0.5, 1.5] and biases ~ N(0, bias_std^2)
    (trained norms and biases are not the identity and not zero)."""
    cfg = transformers.BertConfig(
        vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
        max_position_embeddings=16, type_vocab_size=2, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.BertModel(cfg, add_pooling_layer=False).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.normal_(0, bias_std)
    return model
