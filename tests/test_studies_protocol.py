"""The study protocol's reproducibility checks (issue 30), on the quick variants of EVERY registered study:

* killed by SIGKILL at a random moment and resumed, a study gives the summary.json of an uninterrupted
  run, bit for bit (the keys a study declares in ``timing_keys``, wall-clock times, excepted);
* on a local Dask cluster it gives the summary.json of a local run (the same keys excepted).

Every registered study is in one of two tiers (a test checks that none is missing): ``CHEAP``, whose
kill + resume costs a few seconds, is checked in the default tier, ``SLOW`` with ``-m slow`` (the quick
variant's time, measured under ``nice`` on the 2-core machine, is noted next to each name). The default
tier is cheap by design: one uninterrupted run per study, shared by both checks (a module-scoped cache);
the killed runs are forked from one process that imported attnflow once (a "zygote": it never computes,
so no thread pool is forked); one Dask cluster for every study.

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

from attnflow.studies import available_studies, get_study, run_study

ROOT = Path(__file__).resolve().parents[1]

# The tiers, by the CPU seconds of the quick variant (one worker, in one process; measured under ``nice`` on
# the shared 2-core machine, where wall times were meaningless at a load of ~20): a kill + resume costs about
# twice the quick variant, so the default tier takes the studies below ~4.5 s.
#: studies checked in the default tier (CPU seconds of the quick variant)
CHEAP = [
    "monotonicity",  # 0.9
    "noise_phase",  # 2.5-3.4
    "ntk_injectivity",  # 0.05
    "numerics_checks",  # 4.2-4.9
    "sufficient_condition",  # 0.6
]
#: the rest (``-m slow``; CPU seconds of the quick variant)
SLOW = [
    "critical_beta",  # 9.8
    "depth_limit",  # 4.9 (kill + resume ~10 s, at the limit: the tier took 71 CPU s with it, 43 the old)
    "entropy",  # 10.0
    "jko_stability",  # 8.4
    "layer_scaling",  # 19.0
    "longtime",  # 39.9
    "massucco2026",  # 44.5
    "massucco2026_code",  # 123
    "massucco2026_d5",  # 10.9
    "massucco2026_robustness",  # 15.7
    "massucco2026_s1",  # 22.8
    "mean_field_heads",  # 17-27
    "pde_particles",  # 38.0
    "real_model",  # 13.0
    "real_model_flows",  # 9-40 wall s under load (tiny BERT and tiny Llama families)
    "relu_vs_softmax",  # 13.3
    "stability_input",  # 8.6
    "stability_weights",  # 11.7 (in the default tier before)
    "superadditivity",  # 5.6
]


def test_every_registered_study_is_in_one_tier():
    registered = set(available_studies())
    assert not set(CHEAP) & set(SLOW), "a study is in both tiers"
    missing = sorted(registered - set(CHEAP) - set(SLOW))
    assert not missing, f"studies in no tier of the protocol checks (add each to CHEAP or SLOW): {missing}"
    assert not (set(CHEAP) | set(SLOW)) - registered, "a tier names a study that is not registered"


# -- helpers ---------------------------------------------------------------------------------------------
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
        assert ra == rb, f"{study}: the summary.json of {b.name} differs from the uninterrupted one"
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


@pytest.fixture(scope="module")
def clean_runs(tmp_path_factory):
    """``clean_runs(study)``: the directory of one uninterrupted quick run of ``study`` (run once)."""
    root = tmp_path_factory.mktemp("clean")
    done: dict[str, Path] = {}

    def get(study: str) -> Path:
        if study not in done:
            run_study(study, root / study, quick=True, workers=1)
            done[study] = root / study
        return done[study]

    return get


#: The zygote: imports attnflow once, then forks one child per line ``study<TAB>out`` read on stdin; the
#: child runs the study, the zygote prints the child's pid, then its exit status once it ends (killed: -9).
_ZYGOTE = """
import os, sys
from attnflow.studies import run_study
print("ready", flush=True)
for line in sys.stdin:
    study, out = line.rstrip("\\n").split("\\t")
    pid = os.fork()
    if pid == 0:
        os.dup2(2, 1)  # the child's prints must not mix with the pids and statuses on stdout
        code = 1
        try:
            run_study(study, out, quick=True, workers=1)
            code = 0
        finally:
            os._exit(code)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status), flush=True)
"""


@pytest.fixture(scope="module")
def zygote():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _ZYGOTE],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _kill_and_resume(study: str, clean: Path, out: Path, zygote, rng: random.Random) -> None:
    """Run ``study`` in a child of the zygote, SIGKILL it once ``target`` tasks are done plus a random
    moment, resume it here and compare with the uninterrupted run ``clean``."""
    n_tasks = len(json.loads((clean / "study.json").read_text())["runs"])
    target = rng.randrange(n_tasks)  # kill once this many tasks are done, plus a random moment
    zygote.stdin.write(f"{study}\t{out}\n")
    zygote.stdin.flush()
    pid = int(zygote.stdout.readline())
    deadline = time.monotonic() + 300
    while _finished(out) < target and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:  # already reaped: it finished
            break
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.5))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    status = int(zygote.stdout.readline())  # the zygote has reaped the child
    assert status in (0, -signal.SIGKILL), (
        f"{study}: the run to be killed failed on its own (status {status})"
    )
    print(f"{study}: killed={status != 0} after {_finished(out)} of {n_tasks} tasks (target {target})")
    resumed = run_study(study, out, quick=True, workers=1)
    assert resumed["run"]["status"] == "done"
    _same_summary(clean, out, study)


# -- kill and resume (before the Dask tests: nothing is forked once a cluster's threads exist) -------------
def test_killed_studies_resume_to_the_same_summary(clean_runs, zygote, tmp_path):
    seed = random.randrange(2**32)
    print(f"kill seed {seed}")  # a failure is replayed with this seed
    rng = random.Random(seed)
    for study in CHEAP:
        _kill_and_resume(study, clean_runs(study), tmp_path / study, zygote, rng)


@pytest.mark.slow
@pytest.mark.parametrize("study", SLOW)
def test_a_killed_slow_study_resumes_to_the_same_summary(study, clean_runs, zygote, tmp_path):
    _kill_and_resume(study, clean_runs(study), tmp_path / study, zygote, random.Random(0))


# -- Dask ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dask_scheduler():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def _on_dask(study: str, clean: Path, out: Path, scheduler: str) -> None:
    run_study(study, out, quick=True, scheduler=scheduler)
    _same_summary(clean, out, study)
    assert json.loads((out / "run_log.json").read_text())["workers"] == "dask"


def test_studies_on_dask_give_the_local_summary(clean_runs, dask_scheduler, tmp_path):
    for study in CHEAP:
        _on_dask(study, clean_runs(study), tmp_path / study, dask_scheduler)


@pytest.mark.slow
@pytest.mark.parametrize("study", SLOW)
def test_a_slow_study_on_dask_gives_the_local_summary(study, clean_runs, dask_scheduler, tmp_path):
    _on_dask(study, clean_runs(study), tmp_path / study, dask_scheduler)


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
