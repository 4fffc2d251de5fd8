"""Geometry of the token space as objects: :class:`Sphere` (S^{d-1}) and :class:`Euclidean` (flat R^d).

``GEOMETRIES`` maps the names used in configs and results to the classes; :func:`get_geometry` turns a
name (or a geometry) into an instance. No module outside this package tests geometry names.
"""

from .base import Geometry as Geometry
from .euclidean import Euclidean as Euclidean
from .sphere import (
    SPHERE_TOL as SPHERE_TOL,
    Sphere as Sphere,
    check_on_sphere as check_on_sphere,
    exp_map as exp_map,
    geodesic_distance as geodesic_distance,
    log_map as log_map,
    pairwise_geodesic_distance as pairwise_geodesic_distance,
    project as project,
    tangent_projection as tangent_projection,
)

#: name -> geometry class (the names of configs and stored results)
GEOMETRIES: dict[str, type[Geometry]] = {cls.name: cls for cls in (Sphere, Euclidean)}


def get_geometry(geometry: str | Geometry) -> Geometry:
    """A geometry instance from its name (``"sphere"``, ``"flat"``) or a :class:`Geometry` (returned as is).

    Examples
    --------
    >>> get_geometry("sphere")
    Sphere()
    """
    if isinstance(geometry, Geometry):
        return geometry
    if not isinstance(geometry, str) or geometry not in GEOMETRIES:
        raise ValueError(
            f"unknown geometry {geometry!r}; valid: {', '.join(GEOMETRIES)} "
            "(or an attnflow.geometry.Geometry instance)"
        )
    return GEOMETRIES[geometry]()


__all__ = [
    "GEOMETRIES",
    "SPHERE_TOL",
    "Euclidean",
    "Geometry",
    "Sphere",
    "check_on_sphere",
    "exp_map",
    "geodesic_distance",
    "get_geometry",
    "log_map",
    "pairwise_geodesic_distance",
    "project",
    "tangent_projection",
]
