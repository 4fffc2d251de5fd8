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


def fake_family(shift: dict[str, float], S=12, L=3, seed=0, trend=0.1) -> dict:
    """Per-sentence arrays of a fake family (the layout of ``family_task``'s result): every flow is the
    model plus ``shift[flow]`` in mean cosine (clusters, effective rank scaled by 1 + shift), noise 0.02."""
    from attnflow.studies.real_model_flows import FLOWS, _halves

    rng = np.random.default_rng(seed)
    # the model moves with depth (cosine +0.1 a layer, rank and counts -15% a layer), so that the stand-still
    # control (tokens left at z_0) fails every criterion here (stand_still_control; review round 3, F1)
    base, shifted = fake_profiles(rng, S, L, trend)

    flows = {f: shifted(shift.get(f, 0.0)) for f in (*FLOWS, "no_mlp") if f != "fitted_time"}
    sphere = {"model": dict(base), **flows}
    fitted = []
    for s in (0, 1):
        A, B = _halves(S, s)
        for name, rep in (("A->B", B), ("B->A", A)):
            st = {k: np.asarray(v)[rep] for k, v in shifted(shift.get("fitted_time", 0.0)).items()}
            fitted.append({"split_seed": s, "direction": name, "report": rep,
                           "stats": {"sphere": st, "hidden": st}})  # fmt: skip
    return {"tokens": [10] * S, "model": {"name": "fake"}, "stats": {"sphere": sphere, "hidden": sphere},
            "fitted": fitted}  # fmt: skip
