"""Review round 9, F3 (issue #26): the permuted MiniLM-L6 null over 10 permutation seeds beside the trained.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round11/null_seeds.py [--seeds 0 1 ... 9] [--K 4]
        [--root docs/studies/real_model_flows] [--out FILE.json] [--limit N]

The records 'attention-overclusters' (a), 'biases-overclusters' (b), 'model-scores-overclusters' (d) score
mean over depths of (mean cosine of the flow - the model's), sphere tokens (``_quantity("over")``). The
permuted null ("minilm-permuted", permuted/study.json) keeps 3 permutation seeds; its value depends on the
seed. This script, with the committed configs read through the study's Config:

* loads the trained MiniLM-L6 (``load_family("minilm", seed)``) and, for each permutation seed s, the null
  ``null_weights("minilm-permuted", trained, s, keep_embeddings=permuted_embeddings == "keep")`` -- what
  ``family_task`` builds for ``null_seeds[0]`` and ``_lite`` for the other null seeds;
* draws the sentences as the study (review/common.py ``draw_sentences``) and checks them against both
  committed ``corpus_index`` lists;
* per sentence, as ``_sentence`` / ``_lite``: ``fp = forward(w, ids)``, the model's and each flow's
  ``_profile(...)["cos"]`` with ``layer_flow(w, z_0, variant=v, steps_per_layer=K, attentions=fp.attentions,
  residual_norms=rho)``, v in attention (a), biases (b), model_scores (d) (MiniLM is post-LN: rho None).

Step 1 (the script stops otherwise): the recomputed per-sentence mean cosines equal the committed ones
(rounded to 6 decimals in summary verdict_data) within 1e-6: trained -- ``stats.sphere.model`` and
``step_ladder.levels[K].sphere.<flow>``; null seed ``null_seeds[0]`` -- the same arrays of permuted/; the
other committed null seeds -- ``variants["permutation seed"][s].sphere.<model|flow>``; and the committed
values recomputed within 1e-6 (the null's K = 4 all-depth value with its interval in the record's
``step_ladder.outcomes``, the other seeds' values in ``controls_per_value["permutation seed"]``, the trained
ladder's value at K).

Quantities per flow and weights, each with the study's ``_boot`` (``config.bootstrap`` resamples of
sentences, the record's seed ``config.seed + its position in its summary's verdicts``): the over-cluster
value over depths 1..3 (where the null has room), over depths 1..6 (all, the declared depths) and over the
depths the study's ``room_of`` keeps for that weights' own model; the paired difference trained - null
(depths 1..3 and 1..6; the same sentences resampled together, the trained record's seed). Across seeds:
min / median / max / sd, trained - max null, and how many seeds' upper CI lie below the trained lower CI.
Descriptive: no record is changed.
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
from common import draw_sentences  # noqa: E402

FLOWS = {"attention": "a", "biases": "b", "model_scores": "d"}
RECORD = {"attention": "attention-overclusters", "biases": "biases-overclusters",
          "model_scores": "model-scores-overclusters"}  # fmt: skip
TRAINED, NULL = "minilm", "minilm-permuted"
DIRS = {TRAINED: ".", NULL: "permuted"}
DEPTHS = {"1..3": [1, 2, 3], "1..6": [1, 2, 3, 4, 5, 6]}
TOL = 1e-6


def over_depths(depths: list[int]):
    """The over-cluster quantity over the given depths: mean over them of (mean cosine of the flow - mean
    cosine of the model), the per-depth means over all sentences (``_depth_value("over", ...)``, as the
    study's ``room_of`` builds it for the depths with room)."""
    from attnflow.studies.real_model_flows import _depth_value

    if not depths or min(depths) < 1:
        raise ValueError(f"depths must be a non-empty list of depths >= 1 (depth 0 is z_0): got {depths}")
    idx = np.asarray(depths)

    def q(m: np.ndarray, f: np.ndarray) -> float:
        return _depth_value("over", np.asarray(m, float).mean(0)[idx], np.asarray(f, float).mean(0)[idx])

    q.kind, q.depths = "over", "all"
    return q


def paired_diff(q, m1: np.ndarray, f1: np.ndarray, m2: np.ndarray, f2: np.ndarray, B: int, seed: int):
    """q(m1, f1) - q(m2, f2) on the same sentences with its percentile bootstrap interval: the study's
    ``_boot`` with the four per-sentence arrays (S, L + 1) resampled together (a matched comparison)."""
    from attnflow.studies.real_model_flows import _boot

    arrs = [np.asarray(a, float) for a in (m1, f1, m2, f2)]
    if len({a.shape for a in arrs}) != 1:
        raise ValueError(f"paired_diff needs four arrays of one shape (sentences, depths): got "
                         f"{[a.shape for a in arrs]}; pair the trained and null arrays of the same "
                         "sentences")  # fmt: skip
    X = np.stack(arrs, axis=-1)
    v, ci = _boot(lambda _m, x: q(x[..., 0], x[..., 1]) - q(x[..., 2], x[..., 3]), X, X, B, seed)
    return {"value": v, "ci95": list(ci)}


def spread(values: list[float], uppers: list[float], trained_value: float, trained_lower: float) -> dict:
    """The null's seed spread beside the trained value: min / median / max / sd (ddof 1) over seeds, trained
    - max null, and the seeds whose upper CI lies below the trained lower CI."""
    v = np.asarray(values, float)
    if v.size == 0 or v.size != len(uppers):
        raise ValueError(f"spread needs one upper CI per value and >= 1 value: got {v.size} values, "
                         f"{len(uppers)} upper bounds")  # fmt: skip
    below = [i for i, u in enumerate(uppers) if u < trained_lower]
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max()),
            "sd": float(v.std(ddof=1)) if v.size > 1 else None,
            "trained_minus_max_null": float(trained_value - v.max()),
            "seeds_upper_ci_below_trained_lower_ci": len(below), "of": int(v.size),
            "seed_positions_below": below}  # fmt: skip


def cosines(w, ids: list[list[int]], K: int, thresholds: list[float]) -> tuple[dict, float]:
    """Per-sentence mean cosines (S, L + 1) of the model and of flows (a), (b), (d) at K, as ``_sentence``;
    and the CPU seconds the flows took."""
    from attnflow.bridge import forward, layer_flow
    from attnflow.bridge.flows import stream_scales
    from attnflow.studies.real_model_flows import _profile

    pre = w.arch == "pre_ln"
    out = {k: [] for k in ("model", *FLOWS)}
    cpu = 0.0
    for t in ids:
        fp = forward(w, t)
        z = fp.tokens
        rho = stream_scales(w, fp.hidden_states, "mean") if pre else None
        out["model"].append(_profile(z, z, thresholds)["cos"])
        for v in FLOWS:
            c1 = time.process_time()
            x = layer_flow(w, z[0], variant=v, steps_per_layer=K, attentions=fp.attentions,
                           residual_norms=rho)  # fmt: skip
            cpu += time.process_time() - c1
            out[v].append(_profile(x, z, thresholds)["cos"])
    return {k: np.stack(a).astype(float) for k, a in out.items()}, cpu


def _config(root: Path, fam: str):
    from attnflow.studies import get_study

    study = get_study("real_model_flows")
    meta = json.loads((root / DIRS[fam] / "study.json").read_text())
    fields = study.Config.model_fields
    return study.Config.model_validate({k: v for k, v in meta["config"].items() if k in fields})


def _committed(root: Path, fam: str) -> tuple[dict, dict, dict]:
    summ = json.loads((root / DIRS[fam] / "summary.json").read_text())
    ids = [v["id"] for v in summ["verdicts"]]
    recs = {f: summ["verdicts"][ids.index(f"flows-{fam}-{RECORD[f]}")] for f in FLOWS}
    # real_model_flows.records: a record's bootstrap seed is config.seed + its position
    seeds = {f: ids.index(f"flows-{fam}-{RECORD[f]}") for f in FLOWS}
    return summ["families"][fam], recs, seeds


def run(seeds: list[int], K: int, root: Path, limit: int | None = None) -> dict:
    from attnflow.studies.real_model_flows import _boot, _quantity, load_family, null_weights, room_of

    t0, c0 = time.perf_counter(), time.process_time()
    cfg = {fam: _config(root, fam) for fam in DIRS}
    fam_t, rec_t, seed_t = _committed(root, TRAINED)
    fam_n, rec_n, seed_n = _committed(root, NULL)
    cn, ct = cfg[NULL], cfg[TRAINED]
    seed_t = {f: ct.seed + s for f, s in seed_t.items()}
    seed_n = {f: cn.seed + s for f, s in seed_n.items()}
    for k in ("corpus_seed", "max_tokens", "sentences", "thresholds", "bootstrap", "seed"):
        if getattr(cn, k) != getattr(ct, k):
            raise ValueError(f"config {k} differs between the trained ({getattr(ct, k)}) and null "
                             f"({getattr(cn, k)}) studies: the paired comparison needs the same "
                             "draw")  # fmt: skip
    B = cn.bootstrap
    trained, tokenize, _ = load_family(TRAINED, ct.seed)
    ids, idx = draw_sentences(tokenize, trained.max_length, cn.corpus_seed, cn.max_tokens, cn.sentences)
    for fam, f in ((TRAINED, fam_t), (NULL, fam_n)):
        if idx != f["corpus_index"]:
            raise AssertionError(
                f"sentence draw {idx} != committed corpus_index of {fam}: {f['corpus_index']}"
            )
    n_all = len(ids)
    n_use = n_all if limit is None else min(limit, n_all)
    ids = ids[:n_use]
    keep = cn.permuted_embeddings == "keep"

    cos, cpu_flows, cpu_w = {}, {}, {}
    with torch.no_grad():
        c1 = time.process_time()
        cos["trained"], cpu_flows["trained"] = cosines(trained, ids, K, ct.thresholds)
        cpu_w["trained"] = time.process_time() - c1
        print(f"  trained K={K}: {cpu_w['trained']:.0f} s CPU", flush=True)
        for s in seeds:
            c1 = time.process_time()
            w = null_weights(NULL, trained, s, keep_embeddings=keep)
            cos[s], cpu_flows[s] = cosines(w, ids, K, cn.thresholds)
            cpu_w[s] = time.process_time() - c1
            print(f"  null seed {s} K={K}: {cpu_w[s]:.0f} s CPU ({time.process_time() - c0:.0f} s total)",
                  flush=True)  # fmt: skip

    # step 1: the committed per-sentence mean cosines (6 decimals) and values at K
    vd_t, vd_n = fam_t["verdict_data"], fam_n["verdict_data"]
    lvl_t, lvl_n = vd_t["step_ladder"]["levels"], vd_n["step_ladder"]["levels"]
    if str(K) not in lvl_t or str(K) not in lvl_n:
        raise ValueError(f"--K {K}: the committed ladders have rungs trained {sorted(lvl_t, key=int)}, null "
                         f"{sorted(lvl_n, key=int)}; use one both have")  # fmt: skip
    refs = {("trained", "model"): vd_t["stats"]["sphere"]["model"]["cos"]}
    refs |= {("trained", v): lvl_t[str(K)]["sphere"][v]["cos"] for v in FLOWS}
    s0 = cn.null_seeds[0]
    if s0 in seeds:
        refs[(s0, "model")] = vd_n["stats"]["sphere"]["model"]["cos"]
        refs |= {(s0, v): lvl_n[str(K)]["sphere"][v]["cos"] for v in FLOWS}
    var = (vd_n.get("variants") or {}).get("permutation seed") or {}
    var_K = K == int(vd_n["step"])  # the other seeds ran at the family's chosen step (_lite(w, ids, c, K))
    for s in seeds:
        if str(s) in var and var_K:
            refs |= {(s, x): var[str(s)]["sphere"][x]["cos"] for x in ("model", *FLOWS)}
    diffs = {f"{k[0]}/{k[1]}": float(np.abs(cos[k[0]][k[1]] - np.asarray(r, float)[:n_use]).max())
             for k, r in refs.items()}  # fmt: skip

    def where(who, x: str) -> str:
        top = "summary.json" if who == "trained" else "permuted/summary.json"
        if who in ("trained", s0):
            arr = "stats.sphere.model" if x == "model" else f"step_ladder.levels['{K}'].sphere.{x}"
        else:
            arr = f"variants['permutation seed']['{who}'].sphere.{x}"
        return f"{top} verdict_data.{arr}.cos"

    stored_arrays = {f"{k[0]}/{k[1]}": where(*k) for k in refs}
    bad = [k for k, d in diffs.items() if d > TOL]
    values = []
    full = n_use == n_all  # the committed values are over all sentences
    q_all = _quantity("over")
    for v in FLOWS:
        if not full:
            break
        lad = rec_t[v]["result"]["step_ladder"]
        kv = dict(zip(lad["K"], lad["values"], strict=True)).get(K)
        if kv is not None:
            values.append({"what": f"trained {v}: result.step_ladder.values at K={K} (depths 1..6)",
                           "committed": kv,
                           "recomputed": q_all(cos["trained"]["model"], cos["trained"][v])})  # fmt: skip
        out_n = rec_n[v]["result"]["step_ladder"].get("outcomes", {}).get(str(K))
        if out_n is not None and s0 in seeds:
            rv, rci = _boot(q_all, cos[s0]["model"], cos[s0][v], B, seed_n[v])
            values.append({"what": f"null seed {s0} {v}: result.step_ladder.outcomes['{K}'].value "
                                   "(depths 1..6)",
                           "committed": out_n["value"], "recomputed": rv})  # fmt: skip
            for j in range(2):
                values.append({"what": f"null seed {s0} {v}: result.step_ladder.outcomes['{K}'].ci95[{j}]",
                               "committed": out_n["ci95"][j], "recomputed": rci[j]})  # fmt: skip
        for e in rec_n[v]["result"]["controls_per_value"].get("permutation seed", []):
            s = int(e["choice_value"])
            if s != s0 and s in seeds and var_K:  # seed s0's entry is the main value at the reported K
                qr, info = room_of(q_all, cos[s]["model"], float(cn.criterion_overcluster),
                                   cn.room_min_depth_share)  # fmt: skip
                values.append({"what": f"null seed {s} {v}: controls_per_value['permutation seed'] value "
                               f"(room depths {info['kept']})", "committed": e["value"],
                               "recomputed": qr(cos[s]["model"], cos[s][v])})  # fmt: skip
    for x in values:
        x["abs_diff"] = abs(x["committed"] - x["recomputed"])
    bad += [x["what"] for x in values if x["abs_diff"] > TOL]
    match = {"per_sentence_max_abs_diff": diffs, "stored_arrays": stored_arrays, "values": values,
             "tolerance": TOL, "committed_rounding": "6 decimals (summary verdict_data)",
             "ok": not bad}  # fmt: skip
    if bad:
        raise AssertionError(f"step-1 match failed for {bad}: {json.dumps(match)}")

    # the quantities, per flow: trained and every null seed; paired trained - null
    qs = {d: over_depths(dd) for d, dd in DEPTHS.items()}
    res = {}
    for v in FLOWS:
        mt, ft = cos["trained"]["model"], cos["trained"][v]
        tr = {}
        for d, q in qs.items():
            val, ci = _boot(q, mt, ft, B, seed_t[v])
            tr[d] = {"value": val, "ci95": list(ci)}
        qr, info = room_of(q_all, mt, float(ct.criterion_overcluster), ct.room_min_depth_share)
        val, ci = _boot(qr, mt, ft, B, seed_t[v])
        tr["room"] = {"value": val, "ci95": list(ci), "depths": info["kept"]}
        nulls = {}
        for s in seeds:
            mn, fn = cos[s]["model"], cos[s][v]
            e = {}
            for d, q in qs.items():
                val, ci = _boot(q, mn, fn, B, seed_n[v])
                e[d] = {"value": val, "ci95": list(ci),
                        "trained_minus_null": paired_diff(q, mt, ft, mn, fn, B, seed_t[v])}  # fmt: skip
            qr, info = room_of(q_all, mn, float(cn.criterion_overcluster), cn.room_min_depth_share)
            val, ci = _boot(qr, mn, fn, B, seed_n[v])
            e["room"] = {"value": val, "ci95": list(ci), "depths": info["kept"],
                         "room_per_depth": [round(r, 6) for r in info["room"]]}  # fmt: skip
            nulls[str(s)] = e
        sp = {d: spread([nulls[str(s)][d]["value"] for s in seeds],
                        [nulls[str(s)][d]["ci95"][1] for s in seeds], tr[d]["value"], tr[d]["ci95"][0])
              for d in qs}  # fmt: skip
        for d in qs:
            sp[d]["seeds_below"] = [seeds[i] for i in sp[d].pop("seed_positions_below")]
            pl = [nulls[str(s)][d]["trained_minus_null"]["ci95"][0] for s in seeds]
            sp[d]["paired_lower_ci_min"] = float(min(pl))
            sp[d]["paired_lower_ci_above_0"] = int(sum(x > 0 for x in pl))
        res[v] = {"flow": FLOWS[v], "record": RECORD[v],
                  "bootstrap_seed": {"trained": seed_t[v], "null": seed_n[v]},
                  "trained": tr, "null": nulls, "spread": sp}  # fmt: skip
    return {
        "families": {"trained": TRAINED, "null": NULL}, "K": K, "seeds": seeds,
        "permuted_embeddings": cn.permuted_embeddings, "committed_null_seeds": cn.null_seeds,
        "bootstrap": {"B": B, "helper": "_boot",
                      "seed": "config.seed + the record's position in its summary"},
        "representation": "sphere tokens (ForwardPass.tokens; flows' states), mean pairwise cosine "
                          "(_profile)",
        "quantity": "mean over the depths of (mean cosine of the flow - mean cosine of the model)",
        "threshold": float(cn.criterion_overcluster),
        "corpus_index": idx[:n_use], "tokens": [len(t) for t in ids], "n_sentences": n_use,
        "step1_match": match, "flows": res,
        "cpu_s": {"total": time.process_time() - c0, "per_weights": {str(k): x for k, x in cpu_w.items()},
                  "flows_per_weights": {str(k): x for k, x in cpu_flows.items()}},
        "wall_s": time.perf_counter() - t0, "threads": torch.get_num_threads(),
    }  # fmt: skip


def table(res: dict) -> str:
    """The markdown table of the result: per flow and depth range, the trained value and every seed's."""
    seeds = res["seeds"]
    lines = []
    for v, r in res["flows"].items():
        lines.append(f"\n### flow ({r['flow']}) {v} -- record {r['record']}\n")
        lines.append("| depths | trained | " + " | ".join(f"null s{s}" for s in seeds) + " |")
        lines.append("|---" * (len(seeds) + 2) + "|")
        for d in DEPTHS:
            t = r["trained"][d]
            cells = [f"{r['null'][str(s)][d]['value']:.3f} [{r['null'][str(s)][d]['ci95'][0]:.3f}, "
                     f"{r['null'][str(s)][d]['ci95'][1]:.3f}]" for s in seeds]  # fmt: skip
            lines.append(f"| {d} | {t['value']:.3f} [{t['ci95'][0]:.3f}, {t['ci95'][1]:.3f}] | "
                         + " | ".join(cells) + " |")  # fmt: skip
            pd_ = [r["null"][str(s)][d]["trained_minus_null"] for s in seeds]
            cells = [f"{p['value']:.3f} [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}]" for p in pd_]
            lines.append(f"| {d}: trained - null (paired) | | " + " | ".join(cells) + " |")
        lines.append("\n| depths | trained | null min | median | max | sd | trained - max null | "
                     "seeds upper CI < trained lower CI | paired lower CI > 0 |")  # fmt: skip
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for d in DEPTHS:
            sp, t = r["spread"][d], r["trained"][d]
            sd = "-" if sp["sd"] is None else f"{sp['sd']:.3f}"
            lines.append(f"| {d} | {t['value']:.3f} | {sp['min']:.3f} | {sp['median']:.3f} | "
                         f"{sp['max']:.3f} | {sd} | {sp['trained_minus_max_null']:+.3f} | "
                         f"{sp['seeds_upper_ci_below_trained_lower_ci']}/{sp['of']} | "
                         f"{sp['paired_lower_ci_above_0']}/{sp['of']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--K", type=int, default=4, help="Euler steps per unit time (a committed ladder rung)")
    ap.add_argument("--root", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None, help="only the first N sentences (a timing run)")
    args = ap.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        ap.error(f"--seeds must be distinct: got {args.seeds}; list each permutation seed once")
    torch.set_num_threads(1)
    res = run(args.seeds, args.K, args.root, args.limit)
    m = res["step1_match"]
    print(f"K={args.K} S={res['n_sentences']} step-1 match ok (max per-sentence diff "
          f"{max(m['per_sentence_max_abs_diff'].values()):.1e}; values "
          f"{max([x['abs_diff'] for x in m['values']], default=0):.1e})")  # fmt: skip
    print(table(res))
    print(f"CPU {res['cpu_s']['total']:.0f} s, wall {res['wall_s']:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
