"""Review round 7, F1 (iii): SmolLM2's layer 0 alone, flows (a) and (e) from z_0 for T = 1 at K = 16, 64, 256.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round7/layer0_ladder.py [--sentences 24] [--out FILE.json]

Per K: the mean pairwise cosine (sphere tokens, all tokens, mean over the sentences) at depth 1 of the
attention-only flow (a) and of the attention + MLP flow (e). The model's own depth-1 value and z_0's are
printed beside them. rho_0 is the study's scale estimator (mean) on the network's stream. The question is
whether the collapse of (e) at depth 1 belongs to the ODE (it stays at K = 256) or to the Euler steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # review/: common
from common import draw_sentences  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from attnflow.bridge import forward, layer_flow
    from attnflow.bridge.flows import stream_scales
    from attnflow.observables import mean_pairwise_inner_product
    from attnflow.studies.real_model_flows import load_family

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=24)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0, c0 = time.perf_counter(), time.process_time()
    w, tokenize, _ = load_family("smollm2", 0)
    w1 = dataclasses.replace(w, layers=w.layers[:1])
    ids, _ = draw_sentences(tokenize, w.max_length, 0, 24, args.sentences)
    Ks = (16, 64, 256)
    rows = {"model": [], "z0": [], **{f"{v}_K{K}": [] for v in ("attention", "mlp") for K in Ks}}
    with torch.no_grad():
        for t in ids:
            fp = forward(w, t)
            rho = stream_scales(w, fp.hidden_states, "mean")[:1]
            rows["z0"].append(float(mean_pairwise_inner_product(fp.tokens[0])))
            rows["model"].append(float(mean_pairwise_inner_product(fp.tokens[1])))
            for v in ("attention", "mlp"):
                for K in Ks:
                    z = layer_flow(w1, fp.tokens[0], variant=v, steps_per_layer=K, residual_norms=rho)
                    rows[f"{v}_K{K}"].append(float(mean_pairwise_inner_product(z[1])))
    out = {k: float(np.mean(x)) for k, x in rows.items()}
    out |= {"sentences": len(ids), "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    for k, x in out.items():
        print(f"{k:14s} {x:.4f}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
