"""Review round 15, F3 (issue #26): a null family's record over permutation seeds, through the study's own
``_lite`` (what it runs for a null's other seeds), each seed scored by the study's rules (declared first:
null_seeds_minilm_fitted_declared.md).

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round15/null_seeds_lite.py [--family minilm-permuted]
        [--dir permuted] [--record fitted-time-cos] [--seeds 0 .. 9] [--K 16 4] [--out FILE.json]

Null seed s: ``null_weights(family, trained, s, keep_embeddings=c.permuted_embeddings == "keep")`` with the
trained base loaded by ``load_family(base, c.seed)``; the sentences are the study's draw (review/common.py),
checked against the committed ``corpus_index``; per seed and K, ``real_model_flows._lite(w, ids, c, K)``.
The record's pair: for 'fitted-time-*' the model on the fit's report half and flow (c) fitted on the other
half (``_lite``'s ``fitted``); for '<flow>-follows-network-*' (n) and the flow; for '<flow>-cos' the model
and the flow. Step 1 (the script stops otherwise): seed ``null_seeds[0]`` at the record's reported K
reproduces the record's value, and the committed other seeds at the run's step reproduce
``controls_per_value`` within 1e-6. Scoring: the study's ``_check`` as in ``null_seeds_smollm2.py``.
Descriptive: no record is changed here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # review/: common
sys.path.insert(0, str(HERE))
from common import draw_sentences, stored_config  # noqa: E402
from null_seeds_smollm2 import all_depth, criterion_of, score_seeds  # noqa: E402

TOL = 1e-6
FLOW = {"fitted-time": "fitted_time", "attention": "attention", "biases": "biases", "mlp": "mlp",
        "frames": "frames", "frames-mlp": "frames_mlp", "model-scores": "model_scores"}  # fmt: skip


def pair_of(lite: dict, record: str) -> tuple[np.ndarray, np.ndarray]:
    """The record's (reference, flow) mean-cosine arrays from one ``_lite`` result."""
    if not record.endswith("-cos"):
        raise ValueError(f"record {record!r}: only mean-cosine records ('...-cos') are supported")
    sph = lite["sphere"]
    if record.startswith("fitted-time"):
        fit = lite["fitted"]
        m = np.asarray(sph["model"]["cos"], float)[fit["report"]]
        return m, np.asarray(fit["stats"]["sphere"]["cos"], float)
    if "-follows-network" in record:
        flow = FLOW[record.split("-follows-network")[0]]
        return np.asarray(sph["no_mlp"]["cos"], float), np.asarray(sph[flow]["cos"], float)
    flow = FLOW[record.removesuffix("-cos")]
    return np.asarray(sph["model"]["cos"], float), np.asarray(sph[flow]["cos"], float)


def run(family: str, d: str, record: str, seeds: list[int], Ks: list[int], root: Path) -> dict:
    from attnflow.studies.real_model_flows import _lite, _quantity, load_family, null_base, null_weights

    t0, c0 = time.perf_counter(), time.process_time()
    c, summ = stored_config(root / d)
    fam = summ["families"][family]
    ids_rec = [v["id"] for v in summ["verdicts"]]
    rid = f"flows-{family}-{record}"
    rec = summ["verdicts"][ids_rec.index(rid)]
    seed = c.seed + ids_rec.index(rid)
    crit = criterion_of(rec)
    trained, tokenize, _ = load_family(null_base(family), c.seed)
    ids, idx = draw_sentences(tokenize, trained.max_length, c.corpus_seed, c.max_tokens, c.sentences)
    if idx != fam["corpus_index"]:
        raise AssertionError(f"sentence draw {idx} != committed corpus_index {fam['corpus_index']}")
    keep = c.permuted_embeddings == "keep"
    pairs = {}
    with torch.no_grad():
        for s in seeds:
            w = null_weights(family, trained, s, keep_embeddings=keep)
            for K in Ks:
                pairs[(s, K)] = pair_of(_lite(w, ids, c, K), record)
            print(f"  seed {s}: K = {Ks} ({time.process_time() - c0:.0f} s CPU)", flush=True)
    q = _quantity("gap")
    out_K = {}
    for K in Ks:
        sc = score_seeds(seeds, [pairs[(s, K)] for s in seeds], c, crit, seed)
        sc["per_seed_depths"] = [{"seed": s, "all_depths": all_depth(q, *pairs[(s, K)], c.bootstrap, seed)}
                                 for s in seeds]  # fmt: skip
        out_K[str(K)] = sc
    # step 1: the study's scored values (over the depths with room where the room rule takes them)
    rk = rec["result"].get("robustness_K") or {}
    K_main = rk.get("main value", c.steps_per_layer)
    committed = {x["choice_value"]: (x["value"], x.get("K")) for x in
                 rec["result"]["controls_per_value"]["permutation seed"]}  # fmt: skip
    scored_v = {(x["choice_value"], int(K)): x["value"] for K, r in out_K.items() for x in r["per_seed"]}
    diffs = {}
    s0 = c.null_seeds[0]
    if (s0, K_main) in scored_v:
        diffs[f"seed {s0} K={K_main} value"] = abs(scored_v[(s0, K_main)] - rec["result"]["value"])
    for s, (v, k) in committed.items():
        k = c.steps_per_layer if s != s0 and k is None else k
        if s != s0 and (s, k) in scored_v:
            diffs[f"seed {s} K={k} value"] = abs(scored_v[(s, k)] - v)
    bad = [k for k, v in diffs.items() if v > TOL]
    match = {"abs_diff": diffs, "tolerance": TOL, "ok": not bad and bool(diffs)}
    if not match["ok"]:
        raise AssertionError(f"step-1 match failed: {json.dumps(match)}")
    return {"family": family, "record": rid, "seeds": seeds, "K": Ks, "K_main": K_main,
            "threshold": float(crit.threshold), "bootstrap": {"B": c.bootstrap, "seed": seed},
            "n_sentences": len(ids), "step1_match": match, "per_K": out_K,
            "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="minilm-permuted")
    ap.add_argument("--dir", default="permuted")
    ap.add_argument("--record", default="fitted-time-cos")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--K", type=int, nargs="+", default=[16, 4])
    ap.add_argument("--root", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0:
        ap.error(f"--seeds must be distinct non-negative integers: got {args.seeds}")
    torch.set_num_threads(1)
    res = run(args.family, args.dir, args.record, args.seeds, args.K, args.root)
    for K, r in res["per_K"].items():
        print(f"K = {K}: combined {r['combined']}; {r['counts']}")
        for x, e in zip(r["per_seed"], r["per_seed_depths"], strict=True):
            a = e["all_depths"]
            print(
                f"  seed {e['seed']}: {x['value']:.4f} {x['outcome']}{'' if x['measured'] else ' (void)'}; "
                f"all depths {a['value']:.4f} [{a['ci95'][0]:.4f}, {a['ci95'][1]:.4f}]"
            )
    print(f"CPU {res['cpu_s']:.0f} s, wall {res['wall_s']:.0f} s")
    if args.out is not None:
        args.out.write_text(json.dumps(res, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
