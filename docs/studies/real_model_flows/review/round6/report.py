"""The before -> after tables of review/round6_applied.md, from the snapshots regen.py saves.

Usage: python docs/studies/real_model_flows/review/round6/report.py BEFORE.json AFTER.json ASYMMETRIC.json
Prints markdown: verdict counts per directory (before, after; 'fails where measurable' counted apart from
'fails'), then every record whose verdict, value or reading changed, with its verdict under the round-5
asymmetric paired rule and its verdict at the margin x0.5 / x1.5.
"""

from __future__ import annotations

import json
import sys

DIRS = {".": "MiniLM-L6 + L3", "permuted": "permuted MiniLM nulls", "random": "random MiniLM nulls",
        "smollm2": "SmolLM2 (rerun, ladder)", "permuted_smollm2": "SmolLM2 permuted null",
        "random_smollm2": "SmolLM2 random null"}  # fmt: skip


def kind(r: dict) -> str:
    if r["class"] != "test":
        return r["class"] + "s"
    v = r["verdict"]
    if v.startswith("depends"):
        return "depends"
    if v == "fails" and str(r.get("reading") or "").startswith("fails where measurable"):
        return "fails where measurable"
    if v == "fails" and str(r.get("reading") or "").startswith("collapses"):
        return "fails (collapses)"
    return v


def counts(snap: dict, d: str) -> str:
    out: dict[str, int] = {}
    for r in snap.values():
        if r["dir"] == d:
            out[kind(r)] = out.get(kind(r), 0) + 1
    order = ["holds", "fails", "fails (collapses)", "fails where measurable", "depends", "inconclusive",
             "descriptions", "identitys"]  # fmt: skip
    return ", ".join(f"{k.replace('identitys', 'identities')} {out[k]}" for k in order if k in out)


def fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv: list[str]) -> int:
    before, after, asym = (json.load(open(p)) for p in argv[:3])
    print("| directory | before (round 5) | after (round 6) |\n|---|---|---|")
    for d, name in DIRS.items():
        print(f"| {name} (`{d}`) | {counts(before, d)} | {counts(after, d)} |")
    for d, name in DIRS.items():
        rows = []
        for rid, a in after.items():
            if a["dir"] != d:
                continue
            b = before.get(rid, {})
            same = (b.get("verdict"), b.get("value"), b.get("null_specificity")) == (
                a["verdict"], a["value"], a.get("null_specificity"))  # fmt: skip
            if same and not (a.get("reading") or "").startswith(("main ", "fails where", "collapses")):
                continue
            bv = b.get("value") if b.get("value") is not None else b.get("unmeasured_value")
            av = a["value"] if a["value"] is not None else a.get("unmeasured_value")
            mv = a.get("margin_variants") or {}
            reading = a.get("reading") or a["verdict"]
            if a.get("null_specificity"):
                reading += f"; {a['null_specificity']}"
            rows.append(
                f"| {rid.removeprefix('flows-')} | {b.get('verdict', '-')} ({fmt(bv)}) | {a['verdict']} "
                f"({fmt(av)}) | {reading} | {asym.get(rid, {}).get('verdict', '-')} | "
                + "; ".join(f"{k}: {v}" for k, v in mv.items())
                + " |"
            )
        print(f"\n### {name} (`{d}`): {len(rows)} records changed or newly worded\n")
        if rows:
            print("| record | before (value) | after (value) | reading | round-5 asymmetric rule | "
                  "margin x0.5 / x1.5 (whole record) |\n|---|---|---|---|---|---|")  # fmt: skip
            print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
