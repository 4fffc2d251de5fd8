"""Regenerate every real_model_flows record directory under the review-round-11 rules, the nulls first.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round11/regen.py [ROOT] [--before F] [--after F] [--tables]

First the committed scale check (``scale_check_<family>_K16.json``; review round 11, F1) is written
into the SmolLM2 summaries under ``families[fam].scale_source_check`` (K = 16, the records' reported
rung). Then round 8's procedure (``review/round8/regen.py``: the MLP factor range, then round 7's
nulls-first order) runs with the config fields dated 2026-12-04 round 11 at their defaults:
``scale_source_rule`` (F1: a record referenced to (n) in a pre-LN model does not let a fail stand
without room, and names the scale), ``holds_reachable_check`` (F5: a 'follows' record whose perfect
flow would not pass the paired stand-still test says it could not have held, and a null that holds is
then no contrast) and ``statement_names_fit`` (F3, F8: the fitted-time statement names the
teacher-forced agreement fit). No flow is run.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKS = {"smollm2": ("smollm2", "smollm2"), "permuted_smollm2": ("smollm2-permuted", "smollm2-permuted")}


def scale_source(root: Path) -> None:
    """Write the committed scale check into the SmolLM2 summaries (families[fam].scale_source_check)."""
    from attnflow.studies.real_model_flows import FlowsConfig

    for d, (fam, tag) in CHECKS.items():
        src = HERE / f"scale_check_{tag}_K16.json"
        x = json.loads(src.read_text())
        if not x["step1_match"]["ok"]:
            raise SystemExit(f"{src}: the check did not reproduce the committed record; not written")
        g = x["gaps_depths_1_to_L"]
        sc = {
            "K": x["K"],
            "source": f"review/round11/{src.name}",
            "flow_at_model_scale": g["a_rho_model_vs_no_mlp"],
            "flow_at_n_scale": g["a_rho_n_vs_no_mlp"],
            "collapse": g["collapse_vs_no_mlp"],
            "flow_at_n_scale_minus_collapse": g["paired_diff_vs_no_mlp_(a_rho_n - collapse)"],
            "rho_ratio_model_over_n": x["rho"]["ratio_model_over_n_mean"],
            "margin": FlowsConfig.model_fields["control_margin_cos_gap"].default,
        }
        p = root / d / "summary.json"
        text = p.read_text()
        s = json.loads(text)
        if fam not in s["families"]:
            raise SystemExit(f"{p}: no family {fam!r}")
        s["families"][fam]["scale_source_check"] = sc
        lines = text.splitlines()
        indent = (len(lines[1]) - len(lines[1].lstrip(" "))) if len(lines) > 1 else 1
        p.write_text(json.dumps(s, indent=indent or 1) + ("\n" if text.endswith("\n") else ""))
        print(f"{p}: scale_source_check written ({src.name})")


if __name__ == "__main__":
    # round 8 takes the --before snapshot of the records; the scale check written first changes no record
    argv = sys.argv[1:]
    flags = ("--before", "--after")
    pos = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] not in flags)]
    scale_source(Path(pos[0]) if pos else Path("docs/studies/real_model_flows"))
    sys.argv = [str(HERE.parent / "round8" / "regen.py"), *sys.argv[1:]]
    sys.path.insert(0, str(HERE.parent / "round8"))
    runpy.run_path(str(HERE.parent / "round8" / "regen.py"), run_name="__main__")
