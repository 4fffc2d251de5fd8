r"""Study ``entropy``: attention entropy along clustering flows (arXiv 2605.04279 claim 7; NOTES.md §7).

* Equiangular starts (scalar head a = 1, softmax): the row entropy of the particles (attnflow RK4) against
  the reduced model's :math:`S(\rho(t))` (solve_ivp, rtol 1e-10), the production identity
  :math:`\dot S = \beta^2A_{ii}(1-A_{ii})(1-\rho)\dot\rho \ge 0` [derived] against finite differences, and
  the final value against :math:`\log n`.
* Random starts (uniform tokens on S^2; heads: one identity head, or two symmetric Gaussian heads): the
  entropy production :math:`\dot S^h_i = -\mathrm{Cov}(s, \dot s)` (:func:`attnflow.observables.
  attention_entropy_production`) against second-order finite differences of the recorded entropies,
  how often the mean entropy and the single rows decrease, and the final mean entropy against
  :math:`\log n` with the cluster count at the end.

Computed in ``analyse`` (``plan`` returns no runs): not resumable per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveFloat, PositiveInt, confloat, conint

from ..analysis.reduced import EquiangularModel, equiangular_particles
from ..model import tokens
from ..model.transformer import TransformerModel
from ..observables.clustering import cluster_count
from ..observables.entropy import attention_entropy
from ..observables.multihead import attention_entropy_production, multihead_velocity
from ..simulation import simulate
from .base import Study, StudyAnalysis, StudyConfig, StudyRuns
from .multihead_common import head_family, jsonable, one_thread
from .registry import register

__all__ = ["EntropyStudy"]


class EntropyConfig(StudyConfig):
    n_equi: list[conint(ge=2)] = Field(
        [8, 32], min_length=1, description="tokens of the equiangular starts (>= 2)"
    )
    rho0: list[confloat(ge=0, lt=1)] = Field(
        [0.0, 0.3], min_length=1, description="equiangular initial inner products"
    )
    betas: list[PositiveFloat] = Field([1.0, 4.0], min_length=1, description="inverse temperatures")
    t1_equi: PositiveFloat = Field(12.0, description="equiangular horizon", examples=[12.0])
    n: int = Field(16, ge=2, description="tokens of the random starts", examples=[16])
    configs: PositiveInt = Field(16, description="random starts per (heads, beta)", examples=[16])
    heads: list[Literal["identity", "symmetric"]] = Field(["identity", "symmetric"], min_length=1)
    scale: PositiveFloat = Field(2.0, description="operator norm of the symmetric heads", examples=[2.0])
    t1: PositiveFloat = Field(10.0, description="horizon of the random starts", examples=[10.0])
    dt: PositiveFloat = Field(0.01, description="RK4 step", examples=[0.01])
    record_every: PositiveInt = Field(
        1, description="record every k steps (1: FD at spacing dt)", examples=[1]
    )
    seed: int = Field(0, ge=0, description="seed", examples=[0])


class EntropyStudy(Study):
    name = "entropy"
    description = (
        "arXiv 2605.04279: attention entropy along clustering flows (equiangular and random starts): "
        "production identity vs finite differences, monotone?, rising to log n?"
    )
    Config = EntropyConfig

    def quick_params(self) -> dict:
        return {"n_equi": [8], "rho0": [0.0], "betas": [1.0], "t1_equi": 1.0, "configs": 2, "t1": 0.5, "n": 8}

    def plan(self, config) -> dict:
        return {}

    def analyse(self, config, runs: StudyRuns, out_dir: Path, *, figures: Callable | None = None):
        c = config
        equi, rand, curves = [], [], []
        with one_thread():
            for n in c.n_equi:
                for r0 in c.rho0:
                    for beta in c.betas:
                        m = EquiangularModel(n=n, beta=beta)
                        out = equiangular_particles(m, r0, c.t1_equi, c.dt, record_every=c.record_every)
                        t, S = out["time"], out["entropy"][:, 0]
                        S_red = m.entropy(m.solve(r0, t))[0]
                        rate = m.entropy_rate(out["rho"])[0]
                        fd = np.gradient(S, t, edge_order=2)
                        inner = slice(2, -2)
                        equi.append(
                            {
                                "n": n,
                                "rho0": r0,
                                "beta": beta,
                                "max_abs_S_particles_vs_reduced": float(np.abs(S - S_red).max()),
                                "identity_vs_fd_max_abs": float(np.abs(rate - fd)[inner].max()),
                                "rate_max": float(rate.max()),
                                "min_rate": float(rate.min()),
                                "monotone": bool((np.diff(S) >= -1e-12).all()),
                                "S_final_over_log_n": float(S[-1] / math.log(n)),
                                "rho_final": float(out["rho"][-1]),
                            }
                        )
                        curves.append(
                            {
                                "kind": "equiangular",
                                "n": n,
                                "rho0": r0,
                                "beta": beta,
                                "t": t,
                                "S": S / math.log(n),
                            }
                        )
            for hk in c.heads:
                if hk == "identity":
                    D = torch.eye(3, dtype=torch.float64).expand(c.configs, 1, 3, 3).clone()
                else:
                    D = head_family("symmetric", c.configs, 2, 3, seed=c.seed + 1, scale=c.scale)
                for beta in c.betas:
                    x0 = tokens.uniform(c.configs, c.n, 3, seed=c.seed)
                    model = TransformerModel(direction="ascent", beta=beta, backend="torch")
                    ds = simulate(
                        model,
                        x0,
                        D,
                        t1=c.t1,
                        dt=c.dt,
                        integrator="rk4",
                        ledger=False,
                        record_every=c.record_every,
                    )
                    xs = torch.as_tensor(ds.positions.values).permute(1, 0, 2, 3)
                    t = ds.time.values
                    S = torch.stack([attention_entropy(x, D, beta) for x in xs]).numpy()  # [T, P, H, n]
                    R = torch.stack(
                        [attention_entropy_production(x, D, multihead_velocity(x, D, beta), beta) for x in xs]
                    ).numpy()
                    fd = np.gradient(S, t, axis=0, edge_order=2)
                    err = np.abs(R - fd)[2:-2]
                    scale = np.abs(R).max()
                    Sbar = S.mean((2, 3))  # [T, P]
                    Rbar = R.mean((2, 3))
                    tol = 1e-9 * max(scale, 1e-300)
                    counts = cluster_count(xs[-1], 0.1).numpy()
                    nonmono = (Rbar < -tol).any(0)
                    rand.append(
                        {
                            "heads": hk,
                            "beta": beta,
                            "configs": c.configs,
                            "identity_vs_fd_max_abs": float(err.max()),
                            "identity_vs_fd_rel": float(err.max() / scale),
                            "mean_entropy_nonmonotone_configs": int(nonmono.sum()),
                            "mean_entropy_negative_time_fraction": float((Rbar < -tol).mean()),
                            "row_negative_fraction": float((R < -tol).mean()),
                            "worst_mean_rate_relative": float(Rbar.min() / scale),
                            "S_final_over_log_n_mean": float((Sbar[-1] / math.log(c.n)).mean()),
                            "S_final_over_log_n_min": float((Sbar[-1] / math.log(c.n)).min()),
                            "clusters_final": counts.tolist(),
                            "nonmonotone_with_one_final_cluster": int((nonmono & (counts == 1)).sum()),
                            "negative_mean_rate_times": [
                                float(t[(Rbar < -tol).any(1)].min()) if (Rbar < -tol).any() else None,
                                float(t[(Rbar < -tol).any(1)].max()) if (Rbar < -tol).any() else None,
                            ],
                            "S_final_over_log_n_by_clusters": {
                                str(k): float((Sbar[-1] / math.log(c.n))[counts == k].mean())
                                for k in sorted(set(counts.tolist()))
                            },
                        }
                    )
                    curves.append({"kind": hk, "beta": beta, "t": t, "S": Sbar / math.log(c.n)})
        summary = jsonable({"equiangular": equi, "random": rand})
        lines = [
            "Equiangular starts (one head a = 1, softmax): particles = attnflow rk4, reduced = solve_ivp "
            "(rtol 1e-10); identity: dS/dt = beta^2 A_ii (1 - A_ii)(1 - rho) rho' against np.gradient of the "
            "particle entropy (second order).",
            "",
            "| n | rho0 | beta | abs(S particles - S reduced) | abs(identity - FD) | max dS/dt | monotone "
            "| S(T)/log n | rho(T) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in equi:
            lines.append(
                f"| {r['n']} | {r['rho0']:g} | {r['beta']:g} | {r['max_abs_S_particles_vs_reduced']:.1e} | "
                f"{r['identity_vs_fd_max_abs']:.1e} | {r['rate_max']:.3g} | {r['monotone']} | "
                f"{r['S_final_over_log_n']:.4f} | {r['rho_final']:.4f} |"
            )
        lines += [
            "",
            f"Random starts: {c.configs} uniform clouds of n = {c.n} on S^2, SA ascent, rk4 dt = {c.dt:g} "
            "to T = "
            f"{c.t1:g}; identity = -Cov(s, ds/dt) per row against np.gradient of the recorded row entropies.",
            "",
            "| heads | beta | identity vs FD (rel.) | configs with mean S decreasing | time fraction | row "
            "fraction dS_i/dt < 0 | worst mean rate (rel.) | t of mean decrease | mean S(T)/log n | "
            "min S(T)/log n | final clusters (0.1 rad): count | mean S(T)/log n by final clusters |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rand:
            cl = np.bincount(r["clusters_final"])
            cl_txt = ", ".join(f"{k}: {v}" for k, v in enumerate(cl) if v)
            by = ", ".join(f"{k}: {v:.3f}" for k, v in r["S_final_over_log_n_by_clusters"].items())
            t0, t1 = r["negative_mean_rate_times"]
            tneg = "-" if t0 is None else f"{t0:.2f} .. {t1:.2f}"
            lines.append(
                f"| {r['heads']} | {r['beta']:g} | {r['identity_vs_fd_rel']:.1e} | "
                f"{r['mean_entropy_nonmonotone_configs']}/{r['configs']} | "
                f"{r['mean_entropy_negative_time_fraction']:.3f} | "
                f"{r['row_negative_fraction']:.3f} | {r['worst_mean_rate_relative']:.2e} | {tneg} | "
                f"{r['S_final_over_log_n_mean']:.3f} | {r['S_final_over_log_n_min']:.3f} | {cl_txt} | {by} |"
            )
        files = figures({"study": self.name, "curves": curves, **summary}, out_dir) if figures else {}
        return StudyAnalysis(summary=summary, table="\n".join(lines) + "\n", figures=files)


register(EntropyStudy())
