"""Every input bounded, every refusal one clear error.

* the three config loaders refuse ``/dev/zero``, a FIFO and a 10 MB YAML at once with one ConfigError
  (base commit: MemoryError for ``/dev/zero`` through the PDE reader, a hang on a FIFO, ~30-60 s for
  10 MB), and the PDE loader's YAML/UTF-8 errors are ConfigErrors of < 2000 characters;
* sizes are refused before they are allocated, naming the estimate and the fix, with ``allow_large``;
* SIGTERM leaves ``meta.json`` saying ``interrupted`` and the info readers say how to resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from security_helpers import TINY_PDE, TINY_RUN, TINY_TRAINING, cfg

from attnflow.experiments.errors import MAX_MESSAGE_CHARS, ConfigError
from attnflow.experiments.pde_runs import load_pde_config, run_pde
from attnflow.experiments.schema import load_config
from attnflow.experiments.store import run_experiment, run_info
from attnflow.experiments.training_config import load_training_config
from attnflow.experiments.training_run import read_training_run, run_training

LOADERS = {"particle": load_config, "pde": load_pde_config, "training": load_training_config}


class _Alarm(Exception):
    pass


def _bounded(fn, seconds=5):
    """Call fn() and fail (instead of hanging the suite) when it takes more than ``seconds``."""

    def ring(signum, frame):
        raise _Alarm(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    t0 = time.monotonic()
    try:
        return fn(), time.monotonic() - t0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _refused(loader, path) -> str:
    def call():
        with pytest.raises(ConfigError) as info:
            loader(path)
        return str(info.value)

    msg, dt = _bounded(call)
    assert dt < 2.0 and len(msg) < MAX_MESSAGE_CHARS and "\n" not in msg, (dt, msg[:300])
    return msg


@pytest.mark.parametrize("kind", list(LOADERS))
def test_dev_zero_is_refused_at_once(kind):
    assert "not a regular file" in _refused(LOADERS[kind], "/dev/zero")


@pytest.mark.parametrize("kind", list(LOADERS))
def test_a_fifo_is_refused_at_once(kind, tmp_path):
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in _refused(LOADERS[kind], fifo)


@pytest.mark.parametrize("kind", list(LOADERS))
def test_a_10_mb_yaml_is_refused_at_once(kind, tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"name: x\nnotes: [" + b"1, " * 3_500_000 + b"]\n")
    assert big.stat().st_size > 10_000_000
    assert "more than the 262144 a config may have" in _refused(LOADERS[kind], big)


@pytest.mark.parametrize("kind", list(LOADERS))
def test_a_symlink_to_dev_zero_is_refused(kind, tmp_path):
    link = tmp_path / "c.yaml"
    link.symlink_to("/dev/zero")
    assert "not a regular file" in _refused(LOADERS[kind], link)


@pytest.mark.parametrize(
    "content",
    [b"model: [pde\n", b"\xff\xfe model: pde", b"model: pde\nname: !!python/object:os.system x\n"],
)
@pytest.mark.parametrize("kind", list(LOADERS))
def test_broken_yaml_and_encoding_end_in_one_config_error(kind, tmp_path, content):
    p = tmp_path / "c.yaml"
    p.write_bytes(content)
    with pytest.raises(
        ConfigError, match=r"is not (valid YAML|UTF-8 text)|cannot be constructed|could not determine"
    ):
        LOADERS[kind](p)


@pytest.mark.parametrize("kind", list(LOADERS))
def test_huge_values_make_short_messages(kind, tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"model": "pde", "name": ["y" * 200_000], "x" * 100_000: 1}, width=10**9))
    with pytest.raises(ConfigError) as info:
        LOADERS[kind](p)
    assert len(str(info.value)) < MAX_MESSAGE_CHARS


# -- sizes -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "what"),
    [
        ({"pde": {"band_limit": 10**9}}, r"needs about [0-9.e+]+ GiB of memory"),  # S^1, L = 1e9
        ({"pde": {"band_limit": 10**6}}, r"GiB of memory"),  # quadrature: an N x N matrix of 3e6 nodes
        ({"heads": {"init": "identity", "H": 10**5, "scale": 1.0}}, r"takes about [0-9.e+]+ s per step"),
        (
            {
                "density": {"init": "uniform", "d": 3},
                "weights": {"process": "constant"},
                "pde": {"band_limit": 10**5},
            },
            r"GiB of memory",
        ),
        (
            {
                "density": {"init": "uniform", "d": 3},
                "weights": {"process": "constant"},
                "pde": {"band_limit": 2000},
            },
            r"GiB of memory",
        ),
    ],
)
def test_pde_sizes_are_refused_before_allocation(tmp_path, changes, what):
    from attnflow.experiments.pde_runs import check_pde_resources

    c = {**cfg(TINY_PDE), **changes}
    out = tmp_path / "run"

    def call():
        with pytest.raises(
            ConfigError, match=what + r".*lower pde\.band_limit or heads\.H, or set allow_large: true"
        ):
            run_pde(c, out)

    _, dt = _bounded(call, 10)
    assert dt < 5 and not (out / "data.zarr").exists()
    cost = check_pde_resources({**c, "allow_large": True})  # the override: checked, not refused
    assert cost.memory_bytes > 0


@pytest.mark.parametrize(
    ("changes", "what"),
    [
        ({"paths": 10**9}, r"GiB of memory"),
        ({"tokens": {"init": "octahedral", "n": 10**7, "d": 3}, "heads": {"H": 1000}}, r"s per step"),
    ],
)
def test_particle_sizes_are_refused_before_anything_is_created(tmp_path, changes, what):
    from attnflow.experiments.resources import check_resources, particle_cost

    c = {**cfg(TINY_RUN), **changes}
    out = tmp_path / "run"
    with pytest.raises(
        ConfigError, match=what + r".*lower tokens\.n, heads\.H or paths, or set allow_large: true"
    ):
        run_experiment(c, out)
    assert not out.exists()
    cfg_ok = load_config({**c, "allow_large": True})
    assert check_resources(particle_cost(cfg_ok), allow_large=True, name="x", fix="-").memory_bytes > 0


def test_training_sizes_are_refused_before_anything_is_created(tmp_path):
    from attnflow.experiments.resources import training_cost

    c = cfg(TINY_TRAINING)
    c["task"] = {"kind": "measure", "loss": "mmd", "paths": 64, "n": 200_000}
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"task\.n = 200000.*(GiB of memory|s per step).*allow_large: true"):
        run_training(c, out)
    assert not out.exists()
    assert training_cost(load_training_config({**c, "allow_large": True})).memory_bytes > 1e12


def test_the_small_configs_of_the_suite_pass_the_estimates():
    from attnflow.experiments.pde_runs import check_pde_resources
    from attnflow.experiments.resources import check_resources, particle_cost, training_cost

    assert check_resources(particle_cost(load_config(cfg(TINY_RUN))), allow_large=False, name="t", fix="-")
    assert check_pde_resources(cfg(TINY_PDE)).seconds_per_step < 1
    assert training_cost(load_training_config(cfg(TINY_TRAINING))).memory_bytes < 2**30


# -- SIGTERM ---------------------------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import json, sys
    from attnflow.experiments.pde_runs import run_pde
    from attnflow.experiments.store import run_experiment
    from attnflow.experiments.training_run import run_training
    kind, config, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    {"particle": run_experiment, "pde": run_pde, "training": run_training}[kind](config, out)
    """
)


def _long(kind: str) -> dict:
    if kind == "particle":
        c = cfg(TINY_RUN)
        c["integrator"] = {"dt": 0.01, "t1": 2000.0}
        c["checkpoint_every"] = 50
        return c
    if kind == "pde":
        c = cfg(TINY_PDE)
        c["integrator"] = {"dt": 0.02, "t1": 400.0}
        c["checkpoint_every"] = 20
        return c
    c = cfg(TINY_TRAINING)
    c["train"] = {**c["train"], "steps": 100_000, "checkpoint_every": 5, "record_every": 1000}
    return c


@pytest.mark.parametrize("kind", ["particle", "pde", "training"])
def test_sigterm_leaves_interrupted_and_info_says_how_to_resume(tmp_path, kind):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, json.dumps(_long(kind)), str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            meta = out / "meta.json"
            if meta.is_file() and json.loads(meta.read_text() or "{}").get("status") == "running":
                if (out / "checkpoint.pt").is_file():
                    break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        else:
            pytest.fail("the child run never started")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "interrupted", meta
    if kind == "training":
        info = read_training_run(out)
        assert "attnflow train CONFIG --out" in info["resume"]
    else:
        info = run_info(out)
        assert info["status"] == "interrupted"
        assert "resume it with `attnflow run CONFIG --out" in info["resume"]
        assert ("run_pde" if kind == "pde" else "run_experiment") in info["resume"]
