"""Reproduction manifests: the experiment configs of a paper's experiments, shipped as presets.

The reproduction itself (runs, analysis, figures) is the study of the manifest's name in
:mod:`attnflow.studies` (``attnflow study run massucco2026``; ``attnflow.studies.reproduce`` and
``attnflow reproduce`` are its aliases); this module only reads the manifests and builds their configs.

A manifest (``presets/<name>.yaml``, ``kind: reproduction``) names one base preset per regime (a plain
experiment config, see docs/design.md) and the head counts; the base preset is run once per H with
``heads.H`` overridden. ``quick=True`` keeps the model and shrinks paths, horizon and token count
(manifest key ``quick``) for tests.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

from .schema import load_yaml

__all__ = ["PRESETS", "available_reproductions", "load_manifest", "load_preset", "regime_configs"]

PRESETS = Path(__file__).resolve().parent / "presets"


# -- manifests and configs ---------------------------------------------------------------------------
def available_reproductions() -> list[str]:
    """Names of the shipped reproduction manifests."""
    out = []
    for p in sorted(PRESETS.glob("*.yaml")):
        with open(p) as fh:
            if (load_yaml(fh) or {}).get("kind") == "reproduction":
                out.append(p.stem)
    return out


def load_manifest(name: str) -> dict:
    """The manifest ``presets/<name>.yaml`` (or a path to a manifest file)."""
    path = Path(name)
    if not path.suffix:
        path = PRESETS / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(
            f"unknown reproduction {name!r}; valid: {', '.join(available_reproductions())} "
            "(or a manifest path)"
        )
    with open(path) as fh:
        man = load_yaml(fh)
    if not isinstance(man, dict) or man.get("kind") != "reproduction":
        raise ValueError(f"{path} is not a reproduction manifest (needs 'kind: reproduction')")
    man["_dir"] = str(path.parent)
    return man


def load_preset(file: str, base_dir: str | Path = PRESETS) -> dict:
    """A base preset as a plain dict (validated later by the experiments layer)."""
    with open(Path(base_dir) / file) as fh:
        return load_yaml(fh)


def regime_configs(
    manifest: dict,
    *,
    quick: bool = False,
    paths: int | None = None,
    n: int | None = None,
    t1: float | None = None,
    H: Sequence[int] | None = None,
    seed: int | None = None,
) -> list[tuple[str, int, dict]]:
    """Every (regime key, H, config dict) of a manifest, with the quick / explicit overrides applied."""
    over = dict(manifest.get("quick", {})) if quick else {}
    for k, v in (("paths", paths), ("n", n), ("t1", t1), ("seed", seed)):
        if v is not None:
            over[k] = v
    Hs = [int(h) for h in (H if H is not None else manifest["H"])]
    out = []
    for reg in manifest["regimes"]:
        base = load_preset(reg["preset"], manifest.get("_dir", PRESETS))
        for h in Hs:
            cfg = copy.deepcopy(base)
            cfg["heads"]["H"] = h
            if "paths" in over:
                cfg["paths"] = int(over["paths"])
            if "n" in over:
                cfg["tokens"]["n"] = int(over["n"])
            if "t1" in over:
                cfg["integrator"]["t1"] = float(over["t1"])
            if "seed" in over:
                cfg["seed"] = int(over["seed"])
            if "precision" in over:
                cfg["precision"] = str(over["precision"])
            cfg["name"] = f"{manifest['name']}_{reg['key']}_H{h}"
            out.append((reg["key"], h, cfg))
    return out
