"""Keep numba's on-disk cache of attnflow's compiled code in step with every source it compiles.

numba's cache (``cache=True``) keys a cached function's index (``*.nbi``, with the machine code in
``*.nbc``) on the source of *that function's file* only. attnflow's compiled loop and assembly compile
formula functions whose one definition lives in other modules (``model/weights.py``,
``dynamics/assembly.py``, ``geometry/sphere.py``, ...): editing such a callee would leave the caller's
cached machine code in place, and the old code would silently run.

:func:`refresh` fixes this: before a jitted module of attnflow defines its functions, it hashes (by content)
every ``.py`` file of the subpackages that compiled code can reach (:data:`JIT_SUBPACKAGES`) into one
fingerprint and compares it with the stamp file (:data:`STAMP_NAME`) written beside numba's cache files the
last time. When they differ, it deletes the ``*.nbi`` / ``*.nbc`` files of attnflow's modules in that cache
directory (and nothing else) and writes the new stamp; numba then compiles afresh and caches again.

Which subpackages: compiled (nopython) code can call only compiled code, and a module can only compile a
function it can import; the import layers (pyproject ``[tool.importlinter]``) put every module that uses
numba (dynamics, simulation, pde) above geometry, model, bridge, dynamics and integrators only, so edits in
the upper layers (observables ... cli) cannot change compiled code and do not cost a recompile.
``tests/test_numba_cache.py`` fails if a module outside :data:`JIT_SUBPACKAGES` starts using numba.

Where numba puts the files (``numba.core.caching``, the locators tried in this order):
``$NUMBA_CACHE_DIR/<dir>_<sha1 of the dir>`` when ``NUMBA_CACHE_DIR`` is set, else the source directory's
``__pycache__`` when it is writable, else the same sub-path under the user-wide cache directory
(``~/.cache/numba``, a read-only install). :func:`refresh` cleans every one of these that exists and writes
the stamp where numba will write, so a cache built after the check carries the right stamp.

Concurrency: two processes starting at once may both find the stamp stale; both delete (a file already gone
is skipped) and both write the same stamp (atomically, through a temporary file and ``os.replace``). A
deletion may at worst remove a file the other process has just compiled (it compiles again), never leave
stale code: the stamp is written only after the deletion. Not covered: a process that imported the *old*
sources and compiles after the edit still saves code built from them (restart long-lived processes after
editing).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = ["JIT_SUBPACKAGES", "STAMP_NAME", "cache_dirs", "clean", "fingerprint", "refresh"]

STAMP_NAME = "attnflow-numba-sources.stamp"
"""Name of the stamp file written in each cache directory: the fingerprint of the sources, one line."""

JIT_SUBPACKAGES = ("geometry", "model", "bridge", "dynamics", "integrators", "simulation", "pde")
"""attnflow's subpackages whose sources compiled code can reach: the import layers up to simulation | pde."""

_PACKAGE_ROOT = Path(__file__).resolve().parent
_done: set[Path] = set()  # roots refreshed in this process (the check runs once per process)


def source_files(root: Path, subdirs: Sequence[str]) -> list[Path]:
    """Every ``.py`` file under ``root / sub`` for each ``sub`` in ``subdirs``, recursively, sorted.

    ``"."`` stands for the whole of ``root``.
    """
    files: set[Path] = set()
    for sub in subdirs:
        files.update(p for p in (root / sub).rglob("*.py") if "__pycache__" not in p.parts)
    return sorted(files)


def fingerprint(root: Path, sources: Mapping[Path, bytes]) -> str:
    """SHA-256 over the relative path and the content of each file (path -> bytes): one hex string."""
    digest = hashlib.sha256()
    for path in sorted(sources):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(hashlib.sha256(sources[path]).digest())
    return digest.hexdigest()


def _subpath(source_dir: Path) -> str:
    """numba's sub-path of a source directory inside a cache directory (``get_suitable_cache_subpath``)."""
    path = os.path.abspath(source_dir)
    return f"{os.path.basename(path)}_{hashlib.sha1(path.encode()).hexdigest()}"


def _numba_dirs() -> tuple[str | None, str]:
    """numba's ``NUMBA_CACHE_DIR`` (or None) and its user-wide cache directory, as numba reads them."""
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    return (config.CACHE_DIR or None), AppDirs(appname="numba", appauthor=False).user_cache_dir


def cache_dirs(source_dir: Path, cache_dir: str | None, user_cache_dir: str) -> list[Path]:
    """The directories where numba may cache the functions of ``source_dir``, in numba's order of preference.

    ``cache_dir`` is ``NUMBA_CACHE_DIR`` (None when unset), ``user_cache_dir`` numba's user-wide one.
    """
    dirs = [Path(cache_dir) / _subpath(source_dir)] if cache_dir else []
    return [*dirs, source_dir / "__pycache__", Path(user_cache_dir) / _subpath(source_dir)]


def _read_stamp(directory: Path) -> str | None:
    try:
        return (directory / STAMP_NAME).read_text().strip()
    except OSError:
        return None


def _write_stamp(directory: Path, stamp: str) -> bool:
    """Write the stamp atomically (creating the directory); False when the directory is not writable."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{STAMP_NAME}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(stamp + "\n")
            os.replace(tmp, directory / STAMP_NAME)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True


def clean(directory: Path, modules: Iterable[str], stamp: str) -> list[Path]:
    """Delete the numba cache files of ``modules`` in ``directory`` unless its stamp equals ``stamp``.

    Only files named ``<module>.<qualname>-<line>.pyXY[.N].nbi|.nbc`` with ``<module>`` in ``modules`` (the
    stems of the source directory's ``.py`` files) are removed; anything else in the directory is left alone.
    A file already removed by another process is skipped. Writes ``stamp`` after the deletion (when the
    directory is writable). Returns the files deleted.
    """
    if not directory.is_dir() or _read_stamp(directory) == stamp:
        return []
    stems = set(modules)
    deleted = []
    for entry in directory.iterdir():
        if entry.suffix in (".nbi", ".nbc") and entry.name.split(".", 1)[0] in stems:
            try:
                entry.unlink()
            except FileNotFoundError:  # another process cleaned it first
                continue
            except OSError:  # read-only: numba cannot use this directory either
                continue
            deleted.append(entry)
    _write_stamp(directory, stamp)
    return deleted


def _jit_dirs(sources: Mapping[Path, bytes]) -> dict[Path, list[str]]:
    """Source directories (with their module stems) holding a module that uses numba."""
    stems: dict[Path, list[str]] = {}
    for path in sources:
        stems.setdefault(path.parent, []).append(path.stem)
    jit = {path.parent for path, text in sources.items() if b"numba" in text}
    return {d: s for d, s in stems.items() if d in jit}


def refresh(
    root: Path | None = None, subdirs: Sequence[str] = JIT_SUBPACKAGES, *, force: bool = False
) -> list[Path]:
    """Delete numba's cached code of ``root``'s jitted modules when any source under ``subdirs`` changed.

    Called by each attnflow module that defines jitted functions, before it defines them; runs once per
    process and root (``force=True`` runs it again). ``root`` is the attnflow package (default) or, in
    tests, another package. Returns the cache files deleted.
    """
    root = (root or _PACKAGE_ROOT).resolve()
    if root in _done and not force:
        return []
    sources = {path: path.read_bytes() for path in source_files(root, subdirs)}
    stamp = fingerprint(root, sources)
    cache_dir, user_dir = _numba_dirs()
    deleted: list[Path] = []
    for source_dir, stems in _jit_dirs(sources).items():
        candidates = cache_dirs(source_dir, cache_dir, user_dir)
        for directory in candidates:
            deleted += clean(directory, stems, stamp)
        # numba writes to the first directory it can write to: stamp it now (the user-provided one, else
        # __pycache__, else the user-wide one), so the cache numba builds after this check carries the stamp
        for directory in candidates:
            if _read_stamp(directory) == stamp or _write_stamp(directory, stamp):
                break
    _done.add(root)
    return deleted
