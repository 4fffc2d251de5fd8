"""Regenerate every real_model_flows record directory under the review-round-6 rules, the nulls first.

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round6/regen.py [ROOT] [--before FILE] [--after FILE]
        [--asymmetric FILE] [--tables]

As ``review/round5/regen.py`` (the nulls' records regenerated first, their verdicts written into each trained
summary under ``null_outcomes``, then the trained records), with one addition (review round 6, F7): each
null's entry says whether that null ran under the step ladder (``ladder``: its summary keeps a
``step_ladder``), so that ``records`` never labels a trained record with a null run without it.
``--before`` / ``--after`` save every record's verdict, value and reading before / after; ``--asymmetric``
saves every record's verdict under the round-5 asymmetric paired rule (config ``control_paired_rule =
asymmetric``, everything else as committed), computed from the regenerated summaries without writing them
(the report's F2 column); ``--tables`` rebuilds table.md / tables.json and explain.md's verdict tables.
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
            res = r.get("result", {})
            out[r["id"]] = {
                "dir": d, "class": r["class"], "verdict": r["verdict"], "value": res.get("value"),
                "reading": res.get("reading"), "null_specificity": res.get("null_specificity"),
                "unmeasured_main": res.get("unmeasured_main"), "margin_variants": res.get("margin_variants"),
                "unmeasured_value": res.get("unmeasured_value"),
            }  # fmt: skip
    return out


def _asymmetric(root: Path) -> dict:
    """Every record's verdict with the round-5 paired rule (config control_paired_rule = asymmetric)."""
    from attnflow.studies import get_study
    from attnflow.studies.real_model_flows import records

    study = get_study("real_model_flows")
    out = {}
    for d in (*NULLS, *TRAINED):
        meta = json.loads((root / d / "study.json").read_text())
        summary = json.loads((root / d / "summary.json").read_text())
        fields = study.Config.model_fields
        cfg = {k: v for k, v in meta.get("config", {}).items() if k in fields}
        c = study.Config.model_validate({**cfg, "control_paired_rule": "asymmetric"})
        for r in records(summary, c):
            out[r.id] = {"verdict": r.verdict, "reading": r.result.get("reading")}
    return out


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[5] / "scripts"))
    from regen_tables import main as tables_main
    from regen_verdicts import main as regen

    from attnflow.studies.real_model_flows import null_base, null_outcomes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--after", type=Path, default=None)
    ap.add_argument("--asymmetric", type=Path, default=None)
    ap.add_argument("--tables", action="store_true", help="then table.md, tables.json, explain.md's tables")
    args = ap.parse_args(argv)
    if args.before is not None:
        args.before.write_text(json.dumps(_snapshot(args.root), indent=1))
    regen([str(args.root / d) for d in NULLS])
    outs = {}
    for d in NULLS:
        s = json.loads((args.root / d / "summary.json").read_text())
        ladder = {f: bool(x.get("verdict_data", {}).get("step_ladder")) for f, x in s["families"].items()}
        outs |= null_outcomes(s["verdicts"], list(s["families"]), ladder)
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
    rc = regen([str(args.root / d) for d in TRAINED])
    if args.after is not None:
        args.after.write_text(json.dumps(_snapshot(args.root), indent=1))
    if args.asymmetric is not None:
        args.asymmetric.write_text(json.dumps(_asymmetric(args.root), indent=1))
    if args.tables:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "round5"))
        from regen import explain_tables

        tables_main([*(str(args.root / d) for d in (*TRAINED, *NULLS)), "--allow-vanished"])
        explain_tables(args.root)
    return rc


if __name__ == "__main__":
    sys.exit(main())
