"""Reviewer's check (issue 26 part 3): how much does SmolLM2's flow (a) depend on its scale rho_l?

rho_l (bridge.stream_norms) is the MEAN norm over tokens of the residual stream of the model WITH its MLPs.
Prints, per sentence subsample, rho_l against the median norm of the non-first tokens (the first token is the
attention sink with a massive norm), and flow (a)'s over-clustering (mean over depths 1..L, last depth) with
rho_l = mean (the study's) and rho_l = median of tokens 1..n-1.  Usage: python smollm2_scale.py S > out.json
"""

import json
import sys

import numpy as np
import torch

from attnflow.bridge import forward, layer_flow, stream_norms
from attnflow.observables import mean_pairwise_inner_product
from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import load_family

S = int(sys.argv[1])
torch.set_num_threads(1)
with torch.no_grad():
    w, tokenize, _ = load_family("smollm2", 0)
    corpus = load_corpus()
    ids = []
    for k in np.random.default_rng(0).permutation(len(corpus)):
        t = tokenize(corpus[k])
        if 3 <= len(t) <= min(24, w.max_length):
            ids.append(t)
        if len(ids) == S:
            break
    out = {
        "rho_mean": [],
        "rho_median_rest": [],
        "first_over_median": [],
        "model": [],
        "mean": [],
        "median": [],
    }
    for t in ids:
        fp = forward(w, t)
        rho = stream_norms(w, fp.hidden_states)
        nr = torch.linalg.vector_norm(fp.hidden_states[: w.depth], dim=-1)  # (L, n)
        med = [float(v) for v in nr[:, 1:].median(dim=-1).values]
        out["rho_mean"].append(rho)
        out["rho_median_rest"].append(med)
        out["first_over_median"].append((nr[:, 0] / nr[:, 1:].median(dim=-1).values).tolist())
        out["model"].append(mean_pairwise_inner_product(fp.tokens).tolist())
        for name, r in (("mean", rho), ("median", med)):
            x = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=4, residual_norms=r)
            out[name].append(mean_pairwise_inner_product(x).tolist())
        print(len(out["model"]), file=sys.stderr, flush=True)
    json.dump(out, sys.stdout)
