"""What a test run cost, per test and per worker: ``python scripts/test_times.py DIR [--table FILE]``.

``DIR`` holds the per-test lines that tests/conftest.py writes under ``ATTNFLOW_TEST_TIMES=DIR`` (one
``<worker>.jsonl`` per pytest-xdist worker). Printed: per worker its busy time (the sum of its tests' wall
times), its span (first start to last end), the idle time at its end (until the last worker finished), and
the CPU seconds of its tests (their process and the child processes they waited for); then the ``N`` tests
with the most wall time, with their CPU time and worker.

``--table FILE`` writes the durations table that tests/conftest.py orders the collected tests by (the files
with the most CPU time first): ``{file: CPU seconds of its tests}`` for every file of at least ``--min-s``
CPU seconds (default 1), rounded to 1 s. CPU time, not wall time: on a shared machine the wall times are
inflated by the load, unevenly; the table only orders.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load(directory: Path) -> list[dict]:
    rows = []
    for f in sorted(directory.glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"no per-test times in {directory}: run pytest with ATTNFLOW_TEST_TIMES={directory}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--table", type=Path, help="write the durations table (JSON) here")
    ap.add_argument("--min-s", type=float, default=1.0, help="cheapest file listed in --table (CPU s)")
    args = ap.parse_args(argv)
    rows = load(args.dir)
    t0 = min(r["start"] for r in rows)
    t1 = max(r["end"] for r in rows)
    print(f"{len(rows)} tests, {t1 - t0:.0f} s from the first start to the last end")
    for w in sorted({r["worker"] for r in rows}):
        mine = [r for r in rows if r["worker"] == w]
        busy = sum(r["end"] - r["start"] for r in mine)
        cpu = sum(r["cpu"] + r["cpu_children"] for r in mine)
        first, last = min(r["start"] for r in mine), max(r["end"] for r in mine)
        print(
            f"  {w}: {len(mine)} tests, busy {busy:.0f} s, span {last - first:.0f} s "
            f"(starts at +{first - t0:.0f} s, idle {t1 - last:.0f} s at the end), CPU {cpu:.0f} s"
        )
    cpu_all = sum(r["cpu"] + r["cpu_children"] for r in rows)
    print(f"  CPU of all tests: {cpu_all:.0f} s")
    print(f"the {args.top} longest tests (wall s, CPU s of the test + its children, worker, start):")
    for r in sorted(rows, key=lambda r: r["start"] - r["end"])[: args.top]:
        print(
            f"  {r['end'] - r['start']:7.1f} {r['cpu']:6.1f} + {r['cpu_children']:6.1f}  {r['worker']:>5} "
            f"+{r['start'] - t0:4.0f}  {r['id']}"
        )
    if args.table:
        files: dict[str, float] = {}
        for r in rows:
            f = r["id"].split("::")[0]
            files[f] = files.get(f, 0.0) + r["cpu"] + r["cpu_children"]
        table = {f: round(s) for f, s in files.items() if s >= args.min_s}
        table = dict(sorted(table.items(), key=lambda kv: (-kv[1], kv[0])))
        args.table.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote the CPU seconds of {len(table)} files (>= {args.min_s:g} s) to {args.table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
