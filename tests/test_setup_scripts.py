"""The set-up says what it does (issue 31): each step is announced, a line follows at least every tick
while it runs (20 s by default, under the 30 s the issue allows), it ends with its time and size, a failing
step shows its log; the main job installs only its extra; Chromium only on the test command's path."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bash(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    prelude = (
        f'export ATTNFLOW_SETUP_FUNCTIONS_ONLY=1 ATTNFLOW_SETUP_TICK=1; source "{ROOT}/scripts/setup.sh"; '
        f'venv="{tmp_path}"; logs="{tmp_path}/logs"; mkdir -p "$logs"; '
    )
    return subprocess.run(
        ["bash", "-c", prelude + script], capture_output=True, text=True, timeout=120, check=False
    )


def test_a_step_is_announced_ticks_and_ends_with_time_and_size(tmp_path):
    res = _bash('_step "sleeping a while" sleep 3.5', tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == "setup: sleeping a while ..."
    assert sum("still at it" in ln for ln in lines) >= 2  # a line every tick (1 s here)
    assert lines[-1].startswith("setup:   done in ") and "MB" in lines[-1]


def test_a_failing_step_shows_its_log(tmp_path):
    res = _bash('_step "failing" bash -c "echo the reason; exit 3"', tmp_path)
    assert res.returncode == 3
    assert "failed after" in res.stderr and "(exit 3)" in res.stderr and "the reason" in res.stderr


def test_default_tick_is_under_30_s():
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert "${ATTNFLOW_SETUP_TICK:-20}" in text
    assert "--quiet" not in text and "-qq" not in text  # no silent installs


def test_main_job_installs_its_extra_only_and_chromium_is_for_tests():
    run = (ROOT / "scripts" / "run.sh").read_text()
    assert 'ATTNFLOW_EXTRAS="${ATTNFLOW_EXTRAS:-animate}"' in run
    assert (
        "chromium" not in (ROOT / "scripts" / "setup.sh").read_text().split("# Headless Chromium")[0].lower()
    )
    assert "apt-get" not in (ROOT / "scripts" / "setup.sh").read_text()
    assert "setup_browser.sh" in (ROOT / "scripts" / "test.sh").read_text()
    assert "setup_browser.sh" not in run
