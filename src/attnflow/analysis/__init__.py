"""Analysis: studies built on simulations and observables (fits, audits)."""

from .edi import (
    check_edi as check_edi,
    check_edi_cli as check_edi_cli,
    check_edi_table as check_edi_table,
    run_audit as run_audit,
)
from .fits import (
    fit_depth_width as fit_depth_width,
    fit_power_law as fit_power_law,
    power_law_band as power_law_band,
)
from .noise_stability import (
    critical_token_noise as critical_token_noise,
    fit_critical_noise as fit_critical_noise,
    funk_hecke_eigenvalue as funk_hecke_eigenvalue,
    growth_rate as growth_rate,
)
from .reduced import (
    EquiangularModel as EquiangularModel,
    ReducedModelError as ReducedModelError,
    critical_beta as critical_beta,
    crossing_time as crossing_time,
    equiangular_particles as equiangular_particles,
    equiangular_tokens as equiangular_tokens,
)

__all__ = [
    "EquiangularModel",
    "ReducedModelError",
    "check_edi",
    "check_edi_cli",
    "check_edi_table",
    "critical_beta",
    "critical_token_noise",
    "fit_critical_noise",
    "funk_hecke_eigenvalue",
    "growth_rate",
    "crossing_time",
    "equiangular_particles",
    "equiangular_tokens",
    "fit_depth_width",
    "fit_power_law",
    "power_law_band",
    "run_audit",
]
