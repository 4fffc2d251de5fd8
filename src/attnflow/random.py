"""Reproducible random streams.

Every random API of attnflow takes an integer ``seed``. Streams are derived from it with
:class:`numpy.random.SeedSequence` so that

* the initial tokens, the initial heads and the weight noise use independent streams
  (``purpose`` keys), and
* each path ``p`` has its own stream, so a path's trajectory does not depend on how many other
  paths run beside it, nor on how paths are split across processes or machines.

The weight noise of path ``p`` at step ``k`` is the ``k``-th call of ``torch.randn(H, d, d)`` on
``path_generator(seed, p, "noise")``; tests replay it to feed an independent implementation.
"""

from __future__ import annotations

import numpy as np
import torch

_PURPOSES = {"tokens": 0, "heads": 1, "noise": 2, "values": 3, "misc": 4}


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer: got {seed!r}; pass e.g. seed=0")
    return int(seed)


def path_seed(seed: int, path: int, purpose: str) -> int:
    """Integer seed of the stream for one path and one purpose.

    Parameters
    ----------
    seed : int
        The user's seed (>= 0).
    path : int
        Path index (>= 0).
    purpose : {"tokens", "heads", "noise", "values", "misc"}
    """
    seed = _check_seed(seed)
    if purpose not in _PURPOSES:
        raise ValueError(f"unknown random purpose {purpose!r}; valid: {sorted(_PURPOSES)}")
    ss = np.random.SeedSequence(entropy=seed, spawn_key=(_PURPOSES[purpose], int(path)))
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def path_generator(seed: int, path: int, purpose: str, device: str | torch.device = "cpu") -> torch.Generator:
    """A seeded :class:`torch.Generator` for one path and one purpose."""
    g = torch.Generator(device=device)
    g.manual_seed(path_seed(seed, path, purpose))
    return g


def path_generators(
    seed: int, paths: int, purpose: str, device: str | torch.device = "cpu", *, first: int = 0
) -> list[torch.Generator]:
    """Generators for paths ``first, ..., first + paths - 1``."""
    return [path_generator(seed, first + p, purpose, device) for p in range(paths)]


def randn_per_path(
    gens: list[torch.Generator], shape: tuple[int, ...], dtype: torch.dtype, device: str | torch.device
) -> torch.Tensor:
    """Stack one ``randn(shape)`` draw from each path's generator: shape ``(len(gens), *shape)``."""
    return torch.stack([torch.randn(shape, generator=g, dtype=dtype, device=device) for g in gens], dim=0)


def rand_per_path(
    gens: list[torch.Generator], shape: tuple[int, ...], dtype: torch.dtype, device: str | torch.device
) -> torch.Tensor:
    """Stack one ``rand(shape)`` (uniform on [0, 1)) draw from each path's generator."""
    return torch.stack([torch.rand(shape, generator=g, dtype=dtype, device=device) for g in gens], dim=0)
