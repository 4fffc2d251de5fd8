"""The mean-field Transformer PDE (81) for the token density (issue 16).

A density on S^1 (Fourier) or S^2 (spherical harmonics, ducc0) is advanced by a Lawson RK4 scheme
(:mod:`~attnflow.pde.solver`) under the velocity of :mod:`~attnflow.pde.field` with the heads of any weight
process; :mod:`~attnflow.pde.initial` builds initial densities and samples particles from them;
:mod:`~attnflow.pde.band` holds the band-limit rule; :mod:`~attnflow.pde.linear` the closed-form linear
growth rates of Fourier / spherical-harmonic modes about the uniform state. See ``docs/pde.md``.
"""

from .band import (
    BAND_TOL as BAND_TOL,
    check_band_limit as check_band_limit,
    kernel_radius as kernel_radius,
    minimum_band_limit as minimum_band_limit,
)
from .field import (
    ATTENTIONS as ATTENTIONS,
    DensityField as DensityField,
    density_field as density_field,
    rotation_invariant as rotation_invariant,
)
from .grids import (
    CircleGrid as CircleGrid,
    SpectralGrid as SpectralGrid,
    SphereGrid as SphereGrid,
    make_grid as make_grid,
)
from .initial import (
    density_from_function as density_from_function,
    density_from_particles as density_from_particles,
    sample_density as sample_density,
    smoothing_factors as smoothing_factors,
    von_mises_fisher_mixture as von_mises_fisher_mixture,
)
from .linear import (
    critical_noise as critical_noise,
    mode_growth_rate as mode_growth_rate,
)
from .solver import (
    CFL_MAX as CFL_MAX,
    DensitySolver as DensitySolver,
    make_solver as make_solver,
    records_to_dataset as records_to_dataset,
    snapshot as snapshot,
    solve_density as solve_density,
)

__all__ = [
    "ATTENTIONS",
    "BAND_TOL",
    "CFL_MAX",
    "CircleGrid",
    "DensityField",
    "DensitySolver",
    "SpectralGrid",
    "SphereGrid",
    "check_band_limit",
    "critical_noise",
    "density_field",
    "density_from_function",
    "density_from_particles",
    "kernel_radius",
    "make_grid",
    "make_solver",
    "minimum_band_limit",
    "mode_growth_rate",
    "records_to_dataset",
    "rotation_invariant",
    "sample_density",
    "smoothing_factors",
    "snapshot",
    "solve_density",
    "von_mises_fisher_mixture",
]
