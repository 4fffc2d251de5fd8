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

Both studies plan their computations as study tasks (:class:`~attnflow.studies.tasks.ComputeTask`: the
rows of ``monotonicity`` at each dt, the rows of ``sufficient_condition``), pure functions of this module;
``analyse`` reads the stored rows and builds the verdict records and the table specs
(``monotonicity_tables``, ``sufficient_condition_tables``: pure functions of the summary and config).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from ..analysis.verdicts import Criterion, RobustnessCheck, record_description, record_identity, record_test
from ..geometry import get_geometry
from ..model import tokens
from ..model.transformer import TransformerModel
from ..observables.multihead import (
    HeadEnergyRates,
    check_monotonicity,
    head_energy_rates,
    head_outputs,
    multihead_velocity,
)
from ..simulation import NonFiniteStateError, simulate
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .common import value_tag
from .multihead_common import (
    HEAD_FAMILIES,
    Fraction,
    binomial_ci,
    fit_order,
    head_family,
    jsonable,
    one_thread,
    typed_result,
    verdict_tables,
)
from .registry import register
from .render import Column, Table
from .tasks import ComputeTask

__all__ = ["MonotonicityStudy", "SufficientConditionStudy"]


def _on_sphere(name: str) -> bool:
    """Whether a geometry named in a result row keeps tokens on the sphere (the geometry object decides)."""
    return get_geometry(name).unit_norm


Kind = Literal["usa", "softmax"]
Geo = Literal["sphere", "flat"]
Family = Literal["symmetric", "orthogonal", "identical", "approx_orthogonal", "approx_identical"]


class _HeadsConfig(StudyConfig):
    """The fields the two flow studies share: the number of heads and the inverse temperature."""

    H: int = Field(3, ge=2, description="heads (>= 2)", examples=[3])
    beta: PositiveFloat = Field(1.0, description="inverse temperature (> 0)", examples=[1.0])


class MonotonicityConfig(_HeadsConfig):
    n: int = Field(20, ge=2, description="tokens per configuration (>= 2)", examples=[12])
    d: PositiveInt = Field(3, description="token dimension (>= H for orthogonal heads)", examples=[6])
    configs: PositiveInt = Field(64, description="random configurations per family", examples=[32])
    scale: PositiveFloat = Field(6.0, description="operator norm of each softmax head", examples=[1.5])
    usa_scale: PositiveFloat = Field(
        1.5,
        description="operator norm of the USA heads (both geometries): USA weights grow like "
        "exp(beta |M|), at |M| = 6 a step of 0.01 moved a token by 2-5 rad",
        examples=[1.5],
    )
    eps: float = Field(0.1, ge=0, description="defect of the approx_orthogonal family", examples=[0.1])
    t1: PositiveFloat = Field(3.0, description="horizon on the sphere", examples=[3.0])
    flat_t1: PositiveFloat = Field(
        0.2,
        description="horizon of the flat dynamics (norms grow: at 0.5 SA |M_h| = 6 runs left float64 and "
        "tokens moved 0.62 per step of 0.01; at 0.2 the largest move per step is reported in the table)",
        examples=[0.2],
    )
    flat_multi_configs: PositiveInt = Field(
        400,
        description="configurations of the main value of the flat SA E_multi test (base family, smallest "
        "step of the study): 0 violations decide 'holds' against criterion_multi_fraction = 0.01 only from "
        "368 configurations on (configs_needed)",
        examples=[400],
    )
    dt: PositiveFloat = Field(0.01, description="RK4 step (also run at dt x dt_factors)", examples=[0.02])
    dt_factors: list[PositiveFloat] = Field(
        [0.5, 0.25], description="the other steps, as multiples of dt (convergence in dt)"
    )
    record_spacing: PositiveFloat = Field(
        0.1, description="time between records on the sphere", examples=[0.1]
    )
    flat_record_spacing: PositiveFloat = Field(0.01, description="time between records flat", examples=[0.01])
    families: list[Family] = Field(list(HEAD_FAMILIES[:4]), min_length=1, description="head families")
    kinds: list[Kind] = Field(["usa", "softmax"], min_length=1, description="attention kinds")
    geometries: list[Geo] = Field(["sphere", "flat"], min_length=1, description="geometries")
    criterion_multi_fraction: Fraction = Field(
        0.01,
        description="claim 1 holds if at most this fraction of configurations shows dE_multi/dt < 0",
        examples=[0.01],
    )
    criterion_head_fraction: Fraction = Field(
        0.05,
        description="claim 2 (per-head monotonicity fails for orthogonal heads on the sphere) holds if at "
        "least this fraction of configurations shows some dE_h/dt < 0",
        examples=[0.05],
    )
    head_scales: list[PositiveFloat] = Field(
        [1.0, 1.5, 3.0, 6.0],
        description="operator norms |M_h| of the SA heads of the head-scale robustness check of the sphere "
        "E_multi test (base family, study dt; the sign of dE_multi/dt depends on beta |M_h| only)",
        examples=[[1.0, 6.0]],
    )
    head_scale_configs: PositiveInt = Field(
        400,
        description="configurations per head scale of that check (enough for 0 violations to decide "
        "'holds' against criterion_multi_fraction = 0.01)",
        examples=[400],
    )
    seed: int = Field(0, ge=0, description="seed of tokens and heads", examples=[0])


SRC_MULTI = "2605.04279, abstract, claim 1 (its conditions are not public; NOTES.md section 7)"
SRC_RADIAL = "2605.04279, abstract, claim 2 (radial shadow terms; NOTES.md section 7)"
DERIVED_RATES = "derived: docs/studies/monotonicity/explain.md#rates"


def _every(spacing: float, dt: float) -> int:
    k = round(spacing / dt)
    if k < 1 or abs(k * dt - spacing) > 1e-9 * spacing:
        raise ValueError(
            f"record spacing / dt must be a whole number: got {spacing} / {dt}; choose the spacing as a "
            "multiple of every step of the study (dt x each dt factor)"
        )
    return k


def _trajectory_rates(model, x0, heads, t1, dt, every, beta, kind, geo):
    try:
        ds = simulate(model, x0, heads, t1=t1, dt=dt, integrator="rk4", ledger=False, record_every=every)
        broke = False
    except NonFiniteStateError as err:
        ds, broke = err.partial, True
    xs = torch.as_tensor(ds.positions.values).permute(1, 0, 2, 3)
    times = ds.time.values
    keep, items, speed = [], [], 0.0
    for k, x in enumerate(xs):
        r = head_energy_rates(x, heads, beta, attention=kind, geometry=geo)
        if all(torch.isfinite(getattr(r, f)).all() for f in ("self_term", "cross_term", "radial_term")):
            keep.append(k)
            items.append(r)
            v = multihead_velocity(x, heads, beta, attention=kind, geometry=geo)
            speed = max(speed, float(v.norm(dim=-1).max()))
    return times[keep], HeadEnergyRates.stack(items), broke, len(times) - len(keep), speed


def monotonicity_rows(c: MonotonicityConfig, dt: float) -> list[dict]:
    """Every (family, attention, geometry) row of the table at step ``dt`` (records at fixed times)."""
    rows = []
    x0 = tokens.uniform(c.configs, c.n, c.d, seed=c.seed)
    for fam in c.families:
        heads = head_family(fam, c.configs, c.H, c.d, seed=c.seed + 1, scale=1.0, eps=c.eps)
        for kind in c.kinds:
            hs = heads * (c.usa_scale if kind == "usa" else c.scale)
            for geo in c.geometries:
                model = TransformerModel(
                    direction="ascent", attention=kind, beta=c.beta, geometry=geo, backend="torch"
                )
                curved = get_geometry(geo).unit_norm
                t1 = c.t1 if curved else c.flat_t1
                every = _every(c.record_spacing if curved else c.flat_record_spacing, dt)
                times, rates, broke, dropped, speed = _trajectory_rates(
                    model, x0, hs, t1, dt, every, c.beta, kind, geo
                )
                rep = check_monotonicity(times, rates)
                head_bad = ~rep.head_monotone.all(1)
                resp = Counter(r for r in rep.head_responsible.ravel() if r)
                rows.append(
                    {
                        "dt": dt,
                        "family": fam,
                        "attention": kind,
                        "geometry": geo,
                        "scale": c.usa_scale if kind == "usa" else c.scale,
                        "records": int(len(times)),
                        "non_finite_records_dropped": dropped,
                        "blew_up": broke,
                        "max_move_per_step": speed * dt,
                        "multi_configs_violating": int((~rep.multi_monotone).sum()),
                        "multi_sample_fraction": float(rep.multi_negative_fraction.mean()),
                        "multi_worst_relative": float(rep.multi_worst_relative.min()),
                        "head_configs_violating": int(head_bad.sum()),
                        "head_sample_fraction": float(rep.head_negative_fraction.mean()),
                        "head_worst_relative": float(rep.head_worst_relative.min()),
                        "head_pairs_violating": int((~rep.head_monotone).sum()),
                        "responsible": dict(resp),
                    }
                )
    return rows


def _sa_base_family(c: MonotonicityConfig, geometry: str, configs: int, **update) -> MonotonicityConfig:
    """``c`` narrowed to one row of :func:`monotonicity_rows`: SA (softmax) on ``geometry`` for the base
    family (``symmetric`` if present, else the first of ``c.families``), ``configs`` configurations, and
    any further ``update`` (a head ``scale``)."""
    fam = "symmetric" if "symmetric" in c.families else c.families[0]
    return c.model_copy(
        update={
            "families": [fam],
            "kinds": ["softmax"],
            "geometries": [geometry],
            "configs": configs,
            **update,
        }
    )


def monotonicity_scale_rows(c: MonotonicityConfig) -> dict[float, dict]:
    """SA, sphere, the base family (symmetric if present) at the study dt, for each head scale of
    ``c.head_scales``: scale -> row of :func:`monotonicity_rows`."""
    return {
        s: monotonicity_rows(_sa_base_family(c, "sphere", c.head_scale_configs, scale=s), c.dt)[0]
        for s in c.head_scales
    }


def monotonicity_flat_rows(c: MonotonicityConfig) -> dict:
    """SA, flat, the base family, ``c.flat_multi_configs`` configurations at the study's smallest step:
    the row of :func:`monotonicity_rows` deciding the flat E_multi test."""
    return monotonicity_rows(
        _sa_base_family(c, "flat", c.flat_multi_configs), c.dt * min(1.0, *c.dt_factors)
    )[0]


def monotonicity_flat_task(config: dict) -> dict:
    """Study task: the row of :func:`monotonicity_flat_rows` (JSON)."""
    with one_thread():
        return {"row": jsonable(monotonicity_flat_rows(MonotonicityConfig(**config)))}


def monotonicity_scale_task(config: dict) -> dict:
    """Study task: the rows of :func:`monotonicity_scale_rows` (JSON: a list of [scale, row])."""
    with one_thread():
        rows = monotonicity_scale_rows(MonotonicityConfig(**config))
        return {"rows": jsonable([[s, r] for s, r in rows.items()])}


def configs_needed(threshold: float, cap: int = 100000) -> int:
    """The least number m of configurations for which 0 violations out of m give a Clopper-Pearson upper
    bound below ``threshold`` (the power of a test with criterion ``fraction <= threshold``)."""
    lo, hi = 1, cap
    if binomial_ci(0, hi)[1] >= threshold:
        raise ValueError(f"threshold {threshold} needs more than {cap} configurations; raise the threshold")
    while lo < hi:
        mid = (lo + hi) // 2
        if binomial_ci(0, mid)[1] < threshold:
            hi = mid
        else:
            lo = mid + 1
    return lo


def monotonicity_task(config: dict, dt: float) -> dict:
    """Study task: the rows of :func:`monotonicity_rows` at step ``dt`` for the config ``config`` (JSON)."""
    with one_thread():
        return {"rows": jsonable(monotonicity_rows(MonotonicityConfig(**config), dt))}


def sufficient_condition_task(config: dict, states: str = "uniform", fresh_heads: bool = False) -> dict:
    """Study task: the rows of :func:`sufficient_condition_rows` for the config ``config`` (JSON)."""
    with one_thread():
        c = SufficientConditionConfig(**config)
        return {"rows": jsonable(sufficient_condition_rows(c, states, fresh_heads=fresh_heads))}


def _row(rows, **key):
    for r in rows:
        if all(r[k] == v for k, v in key.items()):
            return r
    return None


def _frac(k: int, m: int) -> tuple[float, list[float]]:
    return k / m, list(binomial_ci(k, m))


def monotonicity_records(
    rows_by_dt: dict[float, list[dict]],
    c: MonotonicityConfig,
    scale_rows: dict[float, dict] | None = None,
    flat_row: dict | None = None,
) -> list:
    """The verdict records from the rows at every dt (pure: a test feeds it synthetic rows).

    ``rows_by_dt``: dt -> rows of :func:`monotonicity_rows`, the study's dt first; ``scale_rows``: head
    scale -> row of :func:`monotonicity_scale_rows` (SA, sphere), a robustness value of the sphere test;
    ``flat_row``: the row of :func:`monotonicity_flat_rows`, the main value of the flat test.
    """
    dts = list(rows_by_dt)
    base = rows_by_dt[dts[0]]
    m = c.configs
    recs = []
    # claim 1, softmax E_multi for heterogeneous heads: a test
    crit1 = Criterion(
        quantity="fraction of configurations (SA, heterogeneous symmetric heads, V = M) with dE_multi/dt < 0 "
        "at some record",
        op="<=",
        threshold=c.criterion_multi_fraction,
        declared_in="config: criterion_multi_fraction",
        note="a monotone energy gives 0",
    )
    fam0 = "symmetric" if _row(base, family="symmetric", attention="softmax") else c.families[0]

    def multi(rows, fam, geo):
        r = _row(rows, family=fam, attention="softmax", geometry=geo)
        return None if r is None else r["multi_configs_violating"]

    for geo0 in c.geometries:  # one record per geometry: different statements (radial terms or none)
        if _row(base, family=fam0, attention="softmax", geometry=geo0) is None:
            continue
        k, m0 = multi(base, fam0, geo0), m
        if not _on_sphere(geo0) and flat_row is not None:
            k, m0 = flat_row["multi_configs_violating"], c.flat_multi_configs
        v, ci = _frac(k, m0)
        vals = [(dt, multi(rows_by_dt[dt], fam0, geo0)) for dt in dts]
        fams = [f for f in c.families if f not in ("identical",) and multi(base, f, geo0) is not None]
        checks = [
            RobustnessCheck.from_values(
                crit1, "dt", [d for d, _ in vals], [x / m for _, x in vals],
                ci95=[binomial_ci(x, m) for _, x in vals],
            ),
            RobustnessCheck.from_values(
                crit1, "head family", fams, [multi(base, f, geo0) / m for f in fams],
                ci95=[binomial_ci(multi(base, f, geo0), m) for f in fams],
            ),
        ]  # fmt: skip
        statement = (
            "the multi-head energy E_multi is non-decreasing along the SA flow (ascent, V = M, "
            f"{geo0}) for heterogeneous heads (base: {fam0} heads, |M_h| = {c.scale:g}, beta = {c.beta:g})"
        )
        need = configs_needed(c.criterion_multi_fraction)
        notes = (
            f"power: 0 violations decide 'holds' only with m >= {need} configurations (Clopper-Pearson "
            f"upper bound < {c.criterion_multi_fraction:g}); the main value has m = {m0}"
            + (" and can only read 'fails' or 'inconclusive'" if m0 < need else "")
            + (f", the robustness values m = {m}" if m != m0 else "")
        )
        if not _on_sphere(geo0) and flat_row is not None:
            notes += (
                f"; main value at dt = {flat_row['dt']:g}, horizon {c.flat_t1:g}, largest move per step "
                f"{flat_row['max_move_per_step']:.3g}, blew up: {flat_row['blew_up']}"
            )
        if _on_sphere(geo0) and scale_rows:
            sc = sorted(scale_rows)
            ks = [scale_rows[s]["multi_configs_violating"] for s in sc]
            ms = c.head_scale_configs
            checks.append(
                RobustnessCheck.from_values(
                    crit1, "head scale beta |M_h|", [c.beta * s for s in sc], [k_ / ms for k_ in ks],
                    ci95=[binomial_ci(k_, ms) for k_ in ks],
                )
            )  # fmt: skip
            notes += f"; head-scale check: m = {ms} per scale, violating {dict(zip(sc, ks, strict=True))}"
            statement += (
                "; the sign of dE_multi/dt depends on beta |M_h| only, and the paper's 'suitable "
                "conditions' (not public) may bound beta |M_h|: the head-scale check says which scales fail"
            )
        recs.append(
            record_test(
                id=f"multi-energy-monotone-softmax-{geo0}",
                statement=statement,
                notes=notes,
                source=SRC_MULTI,
                criterion=crit1,
                value=v,
                ci95=ci,
                samples=m0,
                method="Clopper-Pearson interval over independent configurations",
                robustness=checks,
                extra={"violating": k},
            )
        )
    # claim 2, per-head monotonicity fails for orthogonal heads on the sphere, radial term responsible
    crit2 = Criterion(
        quantity="fraction of configurations (orthogonal heads, sphere) with some dE_h/dt < 0",
        op=">=",
        threshold=c.criterion_head_fraction,
        declared_in="config: criterion_head_fraction",
    )
    for kind in c.kinds:
        if _row(base, family="orthogonal", attention=kind, geometry="sphere") is None:
            continue

        def head(rows, kind=kind):
            r = _row(rows, family="orthogonal", attention=kind, geometry="sphere")
            return r["head_configs_violating"]

        def share(rows, kind=kind, fam="symmetric"):
            r = _row(rows, family=fam, attention=kind, geometry="sphere")
            if r is None:
                return 0, 0
            tot = sum(r["responsible"].values())
            return r["responsible"].get("radial_term", 0), tot

        k = head(base)
        v, ci = _frac(k, m)
        chk = RobustnessCheck.from_values(
            crit2,
            "dt",
            dts,
            [head(rows_by_dt[d]) / m for d in dts],
            ci95=[binomial_ci(head(rows_by_dt[d]), m) for d in dts],
        )
        recs.append(
            record_test(
                id=f"per-head-monotonicity-fails-orthogonal-sphere-{kind}",
                statement="for exactly orthogonal heads (M_h M_h' = 0) on the sphere some "
                "per-head energy E_h "
                f"decreases ({kind})",
                source=SRC_RADIAL,
                criterion=crit2,
                value=v,
                ci95=ci,
                samples=m,
                method="Clopper-Pearson interval over independent configurations",
                robustness=[chk],
                extra={"violating": k},
            )
        )
        # for exactly orthogonal heads the radial term is the only term that can be negative (cross = 0,
        # self >= 0, frozen heads): blaming it there is an identity. The test is on heads whose cross term
        # exists: generic symmetric heads, and approximately orthogonal ones as a robustness value
        r_o, tot_o = share(base, fam="orthogonal")
        if tot_o:
            recs.append(
                record_identity(
                    id=f"radial-shadow-only-negative-term-orthogonal-{kind}",
                    statement=f"orthogonal heads on the sphere: when E_h decreases, the radial term is the "
                    f"negative one ({kind})",
                    source=DERIVED_RATES,
                    why="for M_h M_h' = 0 the cross term vanishes and the self term is >= 0, so only the "
                    "radial term can be negative",
                    result={"radial": r_o, "pairs": tot_o},
                )
            )
        r_k, tot = share(base)
        if tot:
            fams = [f for f in ("symmetric", "approx_orthogonal") if share(base, fam=f)[1]]
            recs.append(
                record_description(
                    id=f"radial-shadow-responsible-{kind}",
                    statement="heads whose cross terms exist (generic symmetric heads; "
                    f"{kind}), sphere: share of the violating (configuration, head) pairs whose most "
                    "negative term at the worst time is the radial one, by dt and head family",
                    source=SRC_RADIAL,
                    result={
                        "by_dt": {
                            str(d): dict(zip(("radial", "pairs"), share(rows_by_dt[d]), strict=True))
                            for d in dts
                        },
                        "by_family": {
                            f: dict(zip(("radial", "pairs"), share(base, fam=f), strict=True)) for f in fams
                        },
                    },  # fmt: skip
                    notes="a description, not a test: the share is not contrasted with the pairs where E_h "
                    "does not decrease (the radial term can be the most negative term there too), so it does "
                    "not show that the radial term causes the decrease",
                )
            )
    # identities: true by construction, code tests
    usa = [r for rows in rows_by_dt.values() for r in rows if r["attention"] == "usa"]
    if usa:
        recs.append(
            record_identity(
                id="multi-energy-monotone-usa",
                statement="USA with symmetric M_h = V_h: E_multi never decreases (sphere and flat)",
                source=DERIVED_RATES,
                why="dE_multi/dt = (H n^3)^-1 sum_i |P sum_h f^h_i|^2 is a sum of squares",
                result={
                    "configs_violating": sum(r["multi_configs_violating"] for r in usa),
                    "worst_relative": min(r["multi_worst_relative"] for r in usa),
                },
            )
        )
    ident = [r for rows in rows_by_dt.values() for r in rows if r["family"] == "identical"]
    if ident:
        recs.append(
            record_identity(
                id="monotone-identical-heads",
                statement="identical heads: E_multi and every E_h are non-decreasing",
                source=DERIVED_RATES,
                why="identical heads are one head: a gradient flow whose rate is a "
                "(mobility-weighted) square",
                result={
                    "configs_violating": sum(
                        r["multi_configs_violating"] + r["head_configs_violating"] for r in ident
                    )
                },
            )
        )
    flat = [
        r
        for rows in rows_by_dt.values()
        for r in rows
        if r["family"] == "orthogonal" and not _on_sphere(r["geometry"])
    ]
    if flat:
        recs.append(
            record_identity(
                id="per-head-monotone-orthogonal-flat",
                statement="orthogonal heads, flat dynamics: every E_h is non-decreasing",
                source=DERIVED_RATES,
                why="M_h M_h' = 0 makes the cross term vanish identically and the self term is a square; no "
                "radial term without the projection",
                result={"configs_violating": sum(r["head_configs_violating"] for r in flat)},
            )
        )
    recs.append(
        record_description(
            id="monotonicity-table",
            statement="per family, attention and geometry: configurations and samples with a "
            "decreasing E_multi "
            "or E_h, the worst relative rate and the term responsible, at each dt",
            source=SRC_MULTI,
            result={
                "dts": dts,
                "max_move_per_step_sphere": max(
                    r["max_move_per_step"] for r in base if _on_sphere(r["geometry"])
                ),
                "max_move_per_step_flat": max(
                    r["max_move_per_step"] for r in base if not _on_sphere(r["geometry"])
                ),
            },
            notes="flat USA runs grow without bound (blow-up in finite time) and are cut there",
        )
    )
    return recs


class MonotonicityStudy(Study):
    name = "monotonicity"
    description = (
        "arXiv 2605.04279: is E_multi / each E_h monotone along SA and USA flows, flat and sphere, for "
        "symmetric, orthogonal, identical and approximately orthogonal heads? (radial shadows; at dt, dt/2, "
        "dt/4)"
    )
    Config = MonotonicityConfig

    @staticmethod
    def tables(summary: dict, config) -> list[Table]:
        """The page tables from the summary: ``monotonicity_tables``."""
        return monotonicity_tables(summary, config)

    def quick_params(self) -> dict:
        return {
            "n": 6,
            "configs": 3,
            "t1": 0.2,
            "flat_t1": 0.1,
            "flat_multi_configs": 6,
            "head_scales": [1.0, 6.0],
            "head_scale_configs": 4,
            "dt": 0.02,
            "dt_factors": [0.5],
            "record_spacing": 0.04,
            "flat_record_spacing": 0.02,
        }

    def plan(self, config) -> dict:
        c = config
        params = c.model_dump(mode="json")
        # measured ~30 s of CPU for the 16 rows at dt = 0.01 (64 configurations); cost ~ 1/dt
        scale = {
            "head_scales": ComputeTask(
                fn="attnflow.studies.multihead_flows:monotonicity_scale_task",
                params={"config": params},
                cost_s=4.0 * len(c.head_scales) * c.head_scale_configs / 64 * 0.01 / c.dt,
            )
        }
        if "flat" in c.geometries and "softmax" in c.kinds:
            scale["flat_multi"] = ComputeTask(
                fn="attnflow.studies.multihead_flows:monotonicity_flat_task",
                params={"config": params},
                cost_s=25.0 * c.flat_multi_configs / 64 * 0.0025 / (c.dt * min(1.0, *c.dt_factors)),
            )
        return scale | {
            f"rows_dt{value_tag(c.dt * f)}": ComputeTask(
                fn="attnflow.studies.multihead_flows:monotonicity_task",
                params={"config": params, "dt": c.dt * f},
                cost_s=30.0 * c.configs / 64 * 0.01 / (c.dt * f),
            )
            for f in (1.0, *c.dt_factors)
        }

    def analyse(self, config, runs: StudyRuns, out_dir: Path) -> StudyResult:
        c = config
        rows_by_dt = {
            c.dt * f: list(runs.result(f"rows_dt{value_tag(c.dt * f)}")["rows"]) for f in (1.0, *c.dt_factors)
        }
        scale_rows = {float(s): r for s, r in runs.result("head_scales")["rows"]}
        has_flat = "flat" in c.geometries and "softmax" in c.kinds
        flat_row = runs.result("flat_multi")["row"] if has_flat else None
        records = monotonicity_records(rows_by_dt, c, scale_rows, flat_row)
        rows = [r for rs in rows_by_dt.values() for r in rs]
        summary = {
            "configs": c.configs,
            "rows": rows,
            "head_scale_rows": [[s, r] for s, r in scale_rows.items()],
            "flat_multi_row": flat_row,
            "derived": "NOTES.md section 7",
        }
        data = {"study": self.name, "rows": rows_by_dt[c.dt]}
        return typed_result(summary, records, monotonicity_tables, c, data)


def monotonicity_tables(summary: dict, config: MonotonicityConfig) -> list[Table]:
    """The tables of ``monotonicity`` from its summary: the verdicts with their robustness, one row per
    (dt, family, attention, geometry)."""
    c = config
    dts = list(dict.fromkeys(r["dt"] for r in summary["rows"]))
    rows = [
        {
            **r,
            # the terms that carry the negative rates, with their counts (a label)
            "resp": ", ".join(f"{k.replace('_term', '')} {v}" for k, v in r["responsible"].items()) or None,
        }
        for r in summary["rows"]
    ]
    note = (
        f"{summary['configs']} configurations per row; n = {c.n}, d = {c.d}, H = {c.H}, beta = {c.beta}, "
        f"|M_h| = {c.scale} (SA), {c.usa_scale} (USA), eps = {c.eps}; horizon {c.t1} on the sphere (records "
        f"every {c.record_spacing:g}), {c.flat_t1} flat (records every {c.flat_record_spacing:g}; a run that "
        "blows up is cut there, records with non-finite energies dropped); every row at dt = "
        f"{', '.join(f'{d:g}' for d in dts)}; a violation is sigma dE/dt < -1e-9 x (sum of abs(terms)); "
        "'move' is the largest distance a token moves in one step (max speed x dt)."
    )
    verdicts = verdict_tables(summary["verdicts"], ".3g", robustness=True)
    table = Table(
        columns=[
            Column("dt", fmt="g"),
            Column("family"),
            Column("attention", "attn"),
            Column("geometry"),
            Column("max_move_per_step", "move", ".3f"),
            Column("multi_configs_violating", "E_multi: configs violating"),
            Column("multi_sample_fraction", "samples", ".3f"),
            Column("multi_worst_relative", "worst rel.", ".2e"),
            Column("head_configs_violating", "E_h: configs violating"),
            Column("head_sample_fraction", "samples (E_h)", ".3f"),
            Column("head_worst_relative", "worst rel. (E_h)", ".2e"),
            Column("resp", "responsible"),
        ],
        rows=rows,
        title="Rows",
        note=f"Configurations violating: out of {summary['configs']}.",
        id="rows",
    )
    return [replace(verdicts[0], note=note), *verdicts[1:], table]


# -- sufficient_condition ----------------------------------------------------------------------------
class SufficientConditionConfig(_HeadsConfig):
    n: int = Field(12, ge=2, description="tokens per configuration (>= 2)", examples=[12])
    d: PositiveInt = Field(6, description="token dimension (>= H)", examples=[6])
    configs: PositiveInt = Field(200, description="random states per eps", examples=[200])
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
    criterion_order_band: tuple[float, float] = Field(
        (0.8, 1.2),
        description="S1: the fitted order p of the worst |cross|/self ~ C eps^p must lie in this band "
        "(derived: order 1)",
        examples=[(0.8, 1.2)],
    )
    order_fit_max_eps: list[PositiveFloat] = Field(
        [0.05, 0.01, 0.1], min_length=1, description="upper ends of the fit range in eps (first: the study's)"
    )
    criterion_violation_fraction: Fraction = Field(
        0.01,
        description="S1 robust: at most this fraction of (state, head) pairs may have dE_h/dt < 0 (flat)",
        examples=[0.01],
    )
    clustered_kappa: NonNegativeFloat = Field(
        10.0,
        description="vMF kappa of the clustered states of the robustness rows (0: none)",
        examples=[10.0],
    )
    robust_eps: float = Field(
        0.1, gt=0, description="the defect at which S1's robustness is tested", examples=[0.1]
    )
    robust_configs: PositiveInt = Field(
        2000,
        description="random states of the S1 robustness test at robust_eps (uniform and clustered): sized "
        "so that a Clopper-Pearson interval over (state, head) pairs can decide against "
        "criterion_violation_fraction",
        examples=[2000],
    )
    seed: int = Field(0, ge=0, description="seed", examples=[0])


SRC_S = "derived: docs/studies/sufficient_condition/explain.md#conditions"


def sufficient_condition_records(
    rows: list[dict],
    c: SufficientConditionConfig,
    clustered: list[dict] | None = None,
    *,
    fresh: list[dict] | None = None,
    robust: tuple[list[dict], list[dict] | None] | None = None,
) -> list:
    """The verdict records from the rows of the study (pure: a test feeds it synthetic rows); ``clustered``:
    the rows at clustered states, a robustness value of both tests; ``fresh``: the rows with new heads at
    every eps (a robustness value of the order fit; the study's rows use the same heads and defect direction
    at every eps); ``robust``: (uniform, clustered) rows at ``c.robust_eps`` with ``c.robust_configs`` states
    (the main value of the per-head monotonicity test; without it the ``c.configs`` rows decide)."""
    recs = []
    states = ["uniform", f"3 vMF clusters, kappa {c.clustered_kappa:g}"]
    eps = np.array([r["eps"] for r in rows])
    band = Criterion(
        quantity="fitted order p of the worst |cross|/self ~ C eps^p (flat)",
        op="within",
        threshold=tuple(c.criterion_order_band),
        declared_in="config: criterion_order_band",
        note="the derived bound abs(cross) <= C abs(M_h M_h') is linear in the defect",
    )

    def order(kind, hi, stat="max", rows=rows):
        keep = (eps > 0) & (eps <= hi)
        key = f"cross_over_self_{stat}"
        f = fit_order(
            eps[keep],
            [r[f"{kind}_flat"][key] for r, k in zip(rows, keep, strict=True) if k],
        )
        return f

    main = order("usa", c.order_fit_max_eps[0])
    checks = [
        RobustnessCheck.from_values(
            band,
            "eps fit range (upper end)",
            list(c.order_fit_max_eps),
            [order("usa", h)["order"] for h in c.order_fit_max_eps],
            ci95=[order("usa", h)["order_ci"] for h in c.order_fit_max_eps],
        ),
        RobustnessCheck.from_values(
            band,
            "attention",
            ["usa", "softmax"],
            [order(k, c.order_fit_max_eps[0])["order"] for k in ("usa", "softmax")],
            ci95=[order(k, c.order_fit_max_eps[0])["order_ci"] for k in ("usa", "softmax")],
        ),
        RobustnessCheck.from_values(
            band,
            "statistic over states (worst: the study's; median)",
            ["worst", "median"],
            [order("usa", c.order_fit_max_eps[0], s_)["order"] for s_ in ("max", "median")],
            ci95=[order("usa", c.order_fit_max_eps[0], s_)["order_ci"] for s_ in ("max", "median")],
        ),
    ]
    order_notes = (
        "main estimator: the same orthogonal heads and defect direction at every eps, so the fit sees the "
        "defect alone"
    )
    if fresh:
        fits = [order("usa", c.order_fit_max_eps[0]), order("usa", c.order_fit_max_eps[0], rows=fresh)]
        fo, fci = fits[1]["order"], fits[1]["order_ci"]
        if fo is not None and fci is not None:
            order_notes += (
                f"; with new heads at every eps (worst over states) p = {fo:.3f} "
                f"[{fci[0]:.3f}, {fci[1]:.3f}]: "
                "head-to-head scatter widens that interval"
            )
        checks.append(
            RobustnessCheck.from_values(
                band,
                "heads across eps (same: the study's; fresh per eps)",
                ["same", "fresh"],
                [f["order"] for f in fits],
                ci95=[f["order_ci"] for f in fits],
            )
        )
    if clustered:
        fits = [order("usa", c.order_fit_max_eps[0]), order("usa", c.order_fit_max_eps[0], rows=clustered)]
        checks.append(
            RobustnessCheck.from_values(
                band, "token states", states, [f["order"] for f in fits], ci95=[f["order_ci"] for f in fits]
            )
        )
    recs.append(
        record_test(
            id="s1-cross-term-order-in-defect",
            statement="with an orthogonality defect eps the cross-head term grows linearly: worst "
            "|cross|/self "
            "~ C eps (flat dynamics, symmetric M_h = V_h; the same heads and defect direction at every eps)",
            source=SRC_S,
            criterion=band,
            value=main["order"],
            ci95=main["order_ci"],
            samples=main["points"],
            method="t interval of the log-log slope (fit_power_law)",
            robustness=checks,
            extra={"C": main["C"]},
            notes=order_notes,
        )
    )
    # S1 robust: per-head monotonicity flat at eps = robust_eps
    crit = Criterion(
        quantity="fraction of (state, head) pairs with dE_h/dt < 0, flat dynamics, at defect eps "
        f"= {c.robust_eps:g}",
        op="<=",
        threshold=c.criterion_violation_fraction,
        declared_in="config: criterion_violation_fraction",
    )

    def viol(kind, e, rows=rows, states=c.configs):
        pairs = states * c.H
        r = min(rows, key=lambda r: abs(r["eps"] - e))
        k = round(r[f"{kind}_flat"]["violating_fraction"] * pairs)
        return k / pairs, binomial_ci(k, pairs), r["eps"]

    r_uni, r_clu = robust if robust else (rows, clustered)
    n_rob = c.robust_configs if robust else c.configs
    pairs = n_rob * c.H
    v, ci, e0 = viol("usa", c.robust_eps, r_uni, n_rob)
    small = [r["eps"] for r in rows if 0 < r["eps"] <= c.robust_eps]
    checks = [
        RobustnessCheck.from_values(
            crit, "eps", small, [viol("usa", e)[0] for e in small], ci95=[viol("usa", e)[1] for e in small]
        ),
        RobustnessCheck.from_values(
            crit,
            "attention",
            ["usa", "softmax"],
            [viol(k, c.robust_eps, r_uni, n_rob)[0] for k in ("usa", "softmax")],
            ci95=[viol(k, c.robust_eps, r_uni, n_rob)[1] for k in ("usa", "softmax")],
        ),
    ]
    if r_clu:
        vs = [viol("usa", c.robust_eps, r_uni, n_rob), viol("usa", c.robust_eps, r_clu, n_rob)]
        checks.append(
            RobustnessCheck.from_values(
                crit, "token states", states, [x[0] for x in vs], ci95=[x[1] for x in vs]
            )
        )
    recs.append(
        record_test(
            id="s1-per-head-monotone-under-defect",
            statement="flat dynamics, approximately orthogonal heads (defect eps <= "
            f"{c.robust_eps:g}): every "
            "E_h stays non-decreasing (instantaneous rates at random states)",
            source=SRC_S,
            criterion=crit,
            value=v,
            ci95=ci,
            samples=pairs,
            method="Clopper-Pearson interval over (state, head) pairs (heads of a state are not independent)",
            robustness=checks,
            extra={"eps": e0, "states": n_rob},
            notes=f"main value and token-states check at {n_rob} states; the eps scan at {c.configs} states",
        )
    )
    r0 = min(rows, key=lambda r: r["eps"])
    recs.append(
        record_identity(
            id="s1-cross-term-vanishes-orthogonal",
            statement="orthogonal heads (M_h M_h' = 0): the cross-head term of dE_h/dt vanishes",
            source=SRC_S,
            why="every cross term carries a product M_h M_h' (or its transpose), zero by construction",
            result={
                "eps": r0["eps"],
                "usa_cross_over_self": r0["usa_flat"]["cross_over_self_max"],
                "softmax_cross_over_self": r0["softmax_flat"]["cross_over_self_max"],
            },
        )
    )
    recs.append(
        record_identity(
            id="s2-implication",
            statement="SA: delta_i sum_h |P w^h_i| <= |P sum_h w^h_i| at every token implies "
            "dE_multi/dt >= 0",
            source=SRC_S,
            why="an exact rate identity plus Cauchy-Schwarz: no state can violate it; the states "
            "check the code",
            result={
                "states": len(rows) * c.configs,
                "violations_with_condition": sum(r["S2"]["violations_with_condition"] for r in rows),
                "condition_fraction_by_eps": {str(r["eps"]): r["S2"]["condition_fraction"] for r in rows},
            },
        )
    )
    recs.append(
        record_description(
            id="sphere-radial-obstruction-at-zero-defect",
            statement="on the sphere the radial term stays at eps = 0: worst (negative radial)/self and the "
            "fraction of (state, head) pairs with dE_h/dt < 0 by eps",
            source=SRC_S,
            result={
                str(r["eps"]): {
                    "usa": [
                        r["usa_sphere"]["radial_neg_over_self_max"],
                        r["usa_sphere"]["violating_fraction"],
                    ],
                    "softmax": [
                        r["softmax_sphere"]["radial_neg_over_self_max"],
                        r["softmax_sphere"]["violating_fraction"],
                    ],
                }
                for r in rows
            },
        )
    )
    return recs


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


def sufficient_condition_rows(
    c: SufficientConditionConfig, states: str = "uniform", *, fresh_heads: bool = False
) -> list[dict]:
    """Every eps row of the study: S1 ratios and violations per attention and geometry, S2 counts; the S1
    states are uniform tokens or (``states="clustered"``) three von Mises-Fisher clusters of concentration
    ``c.clustered_kappa``, the kind of state a clustering flow passes through. The S1 heads are the same
    orthogonal heads and defect direction at every eps (``fresh_heads``: new heads per eps)."""
    if states == "uniform":
        x = tokens.uniform(c.configs, c.n, c.d, seed=c.seed)
    elif states == "clustered":
        x = tokens.von_mises_fisher(c.configs, c.n, c.d, seed=c.seed, clusters=3, kappa=c.clustered_kappa)
    else:
        raise ValueError(f"states must be 'uniform' or 'clustered': got {states!r}")
    x2 = tokens.uniform(c.configs, c.s2_n, c.s2_d, seed=c.seed + 7)
    rows = []
    with one_thread():
        for k, eps in enumerate(c.eps):
            heads = head_family(
                "approx_orthogonal",
                c.configs,
                c.H,
                c.d,
                seed=c.seed + 1 + (k if fresh_heads else 0),
                scale=c.scale,
                eps=eps,
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
                        "cross_over_self_median": float((cross.abs() / s).median()),
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
    return rows


class SufficientConditionStudy(Study):
    name = "sufficient_condition"
    description = (
        "arXiv 2605.04279: the derived sufficient conditions for monotone E_h (orthogonal heads, flat) and "
        "E_multi (SA, equal normalisations) and their robustness to an orthogonality defect eps"
    )
    Config = SufficientConditionConfig

    @staticmethod
    def tables(summary: dict, config) -> list[Table]:
        """The page tables from the summary: ``sufficient_condition_tables``."""
        return sufficient_condition_tables(summary, config)

    def quick_params(self) -> dict:
        return {"configs": 8, "eps": [0.0, 0.01, 0.1, 1.0], "robust_configs": 40}

    def plan(self, config) -> dict:
        # instantaneous rates at random states: ~2 s of CPU per eps at 200 states
        tasks = {
            "rows": ComputeTask(
                fn="attnflow.studies.multihead_flows:sufficient_condition_task",
                params={"config": config.model_dump(mode="json")},
                cost_s=2.0 * len(config.eps) * config.configs / 200,
            )
        }
        if config.clustered_kappa > 0:
            tasks["rows_clustered"] = ComputeTask(
                fn="attnflow.studies.multihead_flows:sufficient_condition_task",
                params={"config": config.model_dump(mode="json"), "states": "clustered"},
                cost_s=2.0 * len(config.eps) * config.configs / 200,
            )
        tasks["rows_fresh_heads"] = ComputeTask(
            fn="attnflow.studies.multihead_flows:sufficient_condition_task",
            params={"config": config.model_dump(mode="json"), "fresh_heads": True},
            cost_s=2.0 * len(config.eps) * config.configs / 200,
        )
        rc = config.model_copy(update={"configs": config.robust_configs, "eps": [0.0, config.robust_eps]})
        for st in ("uniform", "clustered") if config.clustered_kappa > 0 else ("uniform",):
            tasks[f"robust_{st}"] = ComputeTask(
                fn="attnflow.studies.multihead_flows:sufficient_condition_task",
                params={"config": rc.model_dump(mode="json"), "states": st},
                cost_s=2.0 * 2 * config.robust_configs / 200,
            )
        return tasks

    def analyse(self, config, runs: StudyRuns, out_dir: Path) -> StudyResult:
        c = config
        rows = list(runs.result("rows")["rows"])
        clustered = list(runs.result("rows_clustered")["rows"]) if c.clustered_kappa > 0 else None
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
        fresh = list(runs.result("rows_fresh_heads")["rows"])
        robust = (
            list(runs.result("robust_uniform")["rows"]),
            list(runs.result("robust_clustered")["rows"]) if c.clustered_kappa > 0 else None,
        )
        records = sufficient_condition_records(rows, c, clustered, fresh=fresh, robust=robust)
        summary = {
            "rows": rows,
            "order_fits": fits,
            "violation_onset_eps": onset,
            "S2_implication_holds": s2_ok,
            "conditions": {
                "S1": "[derived] symmetric M_h = V_h, M_h M_h' = 0 (h != h'), flat dynamics => every E_h "
                "non-decreasing (cross term 0, self term >= 0); sphere: additionally sum_i radial^h_i >= 0",
                "S2": "[derived] SA: delta_i sum_h |P w^h_i| <= |P sum_h w^h_i| at every token => E_multi "
                "non-decreasing (delta_i = max_h |Z^h_i / mean_h Z^h_i - 1|)",
            },
        }
        full = jsonable({"study": self.name, **summary, "verdicts": [r.to_json() for r in records]})
        return typed_result(summary, records, sufficient_condition_tables, c, full)


def sufficient_condition_tables(summary: dict, config: SufficientConditionConfig) -> list[Table]:
    """The tables of ``sufficient_condition`` from its summary: the verdicts with their robustness, one row
    per eps, the order fits."""
    c = config
    note = (
        f"{c.configs} random states (uniform tokens, n = {c.n}, d = {c.d}) per eps; S1 columns: heads "
        "orthogonal + eps x (normalised symmetric); S2 columns (SA, E_multi): one head + eps x (normalised "
        f"symmetric) per head, |M_h| ~ {c.s2_scale}, n = {c.s2_n}, d = {c.s2_d}; S1: |M_h| ~ {c.scale}, "
        f"H = {c.H}, beta = {c.beta}. Ratios are the worst over states and heads of |cross| / self and "
        "(negative radial) / self (terms summed over tokens)."
    )
    verdicts = verdict_tables(summary["verdicts"], ".3g", robustness=True)
    parts = (
        ("usa_flat", "USA flat"),
        ("softmax_flat", "SA flat"),
        ("usa_sphere", "USA sphere"),
        ("softmax_sphere", "SA sphere"),
    )
    rows = []
    for r in summary["rows"]:
        row = {"eps": r["eps"], "defect": r["defect"], **{f"S2_{k}": v for k, v in r["S2"].items()}}
        for key, _ in parts:
            ratio = "cross_over_self_max" if key.endswith("flat") else "radial_neg_over_self_max"
            row[f"{key}_ratio"] = r[key][ratio]
            row[f"{key}_viol"] = r[key]["violating_fraction"]
        rows.append(row)
    cols = [Column("eps", fmt="g"), Column("defect", "max abs(M_h M_h')/s^2", ".2e")]
    for key, label in parts:
        what = "cross/self" if key.endswith("flat") else "radial/self"
        cols += [
            Column(f"{key}_ratio", f"{label}: {what}", ".2e"),
            Column(f"{key}_viol", f"{label}: viol.", ".3f"),
        ]
    cols += [
        Column("S2_condition_fraction", "S2 holds", ".2f"),
        Column("S2_violations", "SA E_multi viol."),
        Column("S2_violations_with_condition", "SA E_multi viol. with S2"),
    ]
    return [
        replace(verdicts[0], note=note),
        *verdicts[1:],
        Table(columns=cols, rows=rows, title="Rows", id="rows"),
        Table(
            columns=[
                Column("fit", "fit (worst ratio ~ C eps^p)"),
                Column("order", "p", ".3f"),
                Column("C", "C", ".3g"),
            ],
            rows=[{"fit": k, **f} for k, f in summary["order_fits"].items()],
            title="Order fits",
            id="fits",
        ),
    ]


register(MonotonicityStudy())
register(SufficientConditionStudy())
