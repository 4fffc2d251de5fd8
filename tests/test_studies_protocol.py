"""The study protocol's reproducibility checks (issue 30), on the quick variants of EVERY registered study:

* killed by SIGKILL at a random moment (some but not all of its tasks done) and resumed, a study gives the
  summary.json of an uninterrupted run, bit for bit (the keys a study declares in ``timing_keys``,
  wall-clock times, and the figure files of ``run.figures`` excepted);
* on a local Dask cluster it gives the summary.json of a local run (the same keys excepted).

Every registered study is in one of two tiers (a test checks that none is missing): ``STUDIES`` in the
default tier (all but two), ``SLOW_STUDIES`` (two more manifests of the massucco2026 study class) with
``-m slow``. The default tier is cheap by design: the uninterrupted run of each study is THE quick run of
the session (the ``quick_study`` fixture of tests/conftest.py, run once and shared with the study's own
tests); the killed runs are forked from one process per test worker that imported attnflow once (a
"zygote": it never computes, so no thread pool is forked); one Dask cluster runs every study. With
``-m slow`` each study is also killed at two more moments.

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

#: the studies checked in the default tier, with the CPU seconds of the quick variant (one worker, one
#: process, numba kernels cached; measured under ``nice`` on the shared 2-core machine): the checks cost
#: about twice that (the kill + resume and the Dask run; the uninterrupted run is shared with the study's
#: own tests where they read the same quick run)
STUDIES = [
    "critical_beta",  # 5.7
    "depth_limit",  # 4.8
    "entropy",  # 0.2
    "jko_stability",  # 2.7
    "layer_scaling",  # 2.5 (4.6 with both directions)
    "longtime",  # 1.5 (1.9 at n 12, T 2)
    "massucco2026",  # 4.1
    "massucco2026_d5",  # 1.7
    "massucco2026_robustness",  # 6.6
    "mean_field_heads",  # ~6 (7.6 with 18 runs)
    "monotonicity",  # 0.9
    "noise_phase",  # 2.5-3.4
    "ntk_injectivity",  # 0.05
    "numerics_checks",  # 4.2-4.9
    "pde_particles",  # 6.1
    "real_model",  # 9.2 at 4 sentences (2 now)
    "real_model_flows",  # 3.8
    "relu_vs_softmax",  # 1.0
    "stability_input",  # 3.0
    "stability_weights",  # 3.7
    "sufficient_condition",  # 0.6
    "superadditivity",  # 1.7
]
#: checked with ``-m slow`` only: the same study class as ``massucco2026`` (checked in the default tier) on
#: other manifests, and no test of their own shares their quick run, so each costs three quick runs (CPU s)
SLOW_STUDIES = [
    "massucco2026_code",  # 7.0 (10.2 at dt 5e-3)
    "massucco2026_s1",  # 4.6
]


def test_every_registered_study_is_checked():
    registered = set(available_studies())
    listed = STUDIES + SLOW_STUDIES
    missing = sorted(registered - set(listed))
    assert not missing, (
        f"studies the protocol checks do not run (add each to STUDIES or SLOW_STUDIES): {missing}"
    )
    assert not set(listed) - registered, "a tier names a study that is not registered"
    assert len(set(listed)) == len(listed), "a study is listed twice"


# -- helpers ---------------------------------------------------------------------------------------------
def _strip(data, keys: tuple[str, ...]):
    if isinstance(data, dict):
        return {k: _strip(v, keys) for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [_strip(v, keys) for v in data]
    return data


def _comparable(raw: bytes, keys: tuple[str, ...]) -> str:
    """``summary.json`` without the timing keys and ``run.figures``, serialised again: JSON floats
    round-trip exactly (shortest repr), so two of these are equal iff the numbers are bit for bit equal
    (NaN included, which ``==`` on parsed dicts would call different)."""
    data = json.loads(raw)
    data.get("run", {}).pop("figures", None)
    return json.dumps(_strip(data, keys))


def _same_summary(a: Path, b: Path, study: str) -> None:
    keys = get_study(study).timing_keys
    ra, rb = (a / "summary.json").read_bytes(), (b / "summary.json").read_bytes()
    if not keys and "figures" not in json.loads(ra).get("run", {}):
        assert ra == rb, f"{study}: the summary.json of {b} differs from the uninterrupted one"
    else:
        assert _comparable(ra, keys) == _comparable(rb, keys), (
            f"{study}: the summary.json of {b} differs from the uninterrupted one (timing keys {keys} and "
            "run.figures excepted)"
        )


def _is_done(run: Path) -> bool:
    try:
        return json.loads((run / "meta.json").read_text()).get("status") == "done"
    except (OSError, ValueError):  # not there yet, or being written
        return False


def _finished(out: Path) -> int:
    n = 0
    for meta in (out / "runs").glob("*/meta.json"):
        try:
            n += json.loads(meta.read_text()).get("status") == "done"
        except ValueError:  # being written
            pass
    return n


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


def kill_moment(tasks: list[str], elapsed: dict[str, float], rng: random.Random) -> tuple[int, float]:
    """When to kill a run of the planned ``tasks`` (plan order, the order one worker runs them), given the
    seconds each took in the uninterrupted run: ``(done, delay)``, SIGKILL ``delay`` seconds after ``done``
    tasks are finished. ``done`` is drawn from 1 .. n-1 (some but not all; 0 for a one-task study) and
    ``delay`` from [0, 0.5) times the time of the next task, so the kill lands inside it (a killed run
    takes at least as long as the uninterrupted one: it imports what it needs first; tasks of a few
    milliseconds may all be done before the 10 ms polling sees them: the kill then lands in the analysis)."""
    done = rng.randrange(1, len(tasks)) if len(tasks) > 1 else 0
    return done, rng.uniform(0.0, 0.5) * float(elapsed.get(tasks[done], 0.0))


def _kill_and_resume(study: str, clean: Path, out: Path, zygote, rng: random.Random) -> None:
    """Run ``study`` in a child of the zygote, SIGKILL it at :func:`kill_moment`, resume it here and
    compare with the uninterrupted run ``clean``."""
    tasks = json.loads((clean / "study.json").read_text())["runs"]
    log = json.loads((clean / "run_log.json").read_text())["tasks"]
    done, delay = kill_moment(tasks, {k: v.get("elapsed_s", 0.0) for k, v in log.items()}, rng)
    for attempt in (out / "killed", out / "killed_again"):
        zygote.stdin.write(f"{study}\t{attempt}\n")
        zygote.stdin.flush()
        pid = int(zygote.stdout.readline())
        deadline = time.monotonic() + 300
        # one worker runs the tasks in plan order: ``done`` are finished once the done-th is (one small file
        # read per poll, not all of them: the polling must not cost the CPU the tier is short of)
        while done and not _is_done(attempt / "runs" / tasks[done - 1]) and time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:  # already reaped: it finished
                break
            time.sleep(0.01)
        time.sleep(delay)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        status = int(zygote.stdout.readline())  # the zygote has reaped the child
        assert status in (0, -signal.SIGKILL), (
            f"{study}: the run to be killed failed on its own (status {status})"
        )
        print(
            f"{study}: killed={status != 0} after {_finished(attempt)} of {len(tasks)} tasks "
            f"(at {done} + {delay:.3f} s)"
        )
        if status != 0:
            break
        delay = 0.0  # it finished before the kill (a faster machine than the clean run's): once more, at once
    # killed; with tasks of milliseconds (ntk_injectivity) the kill may land after the last task, in the
    # analysis: a resume then only analyses again
    assert status == -signal.SIGKILL, f"{study}: the run finished before the kill, twice; nothing was resumed"
    resumed = run_study(study, attempt, quick=True, workers=1)
    assert resumed["run"]["status"] == "done"
    _same_summary(clean, attempt, study)


def _kill_seed() -> int:
    seed = int(os.environ.get("ATTNFLOW_KILL_SEED") or random.randrange(2**32))
    print(f"kill seed {seed} (replay a failure with ATTNFLOW_KILL_SEED={seed})")
    return seed


# -- kill and resume -------------------------------------------------------------------------------------
@pytest.mark.parametrize("study", STUDIES)
def test_a_killed_study_resumes_to_the_same_summary(study, quick_study, zygote, tmp_path):
    clean, _ = quick_study(study)
    _kill_and_resume(study, clean, tmp_path, zygote, random.Random(f"{_kill_seed()}-{study}"))


@pytest.mark.slow
@pytest.mark.parametrize("study", SLOW_STUDIES)
def test_a_killed_slow_study_resumes_to_the_same_summary(study, quick_study, zygote, tmp_path):
    clean, _ = quick_study(study)
    _kill_and_resume(study, clean, tmp_path, zygote, random.Random(f"{_kill_seed()}-{study}"))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("study", STUDIES + SLOW_STUDIES)
def test_a_study_killed_at_other_moments_resumes_to_the_same_summary(
    study, seed, quick_study, zygote, tmp_path
):
    clean, _ = quick_study(study)
    _kill_and_resume(study, clean, tmp_path, zygote, random.Random(f"{seed}-{study}"))


# -- Dask: one cluster for every study --------------------------------------------------------------------
def _on_dask(study: str, clean: Path, out: Path, scheduler: str) -> None:
    run_study(study, out, quick=True, scheduler=scheduler)
    _same_summary(clean, out, study)
    assert json.loads((out / "run_log.json").read_text())["workers"] == "dask"


def _on_one_cluster(studies: list[str], quick_study, tmp_path: Path) -> None:
    import dask
    from distributed import LocalCluster

    # Dask's nanny starts its workers with OMP/MKL/OPENBLAS_NUM_THREADS=1 (dask config
    # distributed.nanny.pre-spawn-environ) while this process runs BLAS on every core: pde_particles'
    # s2.pde_error_sup_vs_refined (a difference of two PDE solutions) then differs at 4e-9 relative
    # (2.0895234256745887e-06 here and with workers=2; 2.0895234332796164e-06 on Dask, and here with
    # OPENBLAS_NUM_THREADS=1). The workers keep this process's BLAS threads, so that the check compares the
    # same computation on Dask and here (the runner does not pin BLAS threads: reported in issue 30).
    environ = {
        k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ").items() if "THREADS" not in k
    }
    with (
        dask.config.set({"distributed.nanny.pre-spawn-environ": environ}),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
    ):
        for study in studies:
            clean, _ = quick_study(study)
            _on_dask(study, clean, tmp_path / study, cluster.scheduler_address)


#: studies whose Dask check runs with ``-m slow`` only: pde_particles' summary depends in its last bits on
#: the process's thread counts beyond BLAS (a fresh-clone CI run saw s2.pde_error_sup_vs_refined
#: 2.0895234333351e-06 on one side and 2.0895234332796e-06 on the other, and w2_T differ at 1e-16, with BLAS
#: pinned to one thread in every task: torch's intra-op threads are the suspect, not yet pinned by the
#: runner). Its kill + resume check stays in the default tier (same process, same threads).
DASK_SLOW = ["pde_particles"]


def test_studies_on_dask_give_the_local_summary(quick_study, tmp_path):
    _on_one_cluster([s for s in STUDIES if s not in DASK_SLOW], quick_study, tmp_path)


@pytest.mark.slow
def test_slow_studies_on_dask_give_the_local_summary(quick_study, tmp_path):
    _on_one_cluster(SLOW_STUDIES + DASK_SLOW, quick_study, tmp_path)


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
