"""Shared pieces of the security suite (issue 29): tiny runs of every kind and crafted files.

``Evil`` pickles to a call of ``open(marker, "w")``: unpickling it creates the marker file, so a test
proves that nothing ran by asserting that the marker is absent.
"""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import torch

TINY_RUN = {
    "name": "tiny",
    "model": {"direction": "descent", "backend": "torch"},
    "weights": {"process": "ornstein_uhlenbeck", "sigma2": 0.5},
    "tokens": {"init": "octahedral", "n": 8, "d": 3},
    "heads": {"H": 2},
    "integrator": {"dt": 0.01, "t1": 0.2},
    "record": {"every": 5},
    "paths": 2,
    "checkpoint_every": 10,
}

TINY_PDE = {
    "name": "pde_s1",
    "model": "pde",
    "dynamics": {"direction": "ascent", "attention": "softmax", "beta": 1.0},
    "weights": {"process": "oscillating", "forcing": "s1"},
    "heads": {"init": "identity", "H": 2, "scale": 1.0},
    "density": {"init": "von_mises_fisher", "d": 2, "centres": [[1.0, 0.0], [0.0, 1.0]], "kappa": 6.0},
    "pde": {"band_limit": 24},
    "integrator": {"dt": 0.02, "t1": 0.2},
    "record": {"every": 3},
    "checkpoint_every": 4,
}

TINY_TRAINING = {
    "name": "small",
    "seed": 1,
    "model": {"direction": "ascent", "beta": 1.0},
    "flow": {"d": 3, "layers": 1, "heads": 2, "t1": 1.0, "steps_per_layer": 1, "param": "dv"},
    "task": {"kind": "measure", "loss": "mmd", "paths": 4, "n": 6},
    "train": {
        "steps": 4,
        "lr": 0.05,
        "batch": 2,
        "gradient": "autograd",
        "record_every": 2,
        "checkpoint_every": 2,
    },
}


def cfg(which: dict) -> dict:
    return copy.deepcopy(which)


class Evil:
    """Unpickling an ``Evil(path)`` calls ``open(path, "w")``: it creates ``path``."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def write_evil_checkpoints(target: Path, marker: Path, style: str) -> None:
    """Write a checkpoint whose unpickling creates ``marker``: a plain pickle (``legacy``) or a torch zip
    archive (``zip``) whose ``data.pkl`` holds the payload next to plausible keys."""
    payload = {"format": 1, "records": 1, "last_record_step": 0, "sim": Evil(marker), "solver": Evil(marker)}
    if style == "legacy":
        target.write_bytes(pickle.dumps(payload, protocol=2))
    else:
        torch.save(payload, target)


def set_status(run_dir: Path, status: str) -> None:
    meta_path = run_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["status"] = status
    meta_path.write_text(json.dumps(meta))
