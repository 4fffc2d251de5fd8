"""Shared pieces of the multi-head studies (arXiv 2605.04279; NOTES.md §7): head families, one-thread
computation, a log-log order fit, JSON-safe numbers.

The multi-head studies plan their work as computation tasks on the run store and return a typed
:class:`~attnflow.studies.StudyResult` (:func:`typed_result`): their tables are
:class:`~attnflow.studies.render.Table` specs built by a pure function of the summary (so a committed page
regenerates from its ``summary.json``: ``scripts/regen_tables.py``); the verdict records render
through :func:`verdict_tables`.
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
import torch
from pydantic import Field

from ..analysis.fits import fit_power_law
from ..dynamics.threads import torch_threads
from .base import StudyResult
from .render import Column, Table

__all__ = [
    "Fraction",
    "HEAD_FAMILIES",
    "binomial_ci",
    "fit_order",
    "head_family",
    "jsonable",
    "one_thread",
    "typed_result",
    "verdict_tables",
]

#: a level strictly between 0 and 1 (a criterion's fraction of configurations, clouds or pairs)
Fraction = Annotated[float, Field(gt=0, lt=1)]

#: random head sets of the monotonicity studies
HEAD_FAMILIES = ("symmetric", "orthogonal", "identical", "approx_orthogonal", "approx_identical")


def one_thread():
    """Run torch on one thread inside the block (small arrays on a shared machine: thread pools only add
    contention, measured 20x slower with 2 threads on 2 busy cores), then restore the setting."""
    return torch_threads(1)


def _sym_unit(g: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    z = torch.randn(*shape, generator=g, dtype=torch.float64)
    s = (z + z.transpose(-1, -2)) / 2
    return s / torch.linalg.matrix_norm(s, ord=2, keepdim=True)


def head_family(family: str, paths: int, H: int, d: int, *, seed: int, scale: float = 1.0, eps: float = 0.0):
    r"""Random symmetric heads, shape=[paths, H, d, d], operator norm ``scale`` per head (before the defect).

    * ``symmetric``: independent :math:`S = (Z + Z^\top)/2`, normalised;
    * ``orthogonal``: :math:`M_h = Q_h\Lambda_h Q_h^\top` on disjoint blocks of ``d // H`` columns of a
      random orthogonal :math:`Q`, eigenvalues uniform in [-1, 1] (largest modulus 1): :math:`M_hM_{h'} = 0`;
    * ``identical``: one symmetric head repeated;
    * ``approx_orthogonal``: ``orthogonal`` plus ``eps`` times an independent normalised symmetric head, so
      that :math:`\|M_hM_{h'}\| = O(\varepsilon)`;
    * ``approx_identical``: ``identical`` plus ``eps`` times an independent normalised symmetric head.
    """
    if family not in HEAD_FAMILIES:
        raise ValueError(f"unknown head family {family!r}; valid: {', '.join(HEAD_FAMILIES)}")
    if family in ("orthogonal", "approx_orthogonal") and d < H:
        raise ValueError(f"orthogonal heads need d >= H: got d={d}, H={H}; raise d or lower H")
    g = torch.Generator().manual_seed(int(seed))
    if family == "symmetric":
        return scale * _sym_unit(g, (paths, H, d, d))
    if family in ("identical", "approx_identical"):
        M = _sym_unit(g, (paths, 1, d, d)).expand(paths, H, d, d).clone()
        return scale * (M + eps * _sym_unit(g, (paths, H, d, d)) if family == "approx_identical" else M)
    q, _ = torch.linalg.qr(torch.randn(paths, d, d, generator=g, dtype=torch.float64))
    b = d // H
    heads = []
    for h in range(H):
        qh = q[:, :, h * b : (h + 1) * b]
        lam = 2 * torch.rand(paths, b, generator=g, dtype=torch.float64) - 1
        lam = lam / lam.abs().amax(-1, keepdim=True)
        heads.append((qh * lam[:, None, :]) @ qh.transpose(-1, -2))
    M = torch.stack(heads, dim=1)
    if family == "approx_orthogonal":
        M = M + eps * _sym_unit(g, (paths, H, d, d))
    return scale * M


def fit_order(x, y) -> dict:
    """The order p of y ~ C x^p over the positive pairs: least squares in log-log through
    :func:`~attnflow.analysis.fits.fit_power_law`, with its 95% interval ``order_ci`` when at least three
    points leave a degree of freedom (None with two points: the slope through them is exact)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(y)
    m = int(ok.sum())
    if m < 2:
        return {"order": None, "C": None, "order_ci": None, "points": m}
    if m == 2:
        p, c = np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)
        return {"order": float(p), "C": float(math.exp(c)), "order_ci": None, "points": m}
    f = fit_power_law(x[ok], y[ok])
    return {"order": f["b"], "C": f["a"], "order_ci": [float(v) for v in f["b_ci"]], "points": m}


def jsonable(v):
    """Numbers, arrays and nested containers as plain JSON values (inf/nan as strings)."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return jsonable(v.tolist())
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else str(f)
    if isinstance(v, torch.Tensor):
        return jsonable(v.detach().cpu().numpy())
    return v


def binomial_ci(k: int, m: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson (exact) interval of a proportion ``k / m``: conservative, valid at k = 0 and k = m,
    where the Wald interval collapses to a point (scipy ``binomtest(...).proportion_ci('exact')``).

    Examples
    --------
    >>> lo, hi = binomial_ci(0, 1000)
    >>> lo, round(hi, 5)
    (0.0, 0.00368)
    """
    from scipy.stats import binomtest

    if not (isinstance(m, (int, np.integer)) and m >= 1 and 0 <= k <= m):
        raise ValueError(f"binomial_ci needs 0 <= k <= m and m >= 1 (counts): got k={k!r}, m={m!r}")
    ci = binomtest(int(k), int(m)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def verdict_tables(records, fmt: str = ".4g", *, robustness: bool = False) -> list[Table]:
    """The verdict records (``VerdictRecord`` or their JSON) as table specs: one row per record (id, verdict,
    class, criterion, threshold, value and its 95% interval, numbers in ``fmt``) and, with ``robustness``, a
    second table with one row per robustness choice and value (result, outcome).

    Examples
    --------
    >>> rec = {"id": "x", "class": "test", "verdict": "holds", "robustness": [],
    ...        "criterion": {"quantity": "p", "op": ">=", "threshold": 0.5},
    ...        "result": {"value": 0.91234, "ci95": [0.9, 0.93]}}
    >>> [r["value"] for r in verdict_tables([rec])[0].rows]
    [0.91234]
    """
    recs = [r.to_json() if hasattr(r, "to_json") else r for r in records]
    rows = []
    for j in recs:
        crit = j.get("criterion")
        rows.append(
            {
                "id": j["id"],
                "verdict": j["verdict"],
                "class": j["class"],
                "criterion": f"{crit['quantity']} {crit['op']}" if crit else None,
                "threshold": crit["threshold"] if crit else None,
                "value": j["result"].get("value"),
                "ci95": j["result"].get("ci95"),
            }
        )
    out = [
        Table(
            columns=[
                Column("id", "verdict id"),
                Column("verdict"),
                Column("class"),
                Column("criterion"),
                # thresholds are declared numbers (config fields): shown to the last digit
                Column("threshold", "threshold", ".16g"),
                Column("value", "value", fmt),
                Column("ci95", "95% CI", fmt),
            ],
            rows=rows,
            title="Verdicts",
            id="verdicts",
        )
    ]
    if robustness:
        rob = [
            # a robustness value is a label (a dt, a family, a range): shown as the record stores it
            {"id": j["id"], "choice": ch["choice"], "at": str(v), "result": x, "outcome": o}
            for j in recs
            for ch in j["robustness"]
            for v, x, o in zip(ch["values"], ch["results"], ch["outcomes"], strict=True)
        ]
        out.append(
            Table(
                columns=[
                    Column("id", "verdict id"),
                    Column("choice"),
                    Column("at", "value"),
                    Column("result", "result", fmt),
                    Column("outcome"),
                ],
                rows=rob,
                title="Robustness of the verdicts",
                id="robustness",
            )
        )
    return out


def typed_result(
    summary: dict, records: list, tables, config, figure_data: dict | None = None
) -> StudyResult:
    """The :class:`~attnflow.studies.StudyResult` of a multi-head study: the JSON-safe ``summary``, its
    verdict ``records`` and the table specs ``tables(summary with "verdicts", config)`` (a pure function of
    the summary: the committed pages regenerate from their ``summary.json``)."""
    summary = jsonable(summary)
    full = {**summary, "verdicts": [r.to_json() for r in records]}
    return StudyResult(
        summary=summary, verdicts=list(records), tables=tables(full, config), figure_data=figure_data
    )
