"""Integrators, one file per method; each class declares its ``order`` and ``strong_order``."""

from .adaptive import AdaptiveRKMK2 as AdaptiveRKMK2
from .base import Integrator as Integrator
from .euler import ProjectedEuler as ProjectedEuler
from .euler_printed import PrintedEuler as PrintedEuler
from .heun import Heun as Heun
from .jko import JKO as JKO, jko_weights as jko_weights
from .lie import RKMK2 as RKMK2, RKMK4 as RKMK4, LieEuler as LieEuler
from .rk4 import RK4 as RK4

INTEGRATORS: dict[str, type[Integrator]] = {
    cls.name: cls
    for cls in (ProjectedEuler, PrintedEuler, Heun, RK4, LieEuler, RKMK2, RKMK4, AdaptiveRKMK2, JKO)
}

#: the integrators that take a tolerance ``tol`` (and a cap: ``max_substeps`` / ``max_iter``)
TOLERANCE_INTEGRATORS = {AdaptiveRKMK2.name: "max_substeps", JKO.name: "max_iter"}


def get_integrator(name: str | Integrator, **options) -> Integrator:
    """Integrator instance from its name (a key of :data:`INTEGRATORS`) and its options.

    Parameters
    ----------
    name : str or Integrator
        ``euler``, ``euler_printed``, ``heun``, ``rk4``, ``lie_euler``, ``rkmk2``, ``rkmk4``,
        ``adaptive_rkmk2`` (options ``tol``, ``max_substeps``) or ``jko`` (options ``tol``, ``max_iter``);
        an instance is returned as is.
    """
    if isinstance(name, Integrator):
        if options:
            raise ValueError(
                f"options {sorted(options)} cannot be applied to an integrator instance {name.name!r}"
            )
        return name
    if name not in INTEGRATORS:
        raise ValueError(f"unknown integrator {name!r}; valid: {', '.join(INTEGRATORS)}")
    opts = {k: v for k, v in options.items() if v is not None}
    if opts and name not in TOLERANCE_INTEGRATORS:
        raise ValueError(
            f"integrator {name!r} takes no options: got {sorted(opts)}; only "
            f"{', '.join(TOLERANCE_INTEGRATORS)} take tol and a cap"
        )
    try:
        return INTEGRATORS[name](**opts)
    except TypeError as exc:
        raise ValueError(
            f"unknown option for integrator {name!r}: {exc}; valid: tol, {TOLERANCE_INTEGRATORS[name]}"
        ) from exc


__all__ = [
    "INTEGRATORS",
    "JKO",
    "RK4",
    "RKMK2",
    "RKMK4",
    "TOLERANCE_INTEGRATORS",
    "AdaptiveRKMK2",
    "Heun",
    "Integrator",
    "LieEuler",
    "PrintedEuler",
    "ProjectedEuler",
    "get_integrator",
    "jko_weights",
]
