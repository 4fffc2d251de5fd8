"""Reviewer check (issue 26 part 3, post-LN MiniLMs): split the flow-vs-network difference into LayerNorm
frames and biases. Discrete no-MLP network with bias-free attention (a) with the LayerNorm frames kept,
(b) without them (z <- unit(P_c(z + P_c o / a)), the one-step analogue of flow (a)).
Usage: python frames_split.py FAMILY S"""

import math
import sys

import numpy as np
import torch

from attnflow.bridge import forward
from attnflow.bridge.passes import attention_sublayer, layer_norm, sphere_tokens
from attnflow.bridge.theta import attention_layer_norm
from attnflow.observables import mean_pairwise_inner_product
from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import load_family

fam = sys.argv[1]
S = int(sys.argv[2])
torch.set_num_threads(1)
with torch.no_grad():
    w, tok, _ = load_family(fam, 0)
    corpus = load_corpus()
    ids = []
    for k in np.random.default_rng(0).permutation(len(corpus)):
        t = tok(corpus[k])
        if 3 <= len(t) <= min(24, w.max_length):
            ids.append(t)
        if len(ids) == S:
            break
    res = {"model": [], "nomlp_frames_biasfree": [], "nomlp_noframes_biasfree": []}
    for t in ids:
        fp = forward(w, t)
        z0 = fp.tokens[0]
        res["model"].append(mean_pairwise_inner_product(fp.tokens).tolist())
        # discrete no-MLP, LN frames kept, bias-free attention reading the LN output without its shift
        toks = [z0]
        h = fp.hidden_states[0]  # the embedding LayerNorm output
        for i, lw in enumerate(w.layers):
            ln = attention_layer_norm(w, i)
            a = math.sqrt(w.d) * ln.weight
            o = attention_sublayer(toks[-1] * a, w, i, biases=False)[0]
            u = layer_norm(h + o, lw.ln_attn)
            toks.append(sphere_tokens(u))
            h = layer_norm(u, lw.ln_mlp)
        res["nomlp_frames_biasfree"].append(mean_pairwise_inner_product(torch.stack(toks)).tolist())
        # discrete no-MLP without frames: z <- unit(P_c(z + P_c o / a))
        toks = [z0]
        for i in range(w.depth):
            ln = attention_layer_norm(w, i)
            a = math.sqrt(w.d) * ln.weight
            o = attention_sublayer(toks[-1] * a, w, i, biases=False)[0] / a
            y = toks[-1] + o
            toks.append(sphere_tokens(y))
        res["nomlp_noframes_biasfree"].append(mean_pairwise_inner_product(torch.stack(toks)).tolist())
    m = np.array(res["model"]).mean(0)
    for k in res:
        f = np.array(res[k]).mean(0)
        print(fam, k, np.round(f, 3), "over1..L", round((f - m)[1:].mean(), 3), "last", round((f - m)[-1], 3))
