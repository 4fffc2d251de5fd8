r"""Studies ``monotonicity`` and ``sufficient_condition`` (arXiv 2605.04279 claims 1-3; NOTES.md §7).

``monotonicity``: over random head sets (symmetric Gaussian, orthogonal ranges :math:`M_hM_{h'} = 0`,
identical, approximately orthogonal with defect eps), SA and USA, flat and sphere, attnflow RK4
trajectories (ascent, V = M) are recorded and :func:`attnflow.observables.head_energy_rates` splits
:math:`dE_h/dt` at every record; :func:`~attnflow.observables.check_monotonicity` says which of
:math:`E_{\rm multi}` and :math:`E_h` are monotone, by how much they are not and which term is responsible.

``sufficient_condition``: the sufficient conditions attnflow derives (labelled [derived]) and their
robustness:

* (S1) per-head monotonicity: symmetric :math:`M_h = V_h`, orthogonal ranges, flat dynamics: the cross
  term vanishes and the self term is :math:`\ge 0`. With a defect eps the cross/self ratio grows like
  :math:`C\varepsilon^p` (p fitted) and monotonicity holds while it stays below 1. On the sphere the
  radial shadows remain at eps = 0.
* (S2) SA, :math:`E_{\rm multi}`: with per-head normalisations :math:`Z^h_i` within a relative spread
  :math:`\delta_i` of their mean, :math:`dE_{\rm multi}/dt \ge 0` whenever
  :math:`\delta_i\sum_h|P w^h_i| \le |P\sum_h w^h_i|` at every token (Cauchy-Schwarz); equal
  normalisations (:math:`\delta = 0`) always suffice.

Both studies compute in ``analyse`` (``plan`` returns no runs): they are not resumable per run; the full
variants take about a minute each on one busy core.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveFloat, PositiveInt

from ..geometry import get_geometry
from ..model import tokens
from ..model.transformer import TransformerModel
from ..observables.multihead import HeadEnergyRates, check_monotonicity, head_energy_rates, head_outputs
from ..simulation import NonFiniteStateError, simulate
from .base import Study, StudyAnalysis, StudyConfig, StudyRuns
from .multihead_common import HEAD_FAMILIES, fit_order, head_family, jsonable, one_thread
from .registry import register

__all__ = ["MonotonicityStudy", "SufficientConditionStudy"]

Kind = Literal["usa", "softmax"]
Geo = Literal["sphere", "flat"]
Family = Literal["symmetric", "orthogonal", "identical", "approx_orthogonal", "approx_identical"]


class MonotonicityConfig(StudyConfig):
    n: int = Field(20, ge=2, description="tokens per configuration (>= 2)", examples=[12])
    d: PositiveInt = Field(3, description="token dimension (>= H for orthogonal heads)", examples=[6])
    H: int = Field(3, ge=2, description="heads (>= 2)", examples=[3])
    configs: PositiveInt = Field(64, description="random configurations per family", examples=[32])
    beta: PositiveFloat = Field(1.0, description="inverse temperature (> 0)", examples=[1.0])
    scale: PositiveFloat = Field(6.0, description="operator norm of each head", examples=[1.5])
    eps: float = Field(0.1, ge=0, description="defect of the approx_orthogonal family", examples=[0.1])
    t1: PositiveFloat = Field(3.0, description="horizon on the sphere", examples=[3.0])
    flat_t1: PositiveFloat = Field(
        0.5, description="horizon of the flat dynamics (norms grow)", examples=[0.5]
    )
    flat_scale: PositiveFloat = Field(
        1.5,
        description="operator norm of the heads in the flat USA dynamics (it blows up at 6)",
        examples=[1.5],
    )
    dt: PositiveFloat = Field(0.01, description="RK4 step", examples=[0.02])
    record_every: PositiveInt = Field(10, description="record every k steps", examples=[5])
    families: list[Family] = Field(list(HEAD_FAMILIES[:4]), min_length=1, description="head families")
    kinds: list[Kind] = Field(["usa", "softmax"], min_length=1, description="attention kinds")
    geometries: list[Geo] = Field(["sphere", "flat"], min_length=1, description="geometries")
    seed: int = Field(0, ge=0, description="seed of tokens and heads", examples=[0])


def _expected(family: str, kind: str, geo: str) -> tuple[str, str]:
    """[derived] expectations (NOTES §7) for E_multi and for every E_h."""
    multi = "monotone" if (kind == "usa" or family == "identical") else "may fail"
    if family == "identical":
        head = multi
    elif family == "orthogonal":
        head = "fails (radial shadows)" if get_geometry(geo).unit_norm else "monotone"
    else:
        head = "may fail"
    return multi, head


def _verdict(expected: str, violations: int) -> str:
    if expected == "monotone":
        return "holds" if violations == 0 else "FAILS"
    if expected.startswith("fails"):
        return "holds (violations seen)" if violations else "not seen"
    return f"{violations} configs"


def _trajectory_rates(model, x0, heads, t1, dt, every, beta, kind, geo):
    try:
        ds = simulate(model, x0, heads, t1=t1, dt=dt, integrator="rk4", ledger=False, record_every=every)
        broke = False
    except NonFiniteStateError as err:
        ds, broke = err.partial, True
    xs = torch.as_tensor(ds.positions.values).permute(1, 0, 2, 3)
    times = ds.time.values
    keep, items = [], []
    for k, x in enumerate(xs):
        r = head_energy_rates(x, heads, beta, attention=kind, geometry=geo)
        if all(torch.isfinite(getattr(r, f)).all() for f in ("self_term", "cross_term", "radial_term")):
            keep.append(k)
            items.append(r)
    return times[keep], HeadEnergyRates.stack(items), broke, len(times) - len(keep)


class MonotonicityStudy(Study):
    name = "monotonicity"
    description = (
        "arXiv 2605.04279: is E_multi / each E_h monotone along SA and USA flows, flat and sphere, for "
        "symmetric, orthogonal, identical and approximately orthogonal heads? (radial shadows)"
    )
    Config = MonotonicityConfig

    def quick_params(self) -> dict:
        return {"n": 6, "configs": 3, "t1": 0.2, "flat_t1": 0.1, "dt": 0.02, "record_every": 5}

    def plan(self, config) -> dict:
        return {}

    def analyse(self, config, runs: StudyRuns, out_dir: Path, *, figures: Callable | None = None):
        c = config
        rows = []
        x0 = tokens.uniform(c.configs, c.n, c.d, seed=c.seed)
        with one_thread():
            for fam in c.families:
                heads = head_family(fam, c.configs, c.H, c.d, seed=c.seed + 1, scale=c.scale, eps=c.eps)
                for kind in c.kinds:
                    for geo in c.geometries:
                        model = TransformerModel(
                            direction="ascent", attention=kind, beta=c.beta, geometry=geo, backend="torch"
                        )
                        curved = get_geometry(geo).unit_norm
                        t1 = c.t1 if curved else c.flat_t1
                        # flat USA grows like exp(beta |M| |x|^2): smaller heads there; SA keeps |M|
                        hs = heads * (c.flat_scale / c.scale) if (not curved and kind == "usa") else heads
                        every = c.record_every if curved else 1  # flat: every step (short runs)
                        times, rates, broke, dropped = _trajectory_rates(
                            model, x0, hs, t1, c.dt, every, c.beta, kind, geo
                        )
                        rep = check_monotonicity(times, rates)
                        exp_m, exp_h = _expected(fam, kind, geo)
                        head_bad = ~rep.head_monotone.all(1)
                        resp = Counter(r for r in rep.head_responsible.ravel() if r)
                        rows.append(
                            {
                                "family": fam,
                                "attention": kind,
                                "geometry": geo,
                                "records": int(len(times)),
                                "non_finite_records_dropped": dropped,
                                "blew_up": broke,
                                "multi_configs_violating": int((~rep.multi_monotone).sum()),
                                "multi_sample_fraction": float(rep.multi_negative_fraction.mean()),
                                "multi_worst_relative": float(rep.multi_worst_relative.min()),
                                "head_configs_violating": int(head_bad.sum()),
                                "head_sample_fraction": float(rep.head_negative_fraction.mean()),
                                "head_worst_relative": float(rep.head_worst_relative.min()),
                                "responsible": dict(resp),
                                "expected_multi": exp_m,
                                "expected_head": exp_h,
                                "verdict_multi": _verdict(exp_m, int((~rep.multi_monotone).sum())),
                                "verdict_head": _verdict(exp_h, int(head_bad.sum())),
                            }
                        )
        summary = jsonable({"configs": c.configs, "rows": rows, "derived": "NOTES.md section 7"})
        lines = [
            f"{c.configs} configurations per row; n = {c.n}, d = {c.d}, H = {c.H}, beta = {c.beta}, "
            f"|M_h| = {c.scale} (flat USA: {c.flat_scale}, it blows up at larger heads), eps = {c.eps}; "
            "horizon "
            f"{c.t1} on the sphere (recorded every {c.record_every} steps of {c.dt:g}), {c.flat_t1} flat "
            "(recorded "
            "every step; a run that blows up is cut there, records with non-finite energies dropped); a "
            "violation is sigma dE/dt < -1e-9 x (sum of abs(terms)).",
            "",
            "| family | attn | geometry | E_multi: configs violating | samples | worst rel. | expected | "
            "verdict | E_h: configs violating | samples | worst rel. | responsible | expected | verdict |",
            "|" + "---|" * 14,
        ]
        for r in rows:
            resp = ", ".join(f"{k.replace('_term', '')} {v}" for k, v in r["responsible"].items()) or "-"
            lines.append(
                f"| {r['family']} | {r['attention']} | {r['geometry']} | {r['multi_configs_violating']}/"
                f"{c.configs} | {r['multi_sample_fraction']:.3f} | {r['multi_worst_relative']:.2e} | "
                f"{r['expected_multi']} | {r['verdict_multi']} | {r['head_configs_violating']}/{c.configs} | "
                f"{r['head_sample_fraction']:.3f} | {r['head_worst_relative']:.2e} | {resp} | "
                f"{r['expected_head']} | {r['verdict_head']} |"
            )
        files = figures({"study": self.name, "rows": rows}, out_dir) if figures else {}
        return StudyAnalysis(summary=summary, table="\n".join(lines) + "\n", figures=files)


# -- sufficient_condition ----------------------------------------------------------------------------
class SufficientConditionConfig(StudyConfig):
    n: int = Field(12, ge=2, description="tokens per configuration (>= 2)", examples=[12])
    d: PositiveInt = Field(6, description="token dimension (>= H)", examples=[6])
    H: int = Field(3, ge=2, description="heads (>= 2)", examples=[3])
    configs: PositiveInt = Field(200, description="random states per eps", examples=[200])
    beta: PositiveFloat = Field(1.0, description="inverse temperature (> 0)", examples=[1.0])
    scale: PositiveFloat = Field(1.5, description="operator norm of each head", examples=[1.5])
    eps: list[float] = Field(
        [0.0, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0],
        min_length=2,
        description="orthogonality defects (>= 0)",
        examples=[[0.0, 0.01, 0.1]],
    )
    s2_n: int = Field(20, ge=2, description="tokens of the S2 states", examples=[20])
    s2_d: int = Field(3, ge=2, description="token dimension of the S2 states", examples=[3])
    s2_scale: PositiveFloat = Field(6.0, description="operator norm of the S2 heads", examples=[6.0])
    seed: int = Field(0, ge=0, description="seed", examples=[0])


def _softmax_condition(x, heads, beta):
    """(S2): per token, delta_i sum_h |P w^h_i| <= |P sum_h w^h_i|, and dE_multi/dt (SA, sphere)."""
    w = head_outputs(x, heads, beta, attention="softmax")
    Z = torch.exp(beta * torch.einsum("pid,phde,pje->phij", x, heads, x)).sum(-1)  # [P, H, n]
    delta = (Z / Z.mean(1, keepdim=True) - 1).abs().amax(1)  # [P, n]
    Pw = w - (w * x.unsqueeze(1)).sum(-1, keepdim=True) * x.unsqueeze(1)
    lhs = delta * Pw.norm(dim=-1).sum(1)
    rhs = Pw.sum(1).norm(dim=-1)
    cond = (lhs <= rhs).all(-1)  # [P]
    rate = head_energy_rates(x, heads, beta, attention="softmax").multi
    return cond, rate, delta.amax(-1)


class SufficientConditionStudy(Study):
    name = "sufficient_condition"
    description = (
        "arXiv 2605.04279: the derived sufficient conditions for monotone E_h (orthogonal heads, flat) and "
        "E_multi (SA, equal normalisations) and their robustness to an orthogonality defect eps"
    )
    Config = SufficientConditionConfig

    def quick_params(self) -> dict:
        return {"configs": 8, "eps": [0.0, 0.01, 0.1, 1.0]}

    def plan(self, config) -> dict:
        return {}

    def analyse(self, config, runs: StudyRuns, out_dir: Path, *, figures: Callable | None = None):
        c = config
        x = tokens.uniform(c.configs, c.n, c.d, seed=c.seed)
        x2 = tokens.uniform(c.configs, c.s2_n, c.s2_d, seed=c.seed + 7)
        rows = []
        with one_thread():
            for k, eps in enumerate(c.eps):
                heads = head_family(
                    "approx_orthogonal", c.configs, c.H, c.d, seed=c.seed + 1 + k, scale=c.scale, eps=eps
                )
                prod = (
                    max(
                        float(torch.linalg.matrix_norm(heads[:, h] @ heads[:, g], ord=2).max())
                        for h in range(c.H)
                        for g in range(c.H)
                        if g != h
                    )
                    / c.scale**2
                )
                row = {"eps": eps, "defect": prod}
                for kind in ("usa", "softmax"):
                    for geo in ("flat", "sphere"):
                        r = head_energy_rates(x, heads, c.beta, attention=kind, geometry=geo)
                        s = r.self_term.sum(-1)
                        cross = r.cross_term.sum(-1)
                        rad = r.radial_term.sum(-1)
                        key = f"{kind}_{geo}"
                        row[key] = {
                            "self_min": float(s.min()),
                            "cross_over_self_max": float((cross.abs() / s).max()),
                            "radial_neg_over_self_max": float(((-rad).clamp_min(0) / s).max()),
                            "violating_fraction": float((r.per_head < 0).double().mean()),
                            "worst_relative": float(
                                (r.per_head / (s + cross.abs() + rad.abs())).min().clamp_max(0)
                            ),
                        }
                near_id = head_family(
                    "approx_identical", c.configs, c.H, c.s2_d, seed=c.seed + 1 + k, scale=c.s2_scale, eps=eps
                )
                cond, rate, spread = _softmax_condition(x2, near_id, c.beta)
                row["S2"] = {
                    "condition_fraction": float(cond.double().mean()),
                    "violations": int((rate < 0).sum()),
                    "violations_with_condition": int(((rate < 0) & cond).sum()),
                    "max_normalisation_spread": float(spread.max()),
                }
                rows.append(row)
        eps = np.array([r["eps"] for r in rows])
        fits = {
            f"{kind}_flat": fit_order(eps, [r[f"{kind}_flat"]["cross_over_self_max"] for r in rows])
            for kind in ("usa", "softmax")
        }
        small = eps <= 0.05  # before the ratio saturates (the defect is then no longer small)
        fits.update(
            {
                f"{kind}_flat_eps_le_0.05": fit_order(
                    eps[small],
                    [
                        r[f"{kind}_flat"]["cross_over_self_max"]
                        for r, s_ in zip(rows, small, strict=True)
                        if s_
                    ],
                )
                for kind in ("usa", "softmax")
            }
        )
        fits.update(
            {
                f"{kind}_sphere_radial": fit_order(
                    eps[eps > 0],
                    [r[f"{kind}_sphere"]["radial_neg_over_self_max"] for r in rows if r["eps"] > 0],
                )
                for kind in ("usa", "softmax")
            }
        )
        onset = {}
        for key in ("usa_flat", "softmax_flat", "usa_sphere", "softmax_sphere"):
            bad = [r["eps"] for r in rows if r[key]["violating_fraction"] > 0]
            onset[key] = min(bad) if bad else None
        s2_ok = all(r["S2"]["violations_with_condition"] == 0 for r in rows)
        summary = jsonable(
            {
                "rows": rows,
                "order_fits": fits,
                "violation_onset_eps": onset,
                "S2_implication_holds": s2_ok,
                "conditions": {
                    "S1": "[derived] symmetric M_h = V_h, M_h M_h' = 0 (h != h'), flat dynamics => every E_h "
                    "non-decreasing (cross term 0, self term >= 0); sphere: additionally sum_i radial^h_i "
                    ">= 0",
                    "S2": "[derived] SA: delta_i sum_h |P w^h_i| <= |P sum_h w^h_i| at every token => "
                    "E_multi "
                    "non-decreasing (delta_i = max_h |Z^h_i / mean_h Z^h_i - 1|)",
                },
            }
        )
        lines = [
            f"{c.configs} random states (uniform tokens, n = {c.n}, d = {c.d}) per eps; S1 columns: heads "
            "orthogonal + "
            "eps x (normalised symmetric); S2 columns (SA, E_multi): one head + eps x (normalised "
            "symmetric) "
            f"per head, |M_h| ~ {c.s2_scale}, n = {c.s2_n}, d = {c.s2_d}; S1: |M_h| ~ {c.scale}, H = {c.H}, "
            f"beta = {c.beta}. Ratios are the worst over "
            "states and heads of |cross| / self and (negative radial) / self (terms summed over tokens).",
            "",
            "| eps | max abs(M_h M_h')/s^2 | USA flat: cross/self | viol. | SA flat: cross/self | viol. | "
            "USA sphere: radial/self | viol. | SA sphere: radial/self | viol. | S2 holds | SA E_multi viol. "
            "(with S2) |",
            "|" + "---|" * 12,
        ]
        for r in rows:
            u, s, us, ss = r["usa_flat"], r["softmax_flat"], r["usa_sphere"], r["softmax_sphere"]
            lines.append(
                f"| {r['eps']:g} | {r['defect']:.2e} | {u['cross_over_self_max']:.2e} | "
                f"{u['violating_fraction']:.3f} "
                f"| {s['cross_over_self_max']:.2e} | {s['violating_fraction']:.3f} | "
                f"{us['radial_neg_over_self_max']:.2e} | {us['violating_fraction']:.3f} | "
                f"{ss['radial_neg_over_self_max']:.2e} | {ss['violating_fraction']:.3f} | "
                f"{r['S2']['condition_fraction']:.2f} | {r['S2']['violations']} "
                f"({r['S2']['violations_with_condition']}) |"
            )
        lines += ["", "| fit (worst ratio ~ C eps^p) | p | C |", "|---|---|---|"]
        for k, f in fits.items():
            p = "-" if f["order"] is None else f"{f['order']:.3f}"
            C = "-" if f["C"] is None else f"{f['C']:.3g}"
            lines.append(f"| {k} | {p} | {C} |")
        files = figures({"study": self.name, **summary}, out_dir) if figures else {}
        return StudyAnalysis(summary=summary, table="\n".join(lines) + "\n", figures=files)


register(MonotonicityStudy())
register(SufficientConditionStudy())
