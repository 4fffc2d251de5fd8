"""Time per study, per task kind and per phase, and the CPU utilisation of the cores (issue 27 part 2).

``python benchmarks/studies.py --json FILE [--studies a,b,...] [--workers N] [--timeout S]``

Two sources, kept apart in the output (``source`` = ``measured`` or ``read``):

* **measured**: every registered study's *quick* variant is run now, each in a fresh subprocess (so its
  CPU-time accounting starts at zero) into a temporary directory, with the runner's own choice of local
  workers (``--workers`` overrides). The child wraps the runner's phases and times each one, wall clock and
  CPU time of the process and its reaped children (``resource.getrusage``, user + system):
  ``plan`` (the config and ``Study.plan``), ``tasks`` (``run_tasks``: every particle run or computation,
  locally or in worker processes), ``analyse`` (``Study.analyse`` less the figures) and ``render`` (the
  plot layer's figure function). ``other`` is the rest of ``run_study`` (locks, study.json, summary, the
  table). Per task kind (``particle``, ``compute``, ``pde``, ...) it sums the runner's per-task
  ``elapsed_s`` (time inside the worker, so with two workers the kinds' sum can exceed the phase's wall).
  The CPU utilisation is ``CPU time / wall / cores``: 1.0 means both cores busy the whole time.
  The first study of a fresh checkout also pays numba's compilation (cached on disk afterwards).
* **read**: the full variants' wall times from the committed ``docs/studies/<name>/summary.json``
  (``wall_time_s`` of the runner; also ``run_time_s``, the sum of the runs' times, where a study records
  it, which gives the utilisation ``run_time_s / wall / cores``), their task counts per kind from the
  committed ``study.json``, and per-kind task times from a committed ``run_log.json`` when it holds
  finished (not skipped) tasks. The committed full runs were made on a shared 2-core machine under load,
  at different dates and revisions: they are what users waited, not a controlled measurement.

The load average before and after is recorded; per-study lines and the totals are printed.

``python benchmarks/studies.py --run-all [--quick] --json FILE [--studies a,b] [--workers N] [--keep DIR]``
times ONE ``attnflow study run-all`` (every study's tasks in one pool of local workers, each study analysed
as its tasks finish) in a fresh subprocess: its wall time, CPU time (the process and its reaped workers)
and CPU utilisation, and per study its status, when it was done, its tasks' wall and CPU seconds inside the
workers and its analysis' CPU seconds (from ``run_all.json``). It is recorded under ``run_all`` in the
JSON file, beside a one-after-the-other measurement (``measured``) the file holds already, or the one of
``--against FILE``; both totals are printed side by side.

``python benchmarks/studies.py --compare BEFORE.json AFTER.json`` prints the measured quick variants of two
such files side by side (wall s, CPU s, CPU utilisation, the load average after each study, and the CPU
ratio before / after): a change measured at two revisions (``PYTHONPATH`` pointing at each one's ``src``).
Under load compare the CPU seconds: the wall time of a shared machine mostly measures the other users.

``python benchmarks/studies.py --profile-store DIR [--json FILE] [--studies a,b]`` profiles an existing output
without rerunning anything: ``DIR/<study>/`` as ``study run`` or ``run-all`` writes it (``run_log.json``,
``runs/<task>/config.yaml``), and ``DIR/times.jsonl`` (one line per study with its ``cpu_s``, as
``/work/suite`` holds) when present. Per task its seconds (``cpu_s`` where the runner recorded it, else
``elapsed_s``: wall inside the worker) and, for a particle run, its parameters (process, H, n, d, dt, T,
paths, init, precision, seed); per study the sum and the share in H = 100 runs; and the particle runs whose
configs are equal in every parameter but the name, across studies (``duplicates``: the work that sharing
identical runs through the store would save), with the near-duplicates that differ only in ``paths``,
``record`` or ``name`` listed apart (``near_duplicates``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDIES_DIR = ROOT / "docs" / "studies"
PHASES = ("plan", "tasks", "analyse", "render", "other")


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its terminated, waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def child(name: str, out: Path, workers: int | None) -> dict:
    """Run one study's quick variant with its phases timed (the body of the subprocess)."""
    from attnflow.studies import runner

    try:  # the runner's phases (plan, analyse) live in studies.job since run-all
        steps = importlib.import_module("attnflow.studies.job")
    except ModuleNotFoundError:  # an older revision: they lived in the runner
        steps = runner

    try:
        from attnflow.plot.studies import figures_for

        figures = figures_for(name)
    except ImportError:  # no plot layer (matplotlib missing): no render phase
        figures = None
    phases = {p: {"wall_s": 0.0, "cpu_s": 0.0} for p in PHASES}
    chosen = {}

    stack: list[str] = []
    nested = {p: {"wall_s": 0.0, "cpu_s": 0.0} for p in PHASES}  # figure time inside each phase

    def timed(phase, fn):
        def wrapper(*args, **kwargs):
            w0, c0 = time.perf_counter(), _cpu()
            stack.append(phase)
            try:
                return fn(*args, **kwargs)
            finally:
                stack.pop()
                dw, dc = time.perf_counter() - w0, _cpu() - c0
                phases[phase]["wall_s"] += dw
                phases[phase]["cpu_s"] += dc
                if phase == "render" and stack:  # figures drawn inside analyse (or tasks: after_run hooks)
                    nested[stack[-1]]["wall_s"] += dw
                    nested[stack[-1]]["cpu_s"] += dc

        return wrapper

    orig_plan, orig_tasks, orig_analyse = steps._plan, runner.run_tasks, steps._analyse
    steps._plan = timed("plan", orig_plan)

    def run_tasks(specs, root, **kw):
        chosen["workers"] = kw.get("workers")
        chosen["specs"] = {k: v["kind"] for k, v in specs.items()}
        return orig_tasks(specs, root, **kw)

    runner.run_tasks = timed("tasks", run_tasks)
    steps._analyse = timed("analyse", orig_analyse)
    render = timed("render", figures) if figures is not None else None
    w0, c0 = time.perf_counter(), _cpu()
    summary = runner.run_study(name, out, quick=True, workers=workers, figures=render)
    wall, cpu = time.perf_counter() - w0, _cpu() - c0
    # the figures run inside analyse() (and, for studies with an after_run hook, inside the tasks phase):
    # report those phases without them
    for p in ("tasks", "analyse"):
        phases[p]["wall_s"] -= nested[p]["wall_s"]
        phases[p]["cpu_s"] -= nested[p]["cpu_s"]
    named = sum(phases[p]["wall_s"] for p in PHASES[:-1])
    phases["other"] = {"wall_s": wall - named, "cpu_s": cpu - sum(phases[p]["cpu_s"] for p in PHASES[:-1])}
    kinds: dict[str, dict] = {}
    for task, res in summary.log.get("tasks", {}).items():
        kind = chosen["specs"].get(task, "?")
        k = kinds.setdefault(kind, {"tasks": 0, "elapsed_s": 0.0})
        k["tasks"] += 1
        k["elapsed_s"] += float(res.get("elapsed_s", 0.0))
    cores = os.cpu_count() or 1
    return {
        "study": name,
        "source": "measured",
        "variant": "quick",
        "workers": chosen.get("workers"),
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_utilisation": cpu / wall / cores if wall > 0 else None,
        "phases": {
            p: {**v, "cpu_utilisation": v["cpu_s"] / v["wall_s"] / cores if v["wall_s"] > 0.05 else None}
            for p, v in phases.items()
        },
        "kinds": kinds,
    }


def measure(name: str, workers: int | None, timeout: float, keep: Path | None = None) -> dict:
    """Run :func:`child` for ``name`` in a fresh interpreter; a failure or timeout is recorded, not raised.

    ``keep``: write the study directory to ``keep/<name>`` (replaced if there) and keep it, e.g. to compare
    the summaries of two revisions with ``benchmarks/compare_summaries.py``; None: a temporary directory.
    """
    with tempfile.TemporaryDirectory(prefix=f"bench_{name}_") as tmp:
        out = Path(tmp) / name
        if keep is not None:
            out = keep / name
            if out.exists():
                shutil.rmtree(out)
        cmd = [sys.executable, __file__, "--child", name, "--out", str(out)]
        if workers is not None:
            cmd += ["--workers", str(workers)]
        t0 = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {
                "study": name,
                "source": "measured",
                "variant": "quick",
                "error": f"timeout > {timeout:g} s",
            }
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return {
                "study": name, "source": "measured", "variant": "quick",
                "error": f"exit {done.returncode}: {tail[0][:300]}",
                "wall_s": time.perf_counter() - t0,
            }  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])


def read_full(name: str) -> dict:
    """The committed full variant's wall time and task counts (``docs/studies/<name>``), or why not."""
    folder = STUDIES_DIR / name
    row: dict = {"study": name, "source": "read", "variant": "full"}
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        row["error"] = f"no committed summary.json ({exc.__class__.__name__})"
        return row
    run = summary.get("run", {})
    row["quick"] = bool(run.get("quick", summary.get("quick", False)))
    for key in ("wall_time_s", "run_time_s", "run_wall_time_s"):
        if isinstance(summary.get(key), (int, float)):
            row[key] = float(summary[key])
    cores = os.cpu_count() or 1
    if "run_time_s" in row and row.get("wall_time_s"):
        row["cpu_utilisation_from_run_times"] = row["run_time_s"] / row["wall_time_s"] / cores
    try:
        header = json.loads((folder / "study.json").read_text())
        tasks = header.get("tasks") or {}
        if not tasks and header.get("runs"):
            tasks = {r: "particle" for r in header["runs"]}
        counts: dict[str, int] = {}
        for kind in tasks.values():
            counts[kind] = counts.get(kind, 0) + 1
        row["task_counts"] = counts
        row["started"] = header.get("started")
    except (OSError, ValueError):
        pass
    try:
        log = json.loads((folder / "run_log.json").read_text())
        done = {k: v for k, v in log.get("tasks", {}).items() if not v.get("skipped") and "elapsed_s" in v}
        if done:
            kinds: dict[str, dict] = {}
            for task, res in done.items():
                kind = (tasks or {}).get(task, "?")
                k = kinds.setdefault(kind, {"tasks": 0, "elapsed_s": 0.0})
                k["tasks"] += 1
                k["elapsed_s"] += float(res["elapsed_s"])
            row["kinds"] = kinds
            if "wall_time_s" not in row and isinstance(log.get("wall_time_s"), (int, float)):
                row["wall_time_s"] = float(log["wall_time_s"])  # the summary's own record lacks it
                row["wall_time_from"] = "run_log.json"
        else:
            row["run_log"] = "committed run_log.json is a resumed run (every task skipped): no per-task times"
    except (OSError, ValueError):
        row["run_log"] = "no committed run_log.json: no per-task times"
    return row


def fmt(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def table(measured: list[dict], full: list[dict]) -> str:
    """Markdown: one row per study, quick measured and full read, then the totals."""
    by_full = {r["study"]: r for r in full}
    lines = [
        "| study | quick wall s (measured) | plan | tasks | analyse | render | other | CPU s | CPU util. "
        "| workers "
        "| task kinds (quick: n, s) | full wall s (read) | full tasks | full CPU util. |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tq = tf = 0.0
    names = sorted({r["study"] for r in measured} | set(by_full))
    by_meas = {r["study"]: r for r in measured}
    for name in names:
        m, f = by_meas.get(name, {}), by_full.get(name, {})
        if "error" in m:
            qcells = [f"failed: {m['error'][:60]}"] + ["-"] * 8
        elif m:
            ph = m["phases"]
            kinds = ", ".join(f"{k} {v['tasks']}, {v['elapsed_s']:.1f}" for k, v in m["kinds"].items())
            qcells = [fmt(m["wall_s"])] + [fmt(ph[p]["wall_s"]) for p in PHASES]
            qcells += [fmt(m["cpu_s"]), fmt(m["cpu_utilisation"], ".2f"), str(m["workers"]), kinds or "-"]
            tq += m["wall_s"]
        else:
            qcells = ["not run"] + ["-"] * 8
        fwall = f.get("wall_time_s")
        if fwall is not None:
            tf += fwall
        fcells = [
            fmt(fwall, ".0f") + (" (quick!)" if f.get("quick") else ""),
            ", ".join(f"{k} {v}" for k, v in (f.get("task_counts") or {}).items()) or "-",
            fmt(f.get("cpu_utilisation_from_run_times"), ".2f"),
        ]
        lines.append(f"| {name} | " + " | ".join(qcells + fcells) + " |")
    lines.append(
        f"| **total** | **{tq:.0f}** |  |  |  |  |  |  |  |  |  | **{tf:.0f}** ({tf / 60:.0f} min) |  |  |"
    )
    return "\n".join(lines)


def compare(before: dict, after: dict) -> str:
    """Markdown: the studies measured in both payloads, quick wall / CPU / utilisation before and after."""
    b = {r["study"]: r for r in before.get("measured", []) if "error" not in r}
    a = {r["study"]: r for r in after.get("measured", []) if "error" not in r}
    lines = [
        "| study | wall s before | wall s after | CPU s before | CPU s after | CPU before / after "
        "| CPU util. before | CPU util. after | workers before, after | load after (before, after) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(set(a) & set(b)):
        x, y = b[name], a[name]
        lx = (x.get("load_after") or [None])[0]
        ly = (y.get("load_after") or [None])[0]
        lines.append(
            f"| {name} | {fmt(x['wall_s'])} | {fmt(y['wall_s'])} | {fmt(x['cpu_s'])} | {fmt(y['cpu_s'])} "
            f"| {fmt(x['cpu_s'] / y['cpu_s'] if y['cpu_s'] > 0 else None, '.2f')} "
            f"| {fmt(x['cpu_utilisation'], '.2f')} | {fmt(y['cpu_utilisation'], '.2f')} "
            f"| {x['workers']}, {y['workers']} | {fmt(lx)}, {fmt(ly)} |"
        )
    return "\n".join(lines)


def run_all(quick: bool, studies: str | None, workers: int | None, keep: Path | None, timeout: float) -> dict:
    """One ``attnflow study run-all`` in a subprocess, timed; its ``run_all.json`` rows per study."""
    with tempfile.TemporaryDirectory(prefix="bench_run_all_") as tmp:
        out = Path(tmp) / "run_all"
        if keep is not None:
            out = keep  # a run-all directory: a rerun into it resumes, so it must be new
            if out.exists() and any(out.iterdir()):
                raise SystemExit(
                    f"--keep {out} is not empty: a run-all into it would resume; give a new directory"
                )
        cmd = [sys.executable, "-m", "attnflow.cli", "study", "run-all", "--out", str(out), "-q"]
        cmd += ["--quick"] if quick else []
        cmd += ["--only", studies] if studies else []
        cmd += ["-j", str(workers)] if workers else []
        load_before = os.getloadavg()
        kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout > {timeout:g} s", "command": " ".join(cmd)}
        wall = time.perf_counter() - t0
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (kids.ru_utime - kids0.ru_utime) + (kids.ru_stime - kids0.ru_stime)
        try:
            record = json.loads((out / "run_all.json").read_text())
        except (OSError, ValueError) as exc:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return {"error": f"exit {done.returncode}, no run_all.json ({exc}): {tail[0][:300]}"}
    cores = os.cpu_count() or 1
    return {
        "variant": "quick" if quick else "full",
        "command": " ".join(cmd),
        "exit_code": done.returncode,
        "workers": record.get("workers"),
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_utilisation": cpu / wall / cores if wall > 0 else None,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "run_all_wall_s": record.get("wall_s"),
        "studies": record.get("studies", {}),
        "output": done.stdout[-4000:],
    }


def run_all_table(row: dict, sequential: list[dict]) -> str:
    """Markdown: per study the run-all's status, done-at, tasks' wall and CPU, analysis CPU, beside the
    one-after-the-other run's wall and CPU; then both totals."""
    seq = {r["study"]: r for r in sequential if "error" not in r}
    lines = [
        "| study | status | tasks | done at s | tasks wall s | tasks CPU s | analysis CPU s "
        "| alone: wall s | alone: CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sorted(row["studies"].items()):
        a = seq.get(name, {})
        lines.append(
            f"| {name} | {r.get('status')} | {r.get('tasks', '-')} | {fmt(r.get('done_after_s'))} "
            f"| {fmt(r.get('tasks_wall_s'))} | {fmt(r.get('tasks_cpu_s'))} | {fmt(r.get('analysis_cpu_s'))} "
            f"| {fmt(a.get('wall_s'))} | {fmt(a.get('cpu_s'))} |"
        )
    both = [seq[n] for n in row["studies"] if n in seq]
    lines.append(
        f"| **total** | {sum(r.get('status') == 'done' for r in row['studies'].values())} done | "
        f"| **{fmt(row['wall_s'])}** (run-all wall) | "
        f"| **{fmt(row['cpu_s'])}** (run-all CPU, util. {fmt(row['cpu_utilisation'], '.2f')}) | "
        f"| **{fmt(sum(r['wall_s'] for r in both))}** ({len(both)} studies) "
        f"| **{fmt(sum(r['cpu_s'] for r in both))}** |"
    )
    return "\n".join(lines)


#: the parameters of a particle run shown per task by ``--profile-store`` (dotted paths into its config)
PROFILE_KEYS = {
    "process": "weights.process",
    "H": "heads.H",
    "n": "tokens.n",
    "d": "tokens.d",
    "dt": "integrator.dt",
    "T": "integrator.t1",
    "paths": "paths",
    "init": "init",
    "precision": "precision",
    "seed": "seed",
    "backend": "model.backend",
}


def _dotted(cfg: dict, path: str):
    for part in path.split("."):
        if not isinstance(cfg, dict) or part not in cfg:
            return None
        cfg = cfg[part]
    return cfg


def _canonical(cfg: dict, drop: tuple[str, ...]) -> str:
    """The config as sorted JSON without the top-level keys ``drop``: equal strings, equal runs."""
    return json.dumps({k: v for k, v in cfg.items() if k not in drop}, sort_keys=True, default=str)


def profile_store(root: Path, studies: list[str] | None = None) -> dict:
    """Per-task seconds and parameters of an existing output ``root/<study>`` (see the module docstring)."""
    import yaml

    seq = {}
    if (root / "times.jsonl").exists():
        for line in (root / "times.jsonl").read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                seq[rec["study"]] = rec
    names = studies or sorted(p.parent.name for p in root.glob("*/run_log.json"))
    out: dict = {"root": str(root), "studies": {}}
    by_config: dict[str, list] = {}
    by_near: dict[str, list] = {}
    for name in names:
        log_file = root / name / "run_log.json"
        if not log_file.exists():
            out["studies"][name] = {"error": f"no {log_file}"}
            continue
        log = json.loads(log_file.read_text())
        tasks = []
        for task, res in log.get("tasks", {}).items():
            row = {"task": task, "elapsed_s": res.get("elapsed_s"), "cpu_s": res.get("cpu_s")}
            cfg_file = root / name / "runs" / task / "config.yaml"
            if cfg_file.exists():
                cfg = yaml.safe_load(cfg_file.read_text())
                if isinstance(cfg, dict) and "tokens" in cfg:
                    row.update({k: _dotted(cfg, v) for k, v in PROFILE_KEYS.items()})
                    key = (name, task, row["cpu_s"] if row["cpu_s"] is not None else row["elapsed_s"])
                    by_config.setdefault(_canonical(cfg, ("name",)), []).append(key)
                    by_near.setdefault(_canonical(cfg, ("name", "paths", "record")), []).append(key)
            tasks.append(row)
        secs = [t["cpu_s"] if t["cpu_s"] is not None else (t["elapsed_s"] or 0.0) for t in tasks]
        h100 = sum(s for s, t in zip(secs, tasks, strict=True) if t.get("H") == 100)
        out["studies"][name] = {
            "workers": log.get("workers"),
            "wall_s": log.get("wall_time_s"),
            "seconds_are": "cpu_s" if all(t["cpu_s"] is not None for t in tasks) else "elapsed_s (wall)",
            "tasks": sorted(tasks, key=lambda t: -(t["cpu_s"] or t["elapsed_s"] or 0.0)),
            "task_seconds": round(sum(secs), 1),
            "h100_seconds": round(h100, 1),
            "longest_task_s": round(max(secs), 1) if secs else 0.0,
            "sequential": seq.get(name),
        }
    out["duplicates"] = [v for v in by_config.values() if len(v) > 1]
    out["near_duplicates"] = [v for v in by_near.values() if len({(s, t) for s, t, _ in v}) > 1]
    return out


def profile_table(prof: dict) -> str:
    """The per-study lines of :func:`profile_store` as a Markdown table."""
    lines = [
        "| study | tasks | task s (kind) | in H = 100 runs | longest task s | study wall s "
        "| study CPU s (times.jsonl) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, st in prof["studies"].items():
        if "error" in st:
            lines.append(f"| {name} | {st['error']} | | | | | |")
            continue
        seq = st.get("sequential") or {}
        lines.append(
            f"| {name} | {len(st['tasks'])} | {st['task_seconds']} ({st['seconds_are']}) "
            f"| {st['h100_seconds']} | {st['longest_task_s']} | {seq.get('wall_s', st['wall_s'])} "
            f"| {seq.get('cpu_s', '')} |"
        )
    lines.append(
        f"\n{len(prof['duplicates'])} sets of particle runs equal in every parameter but the name; "
        f"{len(prof['near_duplicates'])} sets equal but for paths / record / name."
    )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--studies", default=None, help="comma-separated names (default: every registered study)")
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: the runner's choice)")
    ap.add_argument("--timeout", type=float, default=600.0, help="per-study limit of the quick runs, seconds")
    ap.add_argument(
        "--no-run",
        action="store_true",
        help="only read the committed full variants (with --run-all: compare the recorded run-all again)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep every study measured already in --json, run the named ones not yet there",
    )
    ap.add_argument(
        "--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="print two results side by side"
    )
    ap.add_argument(
        "--keep", type=Path, default=None, help="keep each measured study directory as KEEP/<study>"
    )
    ap.add_argument("--run-all", action="store_true", help="time one `attnflow study run-all` (see above)")
    ap.add_argument("--quick", action="store_true", help="with --run-all: the quick variants")
    ap.add_argument(
        "--against",
        type=Path,
        default=None,
        help="with --run-all: the one-after-the-other measurement to compare",
    )
    ap.add_argument(
        "--profile-store",
        type=Path,
        default=None,
        metavar="DIR",
        help="profile an existing output DIR/<study> per task, without running (see above)",
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.out, args.workers)))
        return
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        print(compare(before, after))
        return
    if args.profile_store:
        prof = profile_store(args.profile_store, args.studies.split(",") if args.studies else None)
        print(profile_table(prof))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(prof, indent=1))
        return
    if args.json is None:
        ap.error("--json FILE is required")
    if args.run_all:
        payload = json.loads(args.json.read_text()) if args.json.exists() else {"benchmark": "studies"}
        if args.no_run:  # compare the run-all recorded in --json again (e.g. with a finished --against)
            row = payload["run_all"]
        else:
            row = run_all(args.quick, args.studies, args.workers, args.keep, args.timeout)
        against = json.loads(args.against.read_text()) if args.against else payload  # read once it ran
        sequential = against.get("measured", [])
        if "error" not in row:
            row["sequential"] = {
                "from": str(args.against or args.json),
                "wall_s": sum(
                    r["wall_s"] for r in sequential if "error" not in r and r["study"] in row["studies"]
                ),
                "cpu_s": sum(
                    r["cpu_s"] for r in sequential if "error" not in r and r["study"] in row["studies"]
                ),
                "studies": sorted(
                    r["study"] for r in sequential if "error" not in r and r["study"] in row["studies"]
                ),
            }
            row["table"] = run_all_table(row, sequential)
            print(row["table"])
        else:
            print(f"run-all failed: {row['error']}")
        payload["run_all"] = row
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=1))
        return
    from attnflow.studies import available_studies

    names = args.studies.split(",") if args.studies else sorted(available_studies())
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    measured = []
    if args.resume and args.json.exists():
        # keep every study measured before (also those not named now: one study per call accumulates)
        old = json.loads(args.json.read_text())
        measured = [r for r in old.get("measured", []) if "error" not in r]
        load_before = old.get("load_before", load_before)
    listed = list(dict.fromkeys([*(r["study"] for r in measured), *names]))
    full = [read_full(name) for name in listed if (STUDIES_DIR / name).is_dir()]
    if not args.no_run:
        for name in names:
            if any(r["study"] == name for r in measured):
                continue
            row = measure(name, args.workers, args.timeout, args.keep)
            row["load_after"] = os.getloadavg()
            measured.append(row)
            what = row.get("error") or f"{row['wall_s']:.1f} s, CPU util. {row['cpu_utilisation']:.2f}"
            print(f"quick {name}: {what}  (load {os.getloadavg()[0]:.1f})", flush=True)
            write(args.json, load_before, t0, measured, full)  # partial results survive an interruption
    write(args.json, load_before, t0, measured, full, final=True)


def write(
    path: Path, load_before, t0: float, measured: list[dict], full: list[dict], final: bool = False
) -> None:
    """Print (when ``final``) and write the payload."""
    text = table(measured, full)
    total_q = sum(r.get("wall_s", 0.0) for r in measured if "error" not in r)
    total_f = sum(r.get("wall_time_s", 0.0) for r in full)
    if final:
        for row in full:
            print(f"full {row['study']}: {fmt(row.get('wall_time_s'), '.0f')} s (read)")
        print(text)
        print(
            f"total quick (measured): {total_q:.0f} s; "
            f"total full (read): {total_f:.0f} s = {total_f / 3600:.2f} h"
        )
    payload = {
        "benchmark": "studies",
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "complete": final,
        "load_after": os.getloadavg(),
        "seconds": time.perf_counter() - t0,
        "measured": measured,
        "full": full,
        "total_quick_measured_s": total_q,
        "total_full_read_s": total_f,
        "table": text,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1))


if __name__ == "__main__":
    main()
