"""Files of a received directory that the issue's list did not name (issue 29: "the same kind of reader
will try inputs not listed here"), tried on every command that reads a directory.

* a ``meta.json`` or an ``.attnflow`` marker that is a FIFO: base commit, ``info``, ``report``, ``plot`` and
  ``study show`` hung in the kind detection (``cli/kinds.py`` read the file whole with ``read_text``);
* a ``meta.json`` of 100 000 nested arrays: base commit, a bare ``RecursionError`` escaped the detection
  ("cannot read DIR: RecursionError: maximum recursion depth exceeded ..."), which names neither the file
  nor the fix;
* an input array of strings or of a structured dtype: base commit, a bare ``TypeError`` from torch
  escaped ``build`` (not a ConfigError).

Tried and already refused on the base commit (no test added here): NaN and +-inf in every numeric field
of the three config loaders (ConfigError), NaN/inf in input arrays (ConfigError "must be finite"), a
``summary.json`` FIFO in a study (``report`` refuses it, ``info``/``study show`` do not read it), a
``meta.json`` over the 64 MiB JSON cap, a deeply nested ``summary.json`` (CorruptFileError).
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from security_helpers import TINY_RUN, cfg
from typer.testing import CliRunner

import attnflow.cli.readers
import attnflow.report
import attnflow.studies  # noqa: F401 - imported before the timed calls (the commands import them lazily)
from attnflow.cli import app
from attnflow.experiments.builder import build
from attnflow.experiments.errors import ConfigError

runner = CliRunner()
COMMANDS = [["info"], ["report"], ["plot"], ["study", "show"]]


class _Hang(BaseException):  # BaseException: the CLI's error mapping must not swallow it
    pass


def _invoke(args: list[str], seconds: int = 30):
    def ring(signum, frame):
        raise _Hang(f"`attnflow {' '.join(args)}` took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    t0 = time.monotonic()
    try:
        r = runner.invoke(app, args)
        # the alarm may be caught and printed as an error line: the time says whether it rang
        assert time.monotonic() - t0 < seconds - 5 and not isinstance(r.exception, _Hang), r.output
        return r
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _one_error_line(r, *words: str) -> str:
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code in (1, 2), r.output
    assert len(lines) == 1 and lines[0].startswith("error:"), r.output
    assert "Traceback" not in r.output, r.output
    for w in words:
        assert w in lines[0], r.output
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_a_meta_json_fifo_does_not_hang_a_command(tmp_path, command):
    d = tmp_path / "run"
    d.mkdir()
    os.mkfifo(d / "meta.json")
    r = _invoke([*command, str(d)])
    _one_error_line(r)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_a_marker_fifo_does_not_hang_a_command(tmp_path, command):
    d = tmp_path / "run"
    d.mkdir()
    os.mkfifo(d / ".attnflow")
    (d / "meta.json").write_text('{"status": "done"}')
    r = _invoke([*command, str(d)])
    assert r.exit_code in (0, 1, 2) and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("command", [["info"], ["report"]], ids=lambda c: " ".join(c))
def test_a_deeply_nested_meta_json_is_named_corrupt(tmp_path, command):
    d = tmp_path / "run"
    d.mkdir()
    (d / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    r = _invoke([*command, str(d)])
    _one_error_line(r, "meta.json", "corrupt")


@pytest.mark.parametrize(
    "array",
    [np.array([["a", "b", "c"]] * 8), np.zeros(8, dtype=[("a", "f8"), ("b", "f8"), ("c", "f8")])],
    ids=["strings", "structured"],
)
def test_an_input_array_that_is_not_numbers_is_a_config_error(tmp_path, array):
    f = tmp_path / "tokens.npy"
    np.save(f, array)
    c = cfg(TINY_RUN)
    c["tokens"] = {"init": "file", "path": str(f)}
    with pytest.raises(ConfigError, match=r"tokens\.path .* values \(not numbers\); .*save a float array"):
        build(c)
