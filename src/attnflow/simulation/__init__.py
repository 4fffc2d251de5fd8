"""The simulation layer: the frozen run description, the Simulator and its energy ledger, one driver loop.

* :class:`SimulationSpec` — what a config builds and a run consumes (whole-step rule: :func:`n_steps_for`);
* :class:`Simulator` — state and step, checkpointable; :class:`EnergyLedger` — identity (147);
* :func:`integrate` — the one loop, writing records into a sink (:class:`MemorySink`, or the run store's);
* :func:`simulate` — Simulator + driver + in-memory sink, returning an :class:`xarray.Dataset`;
* :func:`simulate_clouds` — many small independent clouds by RK4 in one compiled call.
"""

from .dataset import records_to_dataset as records_to_dataset, run_attrs as run_attrs
from .driver import (
    CallbackSink as CallbackSink,
    MemorySink as MemorySink,
    Sink as Sink,
    integrate as integrate,
)
from .ensemble import CloudRuns as CloudRuns, simulate_clouds as simulate_clouds
from .ledger import ACCUMULATORS as ACCUMULATORS, SCALARS as SCALARS, EnergyLedger as EnergyLedger
from .simulator import (
    DTYPES as DTYPES,
    NonFiniteStateError as NonFiniteStateError,
    Record as Record,
    Simulator as Simulator,
)
from .solve import simulate as simulate, simulate_spec as simulate_spec
from .spec import SimulationSpec as SimulationSpec, n_steps_for as n_steps_for

__all__ = [
    "ACCUMULATORS",
    "DTYPES",
    "SCALARS",
    "CallbackSink",
    "CloudRuns",
    "EnergyLedger",
    "MemorySink",
    "NonFiniteStateError",
    "Record",
    "SimulationSpec",
    "Simulator",
    "Sink",
    "integrate",
    "n_steps_for",
    "records_to_dataset",
    "run_attrs",
    "simulate",
    "simulate_clouds",
    "simulate_spec",
]
