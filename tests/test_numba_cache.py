"""numba's on-disk cache must not serve code compiled from a since-edited callee (attnflow._numba_cache)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from attnflow import _numba_cache as nc

SRC = Path(nc.__file__).resolve().parent


def _touch(directory: Path, *names: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"x")


def _package(tmp_path: Path, factor: int) -> Path:
    """A tiny package: a jitted caller in one file, the njit callee it compiles in another."""
    pkg = tmp_path / "tinypkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "callee.py").write_text(f"import numba\n\n\n@numba.njit\ndef g(x):\n    return x * {factor}\n")
    (pkg / "caller.py").write_text(
        textwrap.dedent(
            """\
            from pathlib import Path

            import numba

            from attnflow._numba_cache import refresh

            refresh(Path(__file__).parent, (".",))

            from .callee import g  # noqa: E402


            @numba.njit(cache=True)
            def f(x):
                return g(x) + 1
            """
        )
    )
    return pkg


def test_clean_deletes_only_the_modules_cache_files_when_the_stamp_differs(tmp_path):
    cache = tmp_path / "cache"
    ours = ["caller.f-12.py311.nbi", "caller.f-12.py311.1.nbc", "callee.g-3.py311.nbi"]
    theirs = ["other.h-1.py311.nbi", "other.h-1.py311.1.nbc", "notes.txt", "caller.txt"]
    _touch(cache, *ours, *theirs)
    deleted = nc.clean(cache, ["caller", "callee"], "stamp-1")
    assert sorted(p.name for p in deleted) == sorted(ours)
    assert sorted(p.name for p in cache.iterdir()) == sorted([*theirs, nc.STAMP_NAME])
    assert (cache / nc.STAMP_NAME).read_text().strip() == "stamp-1"
    # same stamp: a cache compiled after the check is kept
    _touch(cache, *ours)
    assert nc.clean(cache, ["caller", "callee"], "stamp-1") == []
    assert all((cache / name).exists() for name in ours)
    # a new stamp (an edited source): deleted again
    assert len(nc.clean(cache, ["caller", "callee"], "stamp-2")) == len(ours)
    # a directory that does not exist: nothing to do, nothing created
    assert nc.clean(tmp_path / "absent", ["caller"], "stamp-2") == []
    assert not (tmp_path / "absent").exists()


def test_refresh_cleans_every_numba_location_and_stamps_where_numba_writes(tmp_path, monkeypatch):
    pkg = _package(tmp_path, factor=2)
    cache_dir, user_dir = tmp_path / "numba_cache_dir", tmp_path / "user_cache"
    monkeypatch.setattr(nc, "_numba_dirs", lambda: (str(cache_dir), str(user_dir)))
    locations = nc.cache_dirs(pkg, str(cache_dir), str(user_dir))
    assert locations[0].parent == cache_dir and locations[1] == pkg / "__pycache__"
    assert locations[2].parent == user_dir
    for location in locations:  # a stale cache (no stamp) in each place numba may have used
        _touch(location, "caller.f-12.py311.nbi", "caller.f-12.py311.1.nbc", "keep.txt")
    assert len(nc.refresh(pkg, (".",), force=True)) == 6
    assert all((loc / "keep.txt").exists() and (loc / nc.STAMP_NAME).exists() for loc in locations)
    # unchanged sources: a fresh cache survives the next process's check
    _touch(locations[0], "caller.f-12.py311.nbi")
    assert nc.refresh(pkg, (".",), force=True) == []
    # once per process: without force a second call does not even look
    (pkg / "callee.py").write_text((pkg / "callee.py").read_text().replace("x * 2", "x * 3"))
    assert nc.refresh(pkg, (".",)) == []
    # the callee edited (the caller's file unchanged): the caller's cache goes
    assert [p.name for p in nc.refresh(pkg, (".",), force=True)] == ["caller.f-12.py311.nbi"]


def test_refresh_stamps_the_first_writable_location_like_numba(tmp_path, monkeypatch):
    pkg = _package(tmp_path, factor=2)
    user_dir = tmp_path / "user_cache"
    monkeypatch.setattr(nc, "_numba_dirs", lambda: (None, str(user_dir)))
    nc.refresh(pkg, (".",), force=True)  # no NUMBA_CACHE_DIR: the in-tree __pycache__, as numba
    assert (pkg / "__pycache__" / nc.STAMP_NAME).exists()
    assert not user_dir.exists()
    (pkg / "__pycache__" / nc.STAMP_NAME).unlink()
    _touch(pkg / "__pycache__", "caller.f-12.py311.nbi")

    # a read-only install (simulated: the tests may run as root, who writes anywhere): nothing under the
    # package can be deleted or written; no error, and the user-wide directory numba falls back to is stamped
    def refuse(path: Path) -> None:
        if Path(path).resolve().is_relative_to(pkg.resolve()):
            raise PermissionError(13, "Permission denied", str(path))

    unlink, mkstemp = Path.unlink, nc.tempfile.mkstemp
    monkeypatch.setattr(
        Path, "unlink", lambda self, missing_ok=False: refuse(self) or unlink(self, missing_ok)
    )
    monkeypatch.setattr(nc.tempfile, "mkstemp", lambda dir, **kw: refuse(dir) or mkstemp(dir=dir, **kw))
    assert nc.refresh(pkg, (".",), force=True) == []
    assert (pkg / "__pycache__" / "caller.f-12.py311.nbi").exists()
    assert not (pkg / "__pycache__" / nc.STAMP_NAME).exists()
    assert (nc.cache_dirs(pkg, None, str(user_dir))[-1] / nc.STAMP_NAME).exists()


def test_concurrent_cleans_do_not_fail(tmp_path):
    # two pytest workers starting at once: both find the stamp stale and both delete; a file the other
    # process removed first is skipped, and the stamp written last is the same one
    cache = tmp_path / "cache"
    names = [f"caller.f{i}-1.py311.{k}.nbc" for i in range(50) for k in range(4)]
    _touch(cache, *names)
    barrier, errors, deleted = threading.Barrier(8), [], []

    def work():
        barrier.wait()
        try:
            deleted.extend(nc.clean(cache, ["caller"], "s"))
        except Exception as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(p.name for p in deleted) == sorted(names)  # each file deleted exactly once
    assert [p.name for p in cache.iterdir()] == [nc.STAMP_NAME]
    assert (cache / nc.STAMP_NAME).read_text().strip() == "s"


def test_locations_are_numbas(tmp_path):
    # the sub-path numba files a source directory's cache under, in NUMBA_CACHE_DIR and the user-wide dir
    from numba.core import caching

    source = tmp_path / "pkg" / "mod.py"
    subpath = caching.UserProvidedCacheLocator.get_suitable_cache_subpath(str(source))
    assert nc.cache_dirs(source.parent, "/c", "/u") == [
        Path("/c", subpath),
        source.parent / "__pycache__",
        Path("/u", subpath),
    ]
    assert nc.cache_dirs(source.parent, None, "/u") == [source.parent / "__pycache__", Path("/u", subpath)]


COMPILERS = {"njit", "jit", "overload", "overload_method", "intrinsic", "register_jitable", "vectorize"}
COMPILERS |= {"guvectorize", "cfunc", "stencil", "generated_jit", "jitclass", "extending", "experimental"}


def _compiles(tree: ast.AST) -> bool:
    """Whether a module uses one of numba's compiling decorators (imported from numba, or numba.<name>)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "numba":
            if {a.name for a in node.names} & COMPILERS or set(node.module.split(".")[1:]) & COMPILERS:
                return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "numba":
            if node.attr in COMPILERS:
                return True
    return False


def test_only_the_fingerprinted_subpackages_compile_and_each_caching_module_refreshes():
    # compiled code can call only compiled code, defined (or njit-wrapped) in a module that uses numba's
    # compiling decorators: every such module must lie in the fingerprinted subpackages (a module that only
    # sets numba's threads, e.g. experiments/sweep.py, compiles nothing), and one that caches must refresh
    # before its first decorator
    compilers = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if "numba" not in text or not _compiles(ast.parse(text)):
            continue
        rel = path.relative_to(SRC)
        compilers.append(rel.as_posix())
        assert rel.parts[0] in nc.JIT_SUBPACKAGES, f"{rel} compiles with numba: add it to JIT_SUBPACKAGES"
        if "cache=True" in text:
            assert "\n_refresh_numba_cache()" in text, (
                f"{rel} caches but does not call _refresh_numba_cache()"
            )
            call = text.index("\n_refresh_numba_cache()")
            assert call < text.index("@njit" if "@njit" in text else "@numba.njit"), rel
    assert {"simulation/fused.py", "dynamics/numba_assembly.py", "pde/quadsums.py"} <= set(compilers)


@pytest.mark.slow
def test_an_edited_callee_is_compiled_again_not_served_from_the_cache(tmp_path):
    # end to end with numba: fresh processes sharing one NUMBA_CACHE_DIR; only the callee's file changes
    pkg = _package(tmp_path, factor=2)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "nbcache")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(SRC.parent), env.get("PYTHONPATH", "")])
    code = "from tinypkg.caller import f; print(f(1.0))"

    def run() -> float:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return float(out.stdout)

    assert run() == 3.0
    assert list((tmp_path / "nbcache").rglob("caller.f-*.nbi")), "numba did not cache the caller"
    assert run() == 3.0  # served from the cache
    (pkg / "callee.py").write_text((pkg / "callee.py").read_text().replace("x * 2", "x * 5"))
    assert run() == 6.0  # without the clean-up numba serves the cached 3.0
