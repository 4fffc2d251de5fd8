"""CPU seconds of a study's ``analyse`` by phase, on its finished run store (issue 27 part 2).

``python benchmarks/analyse_phases.py STUDY_DIR [--json FILE] [--threads K] [--figures] [--top N]``

Reads ``STUDY_DIR/study.json`` (the study and its config, as ``attnflow study run`` wrote it), opens the
finished tasks of ``STUDY_DIR/runs`` and calls the study's ``analyse`` once under :mod:`cProfile` with the
process's CPU clock (``time.process_time``: on a shared machine the wall clock measures the other users).
It prints the CPU and wall of the analysis (and, with ``--figures``, of the figures), and the cumulative
CPU of the functions that take the most (``--top``): which phase of the analysis the time goes to
(``--no-profile``: the totals alone, without the profiler's overhead; a profile counts only the main
thread's own calls, the CPU total counts every thread). ``--threads`` sets torch's threads (the
runner's own process keeps torch's default). Nothing is written into ``STUDY_DIR``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import platform
import pstats
import tempfile
import time
from pathlib import Path

import torch

from attnflow.experiments.config import load_config
from attnflow.studies import get_study
from attnflow.studies.base import StudyRuns
from attnflow.studies.tasks import normalise_plan


def _study_runs(study, config, root: Path) -> StudyRuns:
    """The finished tasks as the runner hands them to ``analyse``: the plan's specs in plan order."""
    specs, _ = normalise_plan(study.plan(config), study.name)
    particle = {name: spec for name, spec in specs.items() if spec["kind"] == "particle"}
    configs = {name: load_config(spec["config"]) for name, spec in particle.items()}
    return StudyRuns(root, configs, {}, specs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study_dir", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--figures", action="store_true", help="also time the figures")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument(
        "--no-profile", action="store_true", help="no cProfile (its overhead inflates call-heavy code)"
    )
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    meta = json.loads((a.study_dir / "study.json").read_text())
    study = get_study(meta["study"])
    config = study.Config(**meta["config"])
    runs = _study_runs(study, config, a.study_dir / "runs")
    prof = cProfile.Profile(time.process_time)
    w0, c0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        if not a.no_profile:
            prof.enable()
        res = study.analyse(config, runs, Path(tmp))
        if not a.no_profile:
            prof.disable()
        analyse_cpu, analyse_wall = time.process_time() - c0, time.perf_counter() - w0
        fig_cpu = fig_wall = None
        if a.figures:
            from attnflow.plot.studies import figures_for

            w1, c1 = time.perf_counter(), time.process_time()
            fn = figures_for(meta["study"])
            if fn is not None:
                fn(res.figure_data if res.figure_data is not None else res.summary, Path(tmp))
            fig_cpu, fig_wall = time.process_time() - c1, time.perf_counter() - w1
    rows = []
    stats = {} if a.no_profile else pstats.Stats(prof).stats
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in stats.items():
        rows.append(
            {"function": f"{Path(file).name}:{line}({fn})", "calls": nc, "tottime": tt, "cumtime": ct}
        )
    rows.sort(key=lambda r: -r["cumtime"])
    out = {
        "study": meta["study"],
        "study_dir": str(a.study_dir),
        "torch_threads": torch.get_num_threads(),
        "profiled": not a.no_profile,
        "analyse_cpu_s": analyse_cpu,
        "analyse_wall_s": analyse_wall,
        "figures_cpu_s": fig_cpu,
        "figures_wall_s": fig_wall,
        "top_cumulative": rows[: a.top],
        "machine": platform.platform(),
        "load_avg": list(__import__("os").getloadavg()),
    }
    print(f"{meta['study']}: analyse {analyse_cpu:.1f} s CPU, {analyse_wall:.1f} s wall (torch threads "
          f"{out['torch_threads']}); figures {fig_cpu} s CPU; load {out['load_avg']}")  # fmt: skip
    for r in rows[: a.top]:
        print(f"  {r['cumtime']:8.2f} cum {r['tottime']:8.2f} own {r['calls']:8d} calls  {r['function']}")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
