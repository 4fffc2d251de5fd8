"""Reviewer check, round 2 (issue 26 part 3): is the permuted null informative, and is it seed-stable?

(1) Scale: per family, trained weights vs permuted_null(seed 0, 1) vs the random init, mean over layers of
||W_q||_F, ||W_q||_2, the stable rank ||W||_F^2/||W||_2^2 of W_q and W_o, and the mean over heads of
||W_q,h^T W_k,h||_2 / sqrt(k) (the score matrix's scale). Permuting entries keeps ||.||_F and the entry
distribution, and scatters the spectrum.
(2) Seeds: on the first S sentences of the study's draw, the model's mean cosine at depths 1..L and the
verdict quantities of flows (a) (over-clusters) and (e) (cos gap), K = 4, for permutation seeds SEEDS.
Usage: PYTHONPATH=src python nulls_scale.py FAMILY S SEEDS...
"""

import math
import sys

import numpy as np
import torch

from attnflow.bridge import forward, layer_flow, stream_norms
from attnflow.bridge.nulls import permuted_null
from attnflow.observables import mean_pairwise_inner_product
from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import _boot, _quantity, load_family

fam, S, seeds = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
torch.set_num_threads(1)


def scale(w):
    H, kv = w.num_heads, w.kv_heads
    k = w.layers[0].W_q.shape[0] // H
    out = {"|Wq|_F": [], "|Wq|_2": [], "srank Wq": [], "srank Wo": [], "|Wq_h^T Wk_h|_2/sqrt k": []}
    for lw in w.layers:
        s = torch.linalg.matrix_norm(lw.W_q, 2)
        out["|Wq|_F"].append(float(torch.linalg.matrix_norm(lw.W_q)))
        out["|Wq|_2"].append(float(s))
        out["srank Wq"].append(float(torch.linalg.matrix_norm(lw.W_q) ** 2 / s**2))
        so = torch.linalg.matrix_norm(lw.W_o, 2)
        out["srank Wo"].append(float(torch.linalg.matrix_norm(lw.W_o) ** 2 / so**2))
        g = H // kv
        out["|Wq_h^T Wk_h|_2/sqrt k"].append(float(np.mean([
            torch.linalg.matrix_norm(lw.W_q[h * k:(h + 1) * k].T @ lw.W_k[(h // g) * k:(h // g + 1) * k], 2)
            / math.sqrt(k) for h in range(H)])))  # fmt: skip
    return {a: float(np.mean(b)) for a, b in out.items()}


with torch.no_grad():
    w, tokenize, _ = load_family(fam, 0)
    nets = {"trained": w, **{f"permuted {s}": permuted_null(w, s) for s in seeds}}
    if fam != "smollm2":
        nets["random init"] = load_family(f"{fam}-random", 0)[0]
    for name, net in nets.items():
        print(f"{fam} {name}: " + ", ".join(f"{a} {b:.3g}" for a, b in scale(net).items()))
    corpus = load_corpus()
    ids = []
    for kk in np.random.default_rng(0).permutation(len(corpus)):
        t = tokenize(corpus[kk])
        if 3 <= len(t) <= min(24, w.max_length):
            ids.append(t)
        if len(ids) == S:
            break
    for name, net in nets.items():
        if name in ("trained", "random init"):
            continue
        cos = {"model": [], "attention": [], "mlp": []}
        for t in ids:
            fp = forward(net, t)
            rho = stream_norms(net, fp.hidden_states) if net.arch == "pre_ln" else None
            cos["model"].append(mean_pairwise_inner_product(fp.tokens).numpy())
            for v in ("attention", "mlp"):
                x = layer_flow(net, fp.tokens[0], variant=v, steps_per_layer=4, residual_norms=rho)
                cos[v].append(mean_pairwise_inner_product(x).numpy())
        m = np.asarray(cos["model"])
        a = _boot(_quantity("over"), m, np.asarray(cos["attention"]), 1000, 0)
        e = _boot(_quantity("gap"), m, np.asarray(cos["mlp"]), 1000, 0)
        print(f"{fam} {name}, {S} sentences: model cos depths 0..L {np.round(m.mean(0), 3).tolist()}; "
              f"(a) over {a[0]:.3f} [{a[1][0]:.3f}, {a[1][1]:.3f}]; "
              f"(e) gap {e[0]:.3f} [{e[1][0]:.3f}, {e[1][1]:.3f}]")
