"""attnflow.bridge: the heads of a real nn.MultiheadAttention reproduce its output exactly.

Reference: PyTorch's own nn.MultiheadAttention forward (float64). With V_h = H W_o^h W_v^h the module's
output equals attnflow's unprojected head average (1/H) sum_h V_h sum_j A^h_ij x_j (bridge docstring).
"""

from __future__ import annotations

import math

import pytest
import torch

from attnflow import TransformerModel
from attnflow.bridge import from_attention_weights, heads_from_multihead_attention
from attnflow.dynamics.field import evaluate_torch

d, n = 8, 10


def _mha(H: int, batch_first: bool, **kw) -> torch.nn.MultiheadAttention:
    torch.manual_seed(1000 + H)
    mha = torch.nn.MultiheadAttention(d, H, batch_first=batch_first, **kw).double().eval()
    with torch.no_grad():  # random (nonzero) weights everywhere, zero biases
        torch.nn.init.normal_(mha.out_proj.weight, std=0.5)
        torch.nn.init.zeros_(mha.in_proj_bias)
        torch.nn.init.zeros_(mha.out_proj.bias)
    return mha


def _field(heads, x: torch.Tensor, causal: bool):
    model = TransformerModel(
        direction="ascent", geometry="flat", beta=heads["beta"], causal=causal, backend="torch"
    )
    return evaluate_torch(model, x[None], heads["D"][None], heads["V"][None], 0.0, ledger=False, raw=True)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("H", [2, 4])
def test_field_equals_module_output(H, batch_first, causal):
    mha = _mha(H, batch_first)
    heads = heads_from_multihead_attention(mha)
    assert heads["D"].shape == (H, d, d) and heads["V"].shape == (H, d, d)
    assert heads["beta"] == 1.0 / math.sqrt(d // H)

    torch.manual_seed(7)
    x = torch.randn(n, d, dtype=torch.float64)
    xb = x[None] if batch_first else x[:, None]  # (1, n, d) or (n, 1, d)
    kw = {}
    if causal:  # PyTorch's causal convention: -inf above the diagonal (token i sees j <= i)
        kw = dict(
            attn_mask=torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=torch.float64),
            is_causal=True,
        )
    with torch.no_grad():
        out = mha(xb, xb, xb, need_weights=False, **kw)[0]
    out = out[0] if batch_first else out[:, 0]

    ev = _field(heads, x, causal)
    # exact relation: out_i = sum_h W_o^h W_v^h sum_j A_ij x_j = (1/H) sum_h V_h sum_j A_ij x_j
    torch.testing.assert_close(out, ev.raw_velocity[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, ev.velocity[0], rtol=1e-12, atol=1e-12)  # flat: no projection
    # the unscaled per-head products W_o^h W_v^h give H times less (the 1/H head average)
    unscaled = dict(heads, V=heads["V"] / H)
    torch.testing.assert_close(out, H * _field(unscaled, x, causal).raw_velocity[0], rtol=1e-12, atol=1e-12)


def test_raw_weights_numpy_match_module_and_blocks():
    H = 2
    mha = _mha(H, True)
    W = mha.in_proj_weight.detach()
    k = d // H
    heads = from_attention_weights(
        W[:d].numpy(), W[d : 2 * d].numpy(), W[2 * d :].numpy(), mha.out_proj.weight.detach().numpy(), H
    )
    ref = heads_from_multihead_attention(mha)
    torch.testing.assert_close(heads["D"], ref["D"], rtol=0, atol=0)
    torch.testing.assert_close(heads["V"], ref["V"], rtol=0, atol=0)
    # head 1 written out by hand from its row blocks
    Wq1, Wk1, Wv1 = W[k : 2 * k], W[d + k : d + 2 * k], W[2 * d + k : 2 * d + 2 * k]
    Wo1 = mha.out_proj.weight.detach()[:, k : 2 * k]
    torch.testing.assert_close(heads["D"][1], Wq1.T @ Wk1, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(heads["V"][1], H * Wo1 @ Wv1, rtol=1e-14, atol=1e-14)
    assert from_attention_weights(W[:d], W[d : 2 * d], W[2 * d :], W[:d], H, scale=0.25)["beta"] == 0.25


def test_ignore_bias_drops_and_records():
    mha = _mha(2, True)
    with torch.no_grad():
        mha.in_proj_bias.fill_(0.1)
    heads = heads_from_multihead_attention(mha, ignore_bias=True)
    assert any("dropped in_proj_bias" in s for s in heads["notes"])


def test_module_errors():
    with pytest.raises(ValueError, match="must be a torch.nn.MultiheadAttention"):
        heads_from_multihead_attention(torch.nn.Linear(d, d))
    with pytest.raises(ValueError, match="kdim == vdim == embed_dim.*kdim=4"):
        heads_from_multihead_attention(torch.nn.MultiheadAttention(d, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv=False"):
        heads_from_multihead_attention(torch.nn.MultiheadAttention(d, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match="add_zero_attn=True"):
        heads_from_multihead_attention(torch.nn.MultiheadAttention(d, 2, add_zero_attn=True))
    mha = _mha(2, True)
    with torch.no_grad():
        mha.in_proj_bias[3] = 0.5
    with pytest.raises(ValueError, match=r"in_proj_bias must be zero.*0\.5.*ignore_bias=True"):
        heads_from_multihead_attention(mha)
    mha = _mha(2, True)
    with torch.no_grad():
        mha.out_proj.bias[0] = -0.25
    with pytest.raises(ValueError, match=r"out_proj.bias must be zero.*0\.25"):
        heads_from_multihead_attention(mha)


def test_weight_errors():
    I = torch.eye(d)
    with pytest.raises(ValueError, match="num_heads must be an integer >= 1: got 0"):
        from_attention_weights(I, I, I, I, 0)
    with pytest.raises(ValueError, match=r"W_k must be a 2-D matrix.*\(2, 8, 8\)"):
        from_attention_weights(I, torch.zeros(2, d, d), I, I, 2)
    bad = I.clone()
    bad[0, 1] = float("nan")
    with pytest.raises(ValueError, match="W_v must be finite: found 1"):
        from_attention_weights(I, I, bad, I, 2)
    with pytest.raises(ValueError, match="W_q and W_k must have the same shape"):
        from_attention_weights(I, I[:4], I, I, 2)
    with pytest.raises(ValueError, match="one token dimension d"):
        from_attention_weights(I, I, torch.zeros(d, 4), torch.zeros(d, d), 2)
    with pytest.raises(ValueError, match="W_o must have as many columns as W_v has rows"):
        from_attention_weights(I, I, I, torch.zeros(d, 4), 2)
    with pytest.raises(ValueError, match="num_heads=3 equal blocks"):
        from_attention_weights(I, I, I, I, 3)
    with pytest.raises(ValueError, match="scale must be None"):
        from_attention_weights(I, I, I, I, 2, scale=-1.0)
