"""Observables: pure functions of tokens (and heads) that the simulation loop records.

Entropy of the attention rows, threshold-free clustering measures and optimal-transport distances;
interaction energy, mobilities, dissipation and the energy-dissipation ledger (arXiv 2605.18870 eq. (147)).
"""

from .clustering import (
    cluster_count,
    cluster_count_sensitivity,
    gram_effective_rank,
    mean_pairwise_inner_product,
    mean_token_norm,
    min_pairwise_inner_product,
    pairwise_geodesic_distance,
    time_to_one_cluster,
)
from .density import (
    smoothed_l2_distance as smoothed_l2_distance,
    wasserstein2_to_density as wasserstein2_to_density,
)
from .dissipation import (
    dissipation_power,
    effective_mobility,
    martingale_increment,
    metric_derivative_sq,
    mobility,
    strong_upper_gradient_sq,
)
from .energy import (
    energy_time_derivative,
    head_energies,
    interaction_energy,
)
from .entropy import (
    attention_entropy,
    attention_entropy_rate,
    mean_attention_entropy,
)
from .free_energy import (
    default_bandwidth,
    free_energy,
    kernel_entropy,
)
from .ledger import (
    ledger_table,
    ledger_terms,
    residual_order,
)
from .multihead import (
    HeadEnergyRates,
    MonotonicityReport,
    attention_entropy_production,
    check_monotonicity,
    head_energy_gradients,
    head_energy_rates,
    head_outputs,
    multihead_velocity,
    radial_shadows,
)
from .transport import (
    distance_to_nearest_dirac,
    distance_to_uniform,
    nearest_dirac_location,
    sliced_wasserstein_sphere,
    sliced_wasserstein_sphere_radians,
    wasserstein2,
    wasserstein2_distance,
    wasserstein2_squared,
)

__all__ = [
    "sliced_wasserstein_sphere_radians",
    "wasserstein2_distance",
    "wasserstein2_squared",
    "time_to_one_cluster",
    "default_bandwidth",
    "free_energy",
    "kernel_entropy",
    "radial_shadows",
    "multihead_velocity",
    "head_outputs",
    "head_energy_rates",
    "head_energy_gradients",
    "check_monotonicity",
    "attention_entropy_production",
    "MonotonicityReport",
    "HeadEnergyRates",
    "attention_entropy",
    "attention_entropy_rate",
    "cluster_count",
    "cluster_count_sensitivity",
    "dissipation_power",
    "distance_to_nearest_dirac",
    "distance_to_uniform",
    "effective_mobility",
    "energy_time_derivative",
    "gram_effective_rank",
    "head_energies",
    "interaction_energy",
    "ledger_table",
    "ledger_terms",
    "martingale_increment",
    "mean_attention_entropy",
    "mean_pairwise_inner_product",
    "mean_token_norm",
    "metric_derivative_sq",
    "min_pairwise_inner_product",
    "mobility",
    "nearest_dirac_location",
    "pairwise_geodesic_distance",
    "residual_order",
    "sliced_wasserstein_sphere",
    "strong_upper_gradient_sq",
    "smoothed_l2_distance",
    "wasserstein2",
    "wasserstein2_to_density",
]
