"""The study protocol's reproducibility checks (issue 30), on the quick variants:

* killed by SIGKILL at a random moment and resumed, a study gives the summary.json of an uninterrupted
  run, bit for bit (the keys a study declares in ``timing_keys``, wall-clock times, excepted);
* on a local Dask cluster it gives the summary.json of a local run.

A representative subset runs here, to keep the checks near two minutes on a small machine:
``ntk_injectivity`` (computation tasks whose results are JSON) and ``stability_weights`` (particle runs
from input arrays, killed inside a run: resumed from its checkpoint). ``pde_particles`` (computation
tasks with arrays) and the other registered studies with a plan run with ``-m slow``.

Tables come from the one renderer: no study module writes a Markdown table row by hand (a string literal
that starts with ``|``), and the committed ``table.md`` of the studies with a ``tables(summary, config)``
is the renderer's Markdown of those specs for the committed summary (``scripts/regen_tables.py --check``).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnflow.studies import get_study, run_study

ROOT = Path(__file__).resolve().parents[1]
SUBSET = ["ntk_injectivity", "stability_weights"]
SLOW = ["pde_particles", "jko_stability", "layer_scaling", "longtime", "mean_field_heads", "noise_phase"]


def _strip(data, keys: tuple[str, ...]):
    if isinstance(data, dict):
        return {k: _strip(v, keys) for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [_strip(v, keys) for v in data]
    return data


def _same_summary(a: Path, b: Path, study: str) -> None:
    keys = get_study(study).timing_keys
    ra, rb = (a / "summary.json").read_bytes(), (b / "summary.json").read_bytes()
    if not keys:
        assert ra == rb, f"{study}: the resumed summary.json differs from the uninterrupted one"
    else:
        assert _strip(json.loads(ra), keys) == _strip(json.loads(rb), keys), study


def _finished(out: Path) -> int:
    n = 0
    for meta in (out / "runs").glob("*/meta.json"):
        try:
            n += json.loads(meta.read_text()).get("status") == "done"
        except ValueError:  # being written
            pass
    return n


def _kill_and_resume(study: str, tmp_path: Path, rng: random.Random) -> None:
    clean = tmp_path / "clean"
    run_study(study, clean, quick=True, workers=1)
    n_tasks = len(json.loads((clean / "study.json").read_text())["runs"])
    out = tmp_path / "killed"
    code = (
        f"from attnflow.studies import run_study; run_study({study!r}, {str(out)!r}, quick=True, workers=1)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    target = rng.randrange(n_tasks)  # kill once this many tasks are done, plus a random moment
    try:
        deadline = time.monotonic() + 300
        while _finished(out) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.5))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    print(f"{study}: killed={killed} after {_finished(out)} of {n_tasks} tasks (target {target})")
    resumed = run_study(study, out, quick=True, workers=1)
    assert resumed["run"]["status"] == "done"
    _same_summary(clean, out, study)


@pytest.mark.parametrize("study", SUBSET)
def test_a_killed_study_resumes_to_the_same_summary(study, tmp_path):
    seed = random.randrange(2**32)
    print(f"kill seed {seed}")  # a failure is replayed with this seed
    _kill_and_resume(study, tmp_path, random.Random(seed))


@pytest.mark.slow
@pytest.mark.parametrize("study", SLOW)
def test_a_killed_study_resumes_to_the_same_summary_slow(study, tmp_path):
    _kill_and_resume(study, tmp_path, random.Random(0))


def test_a_study_on_dask_gives_the_local_summary(tmp_path):
    from distributed import LocalCluster

    run_study("ntk_injectivity", tmp_path / "local", quick=True, workers=1)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        run_study("ntk_injectivity", tmp_path / "dask", quick=True, scheduler=cluster.scheduler_address)
    assert (tmp_path / "dask" / "summary.json").read_bytes() == (
        tmp_path / "local" / "summary.json"
    ).read_bytes()
    log = json.loads((tmp_path / "dask" / "run_log.json").read_text())
    assert log["workers"] == "dask"


# -- tables come from the one renderer (issue 30: no hand-written Markdown tables in study code) ----------
STUDIES_SRC = ROOT / "src" / "attnflow" / "studies"


def hand_written_rows(source: str) -> list[int]:
    """Lines of ``source`` with a string literal (plain or f-string) that starts with ``|``: a Markdown
    table row or rule written by hand."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            text = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if text.startswith("|"):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_hand_written_row_finder_finds_rows_and_only_rows():
    src = (
        'a = "| x | y |"\nb = f"| {a} |"\nc = "|" + "---|" * 3\nd = "a | b"\ne = f"{a} | b"\n'
        'f = """doc\n| a | b |\n"""\n'
    )
    assert hand_written_rows(src) == [1, 2, 3]


@pytest.mark.parametrize(
    "module",
    [
        p.name
        for p in sorted(STUDIES_SRC.glob("*.py"))
        if p.name != "render.py"  # the renderer is where Markdown is written
    ],
)
def test_no_study_module_writes_markdown_tables_by_hand(module):
    rows = hand_written_rows((STUDIES_SRC / module).read_text())
    assert not rows, (
        f"src/attnflow/studies/{module} writes Markdown table rows by hand at lines {rows}; return Table "
        "specs (attnflow.studies.render) in StudyResult.tables instead"
    )


#: studies whose committed table.md is rendered from its summary by the study's tables(summary, config)
#: (studies_b / studies_c add theirs when they convert them)
RENDERED = sorted(d.name for d in (ROOT / "docs" / "studies").iterdir() if (d / "study.json").is_file())


def _regen_tables():
    """``scripts/regen_tables.py`` as a module."""
    spec = importlib.util.spec_from_file_location("regen_tables", ROOT / "scripts" / "regen_tables.py")
    regen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regen)
    return regen


def test_committed_tables_are_rendered_from_the_committed_summaries():
    regen = _regen_tables()
    for name in RENDERED:  # what `scripts/regen_tables.py --check docs/studies/NAME` checks
        d = ROOT / "docs" / "studies" / name
        study = type(get_study(json.loads((d / "study.json").read_text())["study"]))
        assert hasattr(study, "tables") or hasattr(importlib.import_module(study.__module__), "tables"), name
        assert regen.regenerate(d) == (d / "table.md").read_text(), (
            f"{d}/table.md is not the rendering of its summary.json: run scripts/regen_tables.py {d}"
        )
        assert json.loads((d / "tables.json").read_text()) == regen.specs(d), (
            f"{d}/tables.json does not hold the specs of its summary.json: run scripts/regen_tables.py {d}"
        )


def test_the_number_check_of_a_regenerated_page_names_what_vanished():
    regen = _regen_tables()
    assert regen.numbers("W2 = 0.25, b = -1.5e-03 [S^2, 64]; H_ref = 16384.") == [
        "0.25",
        "-1.5e-03",
        "64",
        "16384",
    ]
    old = "| 1.0 | 0.420 | 7.25 | 1925 s |"
    diff = regen.compare_numbers(old, "| 1 | 0.42 | 7.3 |", moved="took 1925 s")
    assert diff == {"moved": ["1925"], "reformatted": ["1.0", "0.420"], "vanished": ["7.25"]}


def test_the_renderer_shows_sample_summaries_intervals_and_verdict_records():
    from attnflow.analysis.verdicts import Criterion, record_identity, record_test
    from attnflow.studies.render import (
        Column,
        Table,
        ci_cells,
        ci_columns,
        markdown,
        table_from_json,
        verdicts_table,
    )

    t = Table(
        columns=[Column("x", "mean x", ".3f"), *ci_columns("b", "slope", ".2f")],
        rows=[
            {"x": {"mean": 0.26213, "sd": 0.4912}, **ci_cells({"b": -0.5, "b_ci": [-0.61, -0.39]}, "b")},
            {"x": None, **ci_cells({"error": "too few points"}, "b")},
        ],
    )
    text = (
        "| mean x | slope | 95% CI |\n|---|---|---|\n| 0.262 +- 0.49 | -0.50 | -0.61, -0.39 |\n|  |  |  |\n"
    )
    assert markdown([t]) == text
    assert markdown([table_from_json(json.loads(json.dumps(t.to_json())))]) == text  # tables.json round trip
    crit = Criterion(quantity="b", op="<", threshold=0.0, declared_in="config: criterion_b")
    src = "2605.18870, Sec. 5"
    recs = [
        record_test(
            id="x-rate",
            statement="b < 0",
            source=src,
            criterion=crit,
            value=-0.5,
            ci95=(-0.61, -0.39),
            samples=10,
            method="t interval of the slope",
        ),
        record_identity(id="x-identity", statement="s", source=src, why="by construction", result={}),
    ]
    rows = verdicts_table(recs).rows
    assert [(r["id"], r["verdict"], r["class"]) for r in rows] == [
        ("x-rate", "holds", "test"),
        ("x-identity", "identity", "identity"),
    ]
    assert (
        rows[0]["criterion"] == "b < 0"
        and rows[0]["value"] == -0.5
        and list(rows[0]["ci95"]) == [-0.61, -0.39]
    )
    assert rows[1]["criterion"] is None and rows[1]["value"] is None
