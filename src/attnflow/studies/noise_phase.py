r"""Noisy tokens (NOTES.md §10): clustering against the noise eps and beta, and the critical noise.

Claim checked (*derived* in :mod:`attnflow.analysis.noise_stability` and ``docs/noisy_tokens.md``): for
``ascent`` tokens with one identity head and Brownian noise of generator eps Delta, the uniform state loses
stability at

* USA: :math:`\varepsilon_c = \Gamma(d/2)(2/\beta)^{d/2-1} I_{d/2}(\beta)/\beta`
  (S^1: I_1/beta, S^2: i_1/beta);
* softmax (SA): :math:`\varepsilon_c = I_{d/2}(\beta)/(\beta I_{d/2-1}(\beta))` (S^1: I_1/(beta I_0),
  S^2: (coth beta - 1/beta)/beta),

and on the disordered side the stationary :math:`n\,\mathbb E|m|^2` of the mean
:math:`m = \frac1n\sum_i x_i` equals :math:`\varepsilon/(\varepsilon - \varepsilon_c)`.

Runs: for each dimension d (S^{d-1}), kernel, beta and ratio r, tokens start uniform and run with
eps = r eps_c(beta) (the predicted mean-field value: the grid is placed around the prediction; the
measurement does not use it), each run with its own seed (so the cases' errors are independent), to
T = ``t_units`` / eps_c with ``steps`` Euler steps (so eps dt = r t_units /
steps, the weak error of the noise splitting, is the same for every run). Measured: the time average over
the second half of :math:`n|m|^2` and of :math:`|m|` (the clustering order parameter), per path, and the
mean pairwise inner product at T. Analysis: eps_c estimated by the fit :math:`1/(n\langle|m|^2\rangle) = a +
b/\varepsilon` over the runs measured disordered (:math:`n\langle|m|^2\rangle` <= ``disordered_max``),
eps_c = -b/a with a 95% interval (:func:`attnflow.analysis.fit_critical_noise`), compared with the
mean-field and the finite-n predictions.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveInt, field_validator, model_validator

from ..analysis.noise_stability import critical_token_noise, fit_critical_noise
from ..analysis.verdicts import Criterion, RobustnessCheck, record_test
from ..observables import mean_pairwise_inner_product
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .common import distinct_sorted, mean_sd, positive_distinct, value_tag
from .registry import register
from .render import Column, Table

__all__ = ["NoisePhaseConfig", "NoisePhaseStudy", "records", "tables"]


class NoisePhaseConfig(StudyConfig):
    """Parameters of ``noise_phase``; the defaults are the committed full run (docs/studies/noise_phase)."""

    dims: list[Literal[2, 3]] = Field(
        [2, 3], min_length=1, description="ambient dimensions d (tokens on S^{d-1})", examples=[[2, 3]]
    )
    kernels: list[Literal["softmax", "usa"]] = Field(
        ["softmax", "usa"], min_length=1, description="attention kinds", examples=[["softmax", "usa"]]
    )
    betas: list[float] = Field(
        [1.0, 2.0, 4.0], min_length=1, description="inverse temperatures (> 0)", examples=[[1.0, 2.0, 4.0]]
    )
    ratios: list[float] = Field(
        [0.6, 0.85, 1.25, 1.6, 2.5, 4.0],
        min_length=3,
        description="noise levels eps / eps_c(predicted) (> 0, >= 3 distinct)",
        examples=[[0.6, 0.85, 1.25, 1.6, 2.5, 4.0]],
    )
    n: int = Field(96, ge=2, description="tokens (>= 2)", examples=[96])
    paths: PositiveInt = Field(6, description="paths per run", examples=[6])
    t_units: float = Field(
        25.0, gt=0, description="the horizon T in units of 1/eps_c (T = t_units / eps_c)", examples=[25.0]
    )
    steps: int = Field(8000, ge=8, description="Euler steps per run (>= 8)", examples=[8000])
    records: int = Field(100, ge=4, description="records per run (divides steps)", examples=[100])
    disordered_max: float = Field(
        10.0, gt=1, description="runs with n<|m|^2> at most this are fitted as disordered", examples=[10.0]
    )
    criterion_eps_c_band: tuple[float, float] = Field(
        (0.9, 1.1),
        description="the fitted eps_c over the finite-n prediction must lie in this band (with its 95% "
        "interval)",
        examples=[(0.9, 1.1)],
    )
    criterion_fluctuation_band: tuple[float, float] = Field(
        (0.8, 1.25),
        description="measured n<|m|^2> over the derived eps/(eps - eps_c) on the disordered side must lie in "
        "this band",
        examples=[(0.8, 1.25)],
    )
    seed: int = Field(
        0, ge=0, description="the seed of the first run (>= 0; run k uses seed + k)", examples=[0]
    )

    @field_validator("betas")
    @classmethod
    def _betas(cls, v: list[float]) -> list[float]:
        return positive_distinct(v, "beta", "betas", "the inverse temperature", "betas=[1.0, 2.0]")

    @field_validator("ratios")
    @classmethod
    def _ratios(cls, v: list[float]) -> list[float]:
        return positive_distinct(v, "ratio", "ratios", "eps = ratio * eps_c >= 0", "ratios=[0.6, 1.5, 2.5]")

    @field_validator("dims", "kernels")
    @classmethod
    def _distinct(cls, v: list) -> list:
        return distinct_sorted(v, "dims / kernels")

    @model_validator(mode="after")
    def _records_divide_steps(self):
        if self.steps % self.records:
            raise ValueError(
                f"records must divide steps: got steps = {self.steps}, records = {self.records}; "
                f"e.g. records = {math.gcd(self.steps, 100)}"
            )
        return self


class NoisePhaseStudy(Study):
    """Clustering of noisy tokens against eps and beta; the critical eps vs the derived prediction."""

    name = "noise_phase"
    description = (
        "NOTES §10 noisy tokens: the uniform state loses stability at the derived eps_c(beta) for SA and USA "
        "on S^1 and S^2 (fitted from n<|m|^2> = eps/(eps - eps_c) on the disordered side)"
    )
    Config = NoisePhaseConfig

    def quick_params(self) -> dict:
        return {
            "dims": [2],
            "kernels": ["usa"],
            "betas": [1.0],
            "ratios": [0.6, 1.5, 2.5, 4.0],
            "n": 16,
            "paths": 2,
            "t_units": 4.0,
            "steps": 40,
            "records": 8,
        }

    @staticmethod
    def run_name(d: int, kernel: str, beta: float, ratio: float) -> str:
        """The run directory name of one (d, kernel, beta, ratio)."""
        return f"d{d}_{kernel}_b{value_tag(beta)}_r{value_tag(ratio)}"

    @staticmethod
    def predicted(config: NoisePhaseConfig, d: int, kernel: str, beta: float) -> float:
        """The mean-field eps_c that places the grid."""
        return critical_token_noise(beta, d, kernel)

    def cases(self, config: NoisePhaseConfig):
        """The grid of the study, in its one order: ``(d, kernel, beta, eps_c)`` for every sphere dimension,
        kernel and beta, with the mean-field ``eps_c`` (:meth:`predicted`) that places the noise levels."""
        for d in config.dims:
            for kernel in config.kernels:
                for beta in config.betas:
                    yield d, kernel, beta, self.predicted(config, d, kernel, beta)

    def plan(self, config: NoisePhaseConfig) -> dict[str, dict]:
        out = {}
        for d, kernel, beta, ec in self.cases(config):
            t1 = config.t_units / ec
            for r in config.ratios:
                name = self.run_name(d, kernel, beta, r)
                out[name] = {
                    "name": name,
                    "model": {
                        "direction": "ascent",
                        "attention": kernel,
                        "beta": beta,
                        "token_noise": r * ec,
                        "backend": "torch",  # measured 3 ms/step here vs 70 for numba (n = 96)
                    },
                    "weights": {"process": "constant"},
                    "tokens": {"init": "uniform", "n": config.n, "d": d},
                    "heads": {"init": "identity", "H": 1},
                    "integrator": {"method": "euler", "dt": t1 / config.steps, "t1": t1},
                    "record": {"every": config.steps // config.records, "ledger": False},
                    "paths": config.paths,
                    "seed": config.seed + len(out),  # independent noise per run: uncorrelated errors
                    "precision": "float64",
                }
        return out

    def _one(self, config: NoisePhaseConfig, name: str, runs: StudyRuns) -> dict:
        ds = runs.open(name)
        x = np.asarray(ds.positions.values)  # [P, K, n, d]
        times = np.asarray(ds.time.values, float)
        m = x.mean(axis=2)  # [P, K, d]
        nm2 = config.n * (m**2).sum(-1)  # [P, K]
        late = times >= times[-1] / 2
        per_path = nm2[:, late].mean(1)
        r_path = np.sqrt((m**2).sum(-1))[:, late].mean(1)
        xT = torch.as_tensor(x[:, -1])
        return {
            "n_m2": mean_sd(per_path),
            "n_m2_se": float(per_path.std(ddof=1) / math.sqrt(len(per_path))) if len(per_path) > 1 else 0.0,
            "order_parameter": mean_sd(r_path),
            "mean_inner_product_T": mean_sd(mean_pairwise_inner_product(xT).numpy()),
            "n_m2_t": nm2.mean(0).tolist(),
            "times": times.tolist(),
        }

    def analyse(self, config: NoisePhaseConfig, runs: StudyRuns, out_dir: Path) -> StudyResult:
        cases = {}
        for d, kernel, beta, ec in self.cases(config):
            ec_n = critical_token_noise(beta, d, kernel, n=config.n)
            per = {}
            for r in config.ratios:
                res = self._one(config, self.run_name(d, kernel, beta, r), runs)
                res["eps"] = r * ec
                res["predicted_n_m2"] = r / (r - 1) if r > 1 else None
                per[f"{r:g}"] = res
            dis = [(v["eps"], v["n_m2"]["mean"]) for v in per.values()]
            dis = [(e, y) for e, y in dis if y <= config.disordered_max]
            fit = (
                fit_critical_noise([e for e, _ in dis], [y for _, y in dis])
                if len(dis) >= 3
                else {"eps_c": None, "note": f"only {len(dis)} disordered runs (need 3)"}
            )
            ordered = [float(k) for k, v in per.items() if v["n_m2"]["mean"] > config.disordered_max]
            cases[f"d{d}_{kernel}_b{beta:g}"] = {
                "d": d,
                "sphere": f"S^{d - 1}",
                "kernel": kernel,
                "beta": beta,
                "eps_c_predicted": ec,
                "eps_c_predicted_finite_n": ec_n,
                "fit": fit,
                "rel_error_vs_finite_n": (
                    (fit["eps_c"] - ec_n) / ec_n if fit.get("eps_c") is not None else None
                ),
                "ratios_measured_ordered": ordered,
                "per_ratio": per,
            }
        summary = {
            "cases": cases,
            "sizes": {
                "n": config.n,
                "paths": config.paths,
                "t_units": config.t_units,
                "steps": config.steps,
                "ratios": list(config.ratios),
                "betas": list(config.betas),
                "disordered_max": config.disordered_max,
                "eps_dt_max": max(config.ratios) * config.t_units / config.steps,
            },
            "note": "eps = ratio * eps_c(mean field); T = t_units / eps_c; n<|m|^2> averaged over the second "
            "half and the paths; fit 1/(n<|m|^2>) = a + b/eps over the runs with n<|m|^2> <= disordered_max, "
            "eps_c = -b/a; derived prediction n<|m|^2> = eps/(eps - eps_c).",
        }
        return StudyResult(summary=summary, verdicts=records(summary, config), tables=tables(summary, config))


#: the columns that name a case (sphere, kernel, beta)
_CASE = (Column("sphere"), Column("kernel"), Column("beta", "beta", "g"))
_KEYS = ("sphere", "kernel", "beta")


def tables(summary: dict, config: NoisePhaseConfig | None = None) -> list[Table]:
    """Predicted and fitted eps_c per case, and the measured n<|m|^2> per ratio (a pure function of the
    summary; ``config`` is unused)."""
    s = summary["sizes"]
    cases = list(summary["cases"].values())
    fits = []
    for c in cases:
        f = c["fit"]
        ok = f.get("eps_c") is not None
        fits.append(
            {
                **{k: c[k] for k in (*_KEYS, "eps_c_predicted", "eps_c_predicted_finite_n")},
                "fitted": f["eps_c"] if ok else None,
                "ci": f["eps_c_ci"] if ok else None,
                "rel": c["rel_error_vs_finite_n"] if ok else None,
                "points": f["points"] if ok else f.get("note"),
                "ordered": c["ratios_measured_ordered"],
            }
        )
    fit = Table(
        id="eps_c",
        title="Critical noise eps_c: predicted and fitted",
        columns=[
            *_CASE,
            Column("eps_c_predicted", "eps_c mean field", ".4g"),
            Column("eps_c_predicted_finite_n", "eps_c finite n", ".4g"),
            Column("fitted", "eps_c fitted", ".4g"),
            Column("ci", "95% CI", ".4g"),
            Column("rel", "rel. err.", "+.1%"),
            Column("points", "runs fitted"),
            Column("ordered", "ordered at ratios", "g"),
        ],
        rows=fits,
        note=f"Sizes: n = {s['n']} tokens, {s['paths']} paths, one identity head, ascent, uniform start, "
        f"T = {s['t_units']:g}/eps_c, {s['steps']} Euler steps (eps dt <= {s['eps_dt_max']:.3g}); fit over "
        f"runs with n<|m|^2> <= {s['disordered_max']:g}.",
    )
    per_ratio = Table(
        id="per_ratio",
        title="n<|m|^2> per noise level",
        columns=[
            *_CASE,
            Column("ratio", "ratio eps/eps_c", "g"),
            Column("n_m2", "n<|m|^2> (+- se)", ".3g"),
            Column("predicted", "predicted eps/(eps-eps_c)", ".3g"),
            Column("m", "<|m|>", ".3f"),
        ],
        rows=[
            {
                **{k: c[k] for k in _KEYS},
                "ratio": float(r),
                "n_m2": {"mean": v["n_m2"]["mean"], "sd": v["n_m2_se"]},
                "predicted": v["predicted_n_m2"] if v["predicted_n_m2"] is not None else "ordered",
                "m": v["order_parameter"]["mean"],
            }
            for c in cases
            for r, v in c["per_ratio"].items()
        ],
    )
    return [fit, per_ratio]


# -- verdict records ---------------------------------------------------------------------------------------
_SRC = (
    "derived: docs/noisy_tokens.md (linear stability of the uniform state; NOTES.md §10, entropic "
    "regularisation)"
)


def records(summary: dict, config: NoisePhaseConfig) -> list:
    """The verdict records of ``noise_phase`` from its summary.

    * ``noise-phase-eps-c``: the fitted critical noise over the finite-n prediction lies in
      ``criterion_eps_c_band`` (95% interval of the fit); robustness over the (sphere, kernel, beta) cases
      and against the mean-field prediction;
    * ``noise-phase-ordered-below``: below eps_c the uniform state is unstable: n<|m|^2> at the largest
      ratio < 1 exceeds ``disordered_max`` in every case;
    * ``noise-phase-fluctuations``: on the disordered side n<|m|^2> = eps/(eps - eps_c), ratio in
      ``criterion_fluctuation_band``, per case and ratio.

    The step-size check is the same study at 4x dt (``docs/studies/noise_phase_coarse_dt``), with its own
    records.
    """
    cases = summary["cases"]
    lo, hi = config.criterion_eps_c_band
    crit = Criterion(
        quantity="fitted eps_c / predicted eps_c (finite n)",
        op="within",
        threshold=(float(lo), float(hi)),
        declared_in="config: criterion_eps_c_band",
    )
    rel, cis, rel_mf, cis_mf = {}, {}, {}, {}
    for key, c in cases.items():
        f = c["fit"]
        if "eps_c" not in f or not f.get("eps_c_ci"):
            rel[key], cis[key] = None, None
            continue
        p, pm = c["eps_c_predicted_finite_n"], c["eps_c_predicted"]
        rel[key], cis[key] = f["eps_c"] / p, (f["eps_c_ci"][0] / p, f["eps_c_ci"][1] / p)
        rel_mf[key], cis_mf[key] = f["eps_c"] / pm, (f["eps_c_ci"][0] / pm, f["eps_c_ci"][1] / pm)
    out = []
    k0 = next(iter(rel))
    out.append(
        record_test(
            id="noise-phase-eps-c",
            statement="the uniform state of noisy ascent tokens (one identity head) loses stability at the "
            "closed-form eps_c (USA and softmax kernels, S^1 and S^2)",
            source=_SRC,
            criterion=crit,
            value=rel[k0],
            ci95=cis[k0],
            samples=int(cases[k0]["fit"].get("points", 0)),
            method="95% interval of eps_c = -b/a from the fit 1/(n<|m|^2>) = a + b/eps over the "
            "disordered runs",
            robustness=[
                RobustnessCheck.from_values(
                    crit,
                    "case (sphere, kernel, beta)",
                    list(rel),
                    list(rel.values()),
                    ci95=list(cis.values()),
                ),
                RobustnessCheck.from_values(
                    crit,
                    "prediction: mean field (n = inf)",
                    list(rel_mf),
                    list(rel_mf.values()),
                    ci95=list(cis_mf.values()),
                ),
            ],
            extra={"main_case": k0, "eps_dt_max": summary["sizes"].get("eps_dt_max")},
        )
    )
    ordered = {}
    for key, c in cases.items():
        below = [r for r in c["per_ratio"] if float(r) < 1]
        if below:
            r = max(below, key=float)
            ordered[f"{key} ratio {r}"] = c["per_ratio"][r]["n_m2"]["mean"]
    if ordered:
        crit_o = Criterion(
            quantity="n<|m|^2> at the largest ratio eps/eps_c below 1",
            op=">",
            threshold=float(config.disordered_max),
            declared_in="config: disordered_max",
            note="the disordered state has n<|m|^2> = O(1); the runs above this are called ordered",
        )
        k1 = min(ordered, key=ordered.get)
        out.append(
            record_test(
                id="noise-phase-ordered-below",
                statement="below the closed-form eps_c the tokens order (the uniform state is unstable)",
                source=_SRC,
                criterion=crit_o,
                value=ordered[k1],
                samples=int(summary["sizes"]["paths"]),
                method="none: the smallest case, mean over the paths of the second-half time average",
                robustness=[
                    RobustnessCheck.from_values(crit_o, "case", list(ordered), list(ordered.values()))
                ],
                extra={"main_case": k1},
            )
        )
    flo, fhi = config.criterion_fluctuation_band
    crit_f = Criterion(
        quantity="measured n<|m|^2> / (eps / (eps - eps_c))",
        op="within",
        threshold=(float(flo), float(fhi)),
        declared_in="config: criterion_fluctuation_band",
    )
    fl, fl_ci = {}, {}
    for key, c in cases.items():
        for r, v in c["per_ratio"].items():
            if float(r) <= 1:
                continue
            pred = float(r) / (float(r) - 1.0)
            m, se = v["n_m2"]["mean"], v["n_m2_se"]
            fl[f"{key} ratio {r}"] = m / pred
            fl_ci[f"{key} ratio {r}"] = ((m - 1.96 * se) / pred, (m + 1.96 * se) / pred)
    if fl:
        main = [k for k in fl if k.endswith("ratio 2.5")] or list(fl)
        k2 = main[0]
        inside = sum(1 for v in fl.values() if flo <= v <= fhi)
        out.append(
            record_test(
                id="noise-phase-fluctuations",
                statement="on the disordered side the stationary n<|m|^2> equals eps/(eps - eps_c) "
                "(eps_c the mean-field value)",
                source=_SRC,
                criterion=crit_f,
                value=fl[k2],
                ci95=fl_ci[k2],
                samples=int(summary["sizes"]["paths"]),
                method="normal interval from the standard error over paths and time (n_m2_se)",
                robustness=[
                    RobustnessCheck.from_values(
                        crit_f, "case and ratio", list(fl), list(fl.values()), ci95=list(fl_ci.values())
                    )
                ],
                extra={"main_case": k2, "inside_band": f"{inside}/{len(fl)}"},
            )
        )
    return out


register(NoisePhaseStudy())
