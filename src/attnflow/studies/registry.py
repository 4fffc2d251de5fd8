"""The registry of studies: the :func:`study` decorator, ``get_study``, ``available_studies``.

A study registers itself in one place: the decorator ``@study`` on its class (or ``register(MyStudy())``).
Three ways in, all running a study exactly like a built-in one:

* the studies shipped with attnflow register when :mod:`attnflow.studies` is imported;
* an installed package declares its studies under the entry-point group ``attnflow.studies``
  (``name = "package.module:StudyClass"``), loaded on the first look-up of an unknown name;
* ``get_study("path/to/my_study.py:MyStudy")`` (and so ``attnflow study run path/to/my_study.py:MyStudy``)
  imports a user's file as the module ``my_study`` (its folder put on ``sys.path``, so its computations
  are importable by worker processes) and returns an instance of ``MyStudy``.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path

from .base import Study
from .errors import UnknownStudyError

__all__ = [
    "ENTRY_POINT_GROUP",
    "available_studies",
    "get_study",
    "load_study_file",
    "register",
    "study",
    "unregister",
]

#: the entry-point group under which installed packages declare their studies
ENTRY_POINT_GROUP = "attnflow.studies"

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


def study(cls: type[Study]) -> type[Study]:
    """Class decorator: register an instance of the study class ``cls`` (see :func:`register`).

    Examples
    --------
    >>> from attnflow.studies import Study, StudyConfig, study
    >>> @study
    ... class Nothing(Study):
    ...     name, description, Config = "nothing_doc", "registers itself", StudyConfig
    ...     def plan(self, config): ...
    ...     def analyse(self, config, runs, out_dir): ...
    >>> get_study("nothing_doc").description
    'registers itself'
    >>> unregister("nothing_doc")
    """
    if not (isinstance(cls, type) and issubclass(cls, Study)):
        raise TypeError(
            f"@study decorates a subclass of attnflow.studies.Study: got {cls!r}; write "
            "'@study' above 'class MyStudy(Study):'"
        )
    register(cls())
    return cls


def unregister(name: str) -> None:
    """Remove the study ``name`` from the registry (no error if absent)."""
    _STUDIES.pop(name, None)


def available_studies() -> dict[str, str]:
    """Registered study names -> their one-line descriptions, sorted by name."""
    return {name: str(_STUDIES[name].description) for name in sorted(_STUDIES)}


_FILE_SPEC = re.compile(r"^(?P<path>.+\.py):(?P<cls>[A-Za-z_]\w*)$")


def load_study_file(path: str | Path, cls_name: str) -> Study:
    """An instance of the study class ``cls_name`` defined in the Python file ``path``.

    The file is imported as the module named by its stem (``my_study.py`` -> ``my_study``) with its folder
    on ``sys.path``, so worker processes import its computations (``ComputeTask(fn="my_study:fn")``) by
    name. A file registering itself with ``@study`` is registered too.

    Raises
    ------
    UnknownStudyError
        The file does not exist, its stem is not a module name, another module of that name is loaded, or
        it defines no study class ``cls_name``.
    """
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise UnknownStudyError(
            f"no study file {str(path)!r} (resolved to {file}); give path/to/file.py:ClassName"
        )
    mod_name = file.stem
    if not mod_name.isidentifier():
        fixed = re.sub(r"\W", "_", mod_name)
        raise UnknownStudyError(
            f"the study file {file.name!r} must be named like a Python module (letters, digits, underscores) "
            f"so that workers can import it: rename it, e.g. {fixed}.py"
        )
    loaded = sys.modules.get(mod_name)
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
        if origin is None or Path(origin).resolve() != file:
            raise UnknownStudyError(
                f"cannot load {file} as the module {mod_name!r}: a module of that name is already imported "
                f"from {origin}; rename the study file"
            )
        module = loaded
    else:
        folder = str(file.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module = importlib.import_module(mod_name)
    cls = getattr(module, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Study)):
        found = sorted(
            k
            for k, v in vars(module).items()
            if isinstance(v, type) and issubclass(v, Study) and v is not Study
        )
        raise UnknownStudyError(
            f"{file} defines no study class {cls_name!r} (a subclass of attnflow.studies.Study); its study "
            f"classes: {', '.join(found) or 'none'}"
        )
    name = getattr(cls, "name", None)
    if isinstance(name, str) and isinstance(_STUDIES.get(name), cls):
        return _STUDIES[name]
    return cls()


def _load_entry_points() -> None:
    """Register the studies of the ``attnflow.studies`` entry points not registered yet."""
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _STUDIES:
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in must not hide the others
            raise UnknownStudyError(
                f"the entry point {ep.name!r} = {ep.value!r} of group {ENTRY_POINT_GROUP!r} cannot be loaded "
                f"({type(exc).__name__}: {exc}); fix or uninstall the package that declares it"
            ) from None
        inst = obj() if isinstance(obj, type) and issubclass(obj, Study) else obj
        if not isinstance(inst, Study):
            raise UnknownStudyError(
                f"the entry point {ep.name!r} = {ep.value!r} must name a Study subclass or instance: got "
                f"{type(obj).__name__}"
            )
        if inst.name not in _STUDIES:
            register(inst)


def get_study(name: str) -> Study:
    """The study ``name``: a registered name, an entry point of group ``attnflow.studies``, or
    ``path/to/file.py:ClassName`` (:func:`load_study_file`).

    Raises
    ------
    UnknownStudyError
        Listing the registered names and the closest one.
    """
    try:
        return _STUDIES[name]
    except (KeyError, TypeError):
        pass
    if isinstance(name, str):
        m = _FILE_SPEC.match(name)
        if m:
            return load_study_file(m["path"], m["cls"])
        _load_entry_points()
        if name in _STUDIES:
            return _STUDIES[name]
    names = sorted(_STUDIES)
    close = difflib.get_close_matches(str(name), names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UnknownStudyError(
        f"unknown study {name!r}; {hint}registered studies: {', '.join(names) or 'none'} "
        "(attnflow.studies.available_studies() lists them; a study of your own: path/to/file.py:ClassName)"
    )
