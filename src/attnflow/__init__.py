"""attnflow: multi-head self-attention as interacting particles on the sphere.

Simulate, measure and draw the time-dependent Wasserstein gradient flow ("Transformer PDE") of
arXiv 2605.18870 and its companions. See README.md for a first example.
"""

__version__ = "0.1.0"

from . import bridge as bridge, geometry as geometry
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
from .simulate import NonFiniteStateError as NonFiniteStateError, Simulator as Simulator, simulate as simulate

__all__ = [
    "ATTENTION_KINDS",
    "Constant",
    "CustomProcess",
    "NonFiniteStateError",
    "OrnsteinUhlenbeck",
    "Oscillating",
    "PiecewiseConstant",
    "Simulator",
    "TransformerModel",
    "WeightProcess",
    "bridge",
    "geometry",
    "heads",
    "simulate",
    "tokens",
    "__version__",
]
