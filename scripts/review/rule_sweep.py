"""Reviewer check, round 2 (issue 26 part 3): which verdicts flip under a choice the study's robustness checks
do not vary -- the saturation rule's tolerance / depth share, the declared cluster radius, the bootstrap seed?

Rebuilds the records from the committed summaries (real_model_flows.records(summary, config), no rerun) under
each variant config and prints every verdict that differs from the committed one.
Usage: PYTHONPATH=src python scripts/review/rule_sweep.py
"""

import json
from pathlib import Path

from attnflow.studies.real_model_flows import FlowsConfig, records

ROOT = Path("docs/studies/real_model_flows")
RUNS = ["", "smollm2", "permuted", "permuted_smollm2"]
VARIANTS = {
    "saturation_tolerance=0.05": {"saturation_tolerance": 0.05},
    "saturation_tolerance=0.2": {"saturation_tolerance": 0.2},
    "saturation_depth_share=0.45": {"saturation_depth_share": 0.45},
    "cluster_threshold=0.6": {"cluster_threshold": 0.6},
    "cluster_threshold=1.2": {"cluster_threshold": 1.2},
    "bootstrap seed=7": {"seed": 7},
}

for run in RUNS:
    d = ROOT / run
    summary = json.loads((d / "summary.json").read_text())
    cfg = json.loads((d / "study.json").read_text())["config"]
    base = {r["id"]: r for r in summary["verdicts"]}
    for name, change in VARIANTS.items():
        recs = [r.to_json() for r in records(summary, FlowsConfig(**{**cfg, **change}))]
        for r in recs:
            b = base[r["id"]]
            if r["verdict"] != b["verdict"]:
                val = (r.get("result") or {}).get("value")
                ci = (r.get("result") or {}).get("ci95")
                print(f"{run or 'minilm*'} | {name} | {r['id']}: {b['verdict']} -> {r['verdict']}"
                      f" (value {val:.3f}, CI {ci})" if isinstance(val, float) else "")
