"""The documented example of an experiment config (``attnflow config example``): :data:`EXAMPLE_YAML`.

The lists of names in its comments come from the core's registries
(:data:`~attnflow.experiments.sections.CHOICES`).
"""

from __future__ import annotations

from typing import get_args

from ..model import transformer as transformer_module
from ..model.registry import forcing_dimensions
from .sections import CHOICES, WEIGHT_SECTIONS

__all__ = ["EXAMPLE_YAML"]


def _alts(key: str) -> str:
    return " | ".join(CHOICES[key]())


def _weights_names() -> str:
    return " | ".join(get_args(c.model_fields["process"].annotation)[0] for c in WEIGHT_SECTIONS)


def _short_float(x: float) -> str:
    """``1e4`` rather than ``10000`` for round powers of ten."""
    text = f"{x:.0e}".replace("e+0", "e").replace("e+", "e")
    return text if float(text) == x else f"{x:g}"


def _comment(line: str, comment: str, column: int = 30) -> str:
    return f"{line.ljust(column)}# {comment}"


EXAMPLE_YAML = "\n".join(
    [
        '# attnflow experiment config (schema: docs/design.md, "Experiment config schema").',
        "# Run it with:  attnflow run this.yaml --out runs/ou_H10",
        _comment("name: ou_H10", "free text label"),
        "",
        "model:",
        _comment(
            "  direction: descent",
            "required: ascent (x' = +v, tokens attract) | descent (x' = -v, authors' code)",
        ),
        _comment("  attention: softmax", _alts("model.attention")),
        _comment(
            "  beta: 1.0", f"inverse temperature, 0 < beta <= {_short_float(transformer_module.BETA_MAX)}"
        ),
        _comment("  geometry: sphere", "sphere (tokens on S^{d-1}) | flat (R^d)"),
        _comment("  causal: false", "token i attends only to j <= i"),
        _comment("  layer_scaling: null", "null, or t0 > 0: heads act as D / ((t0 + t) sqrt(H))"),
        _comment("  backend: auto", _alts("model.backend")),
        _comment("  token_noise: 0.0", "eps >= 0: tokens' Brownian motion, generator eps Delta (0: none)"),
        "",
        _comment("weights:", "how the heads D_h move with time"),
        _comment("  process: ornstein_uhlenbeck", _weights_names()),
        _comment("  sigma2: 1.0", "OU noise level sigma^2 >= 0"),
        _comment("  noise: symmetric", "symmetric ((Z+Z^T)/2, the paper) | full (Z)"),
        _comment("  F: identity", "OU target: identity or a d x d (or H x d x d) matrix"),
        _comment("  rate: 1.0", "mean-reversion rate lambda"),
        "  # or: {process: oscillating, forcing: "
        + " | ".join(f"{f} (d={d})" for f, d in forcing_dimensions().items())
        + f", phases: {_alts('weights.phases')}, rate: 1.0}}",
        "  # or: {process: constant} (frozen heads)",
        "",
        "tokens:",
        _comment(
            "  init: octahedral",
            "uniform | octahedral | von_mises_fisher (clusters, kappa) | file (path: x.npy)",
        ),
        _comment("  n: 300", "tokens"),
        _comment("  d: 3", "dimension (tokens on S^{d-1})"),
        _comment("  noise: 0.05", "octahedral only: std of the Gaussian perturbation"),
        "",
        "heads:",
        _comment(
            "  init: symmetric_gaussian",
            "symmetric_gaussian (Z+Z^T) | gaussian | identity | file (path: D.npy)",
        ),
        _comment("  H: 10", "number of heads"),
        _comment("  scale: 1.0", "multiplies the initial heads"),
        "",
        "integrator:",
        _comment("  method: euler", f"{_alts('integrator.method')} (euler: projected, the authors')"),
        _comment("  dt: 0.01", "time step"),
        _comment("  t1: 20.0", "final time (t1/dt must be a whole number)"),
        "  # jko / adaptive_rkmk2 only: tol: 1e-9 (> 0), max_iter: 500 (iteration / substep cap)",
        "",
        "record:",
        _comment("  every: 10", "record every k-th step (the final state is always recorded)"),
        _comment("  positions: true", "store the tokens (path, time, token, dim)"),
        _comment("  heads: false", "store the heads (path, time, head, row, col)"),
        _comment("  ledger: true", "energy, G2, Ghat2 and the energy-ledger residuals"),
        "",
        _comment("paths: 20", "independent trajectories"),
        _comment(
            "init: per_path",
            "per_path (x0, D0 drawn per path) | shared (one x0, D0 for all paths: the authors' estimator)",
        ),
        _comment("seed: 0", "tokens, heads and noise streams all derive from it"),
        _comment("precision: float64", _alts("precision")),
        _comment("device: cpu", "cpu | cuda | cuda:N"),
        _comment(
            "checkpoint_every: 200", "steps between checkpoints (rounded up to a multiple of record.every)"
        ),
        "",
    ]
)
"""A documented example config (``attnflow config example``); the lists of names come from the registries."""
