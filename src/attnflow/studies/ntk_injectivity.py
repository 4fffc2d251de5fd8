r"""Study ``ntk_injectivity``: is the attention NTK injective for a given token law? (arXiv 2605.17660;
NOTES.md §9, :mod:`attnflow.analysis.ntk`).

For each token law (a single Dirac, a discrete law, the uniform law on :math:`S^{d-1}`, a Gaussian
mixture) the log-partition features :math:`\varphi_\theta(x) = \log\int e^{\langle Qx, Ky\rangle}d\mu(y)` are
sampled at N query points on the sphere for P random parameters, the affine functions of x are projected
out, and the smallest singular value of the normalised feature matrix is recorded as P grows (nested
parameter sets).
The claim checked: discrete, uniform and Gaussian-mixture laws give linearly independent features modulo
affine functions (injective: the smallest singular value settles at a positive value once P exceeds the
dimension), while a single Dirac gives affine features (non-injective: singular values at the rounding
floor for every P). Several seeds of the points and parameters are run.

Each (law, seed) is one computation task (:func:`injectivity_task`) on the run store; ``analyse`` reads
their stored curves.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field, PositiveFloat, conint, field_validator

from ..analysis.ntk import (
    INJECTIVITY_RTOL,
    DiscreteLaw,
    GaussianMixtureLaw,
    UniformSphereLaw,
    dirac,
    injectivity_curve,
    sphere_points,
)
from ..analysis.verdicts import Criterion, RobustnessCheck, record_test
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .multihead_common import jsonable
from .registry import study
from .render import Column, Table
from .tasks import ComputeTask

__all__ = [
    "NTK_LAWS",
    "NtkInjectivityConfig",
    "NtkInjectivityStudy",
    "injectivity_task",
    "records",
    "token_law",
]

#: the token laws of the study and whether the companion work expects an injective NTK for them
NTK_LAWS = {"dirac": False, "discrete": True, "uniform": True, "gaussian_mixture": True}


def token_law(name: str, d: int, *, seed: int, atoms: int = 5, components: int = 3, sigma: float = 0.5):
    """The token law ``name`` of the study in R^d; random atoms / means drawn on the sphere from ``seed``."""
    if name not in NTK_LAWS:
        raise ValueError(f"unknown token law {name!r}; valid: {', '.join(NTK_LAWS)}")
    if name == "dirac":
        return dirac(sphere_points(1, d, seed=seed + 7))
    if name == "discrete":
        return DiscreteLaw(sphere_points(atoms, d, seed=seed + 11))
    if name == "uniform":
        return UniformSphereLaw(d)
    return GaussianMixtureLaw(sphere_points(components, d, seed=seed + 13), sigma)


class NtkInjectivityConfig(StudyConfig):
    laws: list[str] = Field(
        list(NTK_LAWS), min_length=1, description=f"token laws, from {list(NTK_LAWS)}", examples=[["dirac"]]
    )
    d: conint(ge=2, le=8) = Field(3, description="token dimension (points on S^(d-1))", examples=[3])
    N: conint(ge=4, le=400) = Field(30, description="query points on the sphere (> d + 1)", examples=[30])
    P: list[conint(ge=1)] = Field(
        [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
        min_length=2,
        description="numbers of random parameters (nested sets)",
        examples=[[16, 64, 256]],
    )
    scale: PositiveFloat = Field(2.0, description="std of the Q, K entries times sqrt(d)", examples=[2.0])
    atoms: conint(ge=2) = Field(5, description="atoms of the discrete law", examples=[5])
    components: conint(ge=2) = Field(3, description="components of the Gaussian mixture", examples=[3])
    sigma: PositiveFloat = Field(0.5, description="std of the mixture's components", examples=[0.5])
    seeds: list[conint(ge=0)] = Field([0, 1, 2], min_length=1, description="seeds", examples=[[0]])
    criterion_rtol: float = Field(
        INJECTIVITY_RTOL,
        gt=0,
        description="injective when the relative smallest singular value of the affine-projected features "
        "exceeds this (round-off of float64 features is ~1e-16; also decided at 1e-8 and 1e-6)",
        examples=[1e-10],
    )

    @field_validator("laws")
    @classmethod
    def _known_laws(cls, v: list[str]) -> list[str]:
        bad = [law for law in v if law not in NTK_LAWS]
        if bad:
            raise ValueError(f"unknown token laws {bad}; valid: {', '.join(NTK_LAWS)}")
        return v


def injectivity_task(
    law: str, d: int, N: int, P: list[int], scale: float, atoms: int, components: int, sigma: float, seed: int
) -> dict:
    """The injectivity curve of token law ``law`` for one seed of the points and parameters (a task of the
    study: pure, JSON in, JSON out; see :func:`attnflow.analysis.ntk.injectivity_curve`)."""
    tl = token_law(law, d, seed=seed, atoms=atoms, components=components, sigma=sigma)
    x = sphere_points(N, d, seed=seed)
    return jsonable(injectivity_curve(tl, x, P, seed=seed + 1000, scale=scale))


def _task_name(law: str, seed: int) -> str:
    return f"{law}-seed{seed}"


@study
class NtkInjectivityStudy(Study):
    name = "ntk_injectivity"
    description = (
        "arXiv 2605.17660: log-sum-exp features modulo affine functions are independent (NTK injective) for "
        "discrete, uniform and Gaussian-mixture token laws and not for a single Dirac"
    )
    Config = NtkInjectivityConfig

    def quick_params(self) -> dict:
        return {"N": 16, "P": [4, 16, 64, 256], "seeds": [0]}

    def plan(self, config) -> dict:
        c = config
        if c.N <= c.d + 1:
            raise ValueError(f"N must exceed d + 1 = {c.d + 1} (affine functions): got N={c.N}")
        # cost: N x max(P) features, an SVD per P (measured 0.2 s for N = 16, P <= 256; 3 s at full size)
        cost = 0.2 + 3e-5 * c.N * max(c.P)
        common = dict(d=c.d, N=c.N, P=list(c.P), scale=c.scale, atoms=c.atoms, components=c.components)
        return {
            _task_name(law, seed): ComputeTask(
                fn="attnflow.studies.ntk_injectivity:injectivity_task",
                params={**common, "law": law, "sigma": c.sigma, "seed": seed},
                cost_s=cost,
            )
            for law in c.laws
            for seed in c.seeds
        }

    def analyse(self, config, runs: StudyRuns, out_dir: Path) -> StudyResult:
        c = config
        curves, rows = [], []
        for law_name in c.laws:
            per_seed = []
            for seed in c.seeds:
                cv = dict(runs.result(_task_name(law_name, seed)))
                cv["seed"] = seed
                per_seed.append(cv)
                curves.append(cv)
            rel_last = [cv["rel_min"][-1] for cv in per_seed]
            injective = all(cv["injective"] for cv in per_seed)
            expected = NTK_LAWS[law_name]
            rows.append(
                {
                    "law": law_name,
                    "expected_injective": expected,
                    "injective": injective,
                    "rel_min_at_Pmax_min": float(np.min(rel_last)),
                    "rel_min_at_Pmax_max": float(np.max(rel_last)),
                    "dim": per_seed[0]["dim"],
                    "agrees": injective == expected,
                }
            )
        summary = jsonable(
            {
                "rtol": INJECTIVITY_RTOL,
                "curves": curves,
                "rows": rows,
                "verdict": "holds" if all(r["agrees"] for r in rows) else "fails",
            }
        )
        return StudyResult(summary=summary, verdicts=records(summary, c), tables=tables(summary))


def tables(s: dict) -> list[Table]:
    """The page's tables from the summary (pure: ``scripts/regen_tables.py`` re-renders with it)."""
    return [_table(s)]


def _table(s: dict) -> Table:
    return Table(
        columns=[
            Column("law"),
            Column("expected", "expected"),
            Column("injective"),
            Column("rel_min_at_Pmax_min", "rel. sigma_min (min)", ".3g"),
            Column("rel_min_at_Pmax_max", "rel. sigma_min (max)", ".3g"),
            Column("dim"),
        ],
        rows=[
            {**r, "expected": "injective" if r["expected_injective"] else "not injective"} for r in s["rows"]
        ],
        note=(
            "Smallest singular value of the affine-projected features relative to the feature scale, at the "
            f"largest P (min and max over seeds); injective when > {s['rtol']:g}. Verdict: {s['verdict']}."
        ),
    )


# -- verdict records ---------------------------------------------------------------------------------------
_SRC = (
    "2605.17660, NTK injectivity: iff x -> log int exp(<Qx, Ky>) dmu(y) over (Q, K) are linearly independent "
    "modulo affine functions; claimed for discrete, uniform and Gaussian-mixture token laws; a Dirac law "
    "gives affine functions (NOTES.md §9)"
)


def records(summary: dict, config: NtkInjectivityConfig) -> list:
    """The verdict records of ``ntk_injectivity``: per law, the relative smallest singular value of the
    affine-projected features at the largest P (min over seeds) against ``criterion_rtol``; injective laws
    must exceed it, the Dirac control must stay below (the check that must fail). Robustness: seeds, the
    three largest P, and the threshold (1e-8, 1e-6, in the result)."""
    rtol = float(config.criterion_rtol)
    out = []
    curves = summary["curves"]
    for row in summary["rows"]:
        law = row["law"]
        expected = bool(row["expected_injective"])
        mine = [c for c in curves if c["law"] == law or c["law"].startswith(law)]
        crit = Criterion(
            quantity="relative smallest singular value of the affine-projected features at the largest P "
            "(min over seeds)",
            op=">" if expected else "<",
            threshold=rtol,
            declared_in="config: criterion_rtol",
            note="features are float64: round-off gives ~1e-16",
        )
        value = row["rel_min_at_Pmax_min"] if expected else row["rel_min_at_Pmax_max"]
        checks = []
        if mine:
            checks.append(
                RobustnessCheck.from_values(
                    crit, "seed", [c["seed"] for c in mine], [c["rel_min"][-1] for c in mine]
                )
            )
            Ps = mine[0]["P"][-3:]
            worst = [
                min(c["rel_min"][k] for c in mine) if expected else max(c["rel_min"][k] for c in mine)
                for k in range(len(mine[0]["P"]) - 3, len(mine[0]["P"]))
            ]
            checks.append(RobustnessCheck.from_values(crit, "number of parameters P", Ps, worst))
        outcome_at = {
            f"{t:g}": ("holds" if ((value > t) if expected else (value < t)) else "fails")
            for t in (1e-8, 1e-6)
        }
        out.append(
            record_test(
                id=f"ntk-injectivity-{law.replace('_', '-')}",
                statement=(
                    f"the NTK is injective for the {law} token law"
                    if expected
                    else "control: the NTK is not injective for a Dirac token law (affine features)"
                ),
                source=_SRC,
                criterion=crit,
                value=value,
                samples=len(mine),
                method="none: deterministic singular values; the spread over seeds is the robustness check",
                robustness=checks,
                extra={"outcome_at_threshold": outcome_at, "dim": row.get("dim")},
                notes="finite check: N query points and P random parameters; injectivity on N points is "
                "necessary, not sufficient, for the functional statement",
            )
        )
    return out
