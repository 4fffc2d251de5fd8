"""Geometry of the token space: the unit sphere S^{d-1} (and flat R^d)."""

from .sphere import (
    check_on_sphere as check_on_sphere,
    geodesic_distance as geodesic_distance,
    pairwise_geodesic_distance as pairwise_geodesic_distance,
    project as project,
    tangent_projection as tangent_projection,
)

__all__ = [
    "check_on_sphere",
    "geodesic_distance",
    "pairwise_geodesic_distance",
    "project",
    "tangent_projection",
]
