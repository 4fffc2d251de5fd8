"""Reviewer check (issue 26 part 3): do the near-threshold MiniLM verdicts survive another corpus draw?

For corpus seed SEED (the study uses 0), the first S sentences of <= 24 tokens; flows (a) and (e) as in the
study (4 steps per unit time). Prints over-clustering of (a) and |gap| of (e), mean over depths 1..L and at
depth L, with 95% percentile bootstrap intervals over sentences. Usage: python corpus_draw.py FAMILY SEED S
"""

import sys

import numpy as np
import torch

from attnflow.bridge import forward, layer_flow, stream_norms
from attnflow.observables import mean_pairwise_inner_product
from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import load_family

fam, seed, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
with torch.no_grad():
    w, tok, _ = load_family(fam, 0)
    corpus = load_corpus()
    ids = []
    for k in np.random.default_rng(seed).permutation(len(corpus)):
        t = tok(corpus[k])
        if 3 <= len(t) <= min(24, w.max_length):
            ids.append(t)
        if len(ids) == S:
            break
    cos = {"model": [], "attention": [], "mlp": []}
    for t in ids:
        fp = forward(w, t)
        cos["model"].append(mean_pairwise_inner_product(fp.tokens).numpy())
        rho = stream_norms(w, fp.hidden_states) if w.arch == "pre_ln" else None
        for v in ("attention", "mlp"):
            x = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=4, residual_norms=rho)
            cos[v].append(mean_pairwise_inner_product(x).numpy())
m = np.array(cos["model"])
rng = np.random.default_rng(0)
idx = rng.integers(0, S, size=(1000, S))
for v, sign in (("attention", 1), ("mlp", 0)):
    f = np.array(cos[v])
    for name, sl in (("1..L", slice(1, None)), ("L", slice(-1, None))):

        def q(mm, ff, sl=sl, sign=sign):
            g = ff.mean(0)[sl] - mm.mean(0)[sl]
            return float(g.mean() if sign else np.abs(g).mean())

        b = np.percentile([q(m[i], f[i]) for i in idx], [2.5, 97.5])
        print(f"{fam} corpus seed {seed} S {S} {v} depths {name}: {q(m, f):.3f} [{b[0]:.3f}, {b[1]:.3f}]")
