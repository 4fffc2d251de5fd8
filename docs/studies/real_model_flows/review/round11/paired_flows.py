"""Paired differences between the attention-only flows' over-clustering (review round 10, F6; a description).

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round11/paired_flows.py [--out F]

The records 'attention-overclusters' (a), 'biases-overclusters' (b) and 'model-scores-overclusters' (d) each
score mean over depths 1..L of (mean cosine of the flow - the model's), sphere tokens. Their verdicts differ
in MiniLM-L3 ((a) inconclusive, (b) depends, (d) holds) only by how far each paired lower bound clears the
threshold. This script reads the stored per-sentence mean cosines (no flow is run) and gives, per family and
per stored step count K, the paired differences (d) - (a) and (b) - (a) of that quantity (the model cancels:
mean over depths 1..L of cos(x) - cos(a)), with a percentile bootstrap over sentences (1000 paired resamples,
seed 0, the study's ``_boot``). A difference whose interval contains 0 does not separate the two flows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path("docs/studies/real_model_flows")
DIRS = {".": ("minilm", "minilm-l3"), "smollm2": ("smollm2",)}
FLOWS = ("model_scores", "biases")


def paired(res: dict, x: str, steps: int | None) -> dict:
    from attnflow.studies.real_model_flows import _arr, _boot

    a = _arr(res, "sphere", "attention", "cos", None, steps=steps)
    f = _arr(res, "sphere", x, "cos", None, steps=steps)
    both = np.stack([f, a], axis=-1)

    def q(_m, b):
        return float(np.mean(b[..., 0].mean(0)[1:] - b[..., 1].mean(0)[1:]))

    v, ci = _boot(q, a, both, 1000, 0)
    return {"value": v, "ci95": list(ci), "separates": bool(ci[0] > 0 or ci[1] < 0)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("paired_flows.json"))
    args = ap.parse_args(argv)
    out = {}
    for d, fams in DIRS.items():
        s = json.loads((ROOT / d / "summary.json").read_text())
        for fam in fams:
            res = s["families"][fam]["verdict_data"]
            levels = sorted(int(k) for k in ((res.get("step_ladder") or {}).get("levels") or {}))
            out[fam] = {}
            for K in [None, *levels]:
                key = "run's step" if K is None else f"K = {K}"
                try:
                    out[fam][key] = {f"{x} - attention": paired(res, x, K) for x in FLOWS}
                except KeyError:  # a rung the step rule ran for some flows only (step_per_flow)
                    continue
                for name, r in out[fam][key].items():
                    print(f"{fam:10s} {key:11s} {name:24s} {r['value']:+.4f} "
                          f"[{r['ci95'][0]:+.4f}, {r['ci95'][1]:+.4f}] separates={r['separates']}")
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
