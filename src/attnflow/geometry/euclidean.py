"""Flat token space R^d: no tangent projection, no retraction (the flat dynamics of arXiv 2605.04279)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .base import Geometry

__all__ = ["Euclidean"]


@dataclass(frozen=True)
class Euclidean(Geometry):
    """R^d with the Euclidean metric. ``log(x, y) = y - x``, ``exp(x, v) = x + v``.

    Examples
    --------
    >>> g = Euclidean()
    >>> g.exp(torch.zeros(2), g.log(torch.zeros(2), torch.tensor([3.0, 4.0])))
    tensor([3., 4.])
    """

    name: ClassVar[str] = "flat"
    unit_norm: ClassVar[bool] = False

    def tangent(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return v

    def retract(self, y: torch.Tensor) -> torch.Tensor:
        return y

    def check(self, x: torch.Tensor, name: str = "x", tol: float | None = None) -> None:
        if not torch.isfinite(x.detach()).all():
            raise ValueError(
                f"{name} must be finite: found {int((~torch.isfinite(x)).sum())} non-finite entries; "
                "remove nan/inf values before simulating"
            )

    def distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(x - y, dim=-1)

    def pairwise_distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")

    def log(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y - x

    def exp(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return x + v

    def uniform(self, shape, d, generator, dtype):
        raise ValueError(
            "R^d has no uniform probability law (geometry 'flat'); draw tokens on the sphere "
            "(attnflow.tokens.uniform) or pass your own array with attnflow.tokens.from_array"
        )
