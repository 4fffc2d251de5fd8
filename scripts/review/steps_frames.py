"""Reviewer check, round 2 (issue 26 part 3): do the (f) / (g) / (e) verdicts survive the step count, the
sentence-length cap, longer inputs and the exact-(n) re-implementation?

Per family: the first S sentences of the study's draw (corpus seed 0) with 3 <= n <= CAP tokens; per
sentence the study's own statistics (real_model_flows._profile, sphere tokens) of the model, of (n) =
forward on bridge.without_mlp(weights), of an independent re-implementation of (n)
(scripts/review/flows_ablation.ablated, attn on, MLP off), and of flows (a), (e), (f), (g) at K Euler steps
per unit time for each K in STEPS. Prints the study's verdict quantities (real_model_flows._quantity, _boot:
1000 paired resamples, seed 0) and dumps the per-sentence cosine / clusters / erank profiles as JSON on
stdout.
Usage: [JOIN=k] PYTHONPATH=src:scripts/review python steps_frames.py FAMILY S CAP STEPS... > out.json
"""

import json
import os
import sys

import numpy as np
import torch
from flows_ablation import ablated

from attnflow.bridge import forward, layer_flow, stream_norms
from attnflow.bridge.flows import without_mlp
from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import _boot, _profile, _quantity, load_family

THR = [0.6, 1.0, 1.2]
#: env JOIN=k: each input is k sentences of the draw joined (the shipped corpus has <= 19 tokens a sentence)
JOIN = int(os.environ.get("JOIN", "1"))


def main():
    fam, S, cap, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(s) for s in sys.argv[4:]]
    torch.set_num_threads(1)
    with torch.no_grad():
        w, tokenize, _ = load_family(fam, 0)
        wn = without_mlp(w)
        corpus = load_corpus()
        if JOIN > 1:  # longer inputs: JOIN consecutive sentences of the draw joined by a space
            order = np.random.default_rng(0).permutation(len(corpus))
            starts = range(0, len(order) - JOIN + 1, JOIN)
            corpus = [" ".join(corpus[k] for k in order[i : i + JOIN]) for i in starts]
        ids = []
        for k in np.random.default_rng(0).permutation(len(corpus)):
            t = tokenize(corpus[k])
            if 3 <= len(t) <= min(cap, w.max_length):
                ids.append(t)
            if len(ids) == S:
                break
        prof = {}

        def add(key, x, ref):
            p = _profile(x, ref, THR)
            prof.setdefault(key, {"cos": [], "clusters": [], "erank": []})
            for s in ("cos", "clusters", "erank"):
                prof[key][s].append(np.asarray(p[s], float).tolist())

        recheck = []
        for t in ids:
            fp = forward(w, t)
            z = fp.tokens
            rho = stream_norms(w, fp.hidden_states) if w.arch == "pre_ln" else None
            add("model", z, z)
            nm = forward(wn, t).tokens
            add("no_mlp", nm, z)
            recheck.append(float((nm - ablated(w, t, attn=True, use_mlp=False)).abs().max()))
            for K in steps:
                for v in ("attention", "mlp", "frames", "frames_mlp"):
                    if v == "frames" and w.arch == "pre_ln":
                        continue
                    x = layer_flow(w, z[0], variant=v, steps_per_layer=K, residual_norms=rho)
                    add(f"{v}_s{K}", x, z)
            print(fam, len(prof["model"]["cos"]), file=sys.stderr, flush=True)
    arr = {k: {s: np.asarray(v[s]) for s in v} for k, v in prof.items()}
    ntok = [len(t) for t in ids]
    print(f"# {fam}: S={len(ids)} cap={cap} mean n={np.mean(ntok):.1f} max n={max(ntok)}; "
          f"max |(n) - re-implementation| = {max(recheck):.2e}", file=sys.stderr)

    def show(label, ref, flow, stat, kind, k=None):
        m, f = arr[ref][stat], arr[flow][stat]
        if k is not None:
            m, f = m[..., k], f[..., k]
        out = []
        for d in ("all", "last"):
            v, ci = _boot(_quantity(kind, d), m, f, 1000, 0)
            out.append(f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]")
        print(f"{fam} cap{cap} {label}: 1..L {out[0]}; last {out[1]}", file=sys.stderr)

    show("(n) over", "model", "no_mlp", "cos", "over")
    for K in steps:
        show(f"(a) s{K} over", "model", f"attention_s{K}", "cos", "over")
        show(f"(e) s{K} cos gap", "model", f"mlp_s{K}", "cos", "gap")
        if w.arch != "pre_ln":
            show(f"(f) s{K} over", "model", f"frames_s{K}", "cos", "over")
            show(f"(f) s{K} vs (n) cos gap", "no_mlp", f"frames_s{K}", "cos", "gap")
        else:
            show(f"(f)=(a) s{K} vs (n) cos gap", "no_mlp", f"attention_s{K}", "cos", "gap")
        show(f"(g) s{K} cos gap", "model", f"frames_mlp_s{K}", "cos", "gap")
        show(f"(g) s{K} erank rel", "model", f"frames_mlp_s{K}", "erank", "rel")
        for i, r in enumerate(THR):
            show(f"(g) s{K} clusters@{r} rel", "model", f"frames_mlp_s{K}", "clusters", "rel", k=i)
    json.dump({"family": fam, "S": len(ids), "cap": cap, "tokens": ntok, "recheck_max": max(recheck),
               "profiles": prof}, sys.stdout)


if __name__ == "__main__":
    main()
