"""Property-based fuzzing (hypothesis) of the three config loaders and of the functions that open a
received directory: whatever the input, only the documented refusal escapes, in bounded time, with a
bounded message.

Default tier: 1000 examples per test (about a minute in all); ``-m slow``: 10000.
Loaders: :func:`load_config`, :func:`load_pde_config`, :func:`load_training_config` (mutated valid configs,
random YAML documents, random bytes); refusal: :class:`ConfigError`.
Directories: :func:`open_run`, :func:`run_info`, :func:`read_meta`, :func:`read_training_run`,
:func:`study_info`, :func:`attnflow.report.collect.collect` on a directory holding the known file names
filled with random bytes, random JSON, symlinks out of the directory, FIFOs or folders; refusals:
:data:`REFUSALS`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st
from security_helpers import TINY_PDE, TINY_RUN, TINY_TRAINING, cfg

from attnflow.experiments.errors import MAX_MESSAGE_CHARS, ConfigError
from attnflow.experiments.files import CorruptFileError, UnsafePathError
from attnflow.experiments.pde_runs import load_pde_config
from attnflow.experiments.schema import load_config
from attnflow.experiments.store import open_run, read_meta, run_info
from attnflow.experiments.training_config import load_training_config
from attnflow.experiments.training_run import read_training_run
from attnflow.report.collect import collect
from attnflow.report.page import NotReportableError
from attnflow.studies.runner import NotAStudyDirectoryError, study_info

#: What a reader of a received directory may raise: each names the file and the fix.
REFUSALS = (
    ConfigError,
    CorruptFileError,
    UnsafePathError,
    NotReportableError,
    NotAStudyDirectoryError,
    FileNotFoundError,
)
#: CPU seconds of this process per example: a hostile input must not make us work long. CPU time, because a
#: loaded CI machine (load 26 seen) stretches the wall clock of a fast example past any fixed bound.
PER_EXAMPLE_S = 5.0
#: wall-clock bound: catches a read that blocks (uses no CPU), generous enough for any load
PER_EXAMPLE_WALL_S = 60.0
DEFAULT = settings(
    max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True
)
SLOW = settings(DEFAULT, max_examples=10_000)

LOADERS = {
    "particle": (load_config, TINY_RUN),
    "pde": (load_pde_config, TINY_PDE),
    "training": (load_training_config, TINY_TRAINING),
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
values = st.recursive(
    scalars,
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=10), c, max_size=4)),
    max_leaves=12,
)


def _mutate(base: dict, path: list[str], value) -> dict:
    d = cfg(base)
    node = d
    for p in path[:-1]:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[path[-1]] = value
    return d


@st.composite
def config_texts(draw):
    kind = draw(st.sampled_from(sorted(LOADERS)))
    base = LOADERS[kind][1]
    how = draw(st.sampled_from(["mutate", "drop", "random_yaml", "bytes", "text"]))
    if how in ("mutate", "drop"):
        section = draw(st.sampled_from(sorted(base)))
        inner = base[section]
        keys = [section] + (
            [draw(st.sampled_from(sorted(inner)))] if isinstance(inner, dict) and inner else []
        )
        if how == "drop":
            d = cfg(base)
            node = d
            for k in keys[:-1]:
                node = node[k]
            node.pop(keys[-1], None)
        else:
            d = _mutate(base, keys, draw(values))
        try:
            data = yaml.safe_dump(d, allow_unicode=draw(st.booleans())).encode("utf-8", "surrogatepass")
        except yaml.YAMLError:
            data = b"{"
    elif how == "random_yaml":
        try:
            data = yaml.safe_dump(draw(values)).encode("utf-8", "surrogatepass")
        except yaml.YAMLError:
            data = b"["
    elif how == "bytes":
        data = draw(st.binary(max_size=300))
    else:
        data = draw(st.text(alphabet=st.characters(codec="utf-8"), max_size=300)).encode()
    return kind, data


def _check_loader(tmp: Path, kind: str, data: bytes) -> None:
    path = tmp / "c.yaml"
    path.write_bytes(data)
    loader = LOADERS[kind][0]
    t0, c0 = time.monotonic(), time.process_time()
    try:
        loader(path)
    except ConfigError as exc:
        assert len(str(exc)) < MAX_MESSAGE_CHARS
    assert time.process_time() - c0 < PER_EXAMPLE_S
    assert time.monotonic() - t0 < PER_EXAMPLE_WALL_S


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@DEFAULT
@given(config_texts())
def test_fuzz_the_three_config_loaders(scratch, case):
    _check_loader(scratch, *case)


@pytest.mark.slow
@SLOW
@given(config_texts())
def test_fuzz_the_three_config_loaders_slow(scratch, case):
    _check_loader(scratch, *case)


# -- directories -----------------------------------------------------------------------------------
NAMES = [
    "meta.json",
    "config.yaml",
    "data.zarr",
    "checkpoint.pt",
    "study.json",
    "summary.json",
    "table.md",
    "history.json",
    "runs",
    "tasks.json",
    "fig.png",
    ".attnflow",
]
READERS = {
    "open_run": open_run,
    "run_info": run_info,
    "read_meta": read_meta,
    "read_training_run": read_training_run,
    "study_info": study_info,
    "collect": collect,
}
json_docs = st.one_of(
    values.map(lambda v: json.dumps(v, allow_nan=True)),
    st.fixed_dictionaries(
        {
            "status": st.sampled_from(["done", "running", "interrupted", "failed", 3, None]),
            "study": st.one_of(st.text(max_size=10), st.integers()),
            "runs": st.one_of(
                st.lists(st.sampled_from(["a", "../x", "/etc", "", "."]), max_size=3), st.integers()
            ),
            "figures": st.one_of(
                st.dictionaries(
                    st.text(max_size=5),
                    st.sampled_from(["/etc/hostname", "../x.png", "fig.png", "x"]),
                    max_size=2,
                ),
                st.text(max_size=5),
            ),
            "kind": st.sampled_from(["run", "pde", "training", 7]),
            "pid": st.one_of(st.integers(min_value=-5, max_value=10**12), st.text(max_size=3)),
            "host": st.text(max_size=5),
        },
    ).map(json.dumps),
)
entries = st.one_of(
    st.tuples(st.just("bytes"), st.binary(max_size=200)),
    st.tuples(st.just("json"), json_docs),
    st.tuples(
        st.just("yaml"),
        st.sampled_from(
            [yaml.safe_dump(TINY_RUN), yaml.safe_dump(TINY_PDE), yaml.safe_dump(TINY_TRAINING), "a: [", "- 1"]
        ),
    ),
    st.tuples(st.just("symlink_out"), st.just("")),
    st.tuples(st.just("dir"), st.just("")),
    st.tuples(st.just("fifo"), st.just("")),
)


def _make(d: Path, outside: Path, layout: dict) -> None:
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    for name, (how, content) in layout.items():
        p = d / name
        if how == "bytes":
            p.write_bytes(content)
        elif how in ("json", "yaml"):
            p.write_text(content)
        elif how == "symlink_out":
            p.symlink_to(outside)
        elif how == "dir":
            p.mkdir()
            (p / "x").write_bytes(b"\x00junk")
        else:
            os.mkfifo(p)


def _check_reader(scratch: Path, reader: str, layout: dict) -> None:
    outside = scratch / "outside.txt"
    outside.write_text('{"status": "done", "study": "x", "runs": []}')
    d = scratch / "dir"
    _make(d, outside, layout)
    t0, c0 = time.monotonic(), time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = READERS[reader](d)
            if hasattr(res, "close"):
                res.close()
    except REFUSALS as exc:
        assert len(str(exc)) < MAX_MESSAGE_CHARS, str(exc)[:300]
    assert time.process_time() - c0 < PER_EXAMPLE_S
    assert time.monotonic() - t0 < PER_EXAMPLE_WALL_S


dir_cases = st.tuples(
    st.sampled_from(sorted(READERS)), st.dictionaries(st.sampled_from(NAMES), entries, max_size=5)
)


@DEFAULT
@given(dir_cases)
def test_fuzz_the_functions_that_open_a_directory(scratch, case):
    _check_reader(scratch, *case)


@pytest.mark.slow
@SLOW
@given(dir_cases)
def test_fuzz_the_functions_that_open_a_directory_slow(scratch, case):
    _check_reader(scratch, *case)
