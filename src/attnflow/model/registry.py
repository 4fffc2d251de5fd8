"""Named weight processes: the one place where a name such as ``"ornstein_uhlenbeck"`` becomes a process.

Experiment configs (``weights: {process: ...}``), the EDI audit's named cases and the reproduction
presets all build their weight processes here::

    >>> from attnflow.model.registry import WEIGHT_PROCESSES, make_weight_process
    >>> sorted(WEIGHT_PROCESSES)
    ['constant', 'ornstein_uhlenbeck', 'oscillating', 'piecewise_constant']
    >>> make_weight_process("oscillating", forcing="s1", phases="shared").phases
    'shared'

The keyword parameters of each entry are those of its class (read from the class signature, so the
defaults live in :mod:`attnflow.model.weights` only). The one spelling that differs from the class is
the OU target ``F="identity"`` (a config file cannot write ``None``), which means ``F=None``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .weights import FORCING_DIMS, Constant, OrnsteinUhlenbeck, Oscillating, PiecewiseConstant, WeightProcess

__all__ = [
    "WEIGHT_PROCESSES",
    "WeightProcessEntry",
    "forcing_dimensions",
    "forcing_for_dimension",
    "make_weight_process",
    "process_name",
]


@dataclass(frozen=True)
class WeightProcessEntry:
    """One named weight process.

    Parameters
    ----------
    name : str
        The name configs and presets use (``weights.process``).
    cls : type of WeightProcess
        The class :meth:`build` returns an instance of.
    make : callable or None
        ``make(**params) -> WeightProcess``; None means ``cls(**params)``.
    """

    name: str
    cls: type[WeightProcess]
    make: Callable[..., WeightProcess] | None = None

    @property
    def params(self) -> tuple[str, ...]:
        """Keyword parameters accepted by :meth:`build` (those of the class)."""
        return tuple(
            p.name
            for p in inspect.signature(self.cls).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        )

    def build(self, **params: Any) -> WeightProcess:
        """The process with these keyword parameters (class defaults for the others).

        Raises
        ------
        ValueError
            An unknown parameter, or a value the class rejects.
        """
        unknown = [k for k in params if k not in self.params]
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {', '.join(map(repr, unknown))} of the weight process {self.name!r}; "
                f"valid: {', '.join(self.params) or '(none)'}"
            )
        return (self.make or self.cls)(**params)


def _ornstein_uhlenbeck(F: Any = None, **params: Any) -> OrnsteinUhlenbeck:
    if isinstance(F, str):
        if F != "identity":
            raise ValueError(f"F must be 'identity', None or a (d, d) or (H, d, d) matrix: got {F!r}")
        F = None
    return OrnsteinUhlenbeck(F=F, **params)


#: name -> entry. ``piecewise_constant`` takes ``layers`` (an array of shape (L, H, d, d)) and
#: ``layer_time``; experiment configs do not name it (their heads come from the ``heads`` section).
WEIGHT_PROCESSES: dict[str, WeightProcessEntry] = {
    e.name: e
    for e in (
        WeightProcessEntry("constant", Constant),
        WeightProcessEntry("ornstein_uhlenbeck", OrnsteinUhlenbeck, _ornstein_uhlenbeck),
        WeightProcessEntry("oscillating", Oscillating),
        WeightProcessEntry("piecewise_constant", PiecewiseConstant),
    )
}


def make_weight_process(name: str, **params: Any) -> WeightProcess:
    """The weight process registered as ``name``, built from keyword parameters.

    Raises
    ------
    ValueError
        An unknown name or parameter, or a value the process rejects.
    """
    entry = WEIGHT_PROCESSES.get(name)
    if entry is None:
        raise ValueError(f"unknown weight process {name!r}; valid: {', '.join(WEIGHT_PROCESSES)}")
    return entry.build(**params)


def process_name(process: WeightProcess) -> str | None:
    """Registry name of a process instance (None for a class that is not registered)."""
    for name, entry in WEIGHT_PROCESSES.items():
        if type(process) is entry.cls:
            return name
    return None


def forcing_dimensions() -> dict[str, int]:
    """Dimension d of each named oscillating forcing (``{"s2": 3, "s1": 2}``), from
    :data:`attnflow.model.weights.FORCING_DIMS`."""
    return dict(FORCING_DIMS)


def forcing_for_dimension(d: int) -> str:
    """The named oscillating forcing defined in dimension ``d`` (``"s1"`` for 2, ``"s2"`` for 3).

    Raises
    ------
    ValueError
        No named forcing is defined in dimension ``d``.
    """
    for forcing, dim in FORCING_DIMS.items():
        if dim == d:
            return forcing
    dims = forcing_dimensions()
    listed = " or ".join(str(k) for k in sorted(set(dims.values())))
    raise ValueError(
        f"the named oscillating forcings are defined for d = {listed} "
        f"({', '.join(f'{f!r}: d = {k}' for f, k in dims.items())}): got d = {d}; "
        "pass a callable forcing to Oscillating for another dimension"
    )
