"""Regenerate every real_model_flows record directory, the nulls first (review round 5, F8).

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round5/regen.py [ROOT] [--before before.json]

ROOT (default ``docs/studies/real_model_flows``) holds the trained summaries (``.``: MiniLM-L6 and L3;
``smollm2``) and the nulls (``permuted``, ``random``, ``permuted_smollm2``, ``random_smollm2``). The null
directories are regenerated first (``scripts/regen_verdicts.py``'s ``regenerate``); their verdicts are
written into each trained summary under ``null_outcomes`` (trained family -> null family -> record ->
verdict, value: :func:`attnflow.studies.real_model_flows.null_outcomes`), and the trained directories are
regenerated after, so that ``records(summary, config)`` stays a pure function of the committed summary
(``regen_verdicts.py --check`` agrees). ``--before FILE`` first saves every record's verdict and value.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

NULLS = ("permuted", "random", "permuted_smollm2", "random_smollm2")
TRAINED = (".", "smollm2")


def _snapshot(root: Path) -> dict:
    out = {}
    for d in (*TRAINED, *NULLS):
        for r in json.loads((root / d / "summary.json").read_text()).get("verdicts", []):
            out[r["id"]] = {
                "verdict": r["verdict"],
                "value": r.get("result", {}).get("value"),
                "flow_value": r.get("result", {}).get("value"),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[5] / "scripts"))
    from regen_verdicts import main as regen

    from attnflow.studies.real_model_flows import null_base, null_outcomes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--before", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.before is not None:
        args.before.write_text(json.dumps(_snapshot(args.root), indent=1))
    regen([str(args.root / d) for d in NULLS])
    outs = {}
    for d in NULLS:
        s = json.loads((args.root / d / "summary.json").read_text())
        outs |= null_outcomes(s["verdicts"], list(s["families"]))
    for d in TRAINED:
        p = args.root / d / "summary.json"
        text = p.read_text()
        s = json.loads(text)
        s["null_outcomes"] = {
            f: {nf: o for nf, o in outs.items() if null_base(nf) == f} for f in s["families"]
        }
        lines = text.splitlines()
        indent = (len(lines[1]) - len(lines[1].lstrip(" "))) if len(lines) > 1 else 1
        p.write_text(json.dumps(s, indent=indent or 1) + ("\n" if text.endswith("\n") else ""))
    return regen([str(args.root / d) for d in TRAINED])


if __name__ == "__main__":
    sys.exit(main())
