"""What a first run compiles: numba compile time by function and specialisation, on a fresh cache.

    python benchmarks/compile.py [--scenario readme|main|all] [--main-runs K] [--json FILE]
    python benchmarks/compile.py --opt-levels 3 2 1 0 [--rounds R] [--json FILE]

Each scenario runs twice in a fresh subprocess with its own ``NUMBA_CACHE_DIR``: first on an empty cache
(what a new user, a new virtual environment, a CI run or a Dask worker pays), then on the cache the first
process left (what every later run pays). numba's ``numba:compile`` events are recorded in the child;
a compile that happens inside another (an inlined callee) is nested, so each specialisation gets its
*inclusive* time and its *exclusive* time (inclusive less its nested compiles). ``numba:llvm_lock`` events
(every llvmlite call holds LLVM's lock: IR parsing, the optimisation passes at ``NUMBA_OPT``, machine code)
are charged to the innermost compile in progress: ``LLVM exclusive s`` is the part of a function's exclusive
time spent in LLVM (the rest is numba's own Python: bytecode analysis, typing, lowering to LLVM IR, the
cache's files). A numba function's machine code holds its callees' code, linked in and optimised and
compiled again in the caller's module: the callers' LLVM time grows with what they call. The table lists
every (function, signature) compiled, the total compile time (the sum of the outermost compiles) and the
wall time of the scenario in both processes. The child inherits the environment: ``NUMBA_OPT=1
python benchmarks/compile.py`` measures another optimisation level (numba's cache does not key on it: the
benchmark's fresh cache directories keep the levels apart).

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

``--opt-levels 3 2 1 0`` (with ``--rounds R``) measures what each LLVM optimisation level (``NUMBA_OPT``)
costs and gives: for each level a fresh cache of its own, then R rounds over the levels in turn, each a
process that runs the compiled loop at the paper's size (:data:`SPEED_SIZE`: OU, float32, P = 20, H = 100,
n = 300, d = 3, one numba thread: the serial passes, whose inner loops are those of the parallel ones): the
first round's first block compiles (process CPU seconds of the compile), every round times
:data:`SPEED_STEPS` steps (seconds per step, median of the rounds).

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


#: (P, H, n) of the kernel-speed measurement of ``--opt-levels`` (the paper's size)
SPEED_SIZE = (20, 100, 300)
#: steps timed per process in ``--opt-levels`` (after one untimed step that compiles or loads the cache)
SPEED_STEPS = 20


def _speed_child() -> dict:
    """One process of ``--opt-levels``: the compiled loop at :data:`SPEED_SIZE`, first step then
    :data:`SPEED_STEPS` steps in one block."""
    import numba

    import attnflow as af
    from attnflow.simulation import Simulator

    P, H, n = SPEED_SIZE
    model = af.TransformerModel(
        direction="descent", attention="softmax", beta=1.0, weights=af.OrnsteinUhlenbeck(sigma2=1.0)
    )
    x0 = af.tokens.uniform(paths=P, n=n, d=3, seed=0)
    D0 = af.heads.symmetric_gaussian(paths=P, heads=H, d=3, seed=0)
    sim = Simulator(model, x0, D0, dt=1e-2, dtype="float32", seed=0)
    c0, t0 = time.process_time(), time.perf_counter()
    sim.advance(1)
    first_cpu, first_wall = time.process_time() - c0, time.perf_counter() - t0
    c0, t0 = time.process_time(), time.perf_counter()
    sim.advance(SPEED_STEPS)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert sim.loop == "fused", sim.loop
    return {
        "opt": int(numba.config.OPT), "threads": numba.get_num_threads(), "first_step_cpu_s": first_cpu,
        "first_step_wall_s": first_wall, "s_per_step": wall / SPEED_STEPS, "cpu_per_step": cpu / SPEED_STEPS,
    }  # fmt: skip


def opt_study(levels: list[int], rounds: int) -> dict:
    """Compile time and kernel speed per LLVM optimisation level (see the module docstring)."""
    out: dict = {"levels": levels, "rounds": [], "size": SPEED_SIZE, "steps": SPEED_STEPS}
    with tempfile.TemporaryDirectory(prefix="attnflow-numba-opt-") as tmp:
        for r in range(rounds):
            for level in levels:
                cache = Path(tmp) / f"opt{level}"
                env = {
                    **os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT / "src"),
                    "NUMBA_OPT": str(level), "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                }  # fmt: skip
                done = subprocess.run(
                    [sys.executable, __file__, "--child-speed"], env=env, capture_output=True, text=True,
                    check=False,
                )  # fmt: skip
                if done.returncode != 0:
                    raise SystemExit(f"opt level {level} failed:\n{done.stderr[-3000:]}")
                res = {"round": r, "load_avg": os.getloadavg(), **json.loads(done.stdout.splitlines()[-1])}
                out["rounds"].append(res)
                print(
                    f"round {r} NUMBA_OPT {level}: first step {res['first_step_cpu_s']:.1f} s CPU, "
                    f"{res['s_per_step'] * 1e3:.1f} ms a step (load {res['load_avg'][0]:.1f})",
                    flush=True,
                )
    return out


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


class _Recorder:
    """numba's ``numba:compile`` and ``numba:llvm_lock`` events as they happen: a stack of the compiles in
    progress (a compile nests inside its caller's). Each compile gets its wall and CPU seconds (the thread's
    CPU clock: compiling runs in the calling thread, and on a shared machine CPU time is the comparable
    number), inclusive and exclusive of the compiles nested in it, and the CPU seconds that LLVM (the lock
    that every llvmlite call takes: IR parsing, the optimisation passes, machine code) spent while it was
    the innermost one. ``numba:run_pass`` events (numba's compiler passes: bytecode analysis, inlining,
    type inference, lowering with LLVM's work inside it, ...) give each compile its CPU seconds by pass,
    exclusive of the compiles nested in a pass (``passes``)."""

    def __init__(self) -> None:
        self.stack: list[dict] = []
        self.done: list[dict] = []
        self.llvm_start = 0.0
        self.llvm_outside = 0.0
        self.passes: list[list] = []  # [name, CPU start, CPU of nested compiles] of the passes running

    def on_pass(self, ev, start: bool) -> None:
        cpu = time.thread_time()
        if start:
            name = str((ev.data or {}).get("name", "?")).split(" [")[0]  # "nopython_type_inference [f]"
            self.passes.append([name, cpu, 0.0, len(self.stack)])
            return
        name, c0, nested, depth = self.passes.pop()
        if self.passes and self.passes[-1][3] == depth:  # a pass inside a pass (numba-IR inlining)
            self.passes[-1][2] += cpu - c0
        if self.stack and depth == len(self.stack):
            own = self.stack[-1]["passes"]
            own[name] = own.get(name, 0.0) + (cpu - c0 - nested)

    def on_compile(self, ev, start: bool) -> None:
        now, cpu = time.time(), time.thread_time()
        if start:
            data = ev.data or {}
            disp = data.get("dispatcher")
            fn = getattr(disp, "py_func", None)
            qual = f"{fn.__module__}.{fn.__qualname__}" if fn is not None else str(disp)
            self.stack.append(
                {"function": qual, "signature": str(data.get("args")), "start": now, "cpu_start": cpu,
                 "children": 0.0, "cpu_children": 0.0, "llvm": 0.0, "llvm_children": 0.0,
                 "depth": len(self.stack), "passes": {}}
            )  # fmt: skip
            return
        item = self.stack.pop()
        item["end"] = now
        item["inclusive_s"] = now - item.pop("start")
        item["exclusive_s"] = item["inclusive_s"] - item.pop("children")
        item["inclusive_cpu_s"] = cpu - item.pop("cpu_start")
        item["exclusive_cpu_s"] = item["inclusive_cpu_s"] - item.pop("cpu_children")
        item["llvm_exclusive_cpu_s"] = item["llvm"]
        item["llvm_inclusive_cpu_s"] = item.pop("llvm") + item.pop("llvm_children")
        if self.passes and self.passes[-1][3] == len(self.stack):  # nested in a pass of the caller
            self.passes[-1][2] += item["inclusive_cpu_s"]
        if self.stack:
            self.stack[-1]["children"] += item["inclusive_s"]
            self.stack[-1]["cpu_children"] += item["inclusive_cpu_s"]
            self.stack[-1]["llvm_children"] += item["llvm_inclusive_cpu_s"]
        self.done.append(item)

    def on_llvm(self, ev, start: bool) -> None:
        now = time.thread_time()
        if start:
            self.llvm_start = now
        elif self.stack:
            self.stack[-1]["llvm"] += now - self.llvm_start
        else:
            self.llvm_outside += now - self.llvm_start


def child(name: str, main_runs: int | None = None) -> dict:
    """Run scenario ``name`` in this process and return its compile events and wall time."""
    t0 = time.perf_counter()
    import numba  # noqa: F401  (imported before the recorder so its own set-up is not counted)
    from numba.core import event

    class _Listen(event.Listener):
        def __init__(self, fn):
            self.fn = fn

        def on_start(self, ev):
            self.fn(ev, True)

        def on_end(self, ev):
            self.fn(ev, False)

    t_import = time.perf_counter() - t0
    rec = _Recorder()
    with (
        event.install_listener("numba:compile", _Listen(rec.on_compile)),
        event.install_listener("numba:llvm_lock", _Listen(rec.on_llvm)),
        event.install_listener("numba:run_pass", _Listen(rec.on_pass)),
    ):
        t1 = time.perf_counter()
        c1 = time.process_time()
        _run_scenario(name, main_runs)
        wall = time.perf_counter() - t1
        cpu = time.process_time() - c1
    done = rec.done
    runs = []
    for run, a, b in _SPANS:  # the outermost compiles inside each run
        inside = [c for c in done if c["depth"] == 0 and a <= c["end"] <= b]
        runs.append({"run": run, "wall_s": b - a, "compile_s": sum(c["inclusive_s"] for c in inside)})
    for c in done:
        c.pop("end")
    return {
        "scenario": name, "wall_s": wall, "cpu_s": cpu, "numba_import_s": t_import, "compiles": done,
        "runs": runs, "llvm_outside_compiles_s": rec.llvm_outside,
        "opt": int(numba.config.OPT),
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


#: the per-compile times summed per (function, signature) in the table
_TIMES = (
    "inclusive_s",
    "exclusive_s",
    "inclusive_cpu_s",
    "exclusive_cpu_s",
    "llvm_exclusive_cpu_s",
    "llvm_inclusive_cpu_s",
)


def measure(name: str, main_runs: int | None = None) -> dict:
    """Fresh-cache and cached runs of scenario ``name`` with the per-specialisation table."""
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="attnflow-numba-cache-") as cache:
        fresh = _spawn(name, cache, main_runs)
        cached = _spawn(name, cache, main_runs)
    top = [c for c in fresh["compiles"] if c["depth"] == 0]
    per: dict[tuple[str, str], dict] = {}
    for c in fresh["compiles"]:
        row = per.setdefault((c["function"], c["signature"]), {"n": 0, **dict.fromkeys(_TIMES, 0.0)})
        for key in _TIMES:
            row[key] += c[key]
        for pass_name, v in c["passes"].items():
            row.setdefault("passes", {})[pass_name] = row.get("passes", {}).get(pass_name, 0.0) + v
        row["n"] += 1
    sigs: dict[str, int] = {}
    for fn, _ in per:
        sigs[fn] = sigs.get(fn, 0) + 1
    rows = sorted(
        (
            {"function": fn, "signature": sig, **v, "signatures_of_function": sigs[fn]}
            for (fn, sig), v in per.items()
        ),
        key=lambda r: -r["exclusive_cpu_s"],
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
        "compile_total_cpu_s": sum(c["inclusive_cpu_s"] for c in top),
        "llvm_total_cpu_s": sum(c["llvm_inclusive_cpu_s"] for c in top),
        "opt": fresh["opt"],
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
        f"{res['load_avg_after'][0]:.1f} after); compile {res['compile_total_s']:.1f} s wall, "
        f"{res['compile_total_cpu_s']:.1f} s CPU, of which LLVM {res['llvm_total_cpu_s']:.1f} s "
        f"(NUMBA_OPT {res['opt']}; {res['specialisations']} specialisations of "
        f"{res['functions']} functions; {res['compile_cached_s']:.1f} s compiled in the cached run)",
        "",
        "| function | signature | exclusive CPU s | inclusive CPU s | LLVM exclusive CPU s "
        "| exclusive wall s | compiles | signatures of the function |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if res.get("runs"):
        runs = ", ".join(f"{r['run']} {r['compile_s']:.1f} s of {r['wall_s']:.1f} s" for r in res["runs"])
        lines[1:1] = ["", f"Compile per run (fresh cache, wall): {runs}"]
    for r in res["rows"]:
        sig = r["signature"] if len(r["signature"]) <= 60 else r["signature"][:57] + "..."
        lines.append(
            f"| {r['function'].removeprefix('attnflow.')} | `{sig}` | {r['exclusive_cpu_s']:.2f} | "
            f"{r['inclusive_cpu_s']:.2f} | {r['llvm_exclusive_cpu_s']:.2f} | {r['exclusive_s']:.2f} | "
            f"{r['n']} | {r['signatures_of_function']} |"
        )
    lines += ["", "CPU seconds by numba compiler pass (exclusive of nested compiles) of the six largest:", ""]
    for r in res["rows"][:6]:
        top = sorted(r.get("passes", {}).items(), key=lambda kv: -kv[1])[:5]
        lines.append(
            f"- {r['function'].removeprefix('attnflow.')}: " + ", ".join(f"{k} {v:.2f}" for k, v in top)
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="all", choices=["readme", "main", "all"])
    ap.add_argument("--json", type=Path, help="write the measurements to this file")
    ap.add_argument(
        "--main-runs", type=int, default=None, help="only the first K runs of the 'main' scenario"
    )
    ap.add_argument(
        "--opt-levels", type=int, nargs="+", help="compile time and kernel speed at these NUMBA_OPT levels"
    )
    ap.add_argument("--rounds", type=int, default=3, help="rounds of --opt-levels (default 3)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-speed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.main_runs)))
        return
    if args.child_speed:
        print(json.dumps(_speed_child()))
        return
    if args.opt_levels:
        res = opt_study(args.opt_levels, args.rounds)
        if args.json:
            args.json.write_text(json.dumps(res, indent=1))
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
