r"""End-to-end reproduction of a paper's experiments from a shipped manifest.

``reproduce("massucco2026", out_dir)`` reruns Section 6 of arXiv 2605.18870 (Massucco et al.): the
OU and oscillating weight regimes on S^2 (the oscillating one with per-head phases, the paper's model,
and with one shared forcing, what produced the published figures), for H in {1, 10, 100}. It

1. runs every (regime, H) through :func:`attnflow.experiments.store.run_experiment` (one run directory
   each under ``out_dir/runs``; an interrupted reproduction resumes where it stopped);
2. measures, per run, the time averages of G^2 (paper, harmonic-mean mobility, eq. (36)) and
   Ghat^2 (exact dissipation power) over a window (default: the second half [T/2, T]; the paper does not
   say which window it uses), computed exactly from the recorded ledger integrals
   (:math:`(\int_0^{t_b} G^2 - \int_0^{t_a} G^2)/(t_b - t_a)`, left Riemann sums over every step),
   their standard errors over paths, and the residuals of the two energy identities at T;
3. fits k(H) = a H^b per regime (:func:`attnflow.analysis.fits.fit_power_law`);
4. writes ``summary.json`` and the figures ``fig1_tokens.png``, ``fig2_G2.png``, ``fig3_ledger.png``.

A manifest (``presets/<name>.yaml``, ``kind: reproduction``) names one base preset per regime (a plain
experiment config, see docs/design.md) and the head counts; the base preset is run once per H with
``heads.H`` overridden. ``quick=True`` keeps the model and shrinks paths, horizon and token count
(manifest key ``quick``) for tests.
"""

from __future__ import annotations

import copy
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np
import xarray as xr

from ..analysis.fits import fit_power_law
from .schema import load_config, load_yaml
from .store import run_experiment

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


# -- running -----------------------------------------------------------------------------------------
def run_config(cfg: dict, run_dir: Path, *, resume: bool = True, progress: bool = False) -> xr.Dataset:
    """Run (or reopen, or continue) one configuration in ``run_dir`` through the experiments layer."""

    return run_experiment(load_config(cfg), run_dir, resume=resume, progress=progress)


# -- analysis ----------------------------------------------------------------------------------------
def _at(ds: xr.Dataset, var: str, t: float) -> np.ndarray:
    return np.asarray(ds[var].sel(time=t, method="nearest").values, dtype=float)


def time_average(ds: xr.Dataset, var: str, window: tuple[float, float]) -> np.ndarray:
    r"""Per-path time average of ``var`` in {G2, Ghat2} over ``window`` from its ledger integral.

    :math:`\frac{1}{t_b - t_a}\left(\int_0^{t_b} - \int_0^{t_a}\right)`, the integrals being the left
    Riemann sums over every step (recorded as ``int_G2``, ``int_Ghat2``). Shape [P].
    """
    ta, tb = window
    times = ds.time.values
    ka, kb = int(np.argmin(abs(times - ta))), int(np.argmin(abs(times - tb)))
    ta, tb = float(times[ka]), float(times[kb])
    if tb <= ta:
        raise ValueError(
            f"window {window} holds no recorded interval (recorded times {times[0]:g}..{times[-1]:g})"
        )
    iv = ds[f"int_{var}"]
    return (np.asarray(iv.isel(time=kb).values) - np.asarray(iv.isel(time=ka).values)) / (tb - ta)


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    v = np.asarray(v, float)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else float("nan")
    return float(v.mean()), se


def summarise_run(ds: xr.Dataset, window: tuple[float, float]) -> dict:
    """Numbers of one run: windowed G^2, Ghat^2 (mean, se over paths), residuals at T."""
    out: dict = {"paths": int(ds.sizes["path"]), "T": float(ds.time.values[-1])}
    for var in ("G2", "Ghat2"):
        per = time_average(ds, var, window)
        out[f"{var}_mean"], out[f"{var}_se"] = _mean_se(per)
        out[f"{var}_per_path"] = per.tolist()
    for var in ("residual_paper", "residual_exact"):
        r = np.asarray(ds[var].isel(time=-1).values, float)
        out[f"{var}_T"] = {"mean": float(r.mean()), "std": float(r.std(ddof=1)) if r.size > 1 else 0.0}
        out[f"{var}_max_abs"] = float(np.abs(np.asarray(ds[var].values)).max())
    dE = _at(ds, "energy", out["T"]) - _at(ds, "energy", 0.0)
    out["dE_T"] = {"mean": float(dE.mean()), "std": float(dE.std(ddof=1)) if dE.size > 1 else 0.0}
    return out


def versions() -> dict:
    """Python and package versions."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("attnflow", "torch", "numpy", "scipy", "xarray", "zarr", "numba", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _meta_wall(run_dir: Path) -> float | None:
    p = run_dir / "meta.json"
    if not p.is_file():
        return None
    try:
        m = json.loads(p.read_text())
    except json.JSONDecodeError:
        return None
    if "wall_time_s" in m:
        return float(m["wall_time_s"])
    s, e = m.get("started", m.get("start")), m.get("ended", m.get("end"))
    if isinstance(s, (int, float)) and isinstance(e, (int, float)):
        return float(e - s)
    if isinstance(s, str) and isinstance(e, str):
        from datetime import datetime

        try:
            return (datetime.fromisoformat(e) - datetime.fromisoformat(s)).total_seconds()
        except ValueError:
            return None
    return None


# -- the entry point ---------------------------------------------------------------------------------
def reproduce(
    name: str = "massucco2026",
    out_dir: str | Path = "out/massucco2026",
    quick: bool = False,
    resume: bool = True,
    progress: bool = True,
    *,
    window: tuple[float, float] | None = None,
    paths: int | None = None,
    n: int | None = None,
    t1: float | None = None,
    H: Sequence[int] | None = None,
    figures: Callable[..., dict] | None = None,
) -> dict:
    """Rerun every (regime, variant, H) of a reproduction manifest, fit, plot and summarise.

    Parameters
    ----------
    name : str
        Manifest name (``attnflow.experiments.reproduce.available_reproductions()``) or path.
    out_dir : str or Path
        Output directory: ``runs/<regime>_H<H>/`` (run directories), ``summary.json``, figures.
    quick : bool
        Same model with the manifest's ``quick`` sizes (few paths, T = 2, small n): a test in seconds.
    resume : bool
        Reuse finished runs and continue interrupted ones (``run_experiment(..., resume=True)``).
    progress : bool
        Print one line per run (and the store's progress).
    window : (t_a, t_b) or None
        Time window of the G^2 averages; default ``window_fraction`` x T (the second half).
    paths, n, t1, H : optional overrides
        Reduced or enlarged runs (recorded in the summary).
    figures : callable or None
        ``figures(datasets, summary, out_dir, snapshot_times=...) -> dict`` draws the figures
        (the CLI passes :func:`attnflow.plot.reproduction.plot_all`; the experiments layer does not
        import the plotting layer above it). None: no figures.

    Returns
    -------
    dict
        The summary also written to ``out_dir/summary.json``.
    """

    t_start = time.time()
    man = load_manifest(name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfgs = regime_configs(man, quick=quick, paths=paths, n=n, t1=t1, H=H)
    T = float(cfgs[0][2]["integrator"]["t1"])
    if window is None:
        fa, fb = man.get("window_fraction", [0.5, 1.0])
        window = (fa * T, fb * T)
    window = (float(window[0]), float(window[1]))
    if not (0 <= window[0] < window[1] <= T + 1e-9):
        raise ValueError(f"window must satisfy 0 <= t_a < t_b <= T = {T:g}: got {window}")
    datasets: dict[str, dict[int, xr.Dataset]] = {}
    regimes: dict[str, dict] = {}
    labels = {r["key"]: r for r in man["regimes"]}
    for key, h, cfg in cfgs:
        run_dir = out / "runs" / f"{key}_H{h}"
        t0 = time.time()
        if progress:
            print(
                f"[reproduce] {cfg['name']}: P={cfg['paths']} n={cfg['tokens']['n']} H={h} T={T:g} "
                f"-> {run_dir}",
                flush=True,
            )
        ds = run_config(cfg, run_dir, resume=resume, progress=progress)
        wall_here = time.time() - t0
        if progress:
            print(f"[reproduce] {cfg['name']} done in {wall_here:.1f} s", flush=True)
        datasets.setdefault(key, {})[h] = ds
        reg = regimes.setdefault(
            key,
            {
                "label": labels[key].get("label", key),
                "preset": labels[key]["preset"],
                "config": cfg,
                "per_H": {},
            },
        )
        s = summarise_run(ds, window)
        s.update(
            run_dir=str(run_dir.relative_to(out)),
            seed=int(cfg["seed"]),
            wall_time_s=_meta_wall(run_dir) or wall_here,
            wall_time_this_call_s=wall_here,
        )
        reg["per_H"][str(h)] = s
    published = man.get("published", {})
    for key, reg in regimes.items():
        Hs = sorted(int(h) for h in reg["per_H"])
        reg["H"] = Hs
        reg["config"] = {k: v for k, v in reg["config"].items() if k != "name"}
        reg["config"]["heads"] = {**reg["config"]["heads"], "H": Hs}
        for var in ("G2", "Ghat2"):
            y = [reg["per_H"][str(h)][f"{var}_mean"] for h in Hs]
            e = [reg["per_H"][str(h)][f"{var}_se"] for h in Hs]
            try:
                reg[f"fit_{var}"] = fit_power_law(Hs, y)
                if all(np.isfinite(e)) and all(v > 0 for v in e):
                    reg[f"fit_{var}_weighted"] = fit_power_law(Hs, y, e)
            except ValueError as err:
                reg[f"fit_{var}"] = {"error": str(err)}
        if key in published:
            reg["published"] = published[key]
    summary = {
        "name": man["name"],
        "paper": man.get("paper"),
        "quick": bool(quick),
        "overrides": {k: v for k, v in (("paths", paths), ("n", n), ("t1", t1), ("H", H)) if v is not None},
        "window": list(window),
        "window_note": "time averages over [t_a, t_b] from the ledger integrals (left Riemann sums over "
        "every step); the paper does not state its window, the default is the second half [T/2, T]",
        "fit_note": "k(H) = a H^b by least squares on (log H, log y); 95% t intervals with m - 2 dof "
        "(3 head counts: 1 dof, t = 12.71); fit_*_weighted weights by (y/se)^2",
        "T": T,
        "store": "attnflow.experiments.store.run_experiment",
        "regimes": regimes,
        "published": published,
        "versions": versions(),
        "command": " ".join(sys.argv),
    }
    summary["run_wall_time_s"] = float(
        sum(s["wall_time_s"] for r in regimes.values() for s in r["per_H"].values())
    )
    if figures is not None:
        snaps = [f * T for f in man.get("snapshot_fraction", [0.0, 0.8, 0.9, 1.0])]
        summary["figures"] = figures(datasets, summary, out, snapshot_times=snaps)
    summary["wall_time_s"] = time.time() - t_start
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=_json_default))
    return summary


def markdown_tables(summary: dict) -> str:
    """The fit table and the per-H table of a reproduction summary, as markdown.

    Parameters
    ----------
    summary : dict
        What :func:`reproduce` returns (or ``json.load`` of its ``summary.json``).

    Returns
    -------
    str
        Two tables: k(H) = a H^b fitted to the time-averaged G^2 per regime, next to the published
        values where the paper prints them; and per (regime, H) the time averages of G^2 and Ghat^2
        (mean +- standard error over paths) and the residuals of identity (147) at T (mean +- sd).
    """

    def ci(v):
        return f"[{v[0]:.3g}, {v[1]:.3g}]"

    lines = [
        "| regime | a | 95% CI of a | b | 95% CI of b | r | published |",
        "|---|---|---|---|---|---|---|",
    ]
    for reg in summary["regimes"].values():
        f = reg["fit_G2"]
        pub = reg.get("published") or {}
        if "a" in pub:
            ptxt = f"a = {pub['a']} {ci(pub['a_ci'])}, b = {pub['b']} {ci(pub['b_ci'])}"
        elif "b" in pub:
            ptxt = f"b ~ {pub['b']} (stated, no fit printed)"
        else:
            ptxt = "-"
        lines.append(
            f"| {reg['label']} | {f['a']:.3g} | {ci(f['a_ci'])} | {f['b']:.3g} | {ci(f['b_ci'])} "
            f"| {f['r']:.2f} | {ptxt} |"
        )
    lines += [
        "",
        "| regime | H | paths | G^2 | Ghat^2 | R_paper(T) | R_exact(T) | E_T - E_0 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for reg in summary["regimes"].values():
        for H, row in reg["per_H"].items():
            rp, rx, de = row["residual_paper_T"], row["residual_exact_T"], row["dE_T"]
            lines.append(
                f"| {reg['label']} | {H} | {row['paths']} | {row['G2_mean']:.3g} +- {row['G2_se']:.2g} "
                f"| {row['Ghat2_mean']:.3g} +- {row['Ghat2_se']:.2g} | {rp['mean']:.3g} +- {rp['std']:.2g} "
                f"| {rx['mean']:.3g} +- {rx['std']:.2g} | {de['mean']:.3g} +- {de['std']:.2g} |"
            )
    return "\n".join(lines) + "\n"


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
