"""The field types shared by the config schemas (particle runs, PDE runs, training runs).

* :class:`Section`: the base of every config section (unknown keys, loose types and non-finite floats
  are errors; frozen);
* :func:`choice`: a string field whose allowed values are read from a core registry at each validation;
* :class:`TimeGrid`: ``integrator: {dt, t1}``, checked by the one time-grid rule
  :func:`attnflow.simulation.n_steps_for` (so a bad ``dt`` gives, after the key, the message that
  :func:`attnflow.simulate` and :class:`attnflow.simulation.SimulationSpec` give).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from ..simulation.spec import n_steps_for
from .errors import format_choices

__all__ = ["Section", "TimeGrid", "choice"]


class Section(BaseModel):
    """A config section: ``extra="forbid"``, strict types, frozen, finite floats (``.inf``/``.nan`` rejected
    by key)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def choice(allowed: Callable[[], tuple[str, ...]]) -> Any:
    """A string field whose allowed values are ``allowed()``, read at each validation (a pydantic
    ``literal_error`` naming them otherwise)."""

    def check(value: Any) -> Any:
        names = allowed()
        if isinstance(value, str) and value in names:
            return value
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": format_choices(names)}
        )

    return Annotated[str, BeforeValidator(check)]


#: How the time-grid rule's messages start -> the config key they are about.
_GRID_KEYS = {"dt ": "integrator.dt", "t1 must": "integrator.t1"}


class TimeGrid(Section):
    """The check of an ``integrator: {dt, t1}`` section from t0 = 0: ``dt`` finite > 0, ``t1`` finite > 0,
    at most :data:`attnflow.simulation.spec.MAX_STEPS` steps, ``t1/dt`` a whole number.

    Every rule is :func:`attnflow.simulation.n_steps_for` (the one check of ``dt`` and of a time grid);
    its message is prefixed with the key it is about. A subclass declares the fields where its schema
    wants them, as ``dt: float = Field(allow_inf_nan=True)`` and the same for ``t1`` (non-finite values
    then reach the one check and its message, not pydantic's generic float rule).
    """

    @model_validator(mode="after")
    def _time_grid(self):
        try:
            n_steps_for(0.0, self.t1, self.dt)
        except ValueError as exc:
            text = str(exc)
            key = next(
                (k for p, k in _GRID_KEYS.items() if text.startswith(p)), "integrator.t1 / integrator.dt"
            )
            raise ValueError(f"{key}: {text}") from exc
        return self

    @property
    def n_steps(self) -> int:
        """Number of steps from 0 to t1 (:func:`attnflow.simulation.n_steps_for`)."""
        return n_steps_for(0.0, self.t1, self.dt)
