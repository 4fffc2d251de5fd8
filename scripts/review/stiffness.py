"""Reviewer check, round 2 (issue 26 part 3): is K = 4 Euler steps per unit time inside the integrator's
convergent regime? The projected Euler step x <- unit(x + dt P(x) F(x)) turns a token by atan(dt |P F|);
once dt |P F| >> 1 the step saturates (the turn cannot exceed 90 degrees) and the result depends on dt.

Per layer l, at the model's own sphere tokens z_l of the first S sentences of the study's draw: the tangent
speed |P^perp(z) F(z)| of the attention drift (flow (a), the drift (f) also uses) and of the MLP drift
((e), (g)), median and max over tokens and sentences, and the share of tokens with dt |P F| > 1 at dt = 1/4.
Usage: PYTHONPATH=src python scripts/review/stiffness.py FAMILY S
"""

import sys

import numpy as np
import torch

from attnflow.bridge import forward, stream_norms
from attnflow.bridge.flows import attention_drift
from attnflow.bridge.theta import mlp_drift
from attnflow.geometry.sphere import tangent_projection
from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import load_family

fam, S = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(1)
with torch.no_grad():
    w, tokenize, _ = load_family(fam, 0)
    corpus = load_corpus()
    ids = []
    for k in np.random.default_rng(0).permutation(len(corpus)):
        t = tokenize(corpus[k])
        if 3 <= len(t) <= min(24, w.max_length):
            ids.append(t)
        if len(ids) == S:
            break
    sp = {"attention": [[] for _ in range(w.depth)], "mlp": [[] for _ in range(w.depth)]}
    for t in ids:
        fp = forward(w, t)
        rho = stream_norms(w, fp.hidden_states) if w.arch == "pre_ln" else None
        for l in range(w.depth):
            z = fp.tokens[l]
            r = None if rho is None else rho[l]
            Fa = attention_drift(w, l, z, residual_norm=r)
            Fm = mlp_drift(w, l, residual_norm=r)(z)
            sp["attention"][l] += torch.linalg.vector_norm(tangent_projection(z, Fa), dim=-1).tolist()
            sp["mlp"][l] += torch.linalg.vector_norm(tangent_projection(z, Fm), dim=-1).tolist()
print(f"{fam}, {S} sentences: tangent speed |P F| per layer (median / max; share with |P F| / 4 > 1)")
for v in sp:
    row = []
    for l in range(w.depth):
        a = np.asarray(sp[v][l])
        row.append(f"{np.median(a):.2f}/{a.max():.1f}/{(a / 4 > 1).mean():.2f}")
    print(f"  {v}: " + "  ".join(row))
