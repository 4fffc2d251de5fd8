"""The vector field: backends that return pair sums, one assembly of the formulas, a dispatcher."""

from .assembly import (
    FieldEval as FieldEval,
    energy_from_lse as energy_from_lse,
    ledger_rates as ledger_rates,
    martingale_increment as martingale_increment,
)
from .field import (
    evaluate as evaluate,
    evaluate_torch as evaluate_torch,
    model_ledger_rates as model_ledger_rates,
)
from .pairsums import PairSums as PairSums
from .system import VectorField as VectorField

__all__ = [
    "FieldEval",
    "PairSums",
    "VectorField",
    "energy_from_lse",
    "evaluate",
    "evaluate_torch",
    "ledger_rates",
    "martingale_increment",
    "model_ledger_rates",
]
