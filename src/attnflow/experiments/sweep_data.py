"""Reading a sweep directory: its index, the live status of its tasks, and their runs combined into one
labelled Dataset (:func:`open_sweep`); :func:`sweep_info` summarises it. Running a sweep is
:mod:`attnflow.experiments.sweep`.

Combination (:func:`open_sweep`). Every swept key becomes a dimension named after it with dots
replaced by underscores (``heads.H`` -> ``heads_H``), its grid values as coordinate. Tasks that did
not finish are filled with NaN and flagged in the ``task_status`` variable. Variables whose shape
changes with a swept key (``tokens.n`` changes ``token`` of ``positions``, ``heads.H`` changes
``head``, ``integrator.t1`` changes ``time``...) cannot share one array: :func:`open_sweep` raises
:class:`SweepShapeError` naming the key, the dimension and the variables that do combine, which can
be selected with ``variables=[...]``; each task can always be opened with :func:`open_run`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .errors import ConfigError
from .files import CorruptFileError, confined, disk_usage, read_json
from .schema import ExperimentConfig, config_diff, load_config
from .store import CONFIG_FILE, DATA_DIR, CorruptRunError, read_meta, verify_run

__all__ = [
    "SUMMARY_FILE",
    "TASKS_FILE",
    "SweepShapeError",
    "dim_name",
    "finished_status",
    "open_sweep",
    "read_index",
    "run_finished",
    "sweep_info",
]

TASKS_FILE = "tasks.json"
SUMMARY_FILE = "sweep.json"


class SweepShapeError(ValueError):
    """The swept results cannot be combined into one array (a key changes a non-swept dimension)."""


def dim_name(key: str) -> str:
    """Dimension name of a swept dotted key: ``heads.H`` -> ``heads_H``."""
    return key.replace(".", "_")


def finished_status(run_dir: Path, config: ExperimentConfig | dict | None = None) -> tuple[bool, str | None]:
    """(finished, why not) of a run directory: "done" in meta.json, a store that verifies
    (:func:`attnflow.experiments.store.verify_run`) and, if given, the same config. ``why`` is set only
    for a run that says "done" but fails the checks."""
    try:
        status = read_meta(run_dir).get("status")
    except CorruptFileError as exc:
        return False, str(exc)
    if status != "done" or not (run_dir / DATA_DIR).is_dir():
        return False, None
    try:
        verify_run(run_dir)
    except CorruptRunError as exc:
        return False, str(exc)
    if config is not None:
        try:
            if config_diff(load_config(run_dir / CONFIG_FILE), load_config(config)):
                return False, None
        except ConfigError:
            return False, None
    return True, None


def run_finished(run_dir: str | Path, config: ExperimentConfig | dict | None = None) -> bool:
    """Whether ``run_dir`` holds a finished run (status ``done`` and a store that verifies), of ``config``
    if given."""
    return finished_status(Path(run_dir), config)[0]


def _live_status(task_dir: Path) -> str:
    """The status in a task's meta.json; "done" only if its store verifies, else "corrupt"."""
    try:
        status = read_meta(task_dir).get("status", "pending")
    except CorruptFileError:
        return "corrupt"
    if status == "done" and not run_finished(task_dir):
        return "corrupt"
    return status


def read_index(out_dir: str | Path) -> dict:
    """The ``tasks.json`` of a sweep directory: base config, grid, swept keys, task name -> params.

    Raises
    ------
    FileNotFoundError
        ``out_dir`` is not a sweep directory.
    """
    out = Path(out_dir)
    p = out / TASKS_FILE
    if not p.is_file():
        raise FileNotFoundError(f"{out} is not a sweep directory: {TASKS_FILE} not found")
    fix = "rerun the sweep with resume=False to rewrite it"
    index = read_json(p, "the sweep index", fix)
    ok = (
        isinstance(index, dict)
        and isinstance(index.get("base"), dict)
        and isinstance(index.get("grid"), dict)
        and isinstance(index.get("keys"), list)
        and isinstance(index.get("tasks"), dict)
        and all(isinstance(v, dict) for v in index["tasks"].values())
    )
    if not ok:
        raise CorruptFileError(f"the sweep index {p} is corrupt (not the layout attnflow writes); {fix}")
    for name in index["tasks"]:
        confined(out, name, what=f"task directory named in {p}")
    return index


def _coord_value(v: Any) -> Any:
    if v is None or isinstance(v, (list, dict)):
        return json.dumps(v)
    return v


def _responsible_keys(keys: list[str], params: dict[str, dict], sig: dict[str, Any]) -> list[str]:
    """Keys k such that two tasks differing only in k have different signatures."""
    found = []
    for k in keys:
        groups: dict[str, set] = {}
        for name, s in sig.items():
            rest = json.dumps(
                {kk: v for kk, v in params[name].items() if kk != k}, sort_keys=True, default=str
            )
            groups.setdefault(rest, set()).add(s)
        if any(len(g) > 1 for g in groups.values()):
            found.append(k)
    return found or keys


def open_sweep(out_dir: str | Path, *, variables: list[str] | None = None) -> xr.Dataset:
    """Combine the finished tasks of a sweep into one Dataset, the swept keys as dimensions.

    Parameters
    ----------
    out_dir : path
        A sweep directory written by :func:`run_sweep`.
    variables : list of str or None
        Data variables to combine (default all); use it to keep those whose shapes agree when a
        swept key changes a dimension (e.g. ``["energy", "G2"]`` when sweeping ``tokens.n``).

    Returns
    -------
    xarray.Dataset
        Dims ``(dim_name(key) for key in grid) + run dims``; coordinate ``task`` (task directory)
        and variable ``task_status`` (done, failed, ...) over the swept dims. Unfinished tasks are NaN.

    Raises
    ------
    SweepShapeError
        If a swept key changes the shape or the coordinates of a non-swept dimension.
    """
    out = Path(out_dir)
    index = read_index(out)
    keys, grid, tasks = index["keys"], index["grid"], index["tasks"]
    status = {name: _live_status(out / name) for name in tasks}
    opened = {}
    for name in tasks:
        if status[name] == "done":
            ds = xr.open_zarr(out / name / DATA_DIR)
            opened[name] = ds[variables] if variables is not None else ds
    if not opened:
        raise ValueError(f"no finished task in the sweep {out}; statuses: {sorted(set(status.values()))}")
    template = next(iter(opened.values()))

    # which variables keep their shape and coordinates across tasks
    def signature(ds: xr.Dataset, var: str) -> str:
        dims = ds[var].dims
        coords = {d: np.asarray(ds[d].values).tolist() for d in dims if d in ds.coords}
        return json.dumps({"sizes": {d: ds.sizes[d] for d in dims}, "coords": coords}, default=str)

    bad = [v for v in template.data_vars if len({signature(ds, v) for ds in opened.values()}) > 1]
    if bad:
        sig = {name: signature(ds, bad[0]) for name, ds in opened.items()}
        culprits = _responsible_keys(keys, {n: tasks[n] for n in opened}, sig)
        changed = [
            d
            for d in template[bad[0]].dims
            if len(
                {
                    json.dumps(
                        np.asarray(ds[d].values).tolist() if d in ds.coords else ds.sizes[d], default=str
                    )
                    for ds in opened.values()
                }
            )
            > 1
        ]
        good = [v for v in template.data_vars if v not in bad]
        raise SweepShapeError(
            f"cannot combine the sweep {out}: the swept key(s) {', '.join(culprits)} change the dimension(s) "
            f"{', '.join(changed)} of {', '.join(bad)}; combine only variables whose shapes agree with "
            f"open_sweep(dir, variables={good}) or open each task with open_run"
        )

    filler = xr.full_like(template, np.nan, dtype=float).drop_attrs(deep=False)
    # attributes shared by every finished task (per-task ones such as H or the config are dropped)
    attrs = {
        k: v
        for k, v in template.attrs.items()
        if all(
            k in ds.attrs and json.dumps(ds.attrs[k], default=str) == json.dumps(v, default=str)
            for ds in opened.values()
        )
    }
    shape = [len(grid[k]) for k in keys]
    dims = [dim_name(k) for k in keys]
    names = np.empty(shape, dtype=object)
    stat = np.empty(shape, dtype=object)
    nested: Any = np.empty(shape, dtype=object)
    for name, params in tasks.items():
        idx = tuple(
            next(
                i
                for i, v in enumerate(grid[k])
                if json.dumps(v, default=str) == json.dumps(params[k], default=str)
            )
            for k in keys
        )
        ds = opened.get(name, filler)
        nested[idx] = ds.expand_dims({dim_name(k): [_coord_value(params[k])] for k in keys})
        names[idx], stat[idx] = name, status[name]
    combined = xr.combine_nested(nested.tolist(), concat_dim=dims, combine_attrs="drop")
    combined.attrs = attrs
    combined = combined.assign_coords(task=(dims, names.astype(str)))
    combined["task_status"] = (dims, stat.astype(str))
    combined.attrs["sweep_keys"] = json.dumps(keys)
    return combined


def sweep_info(out_dir: str | Path) -> dict:
    """Summary of a sweep directory: grid, task statuses (live, from each ``meta.json``), errors, sizes."""
    out = Path(out_dir)
    index = read_index(out)
    summary = {}
    if (out / SUMMARY_FILE).is_file():
        summary = read_json(out / SUMMARY_FILE, "the sweep summary", "rerun the sweep to rewrite it")
        if not isinstance(summary, dict):
            summary = {}
    rows = {}
    for name, params in index["tasks"].items():
        try:
            meta = read_meta(out / name)
        except CorruptFileError:
            meta = {}
        st = _live_status(out / name)
        row = {"params": params, "status": st}
        if meta.get("n_steps"):
            row["progress"] = f"{meta.get('step', 0)}/{meta['n_steps']} steps"
        err = meta.get("error") or summary.get("tasks", {}).get(name, {}).get("error")
        if st == "failed" and err:
            row["error"] = err
        rows[name] = row
    counts: dict[str, int] = {}
    for r in rows.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {
        "dir": str(out),
        "name": index["base"].get("name"),
        "grid": index["grid"],
        "counts": counts,
        "tasks": rows,
        "size_bytes": disk_usage(out),
        "started": summary.get("started"),
        "ended": summary.get("ended"),
    }
