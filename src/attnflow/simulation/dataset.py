"""Records to a labelled :class:`xarray.Dataset` and the attributes that describe a run."""

from __future__ import annotations

import json

import numpy as np
import torch
import xarray as xr

from .._version import __version__
from ..integrators.base import grid_times
from .ledger import SCALARS
from .simulator import Record, Simulator

__all__ = ["records_to_dataset", "run_attrs"]


def records_to_dataset(
    records: list[Record], sim: Simulator, attrs: dict, *, positions: bool = True
) -> xr.Dataset:
    """Labelled dataset from records: dims (path, time, token, dim) and (path, time)."""
    steps = np.array([r.step for r in records])
    times = grid_times([r.time for r in records], steps, sim.t0, sim.dt)  # exact: ds.sel(time=9.2) works
    coords = {
        "path": np.arange(sim.first_path, sim.first_path + sim.P),
        "time": times,
        "step": ("time", steps),
    }
    data = {}
    if positions:
        data["positions"] = (("path", "time", "token", "dim"), torch.stack([r.x for r in records], 1).numpy())
        coords["token"] = np.arange(sim.n)
        coords["dim"] = np.arange(sim.d)
    if records and records[0].D is not None:
        data["heads"] = (
            ("path", "time", "head", "row", "col"),
            torch.stack([r.D for r in records], 1).numpy(),
        )
        coords["head"] = np.arange(sim.H)
    if records and records[0].scalars:
        for k in SCALARS:
            data[k] = (("path", "time"), torch.stack([r.scalars[k] for r in records], 1).numpy())
    if records and records[0].stats:  # cumulative integrator statistics (adaptive substeps, JKO iterations)
        for k in records[0].stats:
            data[f"integrator_{k}"] = (("time",), np.array([r.stats[k] for r in records], dtype=np.float64))
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def run_attrs(sim: Simulator, t1: float, record_every: int) -> dict:
    """Attributes describing a run (JSON-serialisable, stored with the data).

    ``integrator_order`` is the order the run really has: the integrator's deterministic order without
    weight noise, its strong order with it (``integrator_ode_order`` keeps the deterministic one). ``loop``
    is the step loop the run started on: ``fused`` (compiled, :mod:`attnflow.simulation.fused`) or ``python``
    (a run whose scores later leave the kernel's range goes on in the Python loop from there).
    """
    return {
        "attnflow_version": __version__,
        "model": json.dumps(sim.model.describe()),
        "direction": sim.model.direction,
        "sign": sim.model.sign,
        "integrator": sim.integrator.name,
        "integrator_order": _number(sim.order),
        "integrator_ode_order": sim.integrator.order,
        "token_noise": float(sim.model.token_noise),
        "dt": sim.dt,
        "t0": sim.t0,
        "t1": float(t1),
        "record_every": int(record_every),
        "seed": sim.seed,
        "dtype": str(sim.dtype).replace("torch.", ""),
        "device": str(sim.device),
        "n": sim.n,
        "d": sim.d,
        "H": sim.H,
        "paths": sim.P,
        "ledger": int(sim.ledger_on),
        "loop": sim.loop,
    }
