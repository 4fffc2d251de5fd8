"""Reproduction manifests: the experiment configs of a paper's experiments, shipped as presets.

The reproduction itself (runs, analysis, figures) is the study of the manifest's name in
:mod:`attnflow.studies` (``attnflow study run massucco2026``; ``attnflow.studies.reproduce`` and
``attnflow reproduce`` are its aliases); this module only reads the manifests and builds their configs.

A manifest (``presets/<name>.yaml``, ``kind: reproduction``) names one base preset per regime (a plain
experiment config, see docs/design.md) and the head counts; the base preset is run once per H with
``heads.H`` overridden. ``quick=True`` keeps the model and shrinks paths, horizon and token count
(manifest key ``quick``) for tests.

Overrides, applied in this order (a later one wins): the manifest's ``overrides`` (e.g. the authors'
code defaults of ``massucco2026_code.yaml``), its ``quick`` sizes when ``quick=True``, then the explicit
arguments. The keys (:data:`OVERRIDE_KEYS`): ``paths``, ``n``, ``t1``, ``dt``, ``record_every``,
``seed``, ``precision`` and ``init`` (``shared``: one x0 and D0 copied to every path, the authors'
Monte Carlo; ``per_path``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

from .schema import load_yaml

__all__ = [
    "OVERRIDE_KEYS",
    "PRESETS",
    "available_reproductions",
    "load_manifest",
    "load_preset",
    "regime_configs",
]

#: Manifest / argument override -> the dotted key of the experiment config it sets.
OVERRIDE_KEYS = {
    "paths": "paths",
    "n": "tokens.n",
    "t1": "integrator.t1",
    "dt": "integrator.dt",
    "record_every": "record.every",
    "seed": "seed",
    "precision": "precision",
    "init": "init",
}

PRESETS = Path(__file__).resolve().parent / "presets"


def _as_float(v):
    """An integer time (``t1: 20``) as a float, for the strict schema; anything else as it is."""
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


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
    dt: float | None = None,
    init: str | None = None,
) -> list[tuple[str, int, dict]]:
    """Every (regime key, H, config dict) of a manifest, with the manifest's, quick and explicit overrides.

    Raises
    ------
    ValueError
        A manifest ``overrides`` / ``quick`` key that is not one of :data:`OVERRIDE_KEYS`.
    """
    over: dict = {}
    layers = [("overrides", manifest.get("overrides") or {})]
    if quick:
        layers.append(("quick", manifest.get("quick") or {}))
    for where, layer in layers:
        bad = sorted(set(layer) - set(OVERRIDE_KEYS))
        if bad:
            raise ValueError(
                f"the manifest {manifest.get('name')!r} has unknown {where} keys {bad}; valid: "
                f"{', '.join(OVERRIDE_KEYS)}"
            )
        over.update(layer)
    given = {"paths": paths, "n": n, "t1": t1, "seed": seed, "dt": dt, "init": init}
    over.update({k: v for k, v in given.items() if v is not None})
    Hs = [int(h) for h in (H if H is not None else manifest["H"])]
    out = []
    for reg in manifest["regimes"]:
        base = load_preset(reg["preset"], manifest.get("_dir", PRESETS))
        for h in Hs:
            cfg = copy.deepcopy(base)
            cfg["heads"]["H"] = h
            for key, value in over.items():
                *sections, leaf = OVERRIDE_KEYS[key].split(".")
                node = cfg
                for sec in sections:
                    node = node[sec]
                node[leaf] = _as_float(value) if key in ("t1", "dt") else value
            cfg["name"] = f"{manifest['name']}_{reg['key']}_H{h}"
            out.append((reg["key"], h, cfg))
    return out
