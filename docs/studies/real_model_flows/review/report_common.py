"""The before -> after tables shared by review/round7/report.py and review/round8/report.py; from round 9 on,
run it directly: ``python docs/studies/real_model_flows/review/report_common.py 8 9 BEFORE.json AFTER.json``.

``main(argv, before_round, after_round)`` reads BEFORE.json AFTER.json (the snapshots regen.py saves) and
prints markdown: verdict counts per directory (holds / fails / depends / inconclusive / unmeasured, then
descriptions and identities; 'unmeasured' = a test record whose main value is unmeasured: step not converged,
collapses, no headroom, an MLP jump), then every record whose verdict, value, reading or null-specificity
label changed. review/round6/report.py keeps its own code (its counts, its margin and asymmetric columns).
"""

from __future__ import annotations

import json

DIRS = {".": "MiniLM-L6 + L3", "permuted": "permuted MiniLM nulls", "random": "random MiniLM nulls",
        "smollm2": "SmolLM2", "permuted_smollm2": "SmolLM2 permuted null",
        "random_smollm2": "SmolLM2 random null"}  # fmt: skip
ORDER = ["holds", "fails", "depends", "inconclusive", "unmeasured", "descriptions", "identities"]


def kind(r: dict) -> str:
    if r["class"] != "test":
        return {"description": "descriptions", "identity": "identities"}[r["class"]]
    reading = str(r.get("reading") or "")
    if r.get("unmeasured_main") or reading.startswith("unmeasured") or (
        r["verdict"] == "fails" and reading.startswith("collapses")
    ):
        return "unmeasured" if r["verdict"] != "fails" else "fails"
    if r["verdict"].startswith("depends"):
        return "depends"
    return r["verdict"]


def counts(snap: dict, d: str) -> str:
    out: dict[str, int] = {}
    for r in snap.values():
        if r["dir"] == d:
            out[kind(r)] = out.get(kind(r), 0) + 1
    return ", ".join(f"{k} {out[k]}" for k in ORDER if k in out)


def fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv: list[str], before_round: int, after_round: int) -> int:
    before, after = (json.load(open(p)) for p in argv[:2])
    print(f"| directory | before (round {before_round}) | after (round {after_round}) |\n|---|---|---|")
    for d, name in DIRS.items():
        print(f"| {name} (`{d}`) | {counts(before, d)} | {counts(after, d)} |")
    for d, name in DIRS.items():
        rows = []
        for rid, a in after.items():
            if a["dir"] != d or a["class"] != "test" and before.get(rid, {}).get("class") == a["class"]:
                continue
            b = before.get(rid, {})
            keys = ("verdict", "reading", "null_specificity")
            if all(b.get(k) == a.get(k) for k in keys) and fmt(b.get("value")) == fmt(a.get("value")):
                continue
            bv = b.get("value") if b.get("value") is not None else b.get("unmeasured_value")
            av = a["value"] if a["value"] is not None else a.get("unmeasured_value")
            was = (b.get("verdict"), kind(b) if b else None)
            changed = "**yes**" if was != (a["verdict"], kind(a)) else ""
            rows.append(
                f"| {rid.removeprefix('flows-')} | {b.get('verdict', '-')} ({fmt(bv)}) | {a['verdict']} "
                f"({fmt(av)}) | {changed} | {a.get('reading') or a['verdict']} | "
                f"{a.get('null_specificity') or ''} |"
            )
        print(f"\n### {name} (`{d}`): {len(rows)} records changed or newly worded\n")
        if rows:
            print("| record | before (value) | after (value) | outcome changed | reading "
                  "| null specificity |\n|---|---|---|---|---|---|")  # fmt: skip
            print("\n".join(rows))
    return 0


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 5 or not (sys.argv[1].isdigit() and sys.argv[2].isdigit()):
        sys.exit("usage: report_common.py BEFORE_ROUND AFTER_ROUND BEFORE.json AFTER.json (e.g. 8 9 ...)")
    sys.exit(main(sys.argv[3:], int(sys.argv[1]), int(sys.argv[2])))
