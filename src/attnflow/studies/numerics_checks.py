r"""Study ``numerics_checks``: the verdicts of ``docs/theory_checks.md`` that came from unit tests, as
records with a criterion (issue 25).

* **Lie-group integrator orders** (test): Lie-Euler, RKMK2, RKMK4 on S^2 against scipy DOP853 (rtol = atol
  = 1e-13) of the same ODE written with the independent field
  :func:`attnflow.observables.multihead_velocity`; the order is the free log-log slope of the error at T
  against dt, with its t interval, and must lie within ``order_band`` of the declared order.
* **JKO first order** (test): the JKO step against an RK4 reference at dt = ``jko_reference_dt``; slope
  within ``order_band`` of 1.
* **Brownian tokens: the heat kernel** (test): with no interaction, E P_l(<x_0, x_t>) of the geodesic
  random walk against the closed form exp(-l(l + d - 2) eps t); the difference, with its 95% interval
  over tokens, must lie within ``heat_kernel_band``.
* **Adjoint memory** (test): the bytes autograd saves for the backward pass
  (``torch.autograd.graph.saved_tensors_hooks``) against the number of steps N; the exponent of the
  saved bytes in N must be at most ``memory_exponent_max`` for the adjoint. Plain autograd, through
  the same criterion, is the control that must fail (reported, not a robustness value).
* **First variation of the risk** (identity): H dR/dtheta_h = grad Psi_l(theta_h) is the chain rule of
  the discrete scheme; kept as a code test with its measured difference.

Every computation is a study task (:func:`numerics_task`, a pure function of the config); ``analyse`` reads
the stored results. The quick variant takes seconds of CPU.
"""

from __future__ import annotations

from pathlib import Path

import torch
from pydantic import Field, PositiveFloat, PositiveInt

from ..analysis.fits import fit_power_law
from ..analysis.numerics_checks import (
    LIE,
    heat_kernel_moments,
    jko_errors,
    lie_errors,
)
from ..analysis.verdicts import Criterion, RobustnessCheck, record_identity, record_test
from ..model import tokens
from ..model.transformer import TransformerModel
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .multihead_common import jsonable, one_thread
from .registry import register
from .render import Table, verdicts_table
from .tasks import ComputeTask

__all__ = [
    "NumericsChecksConfig",
    "NumericsChecksStudy",
    "adjoint_saved_bytes",
    "heat_kernel_moments",
    "jko_errors",
    "lie_errors",
    "numerics_records",
    "records",
    "tables",
]


class NumericsChecksConfig(StudyConfig):
    n: int = Field(6, ge=2, description="tokens of the order checks (S^2)", examples=[6])
    H: PositiveInt = Field(2, description="heads of the Lie order checks", examples=[2])
    head_scale: PositiveFloat = Field(
        1.0, description="scale of the symmetric Gaussian heads", examples=[1.0]
    )
    t1: PositiveFloat = Field(1.0, description="horizon of the order checks", examples=[1.0])
    lie_dts: dict[str, list[PositiveFloat]] = Field(
        {
            "lie_euler": [0.04, 0.02, 0.01, 0.005],
            "rkmk2": [0.1, 0.05, 0.025, 0.0125],
            "rkmk4": [0.2, 0.1, 0.05, 0.025],
        },
        description="step sequences per Lie integrator (errors far above the reference's 1e-13)",
    )
    jko_dts: list[PositiveFloat] = Field([0.1, 0.05, 0.025, 0.0125], min_length=3, description="JKO steps")
    jko_reference_dt: PositiveFloat = Field(1 / 256, description="rk4 reference step of the JKO check")
    jko_tol: PositiveFloat = Field(1e-11, description="JKO solver tolerance")
    order_band: float = Field(
        0.15,
        gt=0,
        description="an order check holds when the slope lies within +- this of the order",
        examples=[0.15],
    )
    heat_eps: PositiveFloat = Field(
        0.5, description="token noise eps of the heat-kernel check", examples=[0.5]
    )
    heat_t: PositiveFloat = Field(1.0, description="time of the heat-kernel check", examples=[1.0])
    heat_dts: list[PositiveFloat] = Field([0.05, 0.025, 0.0125], min_length=1, description="walk steps")
    heat_paths: PositiveInt = Field(16, description="paths of the heat-kernel check", examples=[16])
    heat_n: PositiveInt = Field(1000, description="tokens per path of the heat-kernel check", examples=[1000])
    heat_kernel_band: float = Field(
        0.02,
        gt=0,
        description="abs(E P_l - heat kernel) must be below this (the walk's weak bias is O(dt): "
        "0.003 at dt = 0.05)",
        examples=[0.02],
    )
    memory_steps: list[PositiveInt] = Field([8, 16, 32, 64], min_length=3, description="steps N")
    memory_n: PositiveInt = Field(32, description="tokens of the memory check", examples=[32])
    memory_exponent_max: float = Field(
        0.1, description="the adjoint's saved bytes may grow at most like N^this", examples=[0.1]
    )
    seed: int = Field(0, ge=0, description="seed", examples=[0])


def adjoint_saved_bytes(c, method: str) -> dict:
    """Bytes autograd saves for the backward pass of one gradient through N projected-Euler steps."""
    from ..training.adjoint import adjoint_flow
    from ..training.flow import TrainableFlow

    model = TransformerModel(direction="ascent", beta=1.0)
    saved_all = []
    for N in c.memory_steps:
        flow = TrainableFlow(model, d=3, layers=N, heads=4, t1=1.0, steps_per_layer=1, seed=c.seed)
        x0 = tokens.uniform(1, c.memory_n, 3, seed=c.seed).requires_grad_(True)
        saved = [0]

        def pack(t, saved=saved):
            saved[0] += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = flow(x0) if method == "autograd" else adjoint_flow(flow, x0, state="recomputed")
        loss = (out[..., 0] * out[..., 2]).sum()
        torch.autograd.grad(loss, [x0, *flow.parameters()])
        saved_all.append(saved[0])
    f = fit_power_law(c.memory_steps, saved_all) if len(set(saved_all)) > 1 else None
    exp_ = 0.0 if f is None else f["b"]
    ci = [0.0, 0.0] if f is None else list(f["b_ci"])
    return {"steps": list(c.memory_steps), "saved_bytes": saved_all, "exponent": exp_, "exponent_ci": ci}


def first_variation_difference(c) -> float:
    """max over layers and parameters of abs(H dR/dtheta_h - grad Psi_l(theta_h)) / max abs(grad Psi)."""
    from ..training.flow import TrainableFlow
    from ..training.meanfield import risk_first_variation

    model = TransformerModel(direction="descent", beta=1.0)
    flow = TrainableFlow(
        model,
        d=3,
        layers=3,
        heads=3,
        t1=1.0,
        steps_per_layer=2,
        param="dv",
        integrator="euler",
        seed=c.seed + 3,
    )
    x0 = tokens.uniform(2, 5, 3, seed=c.seed + 5)
    w = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(c.seed + 7), dtype=torch.float64)

    def risk(x):
        return (x * w).sum() + 0.5 * (x[..., 0] * x[..., 2]).square().sum()

    grads = torch.autograd.grad(risk(flow(x0)), list(flow.parameters()))
    worst = 0.0
    for layer in range(flow.layers):
        thetas = {name: getattr(flow, name)[layer].detach() for name in flow.param_names()}
        _, gpsi = risk_first_variation(flow, x0, risk, layer, thetas)
        for name, g in zip(flow.param_names(), grads, strict=True):
            diff = (flow.heads * g[layer] - gpsi[name]).abs().max() / gpsi[name].abs().max()
            worst = max(worst, float(diff))
    return worst


def numerics_task(config: dict, kind: str, **kw) -> dict:
    """Study task: one computation of the study (``kind`` lie, jko, heat, memory or first_variation) for
    the config ``config`` (JSON)."""
    c = NumericsChecksConfig(**config)
    with one_thread():
        if kind == "lie":
            out = lie_errors(c, "softmax", kw["dt_factor"], kw["scale_factor"])
            return {name: jsonable(v) for name, v in out.items()}
        if kind == "jko":
            return jsonable(jko_errors(c, kw["attention"], [d / kw["dt_divisor"] for d in c.jko_dts]))
        if kind == "heat":
            return jsonable(heat_kernel_moments(c, kw["d"], kw["dt"], kw["l"]))
        if kind == "memory":
            return jsonable(adjoint_saved_bytes(c, kw["method"]))
        if kind == "first_variation":
            return {"max_relative_difference": first_variation_difference(c)}
    raise ValueError(f"unknown numerics task kind {kind!r}; valid: lie, jko, heat, memory, first_variation")


# -- the records ----------------------------------------------------------------------------------------
def numerics_records(res: dict, c: NumericsChecksConfig) -> list:
    """The verdict records from the numbers (pure: a test feeds it synthetic numbers)."""
    recs = []
    for name in LIE:
        main = res["lie"]["softmax"][name]
        p = main["declared"]
        band = Criterion(
            quantity=f"free log-log slope of the error at T in dt ({name})",
            op="within",
            threshold=(p - c.order_band, p + c.order_band),
            declared_in="config: order_band",
        )
        checks = [
            RobustnessCheck.from_values(
                band,
                "dt range",
                ["study", "halved"],
                [res["lie"]["softmax"][name]["order"], res["lie"]["softmax_half"][name]["order"]],
                ci95=[res["lie"]["softmax"][name]["order_ci"], res["lie"]["softmax_half"][name]["order_ci"]],
            ),
            RobustnessCheck.from_values(
                band,
                "head scale",
                [c.head_scale, 2 * c.head_scale],
                [main["order"], res["lie"]["softmax_scale2"][name]["order"]],
                ci95=[main["order_ci"], res["lie"]["softmax_scale2"][name]["order_ci"]],
            ),
        ]

        def fmt(f):
            ci = f" [{f['order_ci'][0]:.3f}, {f['order_ci'][1]:.3f}]" if f["order_ci"] else ""
            return f"p = {f['order']:.3f}{ci}"

        half, sc2 = res["lie"]["softmax_half"][name], res["lie"]["softmax_scale2"][name]
        lie_notes = (
            f"dt range {main['dts']} (declared): {fmt(main)}; halved range {half['dts']}: {fmt(half)}; "
            f"head scale {2 * c.head_scale:g}: {fmt(sc2)}"
        )
        if band.decide(main["order"], main["order_ci"]) == "inconclusive" and band.decide(
            half["order"], half["order_ci"]
        ) in ("holds", "fails"):
            lie_notes += (
                "; the halved range decides where the declared one does not: the declared steps are coarse"
            )
        lie_notes += " (range and band stay as declared before the data)"
        recs.append(
            record_test(
                id=f"lie-order-{name.replace('_', '-')}",
                notes=lie_notes,
                statement=f"{name} (rotations generated by w y^T - y w^T) has order {p} on S^2",
                source="derived: docs/noisy_tokens.md#5-lie-group-integrators (Munthe-Kaas RKMK)",
                criterion=band,
                value=main["order"],
                ci95=main["order_ci"],
                samples=len(main["dts"]),
                method="t interval of the log-log slope (fit_power_law), DOP853 reference at 1e-13",
                robustness=checks,
                extra={"errors": main["errors"], "dts": main["dts"]},
            )
        )
    band = Criterion(
        quantity="free log-log slope of the JKO error at T in dt",
        op="within",
        threshold=(1 - c.order_band, 1 + c.order_band),
        declared_in="config: order_band",
    )
    j = res["jko"]
    recs.append(
        record_test(
            id="jko-first-order",
            statement="the JKO / minimizing-movement scheme converges to the flow at first order",
            source="2605.18870, Sec. 7 (future directions: JKO layers); NOTES.md section 10",
            criterion=band,
            value=j["softmax"]["order"],
            ci95=j["softmax"]["order_ci"],
            samples=len(j["softmax"]["dts"]),
            method="t interval of the log-log slope (fit_power_law)",
            robustness=[
                RobustnessCheck.from_values(
                    band,
                    "attention (usa at 4x smaller steps: faster flow)",
                    ["softmax", "usa"],
                    [j["softmax"]["order"], j["usa"]["order"]],
                    ci95=[j["softmax"]["order_ci"], j["usa"]["order_ci"]],
                )
            ],
            extra={"errors": j["softmax"]["errors"], "dts": j["softmax"]["dts"]},
        )
    )
    hk = res["heat"]
    crit = Criterion(
        quantity="E P_l(<x_0, x_t>) - exp(-l(l + d - 2) eps t)",
        op="within",
        threshold=(-c.heat_kernel_band, c.heat_kernel_band),
        declared_in="config: heat_kernel_band",
    )
    main = hk[0]
    se = (main["ci95"][1] - main["ci95"][0]) / (2 * 1.959963984540054)  # normal interval half-width / z
    lam_t = main["l"] * (main["l"] + main["d"] - 2) * c.heat_eps * c.heat_t
    # d exact / d log(eps) = -lam t exact: the relative error in the diffusion constant the band lets pass
    eps_rel = c.heat_kernel_band / (lam_t * main["exact"])
    heat_notes = (
        f"power: the band +-{c.heat_kernel_band:g} is {c.heat_kernel_band / se:.1f} standard errors wide "
        f"(se = {se:.2g}) and would pass a diffusion constant off by up to {100 * eps_rel:.1f}% "
        f"(l = {main['l']}, d = {main['d']}); the band stays as declared"
    )
    checks = []
    for choice, key in (("dt", "dt"), ("degree l", "l"), ("sphere dimension d", "d")):
        sub = [h for h in hk if all(h[k] == main[k] for k in ("dt", "l", "d") if k != key)]
        checks.append(
            RobustnessCheck.from_values(
                crit,
                choice,
                [h[key] for h in sub],
                [h["difference"] for h in sub],
                ci95=[h["ci95"] for h in sub],
            )
        )
    recs.append(
        record_test(
            id="brownian-tokens-heat-kernel",
            statement="the geodesic random walk exp_x(sqrt(2 eps dt) P(x) z) simulates Brownian motion of "
            "generator eps Laplacian: E P_l(<x_0, x_t>) = exp(-l(l + d - 2) eps t)",
            source="2605.18870, Sec. 7 (entropic regularisation); "
            "derived: docs/noisy_tokens.md#1-brownian-tokens-of-intensity-eps",
            criterion=crit,
            value=main["difference"],
            ci95=main["ci95"],
            samples=main["samples"],
            method="normal 95% interval over tokens (free tokens are independent)",
            robustness=checks,
            extra={"mean": main["mean"], "exact": main["exact"]},
            notes=heat_notes,
        )
    )
    m = res["memory"]
    crit = Criterion(
        quantity="exponent of the saved bytes in the number of steps N",
        op="<=",
        threshold=c.memory_exponent_max,
        declared_in="config: memory_exponent_max",
        note="plain autograd, the control, has exponent ~1 and fails this criterion",
    )
    a = m["adjoint"]
    recs.append(
        record_test(
            id="adjoint-memory-constant-in-depth",
            statement="gradients by the adjoint (recomputed states) need O(1) memory in the number of steps",
            source="2605.17660 (adjoint ODEs for the risk gradient); "
            "derived: docs/training.md#two-gradient-methods",
            criterion=crit,
            value=a["exponent"],
            ci95=a["exponent_ci"],
            samples=len(a["steps"]),
            method="t interval of the log-log slope; bytes saved for backward (saved_tensors_hooks), not RSS",
            extra={
                "saved_bytes": a["saved_bytes"],
                "steps": a["steps"],
                "control_autograd": {
                    **m["autograd"],
                    "outcome": crit.decide(m["autograd"]["exponent"], m["autograd"]["exponent_ci"]),
                },
            },
            notes="peak RSS against N is measured by benchmarks/adjoint_memory.py (a process per point)",
        )
    )
    recs.append(
        record_identity(
            id="training-first-variation",
            statement="H dR/dtheta_h = grad Psi_l(theta_h): the risk gradient of a head is the "
            "gradient of the "
            "risk's first variation in the head law",
            source="derived: "
            "docs/training.md#the-head-law-as-particles-and-the-risk-gradient-on-parameter-space "
            "(2605.17660)",
            why="the chain rule of the discrete scheme (projected Euler) with the 1/H mean-field scaling",
            result={"max_relative_difference": res["first_variation"]},
        )
    )
    return recs


class NumericsChecksStudy(Study):
    name = "numerics_checks"
    description = (
        "issue 25: Lie-group integrator orders, JKO order, the heat kernel of Brownian tokens and the "
        "adjoint's memory as tested verdicts; the training first variation as an identity"
    )
    Config = NumericsChecksConfig

    def quick_params(self) -> dict:
        return {
            "lie_dts": {
                "lie_euler": [0.02, 0.01, 0.005],
                "rkmk2": [0.1, 0.05, 0.025],
                "rkmk4": [0.2, 0.1, 0.05],
            },
            "jko_dts": [0.1, 0.05, 0.025],
            "jko_reference_dt": 1 / 64,
            "heat_n": 100,
            "heat_paths": 4,
            "heat_dts": [0.05],
            "memory_steps": [4, 8, 16],
            "memory_n": 8,
        }

    def plan(self, config) -> dict:
        c = config
        cfg = c.model_dump(mode="json")

        def task(kind, cost, **kw):
            return ComputeTask(
                fn="attnflow.studies.numerics_checks:numerics_task",
                params={"config": cfg, "kind": kind, **kw},
                cost_s=cost,
            )  # fmt: skip

        heat = [(3, c.heat_dts[0], 1), *[(3, dt, 1) for dt in c.heat_dts[1:]], (3, c.heat_dts[0], 2),
                (2, c.heat_dts[0], 1)]  # fmt: skip
        tasks = {
            "lie_softmax": task("lie", 20.0, dt_factor=1.0, scale_factor=1.0),
            "lie_softmax_half": task("lie", 40.0, dt_factor=0.5, scale_factor=1.0),
            "lie_softmax_scale2": task("lie", 20.0, dt_factor=1.0, scale_factor=2.0),
            "jko_softmax": task("jko", 20.0, attention="softmax", dt_divisor=1.0),
            "jko_usa": task("jko", 60.0, attention="usa", dt_divisor=4.0),
            "memory_adjoint": task("memory", 10.0, method="adjoint"),
            "memory_autograd": task("memory", 10.0, method="autograd"),
            "first_variation": task("first_variation", 2.0),
        }
        for i, (d, dt, l) in enumerate(heat):
            tasks[f"heat_{i}"] = task("heat", 2e-5 * c.heat_paths * c.heat_n / dt, d=d, dt=dt, l=l)
        return tasks

    def analyse(self, config, runs: StudyRuns, out_dir: Path) -> StudyResult:
        c = config
        r = runs.result
        lie = {k: dict(r(f"lie_{k}")) for k in ("softmax", "softmax_half", "softmax_scale2")}
        jko = {k: dict(r(f"jko_{k}")) for k in ("softmax", "usa")}
        heat = [dict(v) for v in runs.results_of("heat_").values()]
        memory = {k: dict(r(f"memory_{k}")) for k in ("adjoint", "autograd")}
        fv = float(r("first_variation")["max_relative_difference"])
        res = {"lie": lie, "jko": jko, "heat": heat, "memory": memory, "first_variation": fv}
        summary = jsonable({"results": res})
        return StudyResult(summary=summary, verdicts=numerics_records(res, c), tables=tables(summary, c))


def tables(summary: dict, config: NumericsChecksConfig) -> list[Table]:
    """The verdict table of the study (:func:`~attnflow.studies.render.verdicts_table` of the records, which
    are rebuilt from the summary's numbers), its note saying the sizes of ``config``."""
    c = config
    note = (
        f"Order checks: n = {c.n} tokens on S^2, H = {c.H} symmetric Gaussian heads x {c.head_scale:g} "
        f"(frozen), ascent, T = {c.t1:g}; Lie integrators against DOP853 at 1e-13 of the field "
        f"multihead_velocity; JKO (tol {c.jko_tol:g}) against rk4 at dt = {c.jko_reference_dt:g}. Heat "
        f"kernel: {c.heat_paths} x {c.heat_n} free tokens, eps = {c.heat_eps:g}, t = {c.heat_t:g}. Memory: "
        f"n = {c.memory_n}, H = 4, N in {list(c.memory_steps)}."
    )
    return [verdicts_table(records(summary, c), note=note)]


register(NumericsChecksStudy())


def records(summary: dict, config: NumericsChecksConfig) -> list:
    """The verdict records of a committed summary (its ``results``), for ``scripts/regen_verdicts.py``."""
    return numerics_records(summary["results"], config)
