"""The vector field: backends that return pair sums, one assembly of the formulas, a dispatcher."""

from .assembly import FieldEval as FieldEval, StepTerms as StepTerms, energy_from_lse as energy_from_lse
from .field import evaluate as evaluate, evaluate_torch as evaluate_torch, step_terms as step_terms
from .pairsums import PairSums as PairSums
from .system import VectorField as VectorField

__all__ = [
    "FieldEval",
    "PairSums",
    "StepTerms",
    "VectorField",
    "energy_from_lse",
    "evaluate",
    "evaluate_torch",
    "step_terms",
]
