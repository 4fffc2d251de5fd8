"""Key-by-key comparison of two study summaries.

``python benchmarks/compare_summaries.py OLD NEW [--skip K ...]``; with two directories of study
directories (``OLD/<study>/summary.json``), one line per study found in both, then what moved.

Walks every key of the two ``summary.json`` files except the runner's record and the timing keys
(``--skip`` adds more), prints how many numbers are equal bit for bit, every number that moved with its
relative change (largest first), every other difference (strings, lengths, keys only on one side), and
the verdicts of both sides side by side (id: verdict). Exit status 0 always: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: the runner's record and wall-clock keys: not results
RUNNER = {
    "study", "description", "config", "quick", "attnflow_version", "versions", "command", "started", "runs",
    "status", "ended", "wall_time_s", "figures", "run",
}  # fmt: skip
TIMING = {"timing_s", "wall_s", "cpu_s", "elapsed_s", "pde_seconds", "particle_seconds", "ms_per_roundtrip"}


def compare(a, b, skip: set[str]) -> tuple[int, list, list]:
    same, moved, other = 0, [], []

    def walk(x, y, p):
        nonlocal same
        if isinstance(x, dict) and isinstance(y, dict):
            for k in list(x) + [k for k in y if k not in x]:
                if k in skip:
                    continue
                q = f"{p}/{k}"
                if k not in x or k not in y:
                    other.append((q, "only in " + ("new" if k not in x else "old")))
                    continue
                walk(x[k], y[k], q)
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                other.append((p, f"length {len(x)} -> {len(y)}"))
                return
            for i, (u, v) in enumerate(zip(x, y, strict=True)):
                walk(u, v, f"{p}[{i}]")
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            if x == y or (x != x and y != y):  # equal, or both NaN
                same += 1
            else:
                moved.append((p, x, y, abs(y - x) / max(abs(x), 1e-300)))
        elif x != y:
            other.append((p, f"{x!r} -> {y!r}"[:200]))
        else:
            same += 1

    walk(a, b, "")
    moved.sort(key=lambda m: -m[3])
    return same, moved, other


def timing_keys(study: str) -> set[str]:
    """The keys the study declares wall-clock (``Study.timing_keys``), if attnflow knows the study."""
    try:
        from attnflow.studies import get_study

        return set(get_study(study).timing_keys)
    except Exception:  # noqa: BLE001 - an unknown study or no attnflow: only the common timing keys
        return set()


def compare_dirs(old: Path, new: Path, skip: set[str], show: int) -> None:
    """One line per study directory found in both ``old`` and ``new`` (e.g. two runs of every quick variant),
    then the numbers that moved in each study where some did."""
    names = sorted(
        p.name
        for p in old.iterdir()
        if (p / "summary.json").is_file() and (new / p.name / "summary.json").is_file()
    )
    only = sorted(
        {p.name for p in old.iterdir() if (p / "summary.json").is_file()}
        ^ {p.name for p in new.iterdir() if (p / "summary.json").is_file()}
    )
    print(f"{len(names)} studies in both; only in one: {', '.join(only) or 'none'}")
    details = []
    for name in names:
        a, b = (json.loads((d / name / "summary.json").read_text()) for d in (old, new))
        same, moved, other = compare(a, b, skip | timing_keys(name))
        vo = {r["id"]: r.get("verdict") for r in a.get("verdicts", [])}
        vn = {r["id"]: r.get("verdict") for r in b.get("verdicts", [])}
        changed = sum(vo.get(k) != vn.get(k) for k in set(vo) | set(vn))
        top = f", largest relative change {moved[0][3]:.3g}" if moved else ""
        print(
            f"{name}: {same} equal, {len(moved)} moved{top}, {len(other)} other, {changed} verdicts changed"
        )
        if moved or other:
            details.append((name, moved, other))
    for name, moved, other in details:
        print(f"-- {name}")
        for p, x, y, rel in moved[:show]:
            print(f"  {rel:.3g}  {p}: {x!r} -> {y!r}")
        for p, what in other[:show]:
            print(f"  {p}: {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--skip", nargs="*", default=[])
    ap.add_argument("--show", type=int, default=30, help="moved numbers to print")
    a = ap.parse_args()
    if Path(a.old).is_dir() and Path(a.new).is_dir():
        compare_dirs(Path(a.old), Path(a.new), RUNNER | TIMING | set(a.skip), a.show)
        return
    with open(a.old) as f:
        old = json.load(f)
    with open(a.new) as f:
        new = json.load(f)
    skip = RUNNER | TIMING | set(a.skip)
    same, moved, other = compare(old, new, skip)
    print(f"{same} values equal, {len(moved)} numbers moved, {len(other)} other differences")
    for p, x, y, rel in moved[: a.show]:
        print(f"  {rel:.3g}  {p}: {x!r} -> {y!r}")
    for p, what in other[: a.show]:
        print(f"  {p}: {what}")
    vo = {r["id"]: r.get("verdict") for r in old.get("verdicts", [])}
    vn = {r["id"]: r.get("verdict") for r in new.get("verdicts", [])}
    changed = [k for k in sorted(set(vo) | set(vn)) if vo.get(k) != vn.get(k)]
    print(f"verdicts: {len(vo)} old, {len(vn)} new, {len(changed)} changed")
    for k in changed:
        print(f"  {k}: {vo.get(k)} -> {vn.get(k)}")


if __name__ == "__main__":
    main()
