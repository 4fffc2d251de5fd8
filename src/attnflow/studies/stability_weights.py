r"""Stability under weight perturbation (arXiv 2605.18870, Sec. 5.2, Gamma-convergence).

The study ``stability_weights``.

Claim (NOTES.md §4, §8): if :math:`\Theta^\varepsilon_t \to \Theta_t` narrowly, then
:math:`E^\varepsilon \to E` and :math:`u^\varepsilon_t \to u_t` in W2. Two perturbations of the weight law,
the same tokens:

* ``heads``: frozen heads :math:`D_h + \varepsilon Z_h` (Z_h = (G + G^T)/2, one fixed Gaussian draw); all eps
  are paths of one run (path 0: eps = 0);
* ``noise``: Sec. 6 OU weights with noise level :math:`\sigma^2 = 1 + \varepsilon`, one run per eps with the
  same seed (path p of every run sees the same Brownian increments, scaled by sqrt(2 sigma^2)).

Measured at T: :math:`|E^\varepsilon_T - E_T|`, :math:`|\partial_t E^\varepsilon_T - \partial_t E_T|`
(drift + Ito rates of the ledger) and :math:`W_2(u^\varepsilon_T, u_T)` (exact, POT), with the rate in eps
fitted (95% interval and range). *Derived*: every quantity is Lipschitz in the weights on [0, T], so the
expected rate is eps^1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveInt, field_validator, model_validator

from ..analysis.theorems import draw_heads, fit_rate
from ..model import tokens as tokens_mod
from ..observables import wasserstein2
from .base import Study, StudyAnalysis, StudyConfig, StudyRuns
from .common import finish_analysis, mean_sd, positive_distinct, value_tag, whole_steps
from .mean_field_heads import inputs_file
from .registry import register

__all__ = ["StabilityWeightsConfig", "StabilityWeightsStudy"]


class StabilityWeightsConfig(StudyConfig):
    """Parameters of ``stability_weights``; the defaults are the committed full run (docs/studies)."""

    epsilons: list[float] = Field(
        [1e-4, 1e-3, 1e-2, 1e-1],
        min_length=3,
        description="the perturbation sizes eps (each > 0; >= 3 for a fit)",
        examples=[[1e-4, 1e-3, 1e-2]],
    )
    kinds: list[Literal["heads", "noise"]] = Field(
        ["heads", "noise"],
        min_length=1,
        description="perturb the heads or the OU noise level",
        examples=[["heads"]],
    )
    direction: Literal["ascent", "descent"] = Field(
        "descent", description="the token direction", examples=["descent"]
    )
    n: int = Field(32, ge=2, description="tokens (>= 2) on S^2", examples=[32])
    H: PositiveInt = Field(8, description="heads", examples=[8])
    noise_paths: PositiveInt = Field(4, description="noise realisations of the OU runs", examples=[4])
    t1: float = Field(5.0, gt=0, description="the horizon T (> 0)", examples=[5.0])
    dt: float = Field(0.01, gt=0, description="the time step (> 0, T/dt whole)", examples=[0.01])
    record_every: PositiveInt = Field(10, description="steps between records", examples=[10])
    seed: int = Field(0, ge=0, description="the seed (>= 0)", examples=[0])
    inputs_dir: str | None = Field(
        None, description="where token and head arrays are written (None: <tmp>/attnflow_study_inputs)"
    )

    @field_validator("epsilons")
    @classmethod
    def _sizes(cls, v: list[float]) -> list[float]:
        return positive_distinct(
            v, "eps", "epsilons", "eps = 0 is the unperturbed run, always included", "[1e-4, 1e-3, 1e-2]"
        )

    @model_validator(mode="after")
    def _steps(self):
        whole_steps(self.t1, self.dt)
        return self


def _noise_name(e: float) -> str:
    return f"noise_eps{value_tag(e)}"


class StabilityWeightsStudy(Study):
    """E^eps -> E, d_tE^eps -> d_tE and u^eps -> u under weight perturbations (module docstring)."""

    name = "stability_weights"
    description = (
        "Sec. 5.2 of arXiv 2605.18870: perturbed weight laws (D_h + eps Z, OU sigma^2 + eps), same tokens: "
        "rates in eps of E, d_tE and W2(u^eps_T, u_T)"
    )
    Config = StabilityWeightsConfig

    def quick_params(self) -> dict:
        return {
            "epsilons": [1e-3, 1e-2, 1e-1],
            "n": 8,
            "H": 2,
            "noise_paths": 1,
            "t1": 0.5,
            "dt": 0.05,
            "record_every": 5,
        }

    def _inputs(self, config: StabilityWeightsConfig):
        x0 = tokens_mod.octahedral(1, config.n, 3, seed=config.seed)[0].numpy()
        D = draw_heads("symmetric_gaussian", 1, config.H, 3, seed=config.seed + 11)[0]
        Z = draw_heads("symmetric_gaussian", 1, config.H, 3, seed=config.seed + 12, scale=0.5)[0]
        return x0, D, Z

    def plan(self, config: StabilityWeightsConfig) -> dict[str, dict]:
        x0, D, Z = self._inputs(config)
        xfile = inputs_file(x0, config.inputs_dir)
        base = {
            "model": {"direction": config.direction},
            "tokens": {"init": "file", "path": xfile},
            "integrator": {"method": "euler", "dt": config.dt, "t1": config.t1},
            "record": {"every": config.record_every},
            "seed": config.seed,
            "precision": "float64",
        }
        out = {}
        if "heads" in config.kinds:
            heads = np.stack([D] + [D + e * Z for e in config.epsilons])  # path 0: eps = 0
            out["heads"] = {
                **base,
                "name": "heads",
                "weights": {"process": "constant"},
                "heads": {"init": "file", "H": config.H, "path": inputs_file(heads, config.inputs_dir)},
                "paths": len(heads),
            }
        if "noise" in config.kinds:
            hfile = inputs_file(D, config.inputs_dir)
            for e in [0.0, *config.epsilons]:
                name = _noise_name(e)
                out[name] = {
                    **base,
                    "name": name,
                    "weights": {"process": "ornstein_uhlenbeck", "sigma2": 1.0 + e, "F": "identity"},
                    "heads": {"init": "file", "H": config.H, "path": hfile},
                    "paths": config.noise_paths,
                }
        return out

    @staticmethod
    def _measures(base, pert) -> dict:
        E0, E1 = np.asarray(base.energy.values)[:, -1], np.asarray(pert.energy.values)[:, -1]
        r0 = np.asarray(base.dtE_drift.values)[:, -1] + np.asarray(base.dtE_ito.values)[:, -1]
        r1 = np.asarray(pert.dtE_drift.values)[:, -1] + np.asarray(pert.dtE_ito.values)[:, -1]
        x0 = torch.as_tensor(np.asarray(base.positions.isel(time=-1).values))
        x1 = torch.as_tensor(np.asarray(pert.positions.isel(time=-1).values))
        return {
            "abs_dE_T": mean_sd(np.abs(E1 - E0)),
            "abs_d_dtE_T": mean_sd(np.abs(r1 - r0)),
            "W2_T": mean_sd(wasserstein2(x1, x0).numpy()),
        }

    def analyse(
        self,
        config: StabilityWeightsConfig,
        runs: StudyRuns,
        out_dir: Path,
        *,
        figures: Callable[..., dict] | None = None,
    ) -> StudyAnalysis:
        res: dict[str, dict] = {}
        eps = list(config.epsilons)
        if "heads" in config.kinds:
            ds = runs.open("heads")
            per = {
                f"{e:g}": self._measures(ds.isel(path=[0]), ds.isel(path=[k + 1])) for k, e in enumerate(eps)
            }
            res["heads"] = {"per_eps": per}
        if "noise" in config.kinds:
            names = {e: _noise_name(e) for e in [0.0, *eps]}
            base = runs.open(names[0.0])
            per = {f"{e:g}": self._measures(base, runs.open(names[e])) for e in eps}
            res["noise"] = {"per_eps": per}
        for r in res.values():
            r["fits"] = {
                q: fit_rate(eps, [r["per_eps"][f"{e:g}"][q]["mean"] for e in eps])
                for q in ("abs_dE_T", "abs_d_dtE_T", "W2_T")
            }
        summary = {
            "kinds": res,
            "sizes": {
                "n": config.n,
                "H": config.H,
                "T": config.t1,
                "dt": config.dt,
                "epsilons": eps,
                "noise_paths": config.noise_paths,
                "direction": config.direction,
            },
            "fit_note": "y = a eps^b over all eps, 95% t intervals; expected b = 1 (derived: Lipschitz on "
            "[0, T]); abs_d_dtE_T is 0 for frozen heads (no weight-driven energy change)",
        }
        return finish_analysis(summary, markdown_table, out_dir, figures)


def markdown_table(summary: dict) -> str:
    """Per kind: the quantities at each eps and their fitted rates, as Markdown."""
    s = summary["sizes"]
    lines = [
        f"Sizes: n = {s['n']} octahedral tokens on S^2, H = {s['H']} heads, T = {s['T']:g}, "
        f"dt = {s['dt']:g}, "
        f"{s['direction']}, eps in {s['epsilons']}, OU with {s['noise_paths']} noise paths.",
        "",
        "| kind | quantity | values for increasing eps | b [95% CI] (expected 1) |",
        "|---|---|---|---|",
    ]
    for kind, r in summary["kinds"].items():
        for q, f in r["fits"].items():
            vals = ", ".join(f"{v[q]['mean']:.3g}" for v in r["per_eps"].values())
            fb = "-"
            if "b" in f:
                lo, hi = f["range"]
                fb = f"{f['b']:.3f} [{f['b_ci'][0]:.3f}, {f['b_ci'][1]:.3f}] on [{lo:g}, {hi:g}]"
            lines.append(f"| {kind} | {q} | {vals} | {fb} |")
    return "\n".join(lines) + "\n"


register(StabilityWeightsStudy())
