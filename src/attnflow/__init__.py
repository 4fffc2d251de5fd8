"""attnflow: multi-head self-attention as interacting particles on the sphere.

Simulate, measure and draw the time-dependent Wasserstein gradient flow ("Transformer PDE") of
arXiv 2605.18870 and its companions. See README.md for a first example.

Subpackages, bottom layer first (``docs/architecture.md``): :mod:`~attnflow.geometry`,
:mod:`~attnflow.model`, :mod:`~attnflow.dynamics`, :mod:`~attnflow.integrators`,
:mod:`~attnflow.simulation`, :mod:`~attnflow.observables`, :mod:`~attnflow.analysis`,
:mod:`~attnflow.experiments`, :mod:`~attnflow.studies`, :mod:`~attnflow.plot`. The upper ones
(observables and above, which pull in POT, scipy, plotting, storage and cluster libraries) are imported on
first access, e.g. ``attnflow.observables.interaction_energy``.
"""

import importlib as _importlib

from . import (
    bridge as bridge,
    dynamics as dynamics,
    geometry as geometry,
    integrators as integrators,
    model as model,
    random as random,
    simulation as simulation,
)
from ._version import __version__ as __version__
from .model import (
    ATTENTION_KINDS as ATTENTION_KINDS,
    Constant as Constant,
    CustomProcess as CustomProcess,
    OrnsteinUhlenbeck as OrnsteinUhlenbeck,
    Oscillating as Oscillating,
    PiecewiseConstant as PiecewiseConstant,
    TransformerModel as TransformerModel,
    WeightProcess as WeightProcess,
    heads as heads,
    tokens as tokens,
)
from .simulation import (
    NonFiniteStateError as NonFiniteStateError,
    SimulationSpec as SimulationSpec,
    Simulator as Simulator,
    integrate as integrate,
    simulate as simulate,
)

#: subpackages loaded on first attribute access (PEP 562): they import heavier libraries
_LAZY = ("observables", "analysis", "experiments", "studies", "plot", "cli")


def __getattr__(name: str):
    if name in _LAZY:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'attnflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "ATTENTION_KINDS",
    "Constant",
    "CustomProcess",
    "NonFiniteStateError",
    "OrnsteinUhlenbeck",
    "Oscillating",
    "PiecewiseConstant",
    "SimulationSpec",
    "Simulator",
    "TransformerModel",
    "WeightProcess",
    "__version__",
    "analysis",
    "bridge",
    "dynamics",
    "experiments",
    "geometry",
    "heads",
    "integrate",
    "integrators",
    "model",
    "observables",
    "plot",
    "random",
    "simulate",
    "simulation",
    "studies",
    "tokens",
]
