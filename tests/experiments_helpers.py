"""Shared configs of the experiments-layer tests (imported as ``experiments_helpers``; conftest puts
``tests/`` on ``sys.path``).

``TINY`` is a run that takes a fraction of a second: 2 paths, 8 tokens on S^2, 2 heads, OU weights,
20 Euler steps, a record every 5 steps and a checkpoint every 10.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import yaml

TINY: dict[str, Any] = {
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


def tiny(**changes: Any) -> dict:
    """A deep copy of TINY with top-level keys replaced (``tiny(seed=3, heads={"H": 3})``)."""
    return {**copy.deepcopy(TINY), **copy.deepcopy(changes)}


def tiny_with(**changes: Any) -> dict:
    """TINY with nested changes, ``section__key=value``; the value ``...`` deletes the key."""
    d = copy.deepcopy(TINY)
    for dotted, value in changes.items():
        node, parts = d, dotted.split("__")
        for p in parts[:-1]:
            node = node[p]
        if value is ...:
            del node[parts[-1]]
        else:
            node[parts[-1]] = value
    return d


def tiny_file_tokens(tmp_path: Path, d: int = 3, **changes: Any) -> dict:
    """TINY with its 8 tokens read from ``tmp_path/x.npy`` (dimension d).

    The dimension of file tokens is known only when the run is built, so a config whose weights do
    not fit it (e.g. ``weights.F`` 2 x 2 with d = 3) is valid on load and its run fails: the sweep
    tests use it to make some tasks fail.
    """
    import attnflow as af

    path = Path(tmp_path) / f"x{d}.npy"
    if not path.is_file():
        np.save(path, af.tokens.uniform(1, 8, d, seed=1)[0].numpy())
    return tiny(tokens={"init": "file", "path": str(path)}, **changes)


def write_yaml(tmp_path: Path, cfg: dict | None = None, name: str = "c.yaml") -> Path:
    """Write a config as YAML into tmp_path and return the path."""
    p = Path(tmp_path) / name
    p.write_text(yaml.safe_dump(TINY if cfg is None else cfg))
    return p
