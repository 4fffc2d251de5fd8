"""The main job's first minute (issue 31): a slow first compiled block (numba compiling the kernels) is
announced instead of silence, and its duration is left out of the progress rates and times left."""

from __future__ import annotations

import io
import time
import types

import pytest

from attnflow.simulation import driver, progress


class _FakeSim:
    """Stands for a Simulator on the compiled loop whose first block is slow (the compilation)."""

    loop = "fused"

    def __init__(self, first_s: float):
        self.step_index = 0
        self.first_s = first_s

    def record(self, with_heads=False):
        return types.SimpleNamespace(step=self.step_index)

    def advance(self, k):
        if self.step_index == 0:
            time.sleep(self.first_s)
        self.step_index += k


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(driver, "_WARM", [False])
    monkeypatch.setattr(driver, "_SAID", [False])
    # the note's delay, well above a thread's start and join on a loaded machine, well below the slow block
    monkeypatch.setattr(driver, "COMPILE_NOTE_AFTER_S", 0.3)
    monkeypatch.setattr(progress, "_EXCLUDED", [0.0])


def test_slow_first_block_is_announced_and_left_out_of_the_eta(fresh, capsys):
    overall = progress.OverallProgress({"a": 1.0, "b": 1.0})
    bar = progress.ProgressBar(total=4, label="run", unit="steps", stream=io.StringIO(), enabled=False)
    driver.integrate(_FakeSim(1.0), 4, record_every=1, sink=driver.MemorySink(), progress=bar)
    text = capsys.readouterr().err
    assert "compiling kernels (first run only, about" in text and "kernels ready in" in text
    # the 0.4 s of the first block are left out: the bar's rate is that of the fast steps
    assert progress.excluded_seconds() >= 1.0
    # with the 1 s counted the rate would be below 4 steps/s; without it, 4 steps in the overhead only
    assert float(bar.line().split("steps/s")[0].split()[-1]) > 15
    overall.finish("a")
    left = overall.left_s()
    assert left < 0.3, left  # without the exclusion: about 1 s (run a took 0.4 s, b has the same work)


def test_no_note_when_the_first_block_is_fast_or_without_progress(fresh, capsys):
    driver.integrate(_FakeSim(0.0), 4, record_every=1, sink=driver.MemorySink(), progress=lambda k: None)
    driver._WARM[0] = False
    driver.integrate(_FakeSim(0.6), 4, record_every=1, sink=driver.MemorySink(), progress=None)
    assert capsys.readouterr().err == "" and progress.excluded_seconds() == 0.0


def test_overall_time_left_is_unknown_until_enough_work_was_measured(monkeypatch):
    # the main job's first line after the compile once said "overall left 56:00:11" from one step of 2000
    from attnflow.simulation import progress

    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    overall = progress.OverallProgress({"a": 100.0, "b": 100.0})
    now[0] = 1.0
    assert overall.left_s("a", 1 / 2000) != overall.left_s("a", 1 / 2000)  # NaN: 0.05 % measured
    assert overall.describe("a", 1 / 2000).endswith("overall left ?]")
    now[0] = 0.0
    overall = progress.OverallProgress({"a": 100.0, "b": 100.0})
    now[0] = 10.0
    assert abs(overall.left_s("a", 0.5) - 30.0) < 1e-9  # 50 of 200 in 10 s: 150 left at 5 per s
