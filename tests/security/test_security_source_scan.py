"""No code from data, checked on the source: a walk over ``src/attnflow`` (the AST of every module) fails on

* ``torch.load`` without ``weights_only=True`` (literally);
* any use of ``pickle`` (and its kin ``dill``, ``cloudpickle``, ``shelve``, ``marshal``, ``joblib``), and
  ``np.load(..., allow_pickle=...)`` with anything but a literal False;
* ``trust_remote_code`` given anything but a literal False, and ``from_pretrained`` called without
  ``trust_remote_code=False`` (transformers asks on a terminal, and "y" runs the model folder's code);
* a YAML loader other than the safe one (``yaml.load`` with a Loader that is not ``SafeLoader``/
  ``CSafeLoader`` or a subclass of it, ``yaml.unsafe_load``, ``yaml.full_load``...).

The scanner itself is tested on snippets that break each rule (so the walk cannot pass by finding nothing).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

SRC = Path(__file__).resolve().parents[2] / "src" / "attnflow"
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib"}
SAFE_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}
UNSAFE_YAML = {"unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}


def _name(node: ast.AST) -> str:
    """Dotted name of a Name / Attribute chain (``torch.load``), '' otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _kw(call: ast.Call, name: str):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _is_const(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _safe_loader_classes(tree: ast.Module) -> set[str]:
    """Classes of the module that subclass a safe loader (``class _Yaml12Loader(yaml.SafeLoader)``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = {_name(b).rsplit(".", 1)[-1] for b in node.bases}
            if bases & (SAFE_LOADERS | out):
                out.add(node.name)
    return out


def scan(text: str, filename: str = "<snippet>") -> list[tuple[str, str]]:
    """(rule, 'file:line: what') of every violation in one module's source."""
    tree = ast.parse(text, filename)
    safe = SAFE_LOADERS | _safe_loader_classes(tree)
    found = []

    def add(rule, node, what):
        found.append((rule, f"{filename}:{node.lineno}: {what}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PICKLE_MODULES:
                    add("pickle", node, f"import {a.name}")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in PICKLE_MODULES:
                add("pickle", node, f"from {node.module} import ...")
            if node.module == "yaml" and any(a.name in UNSAFE_YAML for a in node.names):
                add("yaml", node, "imports an unsafe yaml loader function")
        elif isinstance(node, ast.Call):
            name = _name(node.func)
            last = name.rsplit(".", 1)[-1]
            if name in ("torch.load", "torch.serialization.load") and not _is_const(
                _kw(node, "weights_only"), True
            ):
                add("torch.load", node, f"{name} without weights_only=True")
            if last == "load" and name.split(".")[0] in ("np", "numpy"):
                ap = _kw(node, "allow_pickle")
                if ap is not None and not _is_const(ap, False):
                    add("pickle", node, f"{name}(allow_pickle=...) not literally False")
            trc = _kw(node, "trust_remote_code")
            if trc is not None and not _is_const(trc, False):
                add("trust_remote_code", node, f"{name}(trust_remote_code=...) not literally False")
            if last == "from_pretrained" and trc is None:
                add("trust_remote_code", node, f"{name} without trust_remote_code=False")
            if name.split(".")[0] == "yaml" and last in UNSAFE_YAML:
                add("yaml", node, f"{name}")
            if name in ("yaml.load", "yaml.load_all"):
                loader = _kw(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
                if loader is None or _name(loader).rsplit(".", 1)[-1] not in safe:
                    add("yaml", node, f"{name} with a Loader that is not the safe one")
        elif isinstance(node, ast.keyword) and node.arg == "trust_remote_code":
            pass  # handled with its call
    return found


def _all_violations() -> list[tuple[str, str]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        out += scan(path.read_text(), str(path.relative_to(SRC.parent)))
    return out


def test_the_source_tree_is_scanned():
    assert len(list(SRC.rglob("*.py"))) > 50


@pytest.mark.parametrize("rule", ["torch.load", "pickle", "yaml"])
def test_no_unsafe_deserialisation_in_src(rule):
    bad = [w for r, w in _all_violations() if r == rule]
    assert not bad, "\n".join(bad)


def test_trust_remote_code_is_literally_false_outside_the_bridge():
    bad = [w for r, w in _all_violations() if r == "trust_remote_code" and "/bridge/" not in w]
    assert not bad, "\n".join(bad)


def test_trust_remote_code_is_literally_false_in_the_bridge():
    bad = [w for r, w in _all_violations() if r == "trust_remote_code" and "/bridge/" in w]
    assert not bad, "\n".join(bad)


def test_the_loader_of_configs_is_a_safe_loader():
    from attnflow.experiments.schema import _Yaml12Loader

    assert issubclass(_Yaml12Loader, yaml.SafeLoader)


@pytest.mark.parametrize(
    ("snippet", "rule"),
    [
        ("import torch\ntorch.load(p)", "torch.load"),
        ("import torch\ntorch.load(p, weights_only=False)", "torch.load"),
        ("import torch\ntorch.load(p, weights_only=flag)", "torch.load"),
        ("import pickle", "pickle"),
        ("from dill import loads", "pickle"),
        ("import numpy as np\nnp.load(p, allow_pickle=True)", "pickle"),
        ("m = AutoModel.from_pretrained(p)", "trust_remote_code"),
        ("m = AutoModel.from_pretrained(p, trust_remote_code=True)", "trust_remote_code"),
        ("m = AutoConfig.from_pretrained(p, trust_remote_code=x)", "trust_remote_code"),
        ("import yaml\nyaml.load(t)", "yaml"),
        ("import yaml\nyaml.load(t, Loader=yaml.Loader)", "yaml"),
        ("import yaml\nyaml.load(t, yaml.FullLoader)", "yaml"),
        ("import yaml\nyaml.unsafe_load(t)", "yaml"),
        ("import yaml\nyaml.full_load(t)", "yaml"),
        ("import yaml\nclass L(yaml.Loader): pass\nyaml.load(t, Loader=L)", "yaml"),
    ],
)
def test_the_scanner_finds_each_kind_of_violation(snippet, rule):
    assert rule in [r for r, _ in scan(snippet)], snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "import torch\ntorch.load(p, weights_only=True)",
        "import numpy as np\nnp.load(p)",
        "import numpy as np\nnp.load(p, allow_pickle=False)",
        "m = AutoModel.from_pretrained(p, local_files_only=True, trust_remote_code=False)",
        "import yaml\nyaml.safe_load(t)",
        "import yaml\nclass L(yaml.SafeLoader): pass\nyaml.load(t, Loader=L)",
    ],
)
def test_the_scanner_accepts_the_safe_forms(snippet):
    assert scan(snippet) == []
