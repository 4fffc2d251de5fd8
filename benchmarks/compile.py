"""What a first run compiles: numba compile time by function and specialisation, on a fresh cache.

    python benchmarks/compile.py [--scenario readme|main|all] [--main-runs K] [--json FILE]

Each scenario runs twice in a fresh subprocess with its own ``NUMBA_CACHE_DIR``: first on an empty cache
(what a new user, a new virtual environment, a CI run or a Dask worker pays), then on the cache the first
process left (what every later run pays). numba's ``numba:compile`` events are recorded in the child;
a compile that happens inside another (an inlined callee) is nested, so each specialisation gets its
*inclusive* time and its *exclusive* time (inclusive less its nested compiles). The table lists every
(function, signature) compiled, the total compile time (the sum of the outermost compiles) and the wall
time of the scenario in both processes.

Scenarios
---------
readme
    The first Python example of README.md (the first ```python block, executed as it is).
main
    The main job's runs (the ``massucco2026`` manifest's regimes, every H, in the job's order) at the job's
    sizes and precision (float32, n = 300, 20 paths), each for :data:`MAIN_STEPS` steps: the specialisations
    the full job compiles (the kernel's serial or parallel passes are chosen by size, and the quick
    variant's float64 is another specialisation). ``runs`` gives each run's compile time: the first run's
    is what a user waits before the first step. ``--main-runs K`` stops after the first K runs.

The machine is shared and noisy: compare the rows of one run with each other (which function costs
what), not absolute seconds across runs. The child's process CPU time (``cpu_fresh_s``, ``cpu_cached_s``)
is recorded besides the wall times: compiling is single-threaded, so on a loaded machine the CPU time is
the closer measure of what an idle machine would wait; the load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: steps of each run of the 'main' scenario (a record is taken every 10 steps)
MAIN_STEPS = 10
#: (run name, start, end) of each run of the scenario in the child, on numba's event clock (time.time)
_SPANS: list[tuple[str, float, float]] = []


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"```python\n(.*?)```", text, re.S)
    if m is None:
        raise SystemExit("README.md has no ```python block: nothing to time for the 'readme' scenario")
    return m.group(1)


def _run_scenario(name: str, main_runs: int | None = None) -> None:
    if name == "readme":
        code = _readme_example()
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    elif name == "main":
        from attnflow.experiments.reproduce import load_manifest, regime_configs
        from attnflow.experiments.store import run_experiment

        manifest = load_manifest("massucco2026")
        with tempfile.TemporaryDirectory() as tmp:
            for _, _, cfg in regime_configs(manifest)[:main_runs]:
                cfg["integrator"]["t1"] = MAIN_STEPS * float(cfg["integrator"]["dt"])
                t0 = time.time()
                run_experiment(cfg, Path(tmp) / cfg["name"], progress=False)
                _SPANS.append((cfg["name"], t0, time.time()))
    else:
        raise SystemExit(f"unknown scenario {name!r}; valid: readme, main")


def child(name: str, main_runs: int | None = None) -> dict:
    """Run scenario ``name`` in this process and return its compile events and wall time."""
    t0 = time.perf_counter()
    import numba  # noqa: F401  (imported before the recorder so its own set-up is not counted)
    from numba.core import event

    t_import = time.perf_counter() - t0
    with event.install_recorder("numba:compile") as rec:
        t1 = time.perf_counter()
        c1 = time.process_time()
        _run_scenario(name, main_runs)
        wall = time.perf_counter() - t1
        cpu = time.process_time() - c1
    # pair START/END events as a stack: compiles nest (a caller compiles its callees inside)
    stack: list[dict] = []
    done: list[dict] = []
    for ts, ev in rec.buffer:
        data = ev.data or {}
        disp = data.get("dispatcher")
        fn = getattr(disp, "py_func", None)
        qual = f"{fn.__module__}.{fn.__qualname__}" if fn is not None else str(disp)
        key = (qual, str(data.get("args")))
        if ev.status.name == "START":
            stack.append(
                {"function": key[0], "signature": key[1], "start": ts, "children": 0.0, "depth": len(stack)}
            )
        else:
            item = stack.pop()
            item["end"] = ts
            item["inclusive_s"] = ts - item.pop("start")
            item["exclusive_s"] = item["inclusive_s"] - item.pop("children")
            if stack:
                stack[-1]["children"] += item["inclusive_s"]
            done.append(item)
    runs = []
    for run, a, b in _SPANS:  # the outermost compiles inside each run
        inside = [c for c in done if c["depth"] == 0 and a <= c["end"] <= b]
        runs.append({"run": run, "wall_s": b - a, "compile_s": sum(c["inclusive_s"] for c in inside)})
    for c in done:
        c.pop("end")
    return {
        "scenario": name, "wall_s": wall, "cpu_s": cpu, "numba_import_s": t_import, "compiles": done,
        "runs": runs,
    }  # fmt: skip


def _spawn(name: str, cache: str, main_runs: int | None = None) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT / "src")}
    extra = ["--main-runs", str(main_runs)] if main_runs else []
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, *extra],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"scenario {name!r} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(name: str, main_runs: int | None = None) -> dict:
    """Fresh-cache and cached runs of scenario ``name`` with the per-specialisation table."""
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="attnflow-numba-cache-") as cache:
        fresh = _spawn(name, cache, main_runs)
        cached = _spawn(name, cache, main_runs)
    top = [c for c in fresh["compiles"] if c["depth"] == 0]
    per: dict[tuple[str, str], dict] = {}
    for c in fresh["compiles"]:
        row = per.setdefault(
            (c["function"], c["signature"]), {"inclusive_s": 0.0, "exclusive_s": 0.0, "n": 0}
        )
        row["inclusive_s"] += c["inclusive_s"]
        row["exclusive_s"] += c["exclusive_s"]
        row["n"] += 1
    sigs: dict[str, int] = {}
    for fn, _ in per:
        sigs[fn] = sigs.get(fn, 0) + 1
    rows = sorted(
        (
            {"function": fn, "signature": sig, **v, "signatures_of_function": sigs[fn]}
            for (fn, sig), v in per.items()
        ),
        key=lambda r: -r["exclusive_s"],
    )
    return {
        "scenario": name,
        "wall_fresh_s": fresh["wall_s"],
        "wall_cached_s": cached["wall_s"],
        "cpu_fresh_s": fresh["cpu_s"],
        "cpu_cached_s": cached["cpu_s"],
        "load_avg_before": load,
        "load_avg_after": os.getloadavg(),
        "compile_total_s": sum(c["inclusive_s"] for c in top),
        "compile_cached_s": sum(c["inclusive_s"] for c in cached["compiles"] if c["depth"] == 0),
        "runs": fresh["runs"],
        "specialisations": len(per),
        "functions": len(sigs),
        "rows": rows,
    }


def _table(res: dict) -> str:
    lines = [
        f"## {res['scenario']}: wall {res['wall_fresh_s']:.1f} s on a fresh cache, "
        f"{res['wall_cached_s']:.1f} s cached (process CPU time {res['cpu_fresh_s']:.1f} s and "
        f"{res['cpu_cached_s']:.1f} s; load average {res['load_avg_before'][0]:.1f} before, "
        f"{res['load_avg_after'][0]:.1f} after); compile {res['compile_total_s']:.1f} s "
        f"({res['specialisations']} specialisations of "
        f"{res['functions']} functions; {res['compile_cached_s']:.1f} s compiled in the cached run)",
        "",
        "| function | signature | exclusive s | inclusive s | compiles | signatures of the function |",
        "|---|---|---|---|---|---|",
    ]
    if res.get("runs"):
        runs = ", ".join(f"{r['run']} {r['compile_s']:.1f} s of {r['wall_s']:.1f} s" for r in res["runs"])
        lines[1:1] = ["", f"Compile per run (fresh cache, wall): {runs}"]
    for r in res["rows"]:
        sig = r["signature"] if len(r["signature"]) <= 60 else r["signature"][:57] + "..."
        lines.append(
            f"| {r['function'].removeprefix('attnflow.')} | `{sig}` | {r['exclusive_s']:.2f} | "
            f"{r['inclusive_s']:.2f} | {r['n']} | {r['signatures_of_function']} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="all", choices=["readme", "main", "all"])
    ap.add_argument("--json", type=Path, help="write the measurements to this file")
    ap.add_argument(
        "--main-runs", type=int, default=None, help="only the first K runs of the 'main' scenario"
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.main_runs)))
        return
    names = ["readme", "main"] if args.scenario == "all" else [args.scenario]
    results = []
    for name in names:
        res = measure(name, args.main_runs if name == "main" else None)
        results.append(res)
        print(_table(res), "\n", flush=True)
    if args.json:
        meta = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
