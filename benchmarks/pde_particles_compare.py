"""Key-by-key comparison of two ``pde_particles`` summaries (``OLD NEW`` on the command line).

Walks the study's keys (s1, s2, s1_weights, closed_forms, ledger_order, sht_ducc0, densities_file, verdicts),
prints every number that moved with its relative change (largest first) and the timing keys apart.
"""

import json
import sys

a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
TIMING = {"pde_seconds", "particle_seconds", "ms_per_roundtrip"}
keys = ["s1", "s2", "s1_weights", "closed_forms", "ledger_order", "sht_ducc0", "densities_file", "verdicts"]
moved, timing, same = [], [], 0


def walk(x, y, p):
    global same
    if isinstance(x, dict) and isinstance(y, dict):
        for k in list(x) + [k for k in y if k not in x]:
            q = p + "/" + k
            if k not in x or k not in y:
                moved.append((q, "only in " + ("new" if k not in x else "old"), None))
                continue
            if k in TIMING:
                timing.append((q, x[k], y[k]))
                continue
            walk(x[k], y[k], q)
    elif isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            moved.append((p, f"length {len(x)} -> {len(y)}", None))
            return
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            walk(u, v, f"{p}[{i}]")
    elif isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        if x == y:
            same += 1
        else:
            rel = abs(y - x) / max(abs(x), 1e-300)
            moved.append((p, f"{x!r} -> {y!r}", rel))
    else:
        if x == y:
            same += 1
        else:
            moved.append((p, f"{str(x)[:80]!r} -> {str(y)[:80]!r}", None))


for k in keys:
    walk(a.get(k), b.get(k), k)
print(f"{same} leaves equal, {len(moved)} moved, {len(timing)} timing keys")
for p, s, r in sorted(moved, key=lambda m: -(m[2] or 1e9)):
    print(f"{p}: {s}" + (f" (rel {r:.2e})" if r is not None else ""))
print("-- timing keys (s / ms)")
for p, x, y in timing:
    print(p, x, "->", y)
