"""The registry of studies: ``register``, ``get_study``, ``available_studies``.

The studies shipped with attnflow register themselves when :mod:`attnflow.studies` is imported; a
user's study registers with ``register(MyStudy())`` and then runs through ``attnflow study run``.
"""

from __future__ import annotations

import difflib

from .base import Study
from .errors import UnknownStudyError

__all__ = ["available_studies", "get_study", "register", "unregister"]

_STUDIES: dict[str, Study] = {}


def register(study: Study, *, replace: bool = False) -> Study:
    """Add ``study`` to the registry under ``study.name`` and return it.

    Raises
    ------
    TypeError
        If ``study`` is not a :class:`~attnflow.studies.Study` instance.
    ValueError
        If the name is taken (pass ``replace=True`` to replace it) or is not a plain identifier.
    """
    if not isinstance(study, Study):
        got = f"the class {study.__name__}" if isinstance(study, type) else type(study).__name__
        raise TypeError(
            f"register() takes a Study instance: got {got}; subclass "
            "attnflow.studies.Study and register an instance, e.g. register(MyStudy())"
        )
    name = study.name
    if not (isinstance(name, str) and name.replace("_", "a").isalnum()):
        raise ValueError(
            f"a study name must be letters, digits and underscores (it names directories and commands): "
            f"got {name!r}; e.g. 'longtime'"
        )
    if name in _STUDIES and not replace:
        raise ValueError(f"a study named {name!r} is already registered; pass replace=True to replace it")
    _STUDIES[name] = study
    return study


def unregister(name: str) -> None:
    """Remove the study ``name`` from the registry (no error if absent)."""
    _STUDIES.pop(name, None)


def available_studies() -> dict[str, str]:
    """Registered study names -> their one-line descriptions, sorted by name."""
    return {name: str(_STUDIES[name].description) for name in sorted(_STUDIES)}


def get_study(name: str) -> Study:
    """The registered study ``name``.

    Raises
    ------
    UnknownStudyError
        Listing the registered names and the closest one.
    """
    try:
        return _STUDIES[name]
    except (KeyError, TypeError):
        pass
    names = sorted(_STUDIES)
    close = difflib.get_close_matches(str(name), names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UnknownStudyError(
        f"unknown study {name!r}; {hint}registered studies: {', '.join(names) or 'none'} "
        "(attnflow.studies.available_studies() lists them)"
    )
