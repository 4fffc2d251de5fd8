# %% [markdown]
# # Write your own study
#
# A study is one Python file: a config (the parameters, with the thresholds of its verdicts declared
# before the data), a **plan** of tasks that run on the run store, and an **analysis** that reads their
# stored results and returns a typed result (numbers, verdict records, table specs). The runner does the
# rest: it resumes a killed study, runs it on local workers or a Dask cluster, renders the tables and
# writes `summary.json`. Here we write one end to end, run it from the command line, kill it and resume
# it, and run it on Dask.
#
# The claim: at frozen tokens, the strong upper gradient G^2 of H i.i.d. symmetric Gaussian heads
# decays with H towards its mean-field value (the head Monte Carlo effect of Sec. 5.2 of the main
# paper). The study has two kinds of task: **particle runs** (the flow for H = 1, 4, 16) and
# **computations** (G^2 at the initial cloud for fresh heads, a pure function of JSON parameters).

# %%
from pathlib import Path

study_file = Path("out") / "tutorial_study" / "late_g2_study.py"
study_file.parent.mkdir(parents=True, exist_ok=True)
study_file.write_text('''
"""G^2 at frozen tokens against H: a study in one file (docs/tutorials/07_write_a_study.py)."""
import numpy as np
import torch
from pydantic import Field

from attnflow.analysis.theorems import draw_heads
from attnflow.analysis.verdicts import Criterion, record_test
from attnflow.model.tokens import octahedral
from attnflow.observables.dissipation import strong_upper_gradient_sq
from attnflow.studies import (Column, ComputeTask, ParticleRun, Study, StudyConfig, StudyResult, Table,
                              study)


def frozen_g2(H: int, draws: int, seed: int) -> dict:
    """G^2 of the octahedral cloud (n = 24 on S^2) for `draws` sets of H fresh heads: a pure function."""
    x = octahedral(1, 24, 3, noise=0.05, seed=seed)[0]
    D = torch.as_tensor(draw_heads("symmetric_gaussian", draws, H, 3, seed=seed + H))
    g = strong_upper_gradient_sq(x.expand(draws, -1, -1), D).numpy()
    return {"g2": g, "mean": float(g.mean()), "se": float(g.std(ddof=1) / np.sqrt(draws))}


class Config(StudyConfig):
    H: list[int] = Field([1, 4, 16, 64], description="head counts", examples=[[1, 4]])
    draws: int = Field(64, description="head draws per H", examples=[64])
    slope_max: float = Field(-0.5, description="the claim holds if the fitted exponent is below this")


@study
class FrozenG2(Study):
    name = "frozen_g2_tutorial"
    description = "G^2 at frozen tokens decays with the number of i.i.d. heads (Sec. 5.2, tutorial)"
    Config = Config

    def quick_params(self):
        return {"H": [1, 4, 16], "draws": 16}

    def plan(self, config):
        tasks = {}
        for H in config.H:
            tasks[f"g2_H{H}"] = ComputeTask(fn="late_g2_study:frozen_g2",
                                            params={"H": H, "draws": config.draws, "seed": 0})
            tasks[f"flow_H{H}"] = ParticleRun({
                "name": f"flow_H{H}", "model": {"direction": "descent"},
                "tokens": {"init": "octahedral", "n": 24, "d": 3}, "heads": {"H": H},
                "integrator": {"dt": 0.05, "t1": 1.0}, "record": {"every": 5}, "paths": 2})
        return tasks

    def analyse(self, config, runs, out_dir):
        rows = []
        for H in config.H:
            r = runs.result(f"g2_H{H}")
            late = float(runs.open(f"flow_H{H}").G2.isel(time=-1).mean())
            rows.append({"H": H, "g2_frozen": r["mean"], "se": r["se"], "g2_flow_T": late})
        logH = np.log([r["H"] for r in rows])
        logG = np.log([r["g2_frozen"] for r in rows])
        slope, _ = np.polyfit(logH, logG, 1)
        crit = Criterion(quantity="fitted exponent b of G^2 (frozen tokens) in H", op="<",
                         threshold=config.slope_max, declared_in="config: slope_max")
        rec = record_test(id="frozen-g2-decays", statement="G^2 at frozen tokens decays with H",
                          source="2605.18870, Sec. 5.2", criterion=crit, value=float(slope),
                          samples=len(rows), method="least squares on the H values, no interval (tutorial)")
        table = Table(columns=[Column("H"), Column("g2_frozen", "G^2 frozen", ".4g"),
                               Column("se", "s.e.", ".2g"), Column("g2_flow_T", "G^2 of the flow at T", ".4g")],
                      rows=rows, title="G^2 against H")
        return StudyResult(summary={"rows": rows, "slope": float(slope)}, verdicts=[rec], tables=[table])
''')
print(f"{study_file}: {len(study_file.read_text().splitlines())} lines")

# %% [markdown]
# That file is the whole study. `attnflow study run FILE.py:CLASS` loads it (its folder goes on
# `sys.path`, so the computation `late_g2_study:frozen_g2` is importable by name in every worker) and
# runs it exactly like a built-in study.

# %%
import json
import subprocess
import sys

out = Path("out") / "tutorial_study" / "run"
attnflow = str(Path(sys.executable).with_name("attnflow"))  # the command line of this environment
cmd = [attnflow, "study", "run", f"{study_file}:FrozenG2", "--out", str(out), "--quick", "-q"]
print("$ attnflow study run", *cmd[3:])
print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout or "(quiet)")
summary = json.loads((out / "summary.json").read_text())
print((out / "table.md").read_text())
print("verdict:", summary["verdicts"][0]["verdict"], "| slope", round(summary["slope"], 3))
print("tasks:", {k: v["kind"] for k, v in summary["run"]["tasks"].items()})

# %% [markdown]
# A killed study resumes: the finished tasks are skipped (their stored results are read back bit for
# bit), the others run. Here we delete one task's result, as if the study had been killed during it.

# %%
import shutil

from attnflow.studies import run_study

before = (out / "summary.json").read_bytes()
shutil.rmtree(out / "runs" / "g2_H16")
again = run_study(f"{study_file}:FrozenG2", out, quick=True)
log = json.loads((out / "run_log.json").read_text())
print({name: "skipped" if t.get("skipped") else "ran" for name, t in log["tasks"].items()})
print("same summary.json:", (out / "summary.json").read_bytes() == before)

# %% [markdown]
# On a Dask cluster the tasks go to the cluster's workers (the study directory must be visible to them).
# A `LocalCluster` stands in for a real one; `scheduler="tcp://host:8786"` works the same way.

# %%
from dask.distributed import LocalCluster

with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
    on_dask = run_study(f"{study_file}:FrozenG2", Path("out") / "tutorial_study" / "dask", quick=True,
                        scheduler=cluster.scheduler_address)
print("same numbers on Dask:", on_dask["rows"] == summary["rows"], "| workers:",
      json.loads((Path("out") / "tutorial_study" / "dask" / "run_log.json").read_text())["workers"])
