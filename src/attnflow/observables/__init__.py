"""Observables: pure functions of tokens (and heads) that the simulation loop records.

Entropy of the attention rows, threshold-free clustering measures and optimal-transport distances.
"""

from .clustering import (
    cluster_count,
    cluster_count_sensitivity,
    gram_effective_rank,
    mean_pairwise_inner_product,
    mean_token_norm,
    min_pairwise_inner_product,
    pairwise_geodesic_distance,
)
from .entropy import (
    attention_entropy,
    attention_entropy_rate,
    mean_attention_entropy,
)
from .transport import (
    distance_to_nearest_dirac,
    distance_to_uniform,
    nearest_dirac_location,
    sliced_wasserstein_sphere,
    wasserstein2,
)

__all__ = [
    "attention_entropy",
    "attention_entropy_rate",
    "cluster_count",
    "cluster_count_sensitivity",
    "distance_to_nearest_dirac",
    "distance_to_uniform",
    "gram_effective_rank",
    "mean_attention_entropy",
    "mean_pairwise_inner_product",
    "mean_token_norm",
    "min_pairwise_inner_product",
    "nearest_dirac_location",
    "pairwise_geodesic_distance",
    "sliced_wasserstein_sphere",
    "wasserstein2",
]
