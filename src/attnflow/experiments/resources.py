"""What a particle or training run costs, estimated from its config before anything is allocated.

A config is a few hundred bytes; a typo in it (``n: 1000000``, ``heads.H: 100000``, ``paths: 10**9``) can
ask for more memory than the machine has, or for days per step. :func:`check_resources` refuses such a
config with the estimate and the fix; ``allow_large: true`` in the config runs it anyway (for those who
mean it). The PDE runs' estimate is :mod:`attnflow.pde.resources`.

Particle runs (:func:`particle_cost`). The field's pair sums are tiled (never an ``n x n`` matrix:
:mod:`attnflow.dynamics.numba_kernel`, :mod:`attnflow.dynamics.torch_tiled`), so memory is the state and
its integrator stages, ``O(P (n d + H d^2))`` floats each, plus the records buffered between two
checkpoints; a step evaluates the field ``stages`` times over ``P H n^2`` pairs. The time assumes
:data:`PAIRS_PER_S` (the fused kernel's ~1 ns per pair on one core, ``docs/performance.md``): an optimistic
rate, so only configs that cannot finish a step in :data:`MAX_STEP_SECONDS` even then are refused.

Training runs (:func:`training_cost`). The flow is differentiated by PyTorch on dense attention: the
``batch x heads x n x n`` weights of each of the ``layers x steps_per_layer`` steps are kept for the backward
pass (about three such arrays per step), and a training step costs about three forward passes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import ConfigError

__all__ = [
    "MAX_STEP_SECONDS",
    "MEMORY_SHARE",
    "PAIRS_PER_S",
    "RunCost",
    "check_resources",
    "machine_memory_bytes",
    "particle_cost",
    "training_cost",
]

#: Pairs (i, j) per second assumed for a particle run's time estimate (optimistic: one core of the kernel).
PAIRS_PER_S = 1e9
#: Attention entries per second assumed for a training step (dense PyTorch, forward and backward).
DENSE_PER_S = 1e8
#: The longest estimated time per step accepted without ``allow_large: true`` (seconds).
MAX_STEP_SECONDS = 60.0
#: The share of this machine's memory a run may be estimated to need without ``allow_large: true``.
MEMORY_SHARE = 0.5
#: Integrator stages (field evaluations per step); an unknown method counts as 4 (RK4).
STAGES = {"euler": 1, "euler_printed": 1, "heun": 2, "rk4": 4, "lie_euler": 1, "rkmk2": 2, "rkmk4": 4}


@dataclass(frozen=True)
class RunCost:
    """An estimate: bytes of memory, seconds per step, and what dominates it (for the message)."""

    memory_bytes: float
    seconds_per_step: float
    what: str


def machine_memory_bytes() -> float | None:
    """Physical memory of this machine (None where the OS does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def particle_cost(cfg) -> RunCost:
    """The cost of an :class:`~attnflow.experiments.schema.ExperimentConfig` (module docstring)."""
    P = int(cfg.paths)
    n = int(getattr(cfg.tokens, "n", 0) or 0)
    d = int(getattr(cfg.tokens, "d", 3) or 3)
    H = int(cfg.heads.H)
    stages = STAGES.get(cfg.integrator.method, 4)
    elt = 4 if cfg.precision == "float32" else 8
    state = P * (n * d + H * d * d)
    buffered = (
        max(1, cfg.checkpoint_steps // cfg.record.every)
        * P
        * ((n * d if cfg.record.positions else 0) + (H * d * d if cfg.record.heads else 0) + 16)
    )
    memory = elt * state * (2 * stages + 6) + 8 * P * H * n * (d + 2) + 8 * buffered
    pairs = stages * P * H * n * n
    return RunCost(float(memory), pairs / PAIRS_PER_S, f"paths = {P}, tokens.n = {n}, heads.H = {H}, d = {d}")


def training_cost(cfg) -> RunCost:
    """The cost of a :class:`~attnflow.experiments.training_config.TrainingConfig` (module docstring)."""
    f, t = cfg.flow, cfg.task
    batch = int(cfg.train.batch or t.paths)
    steps = int(f.layers) * int(f.steps_per_layer)
    att = batch * int(f.heads) * int(t.n) ** 2
    per_step_tokens = batch * int(t.n) * int(f.d)
    memory = 8 * steps * (3 * att + 6 * per_step_tokens) + 8 * int(t.paths) * int(t.n) * int(f.d) * 4
    memory += 8 * 4 * int(f.layers) * int(f.heads) * int(f.d) ** 2  # parameters, AdamW moments, gradients
    seconds = 3 * steps * att * (int(f.d) + 2) / DENSE_PER_S
    what = f"task.n = {t.n}, batch = {batch}, flow.heads = {f.heads}, {steps} flow steps"
    return RunCost(float(memory), seconds, what)


def check_resources(cost: RunCost, *, allow_large: bool, name: str, fix: str) -> RunCost:
    """Refuse a run whose estimated memory or time per step this machine cannot give.

    Parameters
    ----------
    cost : RunCost
    allow_large : bool
        The config's ``allow_large``: True lets every estimate pass.
    name : str
        The run's name (for the message).
    fix : str
        Which keys to lower.

    Raises
    ------
    ConfigError
        Naming the estimate, the machine's limit and the fix (lower ``fix`` or set ``allow_large: true``).
    """
    if allow_large:
        return cost
    total = machine_memory_bytes()
    problems = []
    if total is not None and cost.memory_bytes > MEMORY_SHARE * total:
        problems.append(
            f"needs about {cost.memory_bytes / 2**30:.3g} GiB of memory, more than {MEMORY_SHARE:.0%} of "
            f"this machine's {total / 2**30:.3g} GiB"
        )
    if cost.seconds_per_step > MAX_STEP_SECONDS:
        problems.append(
            f"takes about {cost.seconds_per_step:.3g} s per step even at the fastest rate, more than "
            f"{MAX_STEP_SECONDS:g} s"
        )
    if problems:
        raise ConfigError(
            f"the run {name[:80]!r} ({cost.what}) {' and '.join(problems)}; lower {fix}, or set "
            "allow_large: true in the config to run it anyway"
        )
    return cost
