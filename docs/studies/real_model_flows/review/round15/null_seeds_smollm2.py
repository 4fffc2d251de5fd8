"""Review round 14, F2 (issue #26): the permuted SmolLM2 null's record frames-follows-network-cos over
permutation seeds 0..9, each scored by the study's own rules (declared first: null_seeds_smollm2_declared.md).

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round15/null_seeds_smollm2.py [--seeds 0 1 ... 9]
        [--K 16 4] [--root docs/studies/real_model_flows] [--out FILE.json] [--limit N]

The trained SmolLM2 is loaded once (``load_family("smollm2", c.seed)``); null seed s is
``null_weights("smollm2-permuted", trained, s, keep_embeddings=c.permuted_embeddings == "keep")``, what the
study builds for ``null_seeds[0]`` (``family_task``) and for its other null seeds (``_lite``). The sentences
are the study's draw (review/common.py ``draw_sentences``), checked against the committed ``corpus_index``.
Per sentence, as ``real_model_flows._sentence`` / ``_lite`` do for a pre-LN model: ``fp = forward(w, ids)``,
``rho = stream_scales(w, fp.hidden_states, c.scale_estimator)``, the no-MLP network (n) =
``forward(without_mlp(w), ids)``, flow (f) = flow (a) = ``layer_flow(w, z_0, variant="attention",
steps_per_layer=K, attentions=fp.attentions, residual_norms=rho)``; mean pairwise cosines per depth by
``real_model_flows._profile``.

Step 1 (the script stops otherwise): seed 0's (n) and flow at every K of the committed ladder and seeds 1, 2
at the run's step K = ``steps_per_layer`` equal the committed per-sentence mean cosines (6 decimals) within
1e-6, and the record's committed values (main value at K = 16, ``controls_per_value["permutation seed"]``)
are reproduced within 1e-6.

Scoring: the study's ``_check`` on the choice "permutation seed" with the record's criterion, controls,
margin, paired rule, collapse rule, room rule and ``room_fail_stands`` -- the arguments the study's
``records`` passes for a gap record on mean cosine (``scoring`` there) -- and the record's bootstrap seed
(``config.seed`` + the record's position in the summary). The combined verdict is the study's
``RobustnessCheck`` over the measured values. Descriptive: no record is changed here.
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
from common import draw_sentences, stored_config  # noqa: E402

FAMILY, DIR = "smollm2-permuted", "permuted_smollm2"
RECORD = "frames-follows-network-cos"
TOL = 1e-6


def scoring_of(c) -> dict:
    """The keyword arguments the study's ``records`` gives ``_check`` for a gap record on mean cosine."""
    from attnflow.studies.real_model_flows import _MARGIN

    kind = "gap"
    margin = float(getattr(c, _MARGIN[kind])) if c.stand_still_control else None
    cpair = bool(c.collapse_outcome)
    return {
        "kind": kind, "margin": margin, "rule": c.control_paired_rule, "collapse_pair": cpair,
        "headroom": None,
        "room": (float(c.criterion_cos_gap), c.room_min_depth_share) if c.room_per_depth else None,
        "room_fail_stands": c.room_fail_stands,
        "collapse_eps": c.step_tolerance_share * margin
        if cpair and c.collapse_symmetric and margin is not None else None,
    }  # fmt: skip


def criterion_of(rec: dict):
    """The record's criterion, rebuilt from its committed fields."""
    from attnflow.analysis.verdicts import Criterion

    k = rec["criterion"]
    return Criterion(quantity=k["quantity"], op=k["op"], threshold=float(k["threshold"]),
                     declared_in=k["declared_in"], note=k.get("note", ""))  # fmt: skip


def score_seeds(values: list, pairs: list, c, crit, seed: int) -> dict:
    """Each (reference, flow) pair scored by the study's ``_check`` as the choice 'permutation seed'; the
    per-value log, the values left unmeasured with why, and the combined verdict over the measured ones."""
    from attnflow.studies.real_model_flows import _check, _quantity, controls_of

    rob, log, unmeasured, unm_o = [], {}, [], []
    _check(rob, crit, _quantity("gap"), c.bootstrap, seed, "permutation seed", values, pairs,
           controls=controls_of("gap", c), log=log, unmeasured=unmeasured, unmeasured_outcomes=unm_o,
           **scoring_of(c))  # fmt: skip
    per = log["permutation seed"]
    counts = {"measured fails": 0, "measured holds": 0, "measured inconclusive": 0, "void": 0}
    for x in per:
        counts["void" if not x["measured"] else f"measured {x['outcome']}"] += 1
    return {
        "per_seed": per,
        "combined": rob[0].verdict if rob else "no measured value",
        "counts": counts,
        "unmeasured": unmeasured,
    }


def all_depth(q, m, f, B, seed) -> dict:
    from attnflow.studies.real_model_flows import _boot

    v, ci = _boot(q, m, f, B, seed)
    return {"value": v, "ci95": list(ci)}


def run(seeds: list[int], Ks: list[int], root: Path, limit: int | None = None) -> dict:
    from attnflow.bridge import forward, layer_flow
    from attnflow.bridge.flows import stream_scales, without_mlp
    from attnflow.studies.real_model_flows import (
        _halves,
        _profile,
        _quantity,
        load_family,
        null_weights,
        room_of,
    )

    t0, c0 = time.perf_counter(), time.process_time()
    c, summ = stored_config(root / DIR)
    fam = summ["families"][FAMILY]
    stored = fam["verdict_data"]
    ids_rec = [v["id"] for v in summ["verdicts"]]
    rid = f"flows-{FAMILY}-{RECORD}"
    rec = summ["verdicts"][ids_rec.index(rid)]
    seed = c.seed + ids_rec.index(rid)
    crit = criterion_of(rec)
    levels = stored["step_ladder"]["levels"]
    K_run = c.steps_per_layer
    trained, tokenize, _ = load_family("smollm2", c.seed)
    ids, idx = draw_sentences(tokenize, trained.max_length, c.corpus_seed, c.max_tokens, c.sentences)
    if idx != fam["corpus_index"]:
        raise AssertionError(f"sentence draw {idx} != committed corpus_index {fam['corpus_index']}")
    n_use = len(ids) if limit is None else min(limit, len(ids))
    keep = c.permuted_embeddings == "keep"
    cos = {}  # seed -> {"no_mlp": (S, L+1), K: (S, L+1)}
    with torch.no_grad():
        for s in seeds:
            w = null_weights(FAMILY, trained, s, keep_embeddings=keep)
            w0 = without_mlp(w)
            rows = {"no_mlp": [], **{K: [] for K in Ks}}
            for t in ids[:n_use]:
                fp = forward(w, t)
                rho = stream_scales(w, fp.hidden_states, c.scale_estimator)
                rows["no_mlp"].append(_profile(forward(w0, t).tokens, fp.tokens, c.thresholds)["cos"])
                for K in Ks:
                    z = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=K,
                                   attentions=fp.attentions, residual_norms=rho)  # fmt: skip
                    rows[K].append(_profile(z, fp.tokens, c.thresholds)["cos"])
            cos[s] = {k: np.stack(v).astype(float) for k, v in rows.items()}
            print(f"  seed {s}: {n_use} sentences ({time.process_time() - c0:.0f} s CPU)", flush=True)

    # step 1: the committed arrays and values
    q = _quantity("gap")
    diffs = {}

    def cmp(name, a, ref):
        diffs[name] = float(np.abs(a - np.asarray(ref, float)[:n_use]).max())

    for s in seeds:
        if s == c.null_seeds[0]:
            cmp(f"seed {s} no_mlp", cos[s]["no_mlp"], stored["stats"]["sphere"]["no_mlp"]["cos"])
            for K in Ks:
                if str(K) in levels:
                    cmp(f"seed {s} K={K}", cos[s][K], levels[str(K)]["sphere"]["frames"]["cos"])
        elif str(s) in stored["variants"].get("permutation seed", {}):
            var = stored["variants"]["permutation seed"][str(s)]["sphere"]
            cmp(f"seed {s} no_mlp", cos[s]["no_mlp"], var["no_mlp"]["cos"])
            if K_run in Ks:
                cmp(f"seed {s} K={K_run}", cos[s][K_run], var["frames"]["cos"])
    bad = [k for k, v in diffs.items() if v > TOL]
    cpv = rec["result"]["controls_per_value"]["permutation seed"]
    committed = {x["choice_value"]: x["value"] for x in cpv}
    if n_use == len(ids):
        lad = rec["result"]["step_ladder"]
        sl = dict(zip(lad["K"], lad["values"], strict=True))
        s0 = c.null_seeds[0]
        if s0 in cos and 16 in Ks and abs(q(cos[s0]["no_mlp"], cos[s0][16]) - rec["result"]["value"]) > TOL:
            bad.append("main value (seed 0, K = 16)")
        for K in Ks:
            if s0 in cos and K in sl and abs(q(cos[s0]["no_mlp"], cos[s0][K]) - sl[K]) > TOL:
                bad.append(f"ladder value K = {K}")
    match = {"max_abs_diff_per_sentence_depth": diffs, "tolerance": TOL, "ok": not bad,
             "committed_permutation_seed_values": committed}  # fmt: skip
    if bad:
        raise AssertionError(f"step-1 match failed for {bad}: {json.dumps(match)}")

    B = c.bootstrap
    out_K = {}
    for K in Ks:
        pairs = [(cos[s]["no_mlp"], cos[s][K]) for s in seeds]
        sc = score_seeds(seeds, pairs, c, crit, seed)
        extra = []
        for s, (m, f) in zip(seeds, pairs, strict=True):
            qk, info = room_of(q, m, float(c.criterion_cos_gap), c.room_min_depth_share)
            extra.append({
                "seed": s, "all_depths": all_depth(q, m, f, B, seed),
                "depths_with_room": info["kept"], "over_depths_with_room": all_depth(qk, m, f, B, seed)
                if info["kept"] else None,
            })  # fmt: skip
        out_K[str(K)] = {**sc, "per_seed_depths": extra}
    # corpus half B of the committed seed, all depths (R14 F2 asked for it)
    halves = {}
    s0 = c.null_seeds[0]
    if s0 in cos and n_use == len(ids):
        A, Bh = _halves(len(ids), c.split_seeds[0])
        for K in Ks:
            m, f = cos[s0]["no_mlp"], cos[s0][K]
            halves[str(K)] = {"half A": all_depth(q, m[A], f[A], B, seed),
                              "half B": all_depth(q, m[Bh], f[Bh], B, seed)}  # fmt: skip
    return {
        "family": FAMILY, "record": rid, "seeds": seeds, "K": Ks, "threshold": float(c.criterion_cos_gap),
        "bootstrap": {"B": B, "seed": seed, "helper": "_boot"}, "scoring": scoring_of(c),
        "n_sentences": n_use, "corpus_index": idx[:n_use], "step1_match": match, "per_K": out_K,
        "halves_seed0": halves, "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0,
        "threads": torch.get_num_threads(),
    }  # fmt: skip


def table(res: dict) -> str:
    lines = []
    for K, r in res["per_K"].items():
        lines += [f"K = {K}: combined over the measured seeds: {r['combined']}; counts {r['counts']}", "",
                  "| seed | all depths 1..30 [95% CI] | outcome (study's scoring) | measured | depths with "
                  "room | over those depths [95% CI] |", "|---|---|---|---|---|---|"]  # fmt: skip
        for x, e in zip(r["per_seed"], r["per_seed_depths"], strict=True):
            a, o = e["all_depths"], e["over_depths_with_room"]
            lines.append(
                f"| {e['seed']} | {a['value']:.3f} [{a['ci95'][0]:.3f}, {a['ci95'][1]:.3f}] | "
                f"{x['outcome']} | "
                f"{'yes' if x['measured'] else 'void'} | {len(e['depths_with_room'])} | "
                + ("-" if o is None else f"{o['value']:.3f} [{o['ci95'][0]:.3f}, {o['ci95'][1]:.3f}]")
                + " |"
            )
        lines.append("")
    for K, h in res["halves_seed0"].items():
        lines.append(
            f"seed 0, K = {K}: "
            + "; ".join(
                f"{n} {v['value']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]" for n, v in h.items()
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--K", type=int, nargs="+", default=[16, 4], help="Euler steps per unit time")
    ap.add_argument("--root", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None, help="only the first N sentences (a timing run)")
    args = ap.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0:
        ap.error(f"--seeds must be distinct non-negative integers: got {args.seeds}")
    if min(args.K) < 1:
        ap.error(f"--K must be positive step counts: got {args.K}")
    torch.set_num_threads(1)
    res = run(args.seeds, args.K, args.root, args.limit)
    print(table(res))
    print(f"CPU {res['cpu_s']:.0f} s, wall {res['wall_s']:.0f} s")
    if args.out is not None:
        args.out.write_text(json.dumps(res, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
