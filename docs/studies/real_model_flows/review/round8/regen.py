"""Regenerate every real_model_flows record directory under the review-round-8 rules, the nulls first.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round8/regen.py [ROOT] [--before F] [--after F] [--tables]

Round 7's procedure (``review/round7/regen.py`` -> ``review/round6/regen.py``: the nulls' records first, their
verdicts written into each trained summary under ``null_outcomes``, then the trained records), after one
step (review round 8, F4): the range of ``mlp_jump_factor`` that flags the same layers in every family's
per-layer MLP table (``verdict_data.mlp_layers``) is written into every summary under ``mlp_factor_range``,
which the jump reading names. The rules are the config fields dated 2026-12-04 round 8
(``guard_time_flows_only``, ``room_per_depth``, ``room_min_depth_share``, ``mlp_jump_reading``,
``caps_named``). No flow is run: everything is re-scored from the stored per-sentence data.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIRS = (".", "smollm2", "permuted", "random", "permuted_smollm2", "random_smollm2")


def factor_range(root: Path) -> dict | None:
    """Write ``mlp_factor_range`` (every family's table, config mlp_jump_factor) into every summary."""
    from attnflow.studies import get_study
    from attnflow.studies.real_model_flows import mlp_factor_range

    study = get_study("real_model_flows")
    tabs, factor = {}, None
    for d in DIRS:
        s = json.loads((root / d / "summary.json").read_text())
        meta = json.loads((root / d / "study.json").read_text())
        fields = study.Config.model_fields
        c = study.Config.model_validate({k: v for k, v in meta.get("config", {}).items() if k in fields})
        factor = c.mlp_jump_factor if factor is None else factor
        if c.mlp_jump_factor != factor:
            raise ValueError(f"mlp_jump_factor differs between directories ({factor} / "
                             f"{c.mlp_jump_factor} in {d}): one range needs one factor: set it equal in "
                             "every study.json")
        tabs |= {f: x.get("verdict_data", {}).get("mlp_layers") for f, x in s["families"].items()}
    rng = mlp_factor_range(tabs, factor)
    for d in DIRS:
        p = root / d / "summary.json"
        text = p.read_text()
        s = json.loads(text)
        s["mlp_factor_range"] = rng
        lines = text.splitlines()
        indent = (len(lines[1]) - len(lines[1].lstrip(" "))) if len(lines) > 1 else 1
        p.write_text(json.dumps(s, indent=indent or 1) + ("\n" if text.endswith("\n") else ""))
    return rng


if __name__ == "__main__":
    argv = sys.argv[1:]
    pos = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] not in
                                                                        ("--before", "--after"))]  # fmt: skip
    root = Path(pos[0]) if pos else Path("docs/studies/real_model_flows")
    if "--before" in argv:  # the snapshot before anything is rewritten
        sys.path.insert(0, str(HERE.parent / "round6"))
        from regen import _snapshot

        Path(argv[argv.index("--before") + 1]).write_text(json.dumps(_snapshot(root), indent=1))
        i = argv.index("--before")
        argv = argv[:i] + argv[i + 2:]
    print("mlp_factor_range:", factor_range(root))
    sys.argv = [str(HERE.parent / "round7" / "regen.py"), *argv]
    sys.path.insert(0, str(HERE.parent / "round7"))
    import runpy

    runpy.run_path(str(HERE.parent / "round7" / "regen.py"), run_name="__main__")
