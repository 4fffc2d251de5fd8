"""Review round 11, F1 (issue #26): does SmolLM2's record frames-follows-network-cos measure the mismatch of
the residual-stream scale rho_l (full model, with MLPs) against the no-MLP network (n)'s own stream?

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round11/scale_check.py --family smollm2|smollm2-permuted
        [--K 4] [--root docs/studies/real_model_flows] [--out FILE.json] [--limit N]

The family is loaded and its sentences drawn as ``real_model_flows.family_task`` does (review/common.py:
``family_weights`` -- a null is its trained base made null with the config's ``null_seeds[0]`` and
``permuted_embeddings`` --, ``draw_sentences``), with the config of the family's committed study.json
(smollm2/ or permuted_smollm2/) read through the study's Config; the drawn corpus indices are checked
against the committed summary's ``corpus_index``. Per sentence, as in ``real_model_flows._sentence``:

* ``fp = forward(w, ids)``, ``rho_model = stream_scales(w, fp.hidden_states, scale_estimator)`` (the study's);
  ``nm = forward(without_mlp(w), ids)`` (the reference (n)) and
  ``rho_n = stream_scales(without_mlp(w), nm.hidden_states, scale_estimator)`` (the scale of (n)'s stream);
* flow (a) ``layer_flow(w, z_0, variant="attention", steps_per_layer=K, attentions=fp.attentions,
  residual_norms=rho)`` with rho = rho_model (the study's; for pre-LN it is flow (f) of the record bit for
  bit) and with rho = rho_n;
* sphere tokens' mean cosine per depth (``real_model_flows._profile``) of the model, (n), (a)@rho_model,
  (a)@rho_n.

Step 1 check: the per-sentence mean cosines of the model, (n) and (a)@rho_model must equal the committed
ones (summary verdict_data: stats.sphere.model / no_mlp, step_ladder.levels[K].sphere.frames; stored
rounded to 6 decimals) within 1e-6, and the record's quantity within 1e-6; the script stops otherwise.

Quantities (``real_model_flows._quantity("gap")``: mean over depths 1..L of |mean cos (flow) - mean cos
(ref)|), each with the study's bootstrap (``_boot``: 1000 resamples of sentences, the record's seed
``config.seed + its position in the summary's verdicts``, the one the study used): flow (a)@rho_model and
(a)@rho_n against (n) and against the model; (n) against the model; the paired difference
gap((a)@rho_model, n) - gap((a)@rho_n, n) (``_paired_boot``, same resamples); the study's controls of a gap
record (``_still``: the reference's depth 0 at every depth; ``_collapse``: mean cosine 1 from depth 1) against
(n) and the model, and the paired difference gap((a)@rho_n, n) - gap(collapse, n). Per depth: the mean cosines
with their bootstrap intervals (``_mean_ci``), the mean rho of each stream and the per-sentence ratio
rho_model / rho_n. Descriptive: no record is changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # review/: common
from common import draw_sentences, family_weights, stored_config  # noqa: E402

DIRS = {"smollm2": "smollm2", "smollm2-permuted": "permuted_smollm2"}
RECORD = "frames-follows-network-cos"
TOL = 1e-6


def run(family: str, K: int, root: Path, limit: int | None = None, estimator: str | None = None) -> dict:
    from attnflow.bridge import forward, layer_flow
    from attnflow.bridge.flows import stream_scales, without_mlp
    from attnflow.studies.real_model_flows import (
        _boot,
        _collapse,
        _mean_ci,
        _paired_boot,
        _profile,
        _quantity,
        _still,
    )

    t0, c0 = time.perf_counter(), time.process_time()
    d = root / DIRS[family]
    c, summ = stored_config(d)
    fam = summ["families"][family]
    stored = fam["verdict_data"]
    ids_rec = [v["id"] for v in summ["verdicts"]]
    rid = f"flows-{family}-{RECORD}"
    rec = summ["verdicts"][ids_rec.index(rid)]
    seed = c.seed + ids_rec.index(rid)  # real_model_flows.records: seed = c.seed + len(out)
    levels = stored["step_ladder"]["levels"]
    est = c.scale_estimator if estimator is None else estimator
    if est != c.scale_estimator and (K != c.steps_per_layer or est not in (stored.get("scale_alt") or {})):
        raise ValueError(f"--estimator {est}: the study stored that estimator's flows at the run's step only "
                         f"(K = {c.steps_per_layer}; stored: {sorted(stored.get('scale_alt') or {})}); use "
                         f"--K {c.steps_per_layer}")  # fmt: skip
    if str(K) not in levels or "frames" not in levels[str(K)]["sphere"]:
        raise ValueError(f"--K {K}: the committed summary has no ladder rung with flow (f) at K = {K} "
                         f"(rungs: {sorted(levels, key=int)}); use one of them")  # fmt: skip

    w, tokenize = family_weights(family, c)
    if w.arch != "pre_ln":
        raise ValueError(f"{family} is {w.arch}: rho applies to pre-LN models only")
    ids, idx = draw_sentences(tokenize, w.max_length, c.corpus_seed, c.max_tokens, c.sentences)
    if idx != fam["corpus_index"]:
        raise AssertionError(f"sentence draw {idx} != committed corpus_index {fam['corpus_index']}")
    n_use = len(ids) if limit is None else min(limit, len(ids))
    w0 = without_mlp(w)
    cols = ("model", "no_mlp", "a_rho_model", "a_rho_n")
    cos = {k: [] for k in cols}
    rho_m, rho_n, cpu_flow = [], [], {"a_rho_model": 0.0, "a_rho_n": 0.0}
    with torch.no_grad():
        for i, t in enumerate(ids[:n_use]):
            fp = forward(w, t)
            nm = forward(w0, t)
            rm = stream_scales(w, fp.hidden_states, est)
            rn = stream_scales(w0, nm.hidden_states, est)
            rho_m.append(rm)
            rho_n.append(rn)
            xs = {"model": fp.tokens, "no_mlp": nm.tokens}
            for col, rho in (("a_rho_model", rm), ("a_rho_n", rn)):
                c1 = time.process_time()
                xs[col] = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=K,
                                     attentions=fp.attentions, residual_norms=rho)  # fmt: skip
                cpu_flow[col] += time.process_time() - c1
            for col in cols:
                cos[col].append(_profile(xs[col], fp.tokens, c.thresholds)["cos"])
            print(f"  {family} K={K}: sentence {i + 1}/{n_use} ({time.process_time() - c0:.0f} s CPU)",
                  flush=True)  # fmt: skip
    arr = {k: np.stack(v).astype(float) for k, v in cos.items()}  # (S, L + 1)
    rho_m, rho_n = np.asarray(rho_m, float), np.asarray(rho_n, float)  # (S, L)
    q = _quantity("gap")

    # step 1 / 2: the committed per-sentence values and the record's quantity
    ref = {"model": np.asarray(stored["stats"]["sphere"]["model"]["cos"], float)[:n_use],
           "no_mlp": np.asarray(stored["stats"]["sphere"]["no_mlp"]["cos"], float)[:n_use],
           "a_rho_model": np.asarray(levels[str(K)]["sphere"]["frames"]["cos"] if est == c.scale_estimator
                                     else stored["scale_alt"][est]["sphere"]["frames"]["cos"],
                                     float)[:n_use]}  # fmt: skip
    diffs = {k: float(np.abs(arr[k] - v).max()) for k, v in ref.items()}
    q_new, q_stored = q(arr["no_mlp"], arr["a_rho_model"]), q(ref["no_mlp"], ref["a_rho_model"])
    sl = rec["result"].get("step_ladder") or {}
    q_record = dict(zip(sl.get("K", []), sl.get("values", []), strict=True)).get(K)
    if est != c.scale_estimator:  # the record's value is the declared estimator's
        q_record = None
    match = {"max_abs_diff_per_sentence_depth": diffs, "tolerance": TOL,
             "quantity_recomputed": q_new, "quantity_from_committed_arrays": q_stored,
             "quantity_committed_record": q_record if n_use == len(ids) else None,
             "committed_rounding": "6 decimals (summary verdict_data)"}  # fmt: skip
    bad = [k for k, v in diffs.items() if v > TOL] + ([] if abs(q_new - q_stored) <= TOL else ["quantity"])
    if n_use == len(ids) and q_record is not None and abs(q_new - q_record) > TOL:
        bad.append("record value")
    match["ok"] = not bad
    if bad:
        raise AssertionError(f"step-1 match failed for {bad}: {json.dumps(match)}")

    # step 3: the record's quantity for both rho against (n) and against the model, with the study's bootstrap
    B = c.bootstrap
    gaps = {}
    for f in ("a_rho_model", "a_rho_n"):
        for r in ("no_mlp", "model"):
            v, ci = _boot(q, arr[r], arr[f], B, seed)
            gaps[f"{f}_vs_{r}"] = {"value": v, "ci95": list(ci)}
    v, ci = _boot(q, arr["model"], arr["no_mlp"], B, seed)
    gaps["no_mlp_vs_model"] = {"value": v, "ci95": list(ci)}
    v, ci = _paired_boot(q, arr["no_mlp"], arr["a_rho_model"], arr["a_rho_n"], B, seed)
    gaps["paired_diff_vs_no_mlp_(a_rho_model - a_rho_n)"] = {"value": v, "ci95": list(ci)}
    # the study's controls of a gap record: the stand-still and the collapse 'flows' of the reference
    for r in ("no_mlp", "model"):
        for name, ctl in (("stand_still", _still), ("collapse", _collapse)):
            v, ci = _boot(q, arr[r], ctl(arr[r]), B, seed)
            gaps[f"{name}_vs_{r}"] = {"value": v, "ci95": list(ci)}
    v, ci = _paired_boot(q, arr["no_mlp"], arr["a_rho_n"], _collapse(arr["no_mlp"]), B, seed)
    gaps["paired_diff_vs_no_mlp_(a_rho_n - collapse)"] = {"value": v, "ci95": list(ci)}
    per_depth = {
        k: {x: np.asarray(y).tolist() for x, y in _mean_ci(a, B, seed).items()} for k, a in arr.items()
    }
    ratio = rho_m / rho_n
    return {
        "family": family, "K": K, "record": rid, "bootstrap": {"B": B, "seed": seed, "helper": "_boot"},
        "representation": "sphere tokens (ForwardPass.tokens; flows' states), mean pairwise cosine",
        "scale_estimator": est, "corpus_index": idx[:n_use],
        "tokens": [len(t) for t in ids[:n_use]],
        "n_sentences": n_use, "threshold": float(c.criterion_cos_gap),
        "step1_match": match, "gaps_depths_1_to_L": gaps,
        "per_depth_mean_cos": per_depth,
        "rho": {"model_mean": rho_m.mean(0).tolist(), "n_mean": rho_n.mean(0).tolist(),
                "ratio_model_over_n_mean": ratio.mean(0).tolist(),
                "ratio_model_over_n_min": ratio.min(0).tolist(),
                "ratio_model_over_n_max": ratio.max(0).tolist()},
        "cpu_s_per_flow": cpu_flow, "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0,
        "threads": torch.get_num_threads(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=tuple(DIRS), required=True)
    ap.add_argument("--K", type=int, default=4, help="Euler steps per unit time (a committed ladder rung)")
    ap.add_argument("--root", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None, help="only the first N sentences (a timing run)")
    ap.add_argument("--estimator", default=None, help="the scale estimator of both streams (default: the "
                    "declared one; another one needs --K equal to the run's step, where the study stored "
                    "its flows: scale_alt)")  # fmt: skip
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    res = run(args.family, args.K, args.root, args.limit, args.estimator)
    g = res["gaps_depths_1_to_L"]
    print(
        f"{args.family} K={args.K} S={res['n_sentences']} step-1 match ok "
        f"(max diff {max(res['step1_match']['max_abs_diff_per_sentence_depth'].values()):.1e})"
    )
    for k, v in g.items():
        print(f"  {k:48s} {v['value']:.4f} [{v['ci95'][0]:.4f}, {v['ci95'][1]:.4f}]")
    print(f"  CPU {res['cpu_s']:.0f} s, wall {res['wall_s']:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
