"""The README front page (issue 31): the two commands come first, the Python example runs as written and
prints exactly what the page shows under it (a doctest of the front page), the files it lists exist in the
committed results of the main job, its links resolve, and it fits on one screen."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_readme_front_page_shape():
    text = README.read_text()
    first = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first and text.index("```bash") < 20, "the two commands come first"
    commands = [ln.split("#")[0].strip() for ln in first.group(1).splitlines() if ln.strip()]
    assert commands == ["bash scripts/run.sh", "bash scripts/test.sh"]
    assert len(text.splitlines()) <= 60, "the front page fits on one screen (about 60 lines)"
    assert "values=" in text and "V_h = D_h" in text  # V = D by default, said where D is built
    # every relative link resolves
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
    # the files the page says the main job leaves are those of the committed run of it
    committed = ROOT / "docs" / "studies" / "massucco2026"
    front = text.split("```python")[0].splitlines()
    listed = [ln for ln in front if ln.startswith("- `") and "runs/" not in ln]
    for name in re.findall(r"`([a-z0-9_]+\.(?:json|md|mp4))`", "\n".join(listed)):
        assert (committed / name).is_file(), name
    for stem in ("fig1_tokens", "fig3_ledger"):
        for regime in ("ou", "osc_shared", "osc_per_head"):
            assert (committed / f"{stem}_{regime}.png").is_file()


def test_readme_python_example_prints_what_it_shows() -> None:
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    shown = re.findall(r"```text\n(.*?)```", text, re.S)
    assert len(blocks) == 1 and shown, "the README has one Python example and its output"
    res = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout == shown[0], f"printed:\n{res.stdout}\nshown:\n{shown[0]}"
