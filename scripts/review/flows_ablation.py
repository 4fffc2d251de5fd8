"""Reviewer's ablation for real_model_flows (issue 26 part 3): is the attention-only flow's over-clustering
the attention sub-layer's, or the bridge's (continuous time, dropped LN frames)?

Per family, on the study's own corpus subsample (first S sentences of the same draw), mean pairwise cosine of
the sphere tokens at depths 0..L for:
  model        the model's own pass (forward)
  no_mlp       the SAME network with every MLP output set to 0 (all LayerNorms/biases kept): the discrete
               attention-only model, the clean "same-architecture" reference for "attention over-clusters"
  frames       post-LN only: both attention and MLP set to 0 (only the LayerNorm affine maps act)
  flow_sK      flow (a) with K Euler steps per layer (bias-free, T = 1)
Usage: python flows_ablation.py FAMILY S STEPS... > out.json
"""

import json
import sys
from pathlib import Path

import torch

from attnflow.bridge import forward, layer_flow, stream_norms
from attnflow.bridge.passes import attention_sublayer, layer_norm, mlp, sphere_tokens
from attnflow.observables import mean_pairwise_inner_product
from attnflow.studies.real_model_flows import load_family

# the study's sentence draw, shared with the review scripts of docs/studies/real_model_flows/review/
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs/studies/real_model_flows/review"))
from common import draw_sentences  # noqa: E402


def ablated(w, ids, *, attn: bool, use_mlp: bool):
    x = w.word_embeddings[torch.as_tensor(ids)]
    n = len(ids)
    if w.position_embeddings is not None:
        x = x + w.position_embeddings[:n]
    toks = []
    if w.arch == "post_ln":
        if w.token_type_embeddings is not None:
            x = x + w.token_type_embeddings[torch.zeros(n, dtype=torch.int64)]
        toks.append(sphere_tokens(x))
        h = layer_norm(x, w.embedding_ln)
        for i, lw in enumerate(w.layers):
            a = attention_sublayer(h, w, i)[0] if attn else 0.0
            u = layer_norm(h + a, lw.ln_attn)
            y = u + mlp(u, lw, w.activation) if use_mlp else u
            toks.append(sphere_tokens(y))
            h = layer_norm(y, lw.ln_mlp)
    else:
        c = w.norm == "layer"
        r = x
        toks.append(sphere_tokens(r, centred=c))
        for i, lw in enumerate(w.layers):
            if attn:
                r = r + attention_sublayer(layer_norm(r, lw.ln_attn), w, i)[0]
            if use_mlp:
                r = r + mlp(layer_norm(r, lw.ln_mlp), lw, w.activation)
            toks.append(sphere_tokens(r, centred=c))
    return torch.stack(toks)


def main():
    fam, S, steps = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
    torch.set_num_threads(1)
    with torch.no_grad():
        w, tokenize, _ = load_family(fam, 0)
        ids, _ = draw_sentences(tokenize, w.max_length, 0, 24, S)
        out = {k: [] for k in ["model", "model_check", "no_mlp", "frames", *[f"flow_s{s}" for s in steps]]}
        for t in ids:
            fp = forward(w, t)
            rho = stream_norms(w, fp.hidden_states) if w.arch == "pre_ln" else None
            cos = lambda z: mean_pairwise_inner_product(z).tolist()  # noqa: E731
            out["model"].append(cos(fp.tokens))
            out["model_check"].append(cos(ablated(w, t, attn=True, use_mlp=True)))
            out["no_mlp"].append(cos(ablated(w, t, attn=True, use_mlp=False)))
            if w.arch == "post_ln":
                out["frames"].append(cos(ablated(w, t, attn=False, use_mlp=False)))
            for s in steps:
                x = layer_flow(w, fp.tokens[0], variant="attention", steps_per_layer=s, residual_norms=rho)
                out[f"flow_s{s}"].append(cos(x))
            print(fam, len(out["model"]), file=sys.stderr, flush=True)
    json.dump({"family": fam, "S": S, **{k: v for k, v in out.items() if v}}, sys.stdout)


if __name__ == "__main__":
    main()
