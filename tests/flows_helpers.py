"""Shared fake per-sentence profiles for the real_model_flows record tests (no model, no flow)."""

from __future__ import annotations

import numpy as np


def fake_profiles(rng: np.random.Generator, S: int, L: int, trend: float):
    """The model's per-sentence profiles over depths 0..L (mean cosine rising by ``trend`` a layer, effective
    rank and cluster counts falling by 1.5 ``trend`` a layer, noise 0.02 / 0.1), and ``shifted(x)``: a flow
    that is the model plus ``x`` in mean cosine (rank and counts scaled by 1 + x)."""
    d = trend * np.arange(L + 1)
    base = {"cos": 0.3 + d + 0.02 * rng.standard_normal((S, L + 1)),
            "erank": 5.0 * (1 - 1.5 * d) + 0.1 * rng.standard_normal((S, L + 1)),
            "clusters": 4.0 * (1 - 1.5 * d)[:, None] + 0.1 * rng.standard_normal((S, L + 1, 3))}  # fmt: skip

    def shifted(x):
        return {
            "cos": base["cos"] + x,
            "erank": base["erank"] * (1 + x),
            "clusters": base["clusters"] * (1 + x),
        }

    return base, shifted
