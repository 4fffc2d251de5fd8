"""The token space as an object: what the dynamics, integrators and observables ask of a geometry.

A geometry supplies the tangent projection P(x) applied to velocities, the retraction applied after each
step, validation of user tokens, distances, the Riemannian log and exp maps and, where it exists, the
uniform law. ``attnflow`` has two: :class:`~attnflow.geometry.sphere.Sphere` (tokens on S^{d-1}, the
paper's setting, arXiv 2605.18870 Sec. 2) and :class:`~attnflow.geometry.euclidean.Euclidean` (R^d, no
projection: the "flat" dynamics of the companion paper arXiv 2605.04279).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch

__all__ = ["Geometry"]


class Geometry(ABC):
    """Interface of a token space. Subclasses are frozen dataclasses, so equal geometries compare equal."""

    #: the name used in configs and stored results
    name: ClassVar[str]
    #: True when every token has unit norm (the Ito factors of the energy ledger simplify then)
    unit_norm: ClassVar[bool]

    @abstractmethod
    def tangent(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Project ambient vectors ``v`` (shape [..., d]) onto the tangent space at ``x``."""

    @abstractmethod
    def retract(self, y: torch.Tensor) -> torch.Tensor:
        """Map a point of the ambient space back onto the manifold (after an ambient step)."""

    @abstractmethod
    def check(self, x: torch.Tensor, name: str = "x", tol: float | None = None) -> None:
        """Raise ``ValueError`` (rule, value, fix) unless ``x`` holds finite points of this space."""

    @abstractmethod
    def distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Geodesic distance between paired points, shape [...]."""

    @abstractmethod
    def pairwise_distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Geodesic distances between all pairs, shape [..., n, m]."""

    @abstractmethod
    def log(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Riemannian log map: the tangent vector at ``x`` pointing to ``y`` with length d(x, y)."""

    @abstractmethod
    def exp(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Riemannian exp map: the point reached from ``x`` along the geodesic with initial velocity ``v``."""

    @abstractmethod
    def uniform(
        self, shape: tuple[int, ...], d: int, generator: torch.Generator, dtype: torch.dtype
    ) -> torch.Tensor:
        """Samples of the uniform (normalised Riemannian volume) law, shape [*shape, d]."""

    def tolerance(self, dtype: torch.dtype) -> float:
        """Default tolerance of :meth:`check` for tokens of this dtype."""
        return 1e-5 if dtype == torch.float32 else 1e-6

    def __str__(self) -> str:
        return self.name
