"""The bounded YAML 1.2 reader of every config file (particle, PDE, training runs, study configs).

One reader, :func:`read_config_file`, for the three loaders: a regular file of at most
:data:`MAX_CONFIG_BYTES`, UTF-8, parsed by :class:`Yaml12Loader` (YAML 1.2 floats such as ``1e-3``,
bounded depth, written size and size after alias expansion). A config given as a dict is bounded the
same way by :func:`check_config_dict`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError, short_message, short_repr

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_WRITTEN_NODES",
    "Yaml12Loader",
    "YamlLimitError",
    "check_config_dict",
    "load_config_source",
    "load_yaml",
    "read_config_file",
]


# -- YAML 1.2 floats, bounded -------------------------------------------------------------------------
#: The largest config file read (a config is a few hundred bytes; PyYAML reads ~1 MB/s).
MAX_CONFIG_BYTES = 256 * 1024
#: The most values written in a document (a d x d x H matrix of weights.F included); PyYAML builds
#: ~15000 nodes per second, so this bounds the time spent on a hostile document to about a second.
MAX_WRITTEN_NODES = 20_000
#: The deepest nesting of mappings and lists (a config nests 3 levels).
MAX_DEPTH = 32
#: The most nodes a config may have once its aliases are expanded (a "billion laughs" stops here).
MAX_NODES = 100_000


class YamlLimitError(yaml.YAMLError):
    """A YAML document beyond the limits of a config (depth, size after alias expansion, recursion),
    or one that PyYAML cannot construct."""


def _check_tree(root: Any, children: Callable[[Any], list], what: str) -> None:
    """Bound the depth and the expanded size of a tree whose nodes may be shared (aliases); no recursion.

    ``children(node)`` lists a node's children. The expanded size counts a shared node once per
    reference, memoised per node, so a tree of 10^30 nodes written in 3 kB is measured in microseconds.
    A node that contains itself (``&a [*a]``) is refused.
    """
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, expanded = stack.pop()
        key = id(node)
        kids = children(node)
        if not kids:
            size[key] = 1
            continue
        if expanded:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_NODES:
                raise YamlLimitError(
                    f"{what} has more than {MAX_NODES} values once its aliases are expanded; write a config "
                    "without repeated aliases (a config has a few dozen values)"
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlLimitError(f"{what} contains itself through an alias; remove the recursive alias")
        if depth > MAX_DEPTH:
            raise YamlLimitError(
                f"{what} is nested deeper than {MAX_DEPTH} levels; a config nests sections two levels deep"
            )
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((k, depth + 1, False) for k in kids if id(k) not in size)


def _node_children(node: yaml.Node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _data_children(obj: Any) -> list:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return []


class Yaml12Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the YAML 1.2 float rule, so ``1e-3`` is the float 0.001, and bounds.

    PyYAML implements YAML 1.1, whose floats need a dot and a signed exponent: ``1e-3`` and ``1.0e3``
    would be read as strings and then rejected by the strict schema. The document's node graph is
    checked (:data:`MAX_DEPTH`, :data:`MAX_NODES` after alias expansion, no recursive alias) before any
    Python object is built.
    """

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        # PyYAML composes recursively: stop before Python's recursion limit does
        self._depth += 1
        self._nodes += 1
        try:
            if self._nodes > MAX_WRITTEN_NODES:
                raise YamlLimitError(
                    f"the document has more than {MAX_WRITTEN_NODES} values; a config has a few dozen"
                )
            if self._depth > MAX_DEPTH + 1:
                line = self.peek_event().start_mark.line + 1
                raise YamlLimitError(
                    f"the document is nested deeper than {MAX_DEPTH} levels (line {line}); a config nests "
                    "sections two levels deep"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _check_tree(node, _node_children, "the document")
        return node


_YAML12_FLOAT = re.compile(
    r"""^(?:
        [-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?        # 1.5, 1., 1.0e-3, 1.0E3
      | [-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?               # .5, -.5E+4
      | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+                      # 1e-3, -2E+4
      | [-+]?\.(?:inf|Inf|INF)                                # .inf, -.Inf
      | \.(?:nan|NaN|NAN)                                     # .nan
    )$""",
    re.VERBOSE,
)
# Appended after PyYAML's own resolvers: integers (``10``) still resolve to int first.
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


def check_config_dict(source: dict, kind: str) -> None:
    """Bound a config given as a dict (depth, expanded size, shared nodes) as the YAML reader bounds a
    document; one home for the particle, PDE and training loaders.

    Raises
    ------
    ConfigError
        ``invalid <kind> config (dict): ...`` naming the limit that was passed.
    """
    try:
        _check_tree(source, _data_children, "the config dict")
    except YamlLimitError as exc:
        raise ConfigError(f"invalid {kind} config (dict): {exc}") from None


def load_yaml(text: Any) -> Any:
    """Parse YAML text (or an open file) like ``yaml.safe_load``, but with YAML 1.2 floats
    (``1e-3``, ``-2E+4``, ``.5``) and the bounds of :class:`Yaml12Loader`.

    Raises
    ------
    yaml.YAMLError
        Invalid YAML, or :class:`YamlLimitError` for a document beyond the bounds or one whose values
        PyYAML cannot construct (``!!int 0x``, ``!!timestamp 2020-13-45``, an unhashable key...).
    """
    try:
        return yaml.load(text, Loader=Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        raise
    except RecursionError:
        raise YamlLimitError("the document is nested too deeply to be read") from None
    except Exception as exc:  # noqa: BLE001 - untrusted input: whatever PyYAML's constructors raise
        raise YamlLimitError(f"a value cannot be constructed ({type(exc).__name__}: {exc})") from None


def read_config_file(path: str | Path, what: str, fix: str) -> Any:
    """The parsed YAML of a config file: the one bounded reader of all three loaders (particle, PDE,
    training).

    The file must be a regular file (``/dev/zero``, a FIFO or a directory are refused at once: the open is
    non-blocking and checked with ``fstat``), of at most :data:`MAX_CONFIG_BYTES`, UTF-8, and YAML within
    the bounds of :class:`Yaml12Loader`. Every failure is one :class:`ConfigError` of at most
    :data:`~attnflow.experiments.errors.MAX_MESSAGE_CHARS` characters naming the file and ``fix``.

    Raises
    ------
    ConfigError
    """
    from .files import read_bounded

    path = Path(path)
    name = short_repr(str(path))
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{what} not found: {name}; {fix}")
    raw = read_bounded(path, MAX_CONFIG_BYTES, what, fix, error=ConfigError, allowed="a config may have")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {name} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
            f"({exc.reason}); save it as UTF-8"
        ) from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(short_message(f"{what} {name} is not valid YAML: {exc}")) from None


def load_config_source(
    source: Any, config_cls: type, validate: Callable[[Any, str], Any], names: tuple[str, ...], fix: str
) -> Any:
    """The one loading path of a config given as a validated config (returned as is), a dict (bounded by
    :func:`check_config_dict`, copied) or the path of a YAML file (:func:`read_config_file`).

    Parameters
    ----------
    source : the config, a dict or a path
    config_cls : the pydantic model of the config
    validate : ``validate(data, source_label)`` -> the validated config
    names : (the kind named by :func:`check_config_dict`, how the messages call the config, and its
        class, and its file), e.g. ``("training", "a training config", "a TrainingConfig",
        "training config file")``
    fix : how to fix a file that cannot be read

    Raises
    ------
    ConfigError
        Any other type of source, or what the reader and ``validate`` raise.
    """
    kind, config, cls_name, file_what = names
    if isinstance(source, config_cls):
        return source
    if isinstance(source, dict):
        check_config_dict(source, kind)
        return validate(copy.deepcopy(source), "dict")
    if not isinstance(source, (str, Path)):
        raise ConfigError(f"{config} is a YAML file, a dict or {cls_name}: got {type(source).__name__}")
    return validate(read_config_file(Path(source), file_what, fix), str(source))
