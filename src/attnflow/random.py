"""Reproducible random streams.

Every random API of attnflow takes an integer ``seed``. Streams are derived from it with
:class:`numpy.random.SeedSequence` so that

* the initial tokens, the initial heads and the weight noise use independent streams
  (``purpose`` keys), and
* each path ``p`` has its own stream, so a path's trajectory does not depend on how many other
  paths run beside it, nor on how paths are split across processes or machines.

The weight noise of path ``p`` at step ``k`` is the ``k``-th call of ``torch.randn(H, d, d)`` on
``path_generator(seed, p, "noise")`` (with :class:`BrownianSource` ``refine = m``: the normalised sum of
calls ``mk, ..., mk + m - 1``); tests replay it to feed an independent implementation.
"""

from __future__ import annotations

import math

import numpy as np
import torch

_PURPOSES = {"tokens": 0, "heads": 1, "noise": 2, "values": 3, "misc": 4, "token_noise": 5}


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
    purpose : {"tokens", "heads", "noise", "values", "misc", "token_noise"}
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


class BrownianSource:
    r"""Standard normal increments of the weight noise, one draw per step and path, coarsenable.

    Path p's stream is :func:`path_generator` ``(seed, first + p, "noise")``. Step k returns
    :math:`z_k` of shape ``(P, *shape)``; with ``refine = m`` each step draws m normals
    :math:`z^{(\delta)}_{mk+l}` on the m-times finer grid and returns
    :math:`z_k = m^{-1/2}\sum_{l<m} z^{(\delta)}_{mk+l}`: the same Brownian path seen at step
    :math:`m\delta`. Runs at dt and at dt/m with the same seed therefore share one Brownian path
    (the energy-identity audit refines dt this way).

    Parameters
    ----------
    seed : int
    paths : int
    shape : tuple of int
        Shape of one path's draw, e.g. ``(H, d, d)``.
    dtype : torch.dtype
    device : str or torch.device
    first : int
        Global index of the first path.
    refine : int
        Fine draws per step (>= 1).
    purpose : str
        The stream's purpose key: ``"noise"`` (the weight noise) or ``"token_noise"`` (the tokens'
        Brownian motion, :attr:`attnflow.TransformerModel.token_noise`).
    """

    def __init__(
        self,
        seed: int,
        paths: int,
        shape: tuple[int, ...],
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        *,
        first: int = 0,
        refine: int = 1,
        purpose: str = "noise",
    ):
        if isinstance(refine, bool) or not isinstance(refine, int) or refine < 1:
            raise ValueError(f"refine must be an integer >= 1 (fine draws per step): got {refine!r}")
        self.shape = tuple(shape)
        self.dtype, self.device = dtype, torch.device(device)
        self.refine = refine
        self.gens = path_generators(seed, paths, purpose, device, first=first)

    def next(self) -> torch.Tensor:
        """The standard normals of the next step, shape ``(P, *shape)``."""
        if self.refine == 1:
            return randn_per_path(self.gens, self.shape, self.dtype, self.device)
        fine = [randn_per_path(self.gens, self.shape, self.dtype, self.device) for _ in range(self.refine)]
        return torch.stack(fine).sum(0) / math.sqrt(self.refine)

    def state_dict(self) -> list[torch.Tensor]:
        """The generators' states."""
        return [g.get_state() for g in self.gens]

    def load_state_dict(self, states: list[torch.Tensor]) -> None:
        """Restore :meth:`state_dict`."""
        for g, s in zip(self.gens, states, strict=True):
            g.set_state(s)
