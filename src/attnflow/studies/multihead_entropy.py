r"""Study ``entropy``: attention entropy along clustering flows (arXiv 2605.04279 claim 7; NOTES.md §7).

The claim (abstract of arXiv 2605.04279): *attention entropy increases monotonically toward equilibrium*.

* Equiangular starts (scalar head a = 1, softmax): the row entropy of the particles (attnflow RK4) against
  the reduced model's :math:`S(\rho(t))` (solve_ivp, rtol 1e-10). There
  :math:`\dot S = \beta^2A_{ii}(1-A_{ii})(1-\rho)\dot\rho \ge 0` [derived] is an exact rate identity, so
  the monotone rise is an **identity** (a code test), not a confirmation.
* Random starts: ``clouds`` independent clouds per setting, integrated together as one batched attnflow
  RK4 run (one path per cloud). At every record the entropy production
  :math:`\dot S^h_i = -\mathrm{Cov}(s, \dot s)` (:func:`attnflow.observables.
  attention_entropy_production`) says whether the entropy is falling. The **test**: the fraction of clouds
  whose mean row entropy decreases at some recorded time must be at most ``criterion_fraction`` (a
  monotone law gives 0), decided on its Clopper-Pearson 95% interval
  (:func:`~attnflow.studies.multihead_common.binomial_ci`). It is recomputed under every arbitrary choice:
  the entropy definition (mean row entropy from its rate or from differences of the recorded values, every
  row separately, the entropy of the received attention), the relative size a decrease must have to
  count, the horizon, dt (dt/2, dt/4), n, beta, the heads and the initial spread.

Every computation is a study task (:class:`~attnflow.studies.tasks.ComputeTask`: the equiangular solves and
one batched run per random-start setting, each a pure function of this module), so the study resumes
after a kill and runs its settings on several workers; ``analyse`` reads the stored results and returns
the records and the table specs (``entropy_tables``, a pure function of the summary and config).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, confloat, conint

from ..analysis.reduced import EquiangularModel, equiangular_system
from ..analysis.verdicts import Criterion, RobustnessCheck, record_description, record_identity, record_test
from ..model import tokens
from ..observables.clustering import cluster_count
from ..observables.entropy import attention_entropy, received_attention_entropy
from ..observables.multihead import attention_entropy_production, multihead_velocity
from ..simulation import NonFiniteStateError, n_steps_for, simulate_clouds
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .common import value_tag
from .multihead_common import Fraction, binomial_ci, head_family, jsonable, one_thread, typed_result
from .registry import register
from .render import Column, Table
from .tasks import ComputeTask

__all__ = [
    "EntropyConfig",
    "EntropyStudy",
    "entropy_jobs",
    "entropy_records",
    "entropy_statistics",
    "equiangular_task",
    "random_start_run",
]

SOURCE = "2605.04279, abstract (seeds/000): attention entropy rises monotonically"
DERIVED = "derived: docs/studies/entropy/explain.md#production"
#: the definitions of "the attention entropy decreases" (robustness choice)
DEFINITIONS = ("mean_row_rate", "mean_row_differences", "every_row_rate", "received_differences")


class EntropyConfig(StudyConfig):
    n_equi: list[conint(ge=2)] = Field(
        [8, 32], min_length=1, description="tokens of the equiangular starts (>= 2)"
    )
    rho0: list[confloat(ge=0, lt=1)] = Field(
        [0.0, 0.3], min_length=1, description="equiangular initial inner products"
    )
    betas: list[PositiveFloat] = Field(
        [1.0, 4.0], min_length=1, description="equiangular inverse temperatures"
    )
    t1_equi: PositiveFloat = Field(12.0, description="equiangular horizon", examples=[12.0])
    dt_equi: PositiveFloat = Field(0.01, description="equiangular RK4 step", examples=[0.01])
    # -- random starts: the base setting
    clouds: PositiveInt = Field(1000, description="random clouds per setting", examples=[1000])
    n: int = Field(16, ge=2, description="tokens of the random starts (base)", examples=[16])
    beta: PositiveFloat = Field(1.0, description="inverse temperature of the random starts", examples=[1.0])
    heads: Literal["identity", "symmetric"] = Field("identity", description="heads of the base setting")
    scale: PositiveFloat = Field(2.0, description="operator norm of the symmetric heads", examples=[2.0])
    spread: NonNegativeFloat = Field(
        0.0,
        description="initial spread: 0 uniform on S^2, else the vMF kappa of one cap",
        examples=[0.0],
    )
    t1: PositiveFloat = Field(10.0, description="horizon of the base setting", examples=[10.0])
    dt: PositiveFloat = Field(0.01, description="RK4 step of the base setting", examples=[0.01])
    record_spacing: PositiveFloat = Field(0.1, description="time between records", examples=[0.1])
    # -- robustness: each varies one choice of the base setting, to the horizon robust_t1
    robust_t1: PositiveFloat = Field(5.0, description="horizon of the robustness runs", examples=[5.0])
    dt_factors: list[PositiveFloat] = Field([0.5], description="dt multipliers (dt/2)")
    horizons: list[PositiveFloat] = Field([2.5, 5.0], description="horizons (prefixes of the base run)")
    ns: list[conint(ge=2)] = Field([8, 32], description="other token counts")
    robust_betas: list[PositiveFloat] = Field([4.0], description="other inverse temperatures")
    robust_heads: list[Literal["identity", "symmetric"]] = Field(["symmetric"], description="other heads")
    spreads: list[confloat(ge=0)] = Field([2.0, 10.0], description="other spreads (vMF kappa of one cap)")
    # -- the criterion, declared before the data
    criterion_fraction: Fraction = Field(
        0.01,
        description="largest fraction of clouds with a decreasing mean entropy compatible with 'monotone'",
        examples=[0.01],
    )
    decrease_tol: PositiveFloat = Field(
        1e-6,
        description="a decrease counts when rate < -tol x max abs(rate) of that cloud",
        examples=[1e-6],
    )
    robust_tols: list[PositiveFloat] = Field([1e-9, 1e-3, 1e-2], description="other decrease tolerances")
    seed: int = Field(0, ge=0, description="seed", examples=[0])


def _initial(clouds: int, n: int, spread: float, seed: int) -> torch.Tensor:
    if spread == 0:
        return tokens.uniform(clouds, n, 3, seed=seed)
    return tokens.von_mises_fisher(clouds, n, 3, seed=seed, clusters=1, kappa=spread)


def _heads(kind: str, clouds: int, scale: float, seed: int) -> torch.Tensor:
    if kind == "identity":
        return torch.eye(3, dtype=torch.float64).expand(clouds, 1, 3, 3).clone()
    return head_family("symmetric", clouds, 2, 3, seed=seed, scale=scale)


def random_start_run(
    *,
    clouds: int,
    n: int,
    beta: float,
    heads: str,
    scale: float,
    spread: float,
    t1: float,
    dt: float,
    record_spacing: float,
    seed: int,
) -> dict:
    """One batched RK4 run of ``clouds`` independent random clouds (one path each, SA, ascent, S^2) and the
    entropy quantities at every record (spacing ``record_spacing``, the same times at every dt).

    Returns
    -------
    dict
        ``t`` [K]; ``mean_S`` [K, P] (mean row entropy), ``mean_rate`` [K, P] (its exact rate, the mean of
        :func:`attention_entropy_production`), ``row_rate_min`` [K, P] (most negative row rate),
        ``row_rate_scale`` [P] (max abs row rate), ``received_S`` [K, P]
        (:func:`received_attention_entropy`), ``clusters`` [P] (at T, 0.1 rad), ``fd_error`` (largest
        abs(rate - second-order differences of mean_S) inside the run, relative to max abs(rate)).
    """
    every = round(record_spacing / dt)
    if every < 1 or abs(every * dt - record_spacing) > 1e-9 * record_spacing:
        raise ValueError(
            f"record_spacing / dt must be a whole number: got {record_spacing} / {dt}; choose dt = "
            f"{record_spacing / max(1, round(record_spacing / dt)):g}"
        )
    x0 = _initial(clouds, n, spread, seed)
    D = _heads(heads, clouds, scale, seed + 1)
    steps = n_steps_for(0.0, t1, dt)
    # every cloud in one compiled call (RK4, SA ascent on the sphere, V = D: the model of the study)
    runs = simulate_clouds(x0, D, beta=beta, dt=dt, n_steps=steps, record_every=every)
    if (runs.steps_done < steps).any():
        b = int(np.argmax(runs.steps_done < steps))
        raise NonFiniteStateError(
            f"cloud {b} left the finite numbers at step {int(runs.steps_done[b]) + 1} of {steps} "
            f"(beta {beta}, heads {heads!r}, scale {scale}); lower beta or the heads' scale"
        )
    xs = torch.from_numpy(runs.positions).permute(1, 0, 2, 3)  # [K, P, n, d]
    t = runs.times(0)  # the same times for every cloud
    mean_S, mean_rate, row_min, row_scale, recv = [], [], [], [], []
    for x in xs:
        R = attention_entropy_production(x, D, multihead_velocity(x, D, beta), beta)  # [P, H, n]
        mean_S.append(attention_entropy(x, D, beta).mean((1, 2)))
        mean_rate.append(R.mean((1, 2)))
        row_min.append(R.amin((1, 2)))
        row_scale.append(R.abs().amax((1, 2)))
        recv.append(received_attention_entropy(x, D, beta))
    mean_S_a = torch.stack(mean_S).numpy()
    rate = torch.stack(mean_rate).numpy()
    fd = np.gradient(mean_S_a, t, axis=0, edge_order=2)
    scale_ = np.abs(rate).max(0, keepdims=True)
    fd_err = float((np.abs(fd - rate) / np.maximum(scale_, 1e-300))[2:-2].max()) if len(t) > 4 else None
    return {
        "t": t,
        "mean_S": mean_S_a,
        "mean_rate": rate,
        "row_rate_min": torch.stack(row_min).numpy(),
        "row_rate_scale": torch.stack(row_scale).numpy().max(0),
        "received_S": torch.stack(recv).numpy(),
        "clusters": cluster_count(xs[-1], 0.1).numpy(),
        "n": n,
        "fd_error": fd_err,
    }


def entropy_jobs(c: EntropyConfig) -> list[tuple]:
    """The random-start runs of the study: ``(choice, value, kwargs of random_start_run)``, the base first."""
    base_kw = dict(
        clouds=c.clouds,
        n=c.n,
        beta=c.beta,
        heads=c.heads,
        scale=c.scale,
        spread=c.spread,
        record_spacing=c.record_spacing,
        seed=c.seed,
    )
    plan = (
        [("dt", c.dt * f, {"dt": c.dt * f}) for f in c.dt_factors]
        + [("n", n, {"n": n}) for n in c.ns]
        + [("beta", b, {"beta": b}) for b in c.robust_betas]
        + [("heads", h, {"heads": h}) for h in c.robust_heads]
        + [("initial spread", s, {"spread": s}) for s in c.spreads]
    )
    return [("base", None, {**base_kw, "t1": c.t1, "dt": c.dt})] + [
        (choice, value, {**base_kw, "t1": c.robust_t1, "dt": c.dt, **change})
        for choice, value, change in plan
    ]


def _falls(run: dict, definition: str, tol: float, horizon: float | None = None) -> np.ndarray:
    """Per cloud: does the entropy (``definition``) decrease at some record t <= horizon? [P] bool."""
    t = run["t"]
    k = np.ones_like(t, bool) if horizon is None else t <= horizon + 1e-12
    if definition == "mean_row_rate":
        r = run["mean_rate"]
        return (r[k] < -tol * np.abs(r).max(0)).any(0)
    if definition == "every_row_rate":
        return (run["row_rate_min"][k] < -tol * run["row_rate_scale"]).any(0)
    key = {"mean_row_differences": "mean_S", "received_differences": "received_S"}.get(definition)
    if key is None:
        raise ValueError(f"unknown entropy definition {definition!r}; valid: {', '.join(DEFINITIONS)}")
    d = np.diff(run[key][k], axis=0)
    return (d < -tol * np.abs(np.diff(run[key], axis=0)).max(0)).any(0)


def entropy_statistics(run: dict, definition: str, tol: float, horizon: float | None = None) -> dict:
    """The fraction of clouds whose entropy decreases, with its Clopper-Pearson 95% interval, and when the
    last decrease happens."""
    falls = _falls(run, definition, tol, horizon)
    k, m = int(falls.sum()), int(falls.size)
    lo, hi = binomial_ci(k, m)
    out = {"clouds": m, "decreasing": k, "fraction": k / m, "ci95": [lo, hi]}
    if definition == "mean_row_rate":
        r, t = run["mean_rate"], run["t"]
        neg = r < -tol * np.abs(r).max(0)
        last = np.array([t[neg[:, p]].max() for p in range(r.shape[1]) if neg[:, p].any()])
        out["last_decrease_time"] = (
            {
                "max": float(last.max()),
                "q95": float(np.quantile(last, 0.95)),
                "median": float(np.median(last)),
            }
            if last.size
            else None
        )
        out["time_fraction"] = float(neg.mean())
        out["worst_relative_rate"] = float((r.min(0) / np.abs(r).max(0)).min())
    return out


def entropy_records(stats: dict, config: EntropyConfig) -> list:
    """The verdict records of the study from its numbers (pure: a test feeds it synthetic numbers).

    ``stats`` holds ``base`` (:func:`entropy_statistics` of the base setting), ``robustness`` (choice ->
    ``{"values": [...], "stats": [...]}``), ``equiangular`` (rows) and ``base_run`` (fd error, clusters).
    """
    c = config
    crit = Criterion(
        quantity="fraction of random clouds whose mean row entropy decreases at some recorded time",
        op="<=",
        threshold=c.criterion_fraction,
        declared_in="config: criterion_fraction",
        note="a monotone rise gives 0; the threshold leaves room for rare exceptions only",
    )
    checks = [
        RobustnessCheck.from_values(
            crit,
            choice,
            v["values"],
            [s["fraction"] for s in v["stats"]],
            ci95=[s["ci95"] for s in v["stats"]],
        )
        for choice, v in stats["robustness"].items()
    ]
    b = stats["base"]
    notes = ""
    hv = stats["robustness"].get("heads")
    if hv and "symmetric" in hv["values"]:
        s_ = hv["stats"][hv["values"].index("symmetric")]
        notes = (
            f"the 'heads' value symmetric ({s_['decreasing']}/{s_['clouds']} clouds decreasing, "
            f"operator norm {c.scale:g}) is a different setting: generic symmetric heads need not bring the "
            "cloud to one "
            "cluster, so the entropy has no reason to rise to log n there; it tests the claim beyond the "
            "one-cluster flows, not the base setting"
        )
    recs = [
        record_test(
            id="entropy-monotone-random-starts",
            notes=notes,
            statement="the mean attention-row entropy of a softmax flow never decreases along the flow from "
            "random starts (base: one identity head, SA ascent on S^2)",
            source=SOURCE,
            criterion=crit,
            value=b["fraction"],
            ci95=b["ci95"],
            samples=b["clouds"],
            method="Clopper-Pearson interval over independent clouds",
            robustness=checks,
            extra={
                "decreasing": b["decreasing"],
                "last_decrease_time": b.get("last_decrease_time"),
                "time_fraction": b.get("time_fraction"),
                "worst_relative_rate": b.get("worst_relative_rate"),
            },
        )
    ]
    eq = stats["equiangular"]
    recs.append(
        record_identity(
            id="entropy-monotone-equiangular",
            statement="on equiangular configurations the attention entropy rises monotonically to log n",
            source=DERIVED,
            why="dS/dt = beta^2 A_ii (1 - A_ii)(1 - rho) rho' with rho' >= 0: a rate identity that is "
            "non-negative by construction; the runs check the code (particles = reduced model)",
            result={
                "max_abs_S_particles_vs_reduced": max(r["max_abs_S_particles_vs_reduced"] for r in eq),
                "min_rate": min(r["min_rate"] for r in eq),
                "rows": len(eq),
            },
        )
    )
    recs.append(
        record_identity(
            id="entropy-production-identity",
            statement="dS_i/dt = -Cov_{j ~ A_i.}(s_ij, ds_ij/dt) for a softmax row",
            source=DERIVED,
            why="the chain rule of S = -sum_j A_ij log A_ij with dA_ij = A_ij (ds_ij - sum_k A_ik ds_ik); "
            "checked against differences of the recorded entropy as a code test",
            result={"max_relative_error_vs_differences": stats["base_run"]["fd_error"]},
        )
    )
    recs.append(
        record_description(
            id="entropy-final-value",
            statement="final mean entropy over log n against the final cluster count (random starts, base)",
            source=SOURCE,
            result=stats["base_run"]["final"],
            notes="log n is reached only by clouds that end in one cluster; metastable clusters stop below",
        )
    )
    return recs


def _task_name(choice: str, value) -> str:
    if choice == "base":
        return "random_base"
    tag = value_tag(value) if isinstance(value, (int, float)) else str(value)
    return f"random_{choice.replace(' ', '_')}_{tag}"


def equiangular_task(n_equi: list, rho0: list, betas: list, t1_equi: float, dt_equi: float) -> dict:
    """Equiangular starts: particle row entropy against the reduced model, the rate identity, S(T)/log n
    (a pure function of its parameters: a study task)."""
    equi, curves = [], []
    for n in n_equi:
        # the (rho0, beta) starts of one n as one batch of clouds (one compiled call), every step recorded
        cases = [(r0, beta, EquiangularModel(n=n, beta=beta)) for r0 in rho0 for beta in betas]
        systems = [equiangular_system(m, r0) for r0, _, m in cases]
        runs = simulate_clouds(
            torch.stack([x for x, _, _ in systems]),
            torch.stack([D for _, D, _ in systems]),
            values=torch.stack([V for _, _, V in systems]),
            beta=[beta for _, beta, _ in cases],
            dt=dt_equi,
            n_steps=int(round(t1_equi / dt_equi)),
            record_every=1,
        )
        for b, (r0, beta, m) in enumerate(cases):
            k = int(runs.records[b])
            t, rho = runs.times(b), runs.rho[b, :k]
            D = systems[b][1]
            with one_thread():
                S = attention_entropy(torch.from_numpy(runs.positions[b, :k]), D, beta)[:, 0, 0].numpy()
            S_red = m.entropy(m.solve(r0, t))[0]
            rate = m.entropy_rate(rho)[0]
            equi.append(
                {
                    "n": n,
                    "rho0": r0,
                    "beta": beta,
                    "max_abs_S_particles_vs_reduced": float(np.abs(S - S_red).max()),
                    "min_rate": float(rate.min()),
                    "monotone": bool((np.diff(S) >= -1e-12).all()),
                    "S_final_over_log_n": float(S[-1] / math.log(n)),
                    "rho_final": float(rho[-1]),
                }
            )
            curves.append(
                {
                    "kind": "equiangular",
                    "n": n,
                    "rho0": r0,
                    "beta": beta,
                    "t": np.asarray(t).tolist(),
                    "S": (S / math.log(n)).tolist(),
                }
            )
    return {"rows": equi, "curves": curves}


class EntropyStudy(Study):
    name = "entropy"
    description = (
        "arXiv 2605.04279: does attention entropy rise monotonically along clustering flows? Equiangular "
        "identity; random starts tested on >= 1000 clouds per setting with intervals"
    )
    Config = EntropyConfig

    @staticmethod
    def tables(summary: dict, config) -> list[Table]:
        """The page tables from the summary: ``entropy_tables``."""
        return entropy_tables(summary, config)

    def quick_params(self) -> dict:
        return {
            "n_equi": [8],
            "rho0": [0.0],
            "betas": [1.0],
            "t1_equi": 1.0,
            "clouds": 12,
            "n": 6,
            "t1": 1.0,
            "robust_t1": 0.5,
            "horizons": [0.5],
            "ns": [4],
            "robust_betas": [4.0],
            "spreads": [5.0],
            "dt": 0.02,
            "record_spacing": 0.04,
            "dt_factors": [0.5],
        }

    def plan(self, config) -> dict:
        c = config
        eq = ComputeTask(
            fn="attnflow.studies.multihead_entropy:equiangular_task",
            params={"n_equi": list(c.n_equi), "rho0": list(c.rho0), "betas": list(c.betas),
                    "t1_equi": c.t1_equi, "dt_equi": c.dt_equi},
            cost_s=0.5 * len(c.n_equi) * len(c.rho0) * len(c.betas) * c.t1_equi / c.dt_equi / 1000,
        )  # fmt: skip
        tasks = {"equiangular": eq}
        for choice, value, kw in entropy_jobs(c):
            # measured ~40 ms of CPU per RK4 step of 1000 clouds of 16 tokens (one core)
            cost = 0.04 * kw["clouds"] / 1000 * (kw["n"] / 16) ** 2 * kw["t1"] / kw["dt"]
            tasks[_task_name(choice, value)] = ComputeTask(
                fn="attnflow.studies.multihead_entropy:random_start_run", params=kw, cost_s=cost
            )
        return tasks

    def analyse(self, config, runs: StudyRuns, out_dir: Path) -> StudyResult:
        c = config
        eq = runs.result("equiangular")
        equi, curves = list(eq["rows"]), list(eq["curves"])
        jobs = entropy_jobs(c)
        base = runs.result("random_base")
        variants: dict[str, list] = {"dt": [], "n": [], "beta": [], "heads": [], "initial spread": []}
        for choice, value, _ in jobs[1:]:
            variants[choice].append((value, runs.result(_task_name(choice, value))))
        tol = c.decrease_tol
        horizon = c.robust_t1  # robustness runs end there: compare the base run at the same horizon
        base_stats = entropy_statistics(base, "mean_row_rate", tol)
        base_at_h = entropy_statistics(base, "mean_row_rate", tol, horizon)
        robust = {
            "entropy definition": {
                "values": list(DEFINITIONS),
                "stats": [entropy_statistics(base, d, tol) for d in DEFINITIONS],
            },
            "decrease tolerance": {
                "values": [tol, *c.robust_tols],
                "stats": [entropy_statistics(base, "mean_row_rate", x) for x in (tol, *c.robust_tols)],
            },
            "horizon": {
                "values": [*c.horizons, c.t1],
                "stats": [entropy_statistics(base, "mean_row_rate", tol, h) for h in (*c.horizons, c.t1)],
            },
        }
        base_label = {"dt": c.dt, "n": c.n, "beta": c.beta, "heads": c.heads, "initial spread": c.spread}
        for choice, items in variants.items():
            if not items:
                continue
            robust[choice] = {
                "values": [base_label[choice], *[v for v, _ in items]],
                "stats": [base_at_h, *[entropy_statistics(r, "mean_row_rate", tol) for _, r in items]],
            }
        Sbar = base["mean_S"][-1] / math.log(c.n)
        counts = base["clusters"]
        final = {
            "S_final_over_log_n_mean": float(Sbar.mean()),
            "S_final_over_log_n_min": float(Sbar.min()),
            "cluster_counts": {str(k): int((counts == k).sum()) for k in sorted(set(counts.tolist()))},
            "S_final_over_log_n_by_clusters": {
                str(k): float(Sbar[counts == k].mean()) for k in sorted(set(counts.tolist()))
            },
        }
        stats = {
            "base": base_stats,
            "robustness": robust,
            "equiangular": equi,
            "base_run": {"fd_error": base["fd_error"], "final": final},
        }
        records = entropy_records(stats, c)
        show = min(16, c.clouds)
        curves.append(
            {"kind": c.heads, "beta": c.beta, "t": base["t"], "S": base["mean_S"][:, :show] / math.log(c.n)}
        )
        summary = {
            "statistics": stats,
            "sizes": {
                "clouds": c.clouds,
                "n": c.n,
                "beta": c.beta,
                "heads": c.heads,
                "t1": c.t1,
                "dt": c.dt,
                "robust_t1": c.robust_t1,
                "record_spacing": c.record_spacing,
            },
        }
        verdicts = [r.to_json() for r in records]
        data = {"study": self.name, "curves": curves, **jsonable(summary), "verdicts": verdicts}
        return typed_result(summary, records, entropy_tables, c, data)


def _stat_row(s: dict) -> dict:
    """Decreasing clouds, clouds, fraction and its interval of one entropy statistic (a table row)."""
    return {
        "decreasing": s["decreasing"],
        "clouds": s["clouds"],
        "fraction": s["fraction"],
        "ci95": s["ci95"],
    }


_STAT_COLUMNS = (
    Column("decreasing", "decreasing clouds"),
    Column("clouds"),
    Column("fraction", "fraction", ".3f"),
    Column("ci95", "95% CI", ".3f"),
)


def entropy_tables(summary: dict, config: EntropyConfig) -> list[Table]:
    """The tables of ``entropy`` from its summary: the base run's statistic and verdict, its robustness
    (one row per choice and value), the equiangular starts, the base run's final state."""
    c = config
    st = summary["statistics"]
    rec = summary["verdicts"][0]
    b = st["base"]
    last = b.get("last_decrease_time") or {}
    base = {
        **_stat_row(b),
        "last_median": last.get("median"),
        "last_q95": last.get("q95"),
        "last_max": last.get("max"),
        "time_fraction": b.get("time_fraction", 0),
        "worst": b.get("worst_relative_rate", 0),
        "verdict": rec["verdict"],
    }
    robust = [
        {"choice": chk["choice"], "value": str(v), **_stat_row(s), "outcome": o}
        for chk in rec["robustness"]
        for v, s, o in zip(
            chk["values"], st["robustness"][chk["choice"]]["stats"], chk["outcomes"], strict=True
        )
    ]
    f = st["base_run"]["final"]
    spread = "uniform" if c.spread == 0 else f"vMF kappa {c.spread:g}"
    return [
        Table(
            columns=[
                *_STAT_COLUMNS,
                Column("last_median", "last decrease t (median)", ".2f"),
                Column("last_q95", "last decrease t (95%)", ".2f"),
                Column("last_max", "last decrease t (max)", ".2f"),
                Column("time_fraction", "(cloud, record) samples decreasing", ".4f"),
                Column("worst", "worst rate / cloud's largest", ".3g"),
                Column("verdict"),
            ],
            rows=[base],
            title="Base",
            id="base",
            note=f"Random starts: {c.clouds} independent clouds per setting (one batched RK4 run each), SA "
            f"ascent on S^2. Base: n = {c.n}, beta = {c.beta:g}, heads {c.heads}, spread {spread}, T = "
            f"{c.t1:g}, dt = {c.dt:g}, records every {c.record_spacing:g}; robustness runs vary one choice "
            f"each, to T = {c.robust_t1:g} (their base row is the base run cut there). A cloud 'decreases' "
            f"when its mean entropy rate falls below -{c.decrease_tol:g} x its largest abs(rate) at some "
            f"record. Criterion (config criterion_fraction): fraction <= {c.criterion_fraction:g} on the "
            "Clopper-Pearson 95% interval.",
        ),
        Table(
            columns=[Column("choice"), Column("value"), *_STAT_COLUMNS, Column("outcome")],
            rows=robust,
            title="Robustness",
            id="robustness",
        ),
        Table(
            columns=[
                Column("n"),
                Column("rho0", fmt="g"),
                Column("beta", fmt="g"),
                Column("max_abs_S_particles_vs_reduced", "abs(S particles - S reduced)", ".1e"),
                Column("min_rate", "min dS/dt", ".3g"),
                Column("S_final_over_log_n", "S(T)/log n", ".4f"),
                Column("rho_final", "rho(T)", ".4f"),
            ],
            rows=st["equiangular"],
            title="Equiangular starts",
            note="Identity record: dS/dt >= 0 by construction.",
            id="equiangular",
        ),
        Table(
            columns=[
                Column("mean", "mean S/log n", ".3f"),
                Column("min", "min S/log n", ".3f"),
                # the production identity's error against differences of the records, to the last digit
                Column("fd_error", "production identity vs record differences", ".16g"),
            ],
            rows=[
                {
                    "mean": f["S_final_over_log_n_mean"],
                    "min": f["S_final_over_log_n_min"],
                    "fd_error": st["base_run"]["fd_error"],
                }
            ],
            title="Base run at T",
            id="final",
        ),
        Table(
            columns=[Column("clusters"), Column("count", "clouds"), Column("S", "mean S/log n", ".3f")],
            rows=[
                {"clusters": k, "count": n, "S": f["S_final_over_log_n_by_clusters"][k]}
                for k, n in f["cluster_counts"].items()
            ],
            title="Final clusters (0.1 rad)",
            id="clusters",
        ),
    ]


register(EntropyStudy())


def records(summary: dict, config: EntropyConfig) -> list:
    """The verdict records of a committed summary (its ``statistics``), for ``scripts/regen_verdicts.py``."""
    return entropy_records(summary["statistics"], config)
