"""The MLP field's size per unit time, per layer (review round 6, F4): what drives flows (e), (g) to collapse.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round6/mlp_field.py [--sentences 8] [--out FILE.json]

For MiniLM-L6, MiniLM-L3 and SmolLM2, the first ``--sentences`` sentences of the study's draw (corpus seed 0,
3..24 tokens) through the network (:func:`attnflow.bridge.forward`); at each layer l, at the state the
network's MLP reads (pre-LN: the stream r after the attention sub-layer; post-LN: u, the first LayerNorm's
input h + Attn(h)), per token i (pre-LN: tokens 2..n, the first is the attention sink):

* ``network_rel``: ||MLP output_i|| / ||state_i|| (pre-LN: the stream r_i; post-LN: the LayerNorm output
  u'_i the MLP reads, whose norm is sqrt(d) |gamma|-weighted): the network's MLP step relative to the token;
* ``network_angle``: the angle (rad) between state_i and state_i + MLP output_i, what the sub-layer turns a
  token by (before the next norm);
* ``flow_speed``: |P_perp(z_i) m_l(z_i)|, the MLP drift of flows (e), (g) (:func:`attnflow.bridge.mlp_drift`,
  pre-LN divided by rho_l = the mean token norm, config scale_estimator = mean) at the sphere token z_i of
  that state: radians per unit time at small angles; a flow runs T_l = 1 per layer;
* ``drift_cos``: the mean pairwise cosine of the tangent drifts P_perp m(z_i) over the tokens (1: one shared
  direction, which a flow integrated for unit time turns every token towards).

Medians over tokens and sentences; prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch


def measure(family: str, sentences: int) -> dict:
    from attnflow.bridge import forward
    from attnflow.bridge.flows import stream_scales
    from attnflow.bridge.passes import attention_sublayer, layer_norm, mlp
    from attnflow.bridge.theta import mlp_drift
    from attnflow.studies.real_model import load_corpus
    from attnflow.studies.real_model_flows import load_family

    w, tokenize, _ = load_family(family, 0)
    corpus = load_corpus()
    order = np.random.default_rng(0).permutation(len(corpus))
    ids = [t for t in (tokenize(corpus[k]) for k in order) if 3 <= len(t) <= min(24, w.max_length)][
        :sentences
    ]
    pre = w.arch == "pre_ln"
    rows = {
        k: [[] for _ in range(w.depth)] for k in ("network_rel", "network_angle", "flow_speed", "drift_cos")
    }
    with torch.no_grad():
        for t in ids:
            fp = forward(w, t)
            rho = stream_scales(w, fp.hidden_states, "mean") if pre else None
            for l in range(w.depth):
                lw, h = w.layers[l], fp.hidden_states[l]
                if pre:
                    state = h + attention_sublayer(layer_norm(h, lw.ln_attn), w, l)[0]
                    mo = mlp(layer_norm(state, lw.ln_mlp), lw, w.activation)
                    ref, skip = state, 1
                else:
                    state = h + attention_sublayer(h, w, l)[0]
                    ref = layer_norm(state, lw.ln_attn)
                    mo = mlp(ref, lw, w.activation)
                    skip = 0
                c = state - state.mean(-1, keepdim=True) if w.norm == "layer" else state
                z = c / torch.linalg.vector_norm(c, dim=-1, keepdim=True)
                m = mlp_drift(w, l, residual_norm=None if rho is None else rho[l])(z)
                tang = m - (m * z).sum(-1, keepdim=True) * z
                sp = torch.linalg.vector_norm(tang, dim=-1)
                rel = torch.linalg.vector_norm(mo, dim=-1) / torch.linalg.vector_norm(ref, dim=-1)
                a, b = ref, ref + mo
                cosang = (a * b).sum(-1) / (
                    torch.linalg.vector_norm(a, dim=-1) * torch.linalg.vector_norm(b, dim=-1)
                )
                ang = torch.arccos(cosang.clamp(-1.0, 1.0))
                u = tang[skip:] / torch.linalg.vector_norm(tang[skip:], dim=-1, keepdim=True)
                n = len(u)
                dc = float(((u @ u.T).sum() - n) / (n * (n - 1))) if n > 1 else math.nan
                rows["network_rel"][l].extend(rel[skip:].tolist())
                rows["network_angle"][l].extend(ang[skip:].tolist())
                rows["flow_speed"][l].extend(sp[skip:].tolist())
                rows["drift_cos"][l].append(dc)
    return {
        "family": family, "arch": w.arch, "layers": w.depth, "sentences": len(ids),
        "tokens_skipped": "the first (attention sink)" if pre else "none",
        **{k: [float(np.median(v)) for v in rows[k]] for k in rows},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=8)
    ap.add_argument("--families", default="minilm,minilm-l3,smollm2")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = [measure(f, args.sentences) for f in args.families.split(",")]
    for r in out:
        print(
            f"{r['family']} ({r['arch']}, {r['sentences']} sentences, tokens skipped: {r['tokens_skipped']})"
        )
        print("layer  network_rel  network_angle  flow_speed  drift_cos")
        for l in range(r["layers"]):
            print(f"{l:5d}  {r['network_rel'][l]:11.3f}  {r['network_angle'][l]:13.3f}  "
                  f"{r['flow_speed'][l]:10.3f}  {r['drift_cos'][l]:9.3f}")  # fmt: skip
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
