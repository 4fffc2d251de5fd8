"""Dynamics layer: the vector field of the tokens and the ledger pieces computed with it."""

from .field import FieldEval as FieldEval, evaluate as evaluate, evaluate_torch as evaluate_torch
from .system import VectorField as VectorField

__all__ = ["FieldEval", "VectorField", "evaluate", "evaluate_torch"]
