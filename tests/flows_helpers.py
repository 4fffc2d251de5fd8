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


def fake_ladder(S=12, L=3, trend=0.1, drift=None, Ks=(4, 16, 64)) -> dict:
    """A fake family whose every flow is the model + 0.02 in mean cosine (holds every 'follows' criterion);
    at rung K the flow ``drift[0]`` is shifted further by ``drift[1](K)`` (a quantity that moves with the
    step). Main statistics = the chosen rung's (set by the caller)."""
    from attnflow.studies.real_model_flows import STEP_FLOWS, _halves

    rng = np.random.default_rng(0)
    base, shifted = fake_profiles(rng, S, L, trend)

    def level(K):
        extra = {} if drift is None else {drift[0]: drift[1](K)}
        A, B = _halves(S, 0)
        fit = shifted(0.02 + extra.get("fitted_time", 0.0))
        return {"sphere": {f: shifted(0.02 + extra.get(f, 0.0)) for f in STEP_FLOWS},
                "fitted": {"split_seed": 0, "direction": "A->B", "report": B,
                           "stats": {"sphere": {k: v[B] for k, v in fit.items()}}}}  # fmt: skip

    levels = {str(K): level(K) for K in Ks}
    fitted = []
    for s in (0, 1):
        A, B = _halves(S, s)
        for name, rep in (("A->B", B), ("B->A", A)):
            st = {k: np.asarray(v)[rep] for k, v in shifted(0.02).items()}
            fitted.append({"split_seed": s, "direction": name, "report": rep,
                           "stats": {"sphere": st, "hidden": st}})  # fmt: skip
    return {"tokens": [10] * S, "model": {"name": "fake"}, "base": base, "levels": levels, "fitted": fitted}


def with_chosen(fake: dict, K: int, cpu=None) -> dict:
    """The family result of a :func:`fake_ladder` run whose chosen step is ``K`` (one K for every flow): the
    main statistics are rung K's, the ladder keeps every rung."""
    sphere = {"model": fake["base"], "no_mlp": fake["levels"][str(K)]["sphere"]["attention"],
              **fake["levels"][str(K)]["sphere"]}  # fmt: skip
    fitted = [dict(f) for f in fake["fitted"]]
    fitted[0] = {**fitted[0], "stats": {r: fake["levels"][str(K)]["fitted"]["stats"]["sphere"] for r in
                                        ("sphere", "hidden")}}  # fmt: skip
    return {"tokens": fake["tokens"], "model": fake["model"], "stats": {"sphere": sphere, "hidden": sphere},
            "fitted": fitted, "step": K,
            "step_ladder": {"candidates": [4, 16, 64], "chosen": K, "levels": fake["levels"],
                            "cpu_s": cpu or {k: 1.0 for k in fake["levels"]}}}  # fmt: skip


def records_by_id(
    res: dict, fam: str = "tiny-bert", summary: dict | None = None, *, bootstrap: int, **cfg
) -> dict:
    """The records of one fake family ``fam`` (per-sentence profiles ``res``) under ``FlowsConfig(**cfg)``
    with ``bootstrap`` resamples, by id without the ``flows-{fam}-`` prefix."""
    from attnflow.studies.real_model_flows import FlowsConfig, records

    c = FlowsConfig(families=["tiny-bert"], bootstrap=bootstrap, **cfg)
    return {r.id.removeprefix(f"flows-{fam}-"): r for r in records(summary or {}, c, {fam: res})}
