# %% [markdown]
# # A sweep on Dask
#
# A sweep runs the cartesian product of a grid over a base config, one resumable run directory per task.
# Locally it uses a process pool; given the address of a Dask distributed scheduler it submits the tasks
# there (the sweep directory must be visible to the workers). Here a one-worker `LocalCluster` (a thread
# of this process, to start fast) stands in for a real cluster: `dask scheduler` and `dask worker` on
# other machines work the same way, with `scheduler="tcp://host:8786"`.

# %%
from pathlib import Path

from dask.distributed import LocalCluster

from attnflow.experiments import open_sweep, run_sweep, sweep_info

base = {
    "name": "ou_sweep",
    "model": {"direction": "descent", "backend": "torch"},
    "weights": {"process": "ornstein_uhlenbeck", "sigma2": 1.0},
    "tokens": {"init": "octahedral", "n": 24, "d": 3},
    "heads": {"H": 1},
    "integrator": {"dt": 0.02, "t1": 1.0},
    "record": {"every": 10},
    "paths": 2,
}
out = Path("out") / "tutorial_sweep"  # where the script runs (the site build: a temporary directory)
with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
    summary = run_sweep(base, {"heads.H": [1, 4, 16]}, out, scheduler=cluster.scheduler_address)
print({k: v for k, v in summary.items() if k in ("done", "failed")})
info = sweep_info(out)
for name, row in info["tasks"].items():
    print(name, row["params"], row["status"])

# %% [markdown]
# `open_sweep` combines the tasks into one dataset with the swept key as a dimension.

# %%
ds = open_sweep(out, variables=["G2", "Ghat2"])
print(ds)
avg = ds.G2.sel(time=slice(0.5, None)).mean(["time", "path"])
for H, v in zip(avg["heads_H"].values, avg.values, strict=True):
    print(f"H = {H}: time-averaged G^2 over [0.5, 1] = {v:.4f}")
