"""Observables: pure functions of tokens (and heads) that the simulation loop records.

Entropy of the attention rows, threshold-free clustering measures and optimal-transport distances.
"""

from .clustering import (
    cluster_count as cluster_count,
    cluster_count_sensitivity as cluster_count_sensitivity,
    gram_effective_rank as gram_effective_rank,
    mean_pairwise_inner_product as mean_pairwise_inner_product,
    mean_token_norm as mean_token_norm,
    min_pairwise_inner_product as min_pairwise_inner_product,
    pairwise_geodesic_distance as pairwise_geodesic_distance,
)
from .entropy import (
    attention_entropy as attention_entropy,
    attention_entropy_rate as attention_entropy_rate,
    mean_attention_entropy as mean_attention_entropy,
)
from .transport import (
    distance_to_nearest_dirac as distance_to_nearest_dirac,
    distance_to_uniform as distance_to_uniform,
    nearest_dirac_location as nearest_dirac_location,
    sliced_wasserstein_sphere as sliced_wasserstein_sphere,
    wasserstein2 as wasserstein2,
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
