"""The simulation layer: the frozen run description, the Simulator, the energy ledger, one driver."""

from .spec import SimulationSpec as SimulationSpec, n_steps_for as n_steps_for

__all__ = ["SimulationSpec", "n_steps_for"]
