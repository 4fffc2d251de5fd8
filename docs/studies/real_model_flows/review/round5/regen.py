"""Regenerate every real_model_flows record directory, the nulls first (review round 5, F8).

Usage, from the repository root with ``src`` on the path::

    python docs/studies/real_model_flows/review/round5/regen.py [ROOT] [--before before.json]

ROOT (default ``docs/studies/real_model_flows``) holds the trained summaries (``.``: MiniLM-L6 and L3;
``smollm2``) and the nulls (``permuted``, ``random``, ``permuted_smollm2``, ``random_smollm2``). The null
directories are regenerated first (``scripts/regen_verdicts.py``'s ``regenerate``); their verdicts are
written into each trained summary under ``null_outcomes`` (trained family -> null family -> record ->
verdict, value: :func:`attnflow.studies.real_model_flows.null_outcomes`), and the trained directories are
regenerated after, so that ``records(summary, config)`` stays a pure function of the committed summary
(``regen_verdicts.py --check`` agrees). ``--before FILE`` first saves every record's verdict and value;
``--tables`` then rebuilds every
table.md / tables.json (``scripts/regen_tables.py --allow-vanished``) and replaces explain.md's
"#### FAMILY: verdict records" blocks by the regenerated ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

NULLS = ("permuted", "random", "permuted_smollm2", "random_smollm2")
TRAINED = (".", "smollm2")
#: a verdict-table block after its heading's '#'s: blank line, note paragraph, blank line, table rows
BLOCK = r"(\S+): verdict records\n(\n(?:[^\n|#][^\n]*\n)+\n(?:\|[^\n]*\n)+)"


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
    from regen_tables import main as tables_main
    from regen_verdicts import main as regen

    from attnflow.studies.real_model_flows import null_base, null_outcomes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=Path("docs/studies/real_model_flows"))
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--trained-only", action="store_true", help="nulls' records as committed")
    ap.add_argument(
        "--trained", nargs="+", default=list(TRAINED), help="the trained directories to regenerate"
    )
    ap.add_argument("--tables", action="store_true", help="then table.md, tables.json, explain.md's tables")
    args = ap.parse_args(argv)
    if args.before is not None:
        args.before.write_text(json.dumps(_snapshot(args.root), indent=1))
    if not args.trained_only:
        regen([str(args.root / d) for d in NULLS])
    outs = {}
    for d in NULLS:
        s = json.loads((args.root / d / "summary.json").read_text())
        outs |= null_outcomes(s["verdicts"], list(s["families"]))
    for d in args.trained:
        p = args.root / d / "summary.json"
        text = p.read_text()
        s = json.loads(text)
        s["null_outcomes"] = {
            f: {nf: o for nf, o in outs.items() if null_base(nf) == f} for f in s["families"]
        }
        lines = text.splitlines()
        indent = (len(lines[1]) - len(lines[1].lstrip(" "))) if len(lines) > 1 else 1
        p.write_text(json.dumps(s, indent=indent or 1) + ("\n" if text.endswith("\n") else ""))
    rc = regen([str(args.root / d) for d in args.trained])
    if args.tables:
        tables_main([*(str(args.root / d) for d in (*args.trained, *NULLS)), "--allow-vanished"])
        explain_tables(args.root)
    return rc


def explain_tables(root: Path) -> None:
    """Replace each '#### FAMILY: verdict records' block of explain.md by the table.md block of that name
    (the same generated table, one heading level down)."""
    import re

    path = root / "explain.md"
    if not path.is_file():
        return
    text = path.read_text()
    blocks = {}
    for d in (*TRAINED, *NULLS):
        t = (root / d / "table.md").read_text()
        for m in re.finditer("^### " + BLOCK, t, flags=re.M):
            blocks[m.group(1)] = m.group(2)

    def sub(m):
        fam = m.group(1)
        return f"#### {fam}: verdict records\n{blocks[fam]}" if fam in blocks else m.group(0)

    text = re.sub("^#### " + BLOCK, sub, text, flags=re.M)
    path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
