"""The numba warm-up of the test command (``scripts/warm_numba.py``, run by ``scripts/test.sh`` first):
its jobs run through the public entry points, it splits them over processes, and it reports a failing job
by name instead of hiding it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _warm():
    return load_script(ROOT / "scripts" / "warm_numba.py")


def test_every_job_runs():
    # in CI the warm-up has filled the cache, so this loads the kernels (a cold cache compiles them: slower,
    # same result); a job broken by an API change would otherwise only cost time, silently
    warm = _warm()
    done = warm.run_jobs(list(warm.JOBS))
    assert [name for name, _, _ in done] == list(warm.JOBS)
    failed = {name: err for name, _, err in done if err}
    assert not failed, failed


def test_split_deals_every_job_once():
    warm = _warm()
    names = list(warm.JOBS)
    parts = warm.split(names, 2)
    assert len(parts) == 2 and sorted(sum(parts, [])) == sorted(names)
    assert parts[0][0] == names[0] and parts[1][0] == names[1]  # the two longest compiles start at once
    assert warm.split(names[:1], 4) == [names[:1]]  # no empty process
    with pytest.raises(ValueError, match=r"--jobs must be at least 1; got 0"):
        warm.split(names, 0)


def test_a_failing_job_is_reported_by_name(monkeypatch, capsys):
    warm = _warm()

    def broken():
        raise RuntimeError("no such entry point")

    ran = []
    monkeypatch.setitem(warm.JOBS, "broken", (broken, ()))
    monkeypatch.setitem(warm.JOBS, "fine", (ran.append, ("fine",)))
    assert warm.main(["--worker", "broken", "fine"]) == 1
    out = capsys.readouterr().out
    assert "warm-up: broken" in out and "FAILED" in out and "no such entry point" in out
    assert ran == ["fine"] and "warm-up: fine" in out  # the jobs after a failure still run
    assert warm.main(["--worker", "fine"]) == 0


def test_unknown_job_names_are_refused(capsys):
    warm = _warm()
    with pytest.raises(SystemExit):
        warm.main(["--only", "kernel-float64", "no-such-job"])
    assert "unknown job(s) ['no-such-job']; valid: " in capsys.readouterr().err
