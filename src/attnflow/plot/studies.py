"""The figure function of each study, looked up by the CLI and handed to the study layer.

The study layer never imports this leaf: ``attnflow study run NAME`` passes ``figures_for(NAME)`` to
:func:`attnflow.studies.run_study`, which hands it to the study's analysis.
"""

from __future__ import annotations

from collections.abc import Callable

from ..experiments.reproduce import available_reproductions
from .multihead import (
    plot_critical_beta,
    plot_entropy,
    plot_monotonicity,
    plot_relu_vs_softmax,
    plot_sufficient_condition,
    plot_superadditivity,
)
from .noise import plot_jko_stability, plot_noise_phase
from .pde import plot_pde_particles
from .real_model import plot_real_model, plot_real_model_flows
from .reproduction import plot_all, plot_robustness
from .theorems import (
    plot_layer_scaling,
    plot_longtime,
    plot_mean_field_heads,
    plot_stability_input,
    plot_stability_weights,
)
from .training_studies import plot_depth_limit, plot_ntk_injectivity

__all__ = ["figures_for", "register_figures"]

# every shipped reproduction manifest is a study drawn by the Sec. 6 figures
_FIGURES: dict[str, Callable[..., dict]] = {name: plot_all for name in available_reproductions()}
# the multi-head studies (arXiv 2605.04279): figures(data, out_dir) -> {key: file}
_FIGURES.update(
    {
        "monotonicity": plot_monotonicity,
        "sufficient_condition": plot_sufficient_condition,
        "critical_beta": plot_critical_beta,
        "superadditivity": plot_superadditivity,
        "relu_vs_softmax": plot_relu_vs_softmax,
        "entropy": plot_entropy,
    }
)

# the studies of the main paper's theorems (issue 13)
_FIGURES.update(
    mean_field_heads=plot_mean_field_heads,
    longtime=plot_longtime,
    layer_scaling=plot_layer_scaling,
    stability_input=plot_stability_input,
    stability_weights=plot_stability_weights,
)
_FIGURES["massucco2026_robustness"] = plot_robustness  # issue 11

# the training studies (issue 15)
_FIGURES.update(ntk_injectivity=plot_ntk_injectivity, depth_limit=plot_depth_limit)
# issue 17: a trained transformer against the attention flow of its heads
_FIGURES["real_model"] = plot_real_model
_FIGURES["real_model_flows"] = plot_real_model_flows  # issue 26 part 3
# the Transformer PDE against particles (issue 16)
_FIGURES.update(pde_particles=plot_pde_particles)


# issue 16: noisy tokens and the JKO step
_FIGURES.update(noise_phase=plot_noise_phase, jko_stability=plot_jko_stability)


def register_figures(study: str, figures: Callable[..., dict]) -> None:
    """Make ``figures`` the figure function of the study named ``study`` (its signature is the one that
    study's analysis documents)."""
    if not callable(figures):
        raise TypeError(f"figures must be callable: got {type(figures).__name__}; pass a function")
    _FIGURES[study] = figures


def figures_for(study: str) -> Callable[..., dict] | None:
    """The figure function registered for ``study``, or None (the study then writes no figure)."""
    return _FIGURES.get(study)
