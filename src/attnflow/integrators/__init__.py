"""Integrators, one file per method; each class declares its ``order`` and ``strong_order``."""

from .base import Integrator as Integrator
from .euler import ProjectedEuler as ProjectedEuler
from .euler_printed import PrintedEuler as PrintedEuler
from .heun import Heun as Heun
from .rk4 import RK4 as RK4

INTEGRATORS: dict[str, type[Integrator]] = {
    cls.name: cls for cls in (ProjectedEuler, PrintedEuler, Heun, RK4)
}


def get_integrator(name: str | Integrator) -> Integrator:
    """Integrator instance from its name (``euler``, ``euler_printed``, ``heun``, ``rk4``)."""
    if isinstance(name, Integrator):
        return name
    if name not in INTEGRATORS:
        raise ValueError(f"unknown integrator {name!r}; valid: {', '.join(INTEGRATORS)}")
    return INTEGRATORS[name]()


__all__ = ["INTEGRATORS", "Heun", "Integrator", "PrintedEuler", "ProjectedEuler", "RK4", "get_integrator"]
