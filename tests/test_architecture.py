"""The package's shape (issue 9, parts 7 and 9): no private name imported across modules, and a public
surface reachable from ``import attnflow``. The layering itself is the import-linter contract in
pyproject.toml (run by scripts/test.sh); these are the rules import-linter cannot express.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import attnflow

SRC = Path(attnflow.__file__).resolve().parent  # the attnflow being tested (src layout)
ROOT = SRC.name  # "attnflow"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path, src: Path) -> str:
    parts = [ROOT, *path.relative_to(src).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str, src: Path) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (src / rel).with_suffix(".py").is_file() or (src / rel / "__init__.py").is_file()


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _private_module_offence(dotted: str, importer: str) -> str | None:
    """A private module (``pkg._mod``) may be imported from inside ``pkg`` only."""
    parts = dotted.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if _is_private(part):
            owner = ".".join(parts[:i])
            if importer != owner and not importer.startswith(owner + "."):
                return f"private module {'.'.join(parts[: i + 1])} used outside {owner}"
    return None


def private_imports(src: Path = SRC) -> list[str]:
    """Every import, anywhere in a module (top level or inside a function), of a private name defined
    in another module, or of a private module from outside its package: 'file:line: what'."""
    offenders = []
    for path in sorted(src.rglob("*.py")):
        importer = _module_name(path, src)
        is_package = path.name == "__init__.py"
        where = f"{path.relative_to(src.parent)}"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == ROOT and (
                        msg := _private_module_offence(alias.name, importer)
                    ):
                        offenders.append(f"{where}:{node.lineno}: {msg}")
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(node, importer, is_package)
                if module.split(".")[0] != ROOT:
                    continue
                if msg := _private_module_offence(module, importer):
                    offenders.append(f"{where}:{node.lineno}: {msg}")
                    continue
                for alias in node.names:
                    if not _is_private(alias.name):
                        continue
                    full = f"{module}.{alias.name}"
                    if _is_module(full, src):  # a private submodule: allowed inside its package only
                        if msg := _private_module_offence(full, importer):
                            offenders.append(f"{where}:{node.lineno}: {msg}")
                    else:
                        offenders.append(f"{where}:{node.lineno}: private name {alias.name} from {module}")
    return offenders


def test_the_private_import_finder_finds_what_it_should(tmp_path) -> None:
    # A small package with one offence of each kind and the allowed cases next to them.
    pkg = tmp_path / ROOT
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from ._version import __version__\n",
        "_version.py": "__version__ = '0'\n",
        "a.py": "_helper = 1\n",
        "b.py": "from .a import _helper\n\ndef f():\n    from attnflow.a import _helper\n",
        "sub/__init__.py": "",
        "sub/_impl.py": "x = 1\n",
        "sub/user.py": "from . import _impl\nfrom ._impl import x\n",
        "c.py": "from .sub._impl import x\nimport attnflow.sub._impl\nfrom .sub import _impl\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    assert private_imports(pkg) == [
        "attnflow/b.py:1: private name _helper from attnflow.a",
        "attnflow/b.py:4: private name _helper from attnflow.a",
        "attnflow/c.py:1: private module attnflow.sub._impl used outside attnflow.sub",
        "attnflow/c.py:2: private module attnflow.sub._impl used outside attnflow.sub",
        "attnflow/c.py:3: private module attnflow.sub._impl used outside attnflow.sub",
    ]


def test_no_private_name_is_imported_across_modules() -> None:
    offenders = private_imports()
    assert not offenders, "private names imported across modules:\n" + "\n".join(offenders)


SUBPACKAGES = (
    "geometry",
    "model",
    "integrators",
    "simulation",
    "observables",
    "analysis",
    "experiments",
)


def _fresh_import(code: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC.parent), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_attnflow_exposes_the_subpackages_and_plot_lazily() -> None:
    # In a fresh interpreter (this one has imported half the package already): every subpackage is an
    # attribute right after `import attnflow`; plot (a leaf, it imports matplotlib) is not imported
    # by that, but `attnflow.plot` reaches it on first use (PEP 562 module __getattr__).
    code = f"""
import importlib.util, sys, types
import attnflow
names = {SUBPACKAGES!r} + (("studies",) if importlib.util.find_spec("attnflow.studies") else ())
missing = [n for n in names if not isinstance(getattr(attnflow, n, None), types.ModuleType)]
assert not missing, f"not attributes of attnflow after import attnflow: {{missing}}"
assert "attnflow.plot" not in sys.modules, "import attnflow imported attnflow.plot"
assert isinstance(attnflow.plot, types.ModuleType) and callable(attnflow.plot.plot_all)
"""
    res = _fresh_import(code)
    assert res.returncode == 0, res.stderr[-2000:]
