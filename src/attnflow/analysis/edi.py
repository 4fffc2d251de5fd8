r"""Audit of the discrete energy-dissipation identity (147) of arXiv 2605.18870.

For one configuration (number of heads H, weight process, noise kind, symmetric or not D) the projected
Euler / Euler-Maruyama scheme of Sec. 6 is run from the same initial tokens and heads at several step
sizes dt, and the two residuals of the energy ledger are read at the final time T (NOTES.md §3):

.. math:: R^{\mathrm{paper}}_T = \mathcal{E}_T - \mathcal{E}_0 - \int_0^T\partial_s\mathcal{E}\,ds
          - s\int_0^T G_s^2\,ds - M_T,\qquad
          R^{\mathrm{exact}}_T = (\text{same with } \hat G^2_s),

with :math:`G^2` the paper's strong upper gradient (harmonic-mean mobility, Lemma 4.12) and
:math:`\hat G^2` the exact dissipation power (:mod:`attnflow.observables.dissipation`), all integrals
left Riemann sums. A residual that is a discretisation error vanishes as dt -> 0 (fitted order > 0); a
residual that tends to a non-zero limit (order ~ 0) means the identity itself does not hold.

For stochastic weights every dt uses the same Brownian path: the run at dt = m * dt_min draws m standard
normals per step from the per-path noise streams (:class:`attnflow.random.BrownianSource` with
``refine = m``, the draws ``attnflow.simulate`` would use at the finest dt with the same seed) and sums
them, :math:`z^{(m\,\delta)}_k = m^{-1/2}\sum_{l<m} z^{(\delta)}_{mk+l}`. Each run goes through the
one driver :func:`attnflow.simulation.integrate` and its in-memory sink.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

from ..dynamics.threads import torch_threads
from ..model import heads as heads_mod, tokens as tokens_mod
from ..model.registry import forcing_for_dimension, make_weight_process
from ..model.transformer import DIRECTIONS, TransformerModel
from ..model.weights import NOISE_KINDS, WeightProcess
from ..observables.ledger import residual_order
from ..simulation import MemorySink, Simulator, integrate, n_steps_for

__all__ = ["AUDIT_FULL", "AUDIT_QUICK", "check_edi", "check_edi_cli", "check_edi_table", "run_audit"]

#: The named audit cases: case -> (name in attnflow.model.registry.WEIGHT_PROCESSES, parameters);
#: the oscillating forcing is the one defined in the tokens' dimension (``forcing_for_dimension``).
WEIGHTS: dict[str, tuple[str, dict]] = {
    "frozen": ("constant", {}),
    "ou": ("ornstein_uhlenbeck", {"F": "identity", "sigma2": 1.0}),
    "oscillating": ("oscillating", {"phases": "per_head"}),
    "oscillating_shared": ("oscillating", {"phases": "shared"}),
}
DEFAULT_DTS = (1e-2, 5e-3, 2.5e-3, 1.25e-3)

#: Sizes of the full audit (run_audit) and of its quick mode (tests): kept small enough for ~3 min /
#: a few seconds on 2 CPU cores; the table header states them.
AUDIT_FULL = {"n": 32, "paths": 4, "T": 1.0, "dts": (2e-2, 1e-2, 5e-3, 2.5e-3, 1.25e-3), "seed": 0, "d": 3}
AUDIT_QUICK = {"n": 12, "paths": 2, "T": 0.5, "dts": (2e-2, 1e-2, 5e-3), "seed": 0, "d": 3}


def weight_process(weights: str, noise: str = "symmetric", d: int = 3) -> WeightProcess:
    """The weight process of a named audit case (Sec. 6 of the paper, NOTES.md §2), built by the registry.

    ``frozen``: constant heads; ``ou``: OU with F = I, sigma^2 = 1 and the given noise kind;
    ``oscillating``: forcing with per-head phases 2 pi h / H (the paper's model);
    ``oscillating_shared``: one forcing for every head (the published figures).
    """
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; valid: {', '.join(WEIGHTS)}")
    if noise not in NOISE_KINDS:
        raise ValueError(f"unknown noise {noise!r}; valid: {', '.join(NOISE_KINDS)}")
    name, params = WEIGHTS[weights]
    params = dict(params)
    if name == "ornstein_uhlenbeck":
        params["noise"] = noise
    elif name == "oscillating":
        params["forcing"] = forcing_for_dimension(d)
    return make_weight_process(name, **params)


def _check_dts(dts: Sequence[float], T: float) -> tuple[tuple[float, ...], list[int]]:
    dts = tuple(float(h) for h in dts)
    if len(dts) < 2 or len(set(dts)) != len(dts) or not all(math.isfinite(h) and h > 0 for h in dts):
        raise ValueError(f"dts must hold at least two distinct step sizes > 0: got {dts}")
    hmin = min(dts)
    ratios = []
    for h in dts:
        m = round(h / hmin)
        if abs(h / hmin - m) > 1e-9 * m:
            raise ValueError(
                f"every dt must be a whole multiple of the finest one ({hmin:g}) so that one Brownian path "
                f"serves all of them: got dt = {h:g} (ratio {h / hmin:.6g}); use e.g. dts halving each time"
            )
        ratios.append(m)
    for h in dts:
        n_steps_for(0.0, T, h)
    return dts, ratios


def check_edi(
    H: int,
    weights: str = "frozen",
    *,
    noise: str = "symmetric",
    dts: Sequence[float] = DEFAULT_DTS,
    T: float = 1.0,
    n: int = 64,
    paths: int = 4,
    seed: int = 0,
    direction: str = "descent",
    symmetric: bool = True,
    d: int = 3,
    beta: float = 1.0,
    backend: str = "torch",
    device: str = "cpu",
) -> dict:
    r"""Residuals of identity (147) at time T for several dt, with the paper's G^2 and the exact Ghat^2.

    Parameters
    ----------
    H : int
        Number of heads (>= 1).
    weights : {"frozen", "ou", "oscillating", "oscillating_shared"}
        Weight process (see :func:`weight_process`).
    noise : {"symmetric", "full"}
        Noise shape of the OU weights (ignored for deterministic weights).
    dts : sequence of float
        Step sizes, each a whole multiple of the finest; T/dt must be whole.
    T : float
        Final time.
    n, paths, d : int
        Tokens, Monte Carlo paths, dimension (octahedral initial tokens, NOTES.md §2).
    seed : int
        Seed of the initial tokens, heads and Brownian path.
    direction : {"descent", "ascent"}
    symmetric : bool
        Initial heads Z + Z^T (the authors' choice) or non-symmetric Gaussian Z.
    beta : float
    backend : {"torch", "auto", "numba"}
        Field evaluation backend (default: the PyTorch reference path).
    device : str
        Torch device of the simulation.

    Returns
    -------
    dict
        ``config`` (the parameters), ``per_dt`` (one dict per dt: ``dt``, ``exact_mean_abs``,
        ``exact_max_abs``, ``paper_mean_abs``, ``paper_max_abs``, signed means ``exact_mean``,
        ``paper_mean``, ``gap_mean_abs`` = mean |R_paper - R_exact| = mean |int (G^2 - Ghat^2)|,
        ``delta_energy_mean_abs``), ``order_exact`` and ``order_paper`` (fits of the mean |R| against dt,
        :func:`attnflow.observables.ledger.residual_order`), ``order_gap`` (the same fit of the gap
        R_paper - R_exact = s int (Ghat^2 - G^2): order ~ 0 means the paper's residual tends to a
        non-zero limit) and ``seconds``.
    """
    if isinstance(H, bool) or not isinstance(H, int) or H < 1:
        raise ValueError(f"H must be an integer >= 1: got {H!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}: got {direction!r}")
    if not (isinstance(T, (int, float)) and math.isfinite(T) and T > 0):
        raise ValueError(f"T must be a finite number > 0: got {T!r}")
    process = weight_process(weights, noise, d)
    dts, ratios = _check_dts(dts, float(T))
    t_start = time.perf_counter()
    model = TransformerModel(direction=direction, beta=beta, weights=process, backend=backend)
    x0 = tokens_mod.octahedral(paths, n, d, seed=seed)
    make = heads_mod.symmetric_gaussian if symmetric else heads_mod.gaussian
    D0 = make(paths, H, d, seed=seed)
    per_dt = []
    for dt, m in zip(dts, ratios, strict=True):
        sim = Simulator(model, x0, D0, dt=dt, seed=seed, ledger=True, noise_refine=m, device=device)
        K = n_steps_for(0.0, float(T), dt)
        sc = integrate(sim, K, record_every=K, sink=MemorySink()).records[-1].scalars
        rp, re = sc["residual_paper"], sc["residual_exact"]
        per_dt.append(
            {
                "dt": dt,
                "exact_mean_abs": float(re.abs().mean()),
                "exact_max_abs": float(re.abs().max()),
                "exact_mean": float(re.mean()),
                "paper_mean_abs": float(rp.abs().mean()),
                "paper_max_abs": float(rp.abs().max()),
                "paper_mean": float(rp.mean()),
                "gap_mean_abs": float((rp - re).abs().mean()),
                "delta_energy_mean_abs": float((sc["energy"] - sim.E0.cpu()).abs().mean()),
            }
        )
    hs = [r["dt"] for r in per_dt]
    config = {
        "H": H,
        "weights": weights,
        "noise": noise if process.stochastic else None,
        "symmetric": bool(symmetric),
        "direction": direction,
        "n": n,
        "d": d,
        "paths": paths,
        "T": float(T),
        "beta": float(beta),
        "seed": seed,
        "dts": list(dts),
        "backend": backend,
    }
    return {
        "config": config,
        "per_dt": per_dt,
        "order_exact": residual_order(hs, [r["exact_mean_abs"] for r in per_dt]),
        "order_paper": residual_order(hs, [r["paper_mean_abs"] for r in per_dt]),
        "order_gap": residual_order(hs, [r["gap_mean_abs"] for r in per_dt]),
        "seconds": time.perf_counter() - t_start,
    }


def check_edi_table(configs: Sequence[dict]) -> list[dict]:
    """Run :func:`check_edi` for each configuration (a dict of its keyword arguments) and summarise.

    Returns
    -------
    list of dict
        One row per configuration: the ``config`` entries, the residuals at the finest dt
        (``exact_mean_abs``, ``exact_max_abs``, ``paper_mean_abs``, ``paper_max_abs``, ``gap_mean_abs``,
        ``delta_energy_mean_abs``), the fitted orders with standard errors (``order_exact``,
        ``order_exact_se``, ``order_paper``, ``order_paper_se``, ``order_gap``, ``order_gap_se``),
        ``seconds``, and the full ``per_dt`` list.
    """
    rows = []
    for cfg in configs:
        if not isinstance(cfg, dict) or "H" not in cfg:
            raise ValueError(
                f"each configuration must be a dict of check_edi arguments with 'H': got {cfg!r}"
            )
        res = check_edi(**cfg)
        fine = min(res["per_dt"], key=lambda r: r["dt"])
        rows.append(
            {
                **res["config"],
                **{k: v for k, v in fine.items() if k != "dt"},
                "dt_min": fine["dt"],
                "order_exact": res["order_exact"]["order"],
                "order_exact_se": res["order_exact"]["stderr"],
                "order_paper": res["order_paper"]["order"],
                "order_paper_se": res["order_paper"]["stderr"],
                "order_gap": res["order_gap"]["order"],
                "order_gap_se": res["order_gap"]["stderr"],
                "seconds": res["seconds"],
                "per_dt": res["per_dt"],
            }
        )
    return rows


def audit_configs(
    quick: bool = False, H: Sequence[int] | None = None, weights: Sequence[str] | None = None
) -> list[dict]:
    """Configurations of the audit: H x weights with symmetric heads, plus variants.

    Variants (when their H and weights are selected): OU with full noise (H = 10, or the largest H
    below it), and non-symmetric heads (frozen and OU) for H = 1 and the next selected H.
    """
    size = AUDIT_QUICK if quick else AUDIT_FULL
    Hs = list(H) if H is not None else ([1, 4] if quick else [1, 10, 100])
    ws = list(weights) if weights is not None else ["frozen", "ou", "oscillating", "oscillating_shared"]
    for w in ws:
        if w not in WEIGHTS:
            raise ValueError(f"unknown weights {w!r}; valid: {', '.join(WEIGHTS)}")
    for h in Hs:
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            raise ValueError(f"every H must be an integer >= 1: got {h!r}")
    base = {k: size[k] for k in ("n", "paths", "T", "dts", "seed", "d")}
    cfgs = []
    for h in Hs:
        for w in ws:
            if w == "oscillating_shared" and weights is None and h != sorted(Hs)[min(1, len(Hs) - 1)]:
                continue  # by default the shared-forcing variant runs for one H > 1 only
            cfgs.append({"H": h, "weights": w, **base})
    small = sorted(Hs)[:2]
    if "ou" in ws:
        cfgs.append({"H": small[-1], "weights": "ou", "noise": "full", **base})
    for h in small:
        for w in ("frozen", "ou"):
            if w in ws:
                cfgs.append({"H": h, "weights": w, "symmetric": False, **base})
    return cfgs


def _fmt(x: float) -> str:
    return "nan" if x is None or not math.isfinite(x) else f"{x:.2e}"


def _order(p: float, se: float) -> str:
    if not math.isfinite(p):
        return "nan"
    return f"{p:.2f}" + (f" ± {se:.2f}" if math.isfinite(se) else "")


def format_table(rows: Sequence[dict], *, title: str | None = None) -> str:
    """Markdown table of :func:`check_edi_table` rows (residuals at the finest dt and fitted orders)."""
    head = (
        "| H | weights | D | noise | dts | mean abs(R_exact) | max abs(R_exact) | order exact | "
        "mean abs(R_paper) | max abs(R_paper) | order paper | mean abs(gap) | order gap | mean abs(dE) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        dts = ", ".join(f"{h:g}" for h in r["dts"])
        if r["gap_mean_abs"] <= 1e-12 * r["delta_energy_mean_abs"]:  # G^2 = Ghat^2 up to roundoff
            gap, gap_order = "0 (roundoff)", "-"
        else:
            gap, gap_order = _fmt(r["gap_mean_abs"]), _order(r["order_gap"], r["order_gap_se"])
        lines.append(
            f"| {r['H']} | {r['weights']} | {'sym' if r['symmetric'] else 'non-sym'} | {r['noise'] or '-'} | "
            f"{dts} | {_fmt(r['exact_mean_abs'])} | {_fmt(r['exact_max_abs'])} | "
            f"{_order(r['order_exact'], r['order_exact_se'])} | {_fmt(r['paper_mean_abs'])} | "
            f"{_fmt(r['paper_max_abs'])} | {_order(r['order_paper'], r['order_paper_se'])} | "
            f"{gap} | {gap_order} | "
            f"{_fmt(r['delta_energy_mean_abs'])} |"
        )
    out = head + "\n".join(lines) + "\n"
    return (title + "\n\n" + out) if title else out


def _title(rows: Sequence[dict]) -> str:
    if not rows:
        return "Energy-dissipation audit (no configurations)"
    r = rows[0]
    return (
        f"Energy-dissipation identity (147), residuals at T = {r['T']:g} (finest dt) and fitted order of "
        f"mean abs(R) in dt; n = {r['n']}, d = {r['d']}, paths = {r['paths']}, beta = {r['beta']:g}, "
        f"direction = {r['direction']}, projected Euler, seed = {r['seed']}, octahedral tokens, heads Z+Z^T "
        "(sym) or Z (non-sym); one Brownian path refined across dt"
    )


def run_audit(
    json_path: str | Path | None,
    quick: bool = False,
    *,
    H: Sequence[int] | None = None,
    weights: Sequence[str] | None = None,
    threads: int | None = 1,
    device: str = "cpu",
) -> str:
    """Run the audit (H = 1, 10, 100; frozen, OU and oscillating weights; non-symmetric D) and tabulate it.

    Parameters
    ----------
    json_path : str, Path or None
        Where to write the rows (with every dt's residuals) as JSON; None: do not write.
    quick : bool
        Small sizes (:data:`AUDIT_QUICK`, H = 1, 4; a few seconds) instead of :data:`AUDIT_FULL`.
    H, weights : sequences or None
        Restrict the heads counts / weight processes (see :func:`audit_configs`).
    threads : int or None
        PyTorch intra-op threads during the audit (restored afterwards); None keeps the current setting.
        The default 1 is fastest here: the arrays are small and, on a busy machine, a thread pool
        mostly adds contention (measured: 2 threads 15 s vs 1 thread 0.5 s for one quick case).
    device : str
        Torch device of every simulation (``cpu``, ``cuda``, ``cuda:N``).

    Returns
    -------
    str
        The markdown table, its header stating the parameters.
    """
    t0 = time.perf_counter()
    configs = audit_configs(quick, H, weights)
    if device != "cpu":
        configs = [{**cfg, "device": device} for cfg in configs]
    with torch_threads(None if threads is None else int(threads)) as used_threads:
        rows = check_edi_table(configs)
    table = format_table(rows, title=_title(rows))
    if json_path is not None:
        payload = {
            "identity": "arXiv 2605.18870 eq. (147)",
            "quick": bool(quick),
            "seconds": time.perf_counter() - t0,
            "torch_threads": used_threads,
            "rows": rows,
            "markdown": table,
        }
        Path(json_path).write_text(json.dumps(payload, indent=2, default=float))
    return table


def check_edi_cli(
    json_path: str | None,
    quick: bool,
    H: list[int] | None,
    weights: list[str] | None,
    *,
    device: str = "cpu",
) -> str:
    """Entry point of ``attnflow check-edi``: run :func:`run_audit` (on ``device``), print the table and
    return it."""
    table = run_audit(json_path, quick, H=H or None, weights=weights or None, device=device)
    print(table)
    return table
