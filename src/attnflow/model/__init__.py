"""Model layer: tokens, heads, attention kinds, weight processes and the model description."""

from . import heads as heads, tokens as tokens
from .attention import ATTENTION_KINDS as ATTENTION_KINDS
from .transformer import TransformerModel as TransformerModel
from .weights import (
    Constant as Constant,
    CustomProcess as CustomProcess,
    OrnsteinUhlenbeck as OrnsteinUhlenbeck,
    Oscillating as Oscillating,
    PiecewiseConstant as PiecewiseConstant,
    WeightProcess as WeightProcess,
)
