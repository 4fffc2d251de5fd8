"""The config loader cannot be crashed: a hypothesis fuzz of ``load_config`` (file and dict inputs).

Every input ends in a valid config or in :class:`ConfigError` (never another exception), within a
time bound per example, with a message of at most ``MAX_MESSAGE_CHARS`` characters. The named cases
reproduce the failures of issue 10 (UnicodeDecodeError, RecursionError on deep nesting, TypeError on
unhashable tags, "billion laughs" alias expansion, messages of megabytes).
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from experiments_helpers import TINY
from hypothesis import HealthCheck, example, given, settings, strategies as st

from attnflow.experiments.config import ConfigError, load_config
from attnflow.experiments.errors import MAX_MESSAGE_CHARS

#: Time bound of one example, in CPU seconds of this process (the slowest legal document, 256 kB, parses in
#: well under a second). CPU time, not wall time: a loaded CI machine (load 26 measured) stretches the wall
#: clock of a 0.1 s parse past any fixed bound, while a hostile input that makes the parser work shows in CPU.
PER_EXAMPLE_S = 3.0
#: Wall-clock bound (a read that blocks, e.g. a FIFO, uses no CPU): generous, it catches hangs, not slowness.
PER_EXAMPLE_WALL_S = 60.0
VALID = yaml.safe_dump(TINY, sort_keys=False).encode()

_DIR = tempfile.mkdtemp(prefix="attnflow-fuzz-")


def _load_bytes(data: bytes):
    fd, path = tempfile.mkstemp(dir=_DIR, suffix=".yaml")
    try:
        os.write(fd, data)
        os.close(fd)
        t0, c0 = time.monotonic(), time.process_time()
        try:
            load_config(path)
        except ConfigError as exc:
            assert len(str(exc)) <= MAX_MESSAGE_CHARS, len(str(exc))
        cpu, wall = time.process_time() - c0, time.monotonic() - t0
        assert cpu < PER_EXAMPLE_S, f"{cpu:.1f} CPU s for {data[:80]!r}"
        assert wall < PER_EXAMPLE_WALL_S, f"{wall:.1f} s wall for {data[:80]!r}"
    finally:
        Path(path).unlink(missing_ok=True)


#: "Billion laughs": 10^10 values in 500 bytes, under a key that the schema validates (and reports).
LAUGHS = (
    VALID
    + b"record: [&a0 [x, x, x, x, x, x, x, x, x, x], "
    + b", ".join(b"&a%d [%s]" % (i, b", ".join([b"*a%d" % (i - 1)] * 10)) for i in range(1, 10))
    + b"]\n"
)


#: The named failures of the issue, each as a file.
HOSTILE = {
    "invalid UTF-8": b"name: \xff\xfe\x80\n" + VALID,
    "deep flow nesting": b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "deep block nesting": b"a:\n" + b"".join(b" " * i + b"b:\n" for i in range(1, 400)),
    "billion laughs": LAUGHS,
    "recursive alias": VALID + b"record: &a [*a]\n",
    "recursive mapping": b"&a {model: *a}\n",
    "unhashable tag value": VALID.replace(b"init: octahedral", b"init: [octahedral]"),
    "mapping as tag": VALID.replace(b"process: ornstein_uhlenbeck", b"process: {a: 1}"),
    "unhashable key": b"? [a]\n: 1\n",
    "bad int tag": b"seed: !!int 0x\n",
    "bad timestamp": b"seed: !!timestamp 2020-13-45\n",
    "python tag": b"a: !!python/object/apply:os.system ['echo hi']\n",
    "binary": b"name: !!binary AAAA\n",
    "huge file": b"name: " + b"x" * 2_000_000 + b"\n",
    "many values": b"name: [" + b"1," * 100_000 + b"]\n",
    "huge value in an error": b"paths: [" + b"'" + b"y" * 200_000 + b"', " * 1 + b"]\n",
    "huge key in an error": b"x" * 200_000 + b": 1\n",
    "overflowing float": VALID.replace(b"sigma2: 0.5", b"sigma2: 1e99999"),
    "NUL byte": VALID + b"\x00",
    "BOM": b"\xef\xbb\xbf" + VALID,
    "empty": b"",
    "a list": b"- 1\n- 2\n",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_configs_end_in_config_error(name):
    data = HOSTILE[name]
    fd, path = tempfile.mkstemp(dir=_DIR, suffix=".yaml")
    os.write(fd, data)
    os.close(fd)
    t0, c0 = time.monotonic(), time.process_time()
    if name == "BOM":
        assert load_config(path).name == "tiny"
        return
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert time.process_time() - c0 < PER_EXAMPLE_S
    assert time.monotonic() - t0 < PER_EXAMPLE_WALL_S
    assert len(str(info.value)) <= MAX_MESSAGE_CHARS


def test_named_failures_have_named_rules(tmp_path):
    cases = {
        "invalid UTF-8": r"is not UTF-8 text: byte 0xff at offset 6 \(invalid start byte\); save it as UTF-8",
        "deep flow nesting": r"nested deeper than 32 levels",
        "billion laughs": r"more than 100000 values once its aliases are expanded",
        "recursive alias": r"contains itself through an alias; remove the recursive alias",
        "unhashable tag value": r"tokens.init: got \['octahedral'\]; allowed values",
        "huge file": r"has 2000007 bytes, more than the 262144 a config may have",
        "many values": r"more than 20000 values",
        "bad int tag": r"a value cannot be constructed \(ValueError",
    }
    for name, pattern in cases.items():
        p = tmp_path / "c.yaml"
        p.write_bytes(HOSTILE[name])
        with pytest.raises(ConfigError, match=pattern):
            load_config(p)


def test_dict_inputs_are_bounded_too():
    deep: dict = {}
    node = deep
    for _ in range(100):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ConfigError, match=r"nested deeper than 32 levels"):
        load_config(deep)
    cyc: dict = {"model": {}}
    cyc["model"]["x"] = cyc
    with pytest.raises(ConfigError, match=r"contains itself"):
        load_config(cyc)
    with pytest.raises(ConfigError, match=r"got \['x'\]"):
        load_config({**TINY, "tokens": {**TINY["tokens"], "init": ["x"]}})


# -- the fuzz ------------------------------------------------------------------------------------------
_FRAGMENTS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"-",
    b"&a",
    b"*a",
    b"&b",
    b"*b",
    b"!!",
    b"!!str",
    b"!!int",
    b"!!float",
    b"!!binary",
    b"!!set",
    b"!!omap",
    b"!!timestamp",
    b"!!python/object:os.system",
    b"?",
    b"|",
    b">",
    b"'",
    b'"',
    b"#",
    b"%YAML 1.2",
    b"---",
    b"...",
    b"\n",
    b"  ",
    b"\t",
    b"\xff",
    b"\x00",
    b"\xc3",
    b"1e-3",
    b".inf",
    b".nan",
    b"-0",
    b"0x1F",
    b"1e999",
    b"null",
    b"~",
    b"true",
    b"<<",
    b"model",
    b"tokens",
    b"heads",
    b"weights",
    b"init",
    b"process",
    b"direction",
    b"beta",
    b"H",
    b"n",
    b"d",
    b"dt",
    b"t1",
    b"paths",
    b"seed",
    b"kappa",
    b"scale",
    b"layer_scaling",
    b"F",
    b"descent",
]


@st.composite
def _mutated(draw):
    """A valid config with random fragments spliced in and random spans cut out."""
    data = bytearray(VALID)
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data)))
        if draw(st.booleans()):
            frag = draw(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=6))
            data[pos:pos] = b" ".join(frag)
        else:
            data[pos : pos + draw(st.integers(1, 20))] = b""
    return bytes(data)


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=8),
    st.sampled_from(["descent", "ascent", "octahedral", "ornstein_uhlenbeck", "constant", "file", "../x"]),
)
_tree = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from([k.decode() for k in _FRAGMENTS[45:]] + ["x", "1"]), inner, max_size=5
        ),
    ),
    max_leaves=30,
)


@st.composite
def _structured(draw):
    """A YAML dump of a random tree over the schema's keys, mixed into a valid config."""
    cfg = dict(TINY)
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(list(TINY) + ["x"]))
        cfg[key] = draw(_tree)
    return yaml.safe_dump(cfg, allow_unicode=True).encode()


_inputs = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(_FRAGMENTS), max_size=40).map(b" ".join),
    _mutated(),
    _structured(),
)

_FUZZ = settings(
    max_examples=2000,
    deadline=timedelta(seconds=PER_EXAMPLE_S),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
    database=None,
)


@_FUZZ
@given(_inputs)
@example(LAUGHS)
@example(b"name: " + b"[" * 3000)
def test_fuzz_loader_raises_only_config_error(data):
    _load_bytes(data)


@pytest.mark.slow
@settings(_FUZZ, max_examples=20_000, derandomize=False)
@given(_inputs)
def test_fuzz_loader_slow(data):
    _load_bytes(data)
