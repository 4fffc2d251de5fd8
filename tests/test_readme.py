"""The README's Python example runs as written and prints what it says (a newcomer's first step)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has no Python example"
    for k, code in enumerate(blocks):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, f"README Python block {k}:\n" + res.stderr[-2000:]
        if k == 0:
            # the first example prints the dataset, then G^2 at t = 5 and the two residuals (numbers)
            numbers = [float(x) for x in res.stdout.strip().splitlines()[-3:]]
            assert numbers[1] < numbers[2], "the exact residual must be below the paper's for H > 1"
