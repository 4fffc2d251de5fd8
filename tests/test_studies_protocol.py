"""The study protocol's reproducibility checks (issue 30), on the quick variants of EVERY registered study:

* killed by SIGKILL at a random moment (some but not all of its tasks done) and resumed, a study gives the
  summary.json of an uninterrupted run, bit for bit (the keys a study declares in ``timing_keys``,
  wall-clock times, and the figure files of ``run.figures`` excepted);
* on a local Dask cluster it gives the summary.json of a local run (the same keys excepted).

Every registered study is checked in the default tier (a test checks that none is missing); a task's
numbers do not depend on the thread counts it is given (checked below), so local, killed + resumed and Dask
runs compare bit for bit. The default tier is cheap by design: the uninterrupted run of each study is THE
quick run of the session (the ``quick_study`` fixture of tests/conftest.py, run once and shared with the
study's own tests); the killed runs are forked from one process per test worker that imported attnflow once
(a "zygote": it never computes, so no thread pool is forked); one Dask cluster runs every study. With
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
from conftest import load_script

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
    "massucco2026_code",  # 3.4 (6.1 before its quick variant shrank: dt 2e-2, T 2.7, 2 paths of 32)
    "massucco2026_d5",  # 1.7
    "massucco2026_s1",  # 3.0 (4.6 before: T 0.5, 2 paths of 32)
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


def test_every_registered_study_is_checked():
    registered = set(available_studies())
    listed = STUDIES
    missing = sorted(registered - set(listed))
    assert not missing, f"studies the protocol checks do not run (add each to STUDIES): {missing}"
    assert not set(listed) - registered, "STUDIES names a study that is not registered"
    assert len(set(listed)) == len(listed), "a study is listed twice"


# -- helpers ---------------------------------------------------------------------------------------------
def _strip(data, keys: tuple[str, ...]):
    if isinstance(data, dict):
        return {k: _strip(v, keys) for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [_strip(v, keys) for v in data]
    return data


def _comparable(raw: bytes, keys: tuple[str, ...]):
    """``summary.json`` without the timing keys and ``run.figures``: ``(serialised, parsed)``. JSON floats
    round-trip exactly (shortest repr), so two serialisations are equal iff the numbers are bit for bit
    equal (NaN included, which ``==`` on parsed dicts would call different)."""
    data = json.loads(raw)
    data.get("run", {}).pop("figures", None)
    data = _strip(data, keys)
    return json.dumps(data), data


def first_difference(a, b, path: str = "") -> tuple[str, object, object] | None:
    """The first key (dotted path, lists indexed ``[i]``) where two parsed summaries differ, with the two
    values (a missing key: ``"<missing>"``); None when they are equal, bit for bit (floats by their JSON
    repr, so NaN equals NaN and 0.0 differs from -0.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}".lstrip("."), a.get(k, "<missing>"), b.get(k, "<missing>")
            diff = first_difference(a[k], b[k], f"{path}.{k}")
            if diff:
                return diff
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):  # lengths compared below
            diff = first_difference(x, y, f"{path}[{i}]")
            if diff:
                return diff
        return None if len(a) == len(b) else (f"{path} (length)", len(a), len(b))
    return None if json.dumps(a) == json.dumps(b) else (path.lstrip(".") or "<root>", a, b)


def _same_summary(a: Path, b: Path, study: str) -> None:
    keys = get_study(study).timing_keys
    ra, rb = (a / "summary.json").read_bytes(), (b / "summary.json").read_bytes()
    if ra == rb:
        return
    (sa, da), (sb, db) = _comparable(ra, keys), _comparable(rb, keys)
    if sa != sb:
        key, va, vb = first_difference(da, db) or ("<order of keys>", None, None)
        pytest.fail(
            f"{study}: the summary.json of {b} differs from the uninterrupted one {a} (timing keys {keys} "
            f"and run.figures excepted); first differing key {key}: {va!r} there, {vb!r} here"
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
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("study", STUDIES)
def test_a_study_killed_at_other_moments_resumes_to_the_same_summary(
    study, seed, quick_study, zygote, tmp_path
):
    clean, _ = quick_study(study)
    _kill_and_resume(study, clean, tmp_path, zygote, random.Random(f"{seed}-{study}"))


# -- a task's numbers do not depend on the thread counts it is given -------------------------------------
def test_a_task_gives_the_same_bits_on_one_and_two_threads(monkeypatch, tmp_path):
    """A particle task (the numba kernel at n = 768, whose rows split into chunks; 2 steps) run through
    ``sweep._run_task`` as a local in-process run does (``threads=None``: the caller's thread counts), once
    under torch 1 / numba 1 and once under torch 2 / numba 2, stores the same arrays bit for bit. numba's
    pool has one thread in the tests (conftest), so numba's count is the one its kernels read
    (``numba.get_num_threads``, patched): with the split by thread count that Dask check failed on (4 items
    per thread) the two runs differed in every stored quantity. Cost: ~0.5 s with the kernels cached."""
    import numba
    import numpy as np
    import torch
    from experiments_helpers import tiny

    from attnflow.experiments import open_run
    from attnflow.experiments.sweep import _run_task

    cfg = tiny(
        model={"direction": "descent", "backend": "numba"},
        tokens={"init": "uniform", "n": 768, "d": 3},
        heads={"H": 1},
        paths=1,
        integrator={"dt": 0.01, "t1": 0.02},
        record={"every": 1},
        checkpoint_every=2,
    )
    saved = torch.get_num_threads()
    stored = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            monkeypatch.setattr(numba, "get_num_threads", lambda n=n: n)
            res = _run_task({"kind": "particle", "config": cfg}, str(tmp_path / f"t{n}"), False, None)
            assert res["status"] == "done", res
            assert torch.get_num_threads() == n, "the task did not restore the caller's torch threads"
            ds = open_run(tmp_path / f"t{n}")
            stored.append({k: np.ascontiguousarray(ds[k].values).tobytes() for k in sorted(ds.data_vars)})
    finally:
        torch.set_num_threads(saved)
    assert "positions" in stored[0] and stored[0].keys() == stored[1].keys()
    differ = [k for k in stored[0] if stored[0][k] != stored[1][k]]
    assert not differ, f"the task's stored {differ} depend on the torch / numba thread counts"


def test_after_run_hooks_only_tasks_finished_now_and_not_the_last(tmp_path):
    """The runner calls a study's ``after_run`` (figures while other tasks still run) for a task finished
    in this call, not for one found complete on a resume, and not after the last task (the analysis draws
    every figure then): a resumed finished massucco2026 redrew each regime's figures three times."""
    from experiments_helpers import tiny

    from attnflow.studies import Study, StudyConfig, StudyResult

    calls = []

    class Hooked(Study):
        name = "hooked"
        description = "two TINY runs (a test study)"
        Config = StudyConfig

        def plan(self, config):
            return {f"H{h}": tiny(name=f"h{h}", heads={"H": h}, paths=1) for h in (1, 2)}

        def analyse(self, config, runs, out_dir):
            return StudyResult(summary={"runs": sorted(runs.configs)})

        def after_run(self, config, runs, out_dir, name, *, figures=None):
            calls.append(name)
            return {}

    run_study(Hooked(), tmp_path / "s", quick=True, workers=1)
    assert calls == ["H1"]
    calls.clear()
    assert run_study(Hooked(), tmp_path / "s", quick=True, workers=1)["run"]["status"] == "done"
    assert calls == []


def test_the_first_difference_names_the_key_and_both_values():
    a = {"run": {"status": "done"}, "s2": {"err": 2.0895234333351e-06, "w2": [0.1, float("nan")]}}
    assert first_difference(a, json.loads(json.dumps(a))) is None  # NaN equals NaN, bit for bit
    b = json.loads(json.dumps(a))
    b["s2"]["err"] = 2.0895234332796e-06
    b["s2"]["w2"][0] = 0.2
    assert first_difference(a, b) == ("s2.err", 2.0895234333351e-06, 2.0895234332796e-06)
    b["s2"]["err"] = a["s2"]["err"]
    assert first_difference(a, b) == ("s2.w2[0]", 0.1, 0.2)
    assert first_difference({"x": 0.0}, {"x": -0.0}) == ("x", 0.0, -0.0)
    assert first_difference({"x": 1}, {"y": 1}) == ("x", 1, "<missing>")
    assert first_difference([1, 2], [1]) == (" (length)", 2, 1)


# -- Dask: one cluster for every study --------------------------------------------------------------------
def _on_dask(study: str, clean: Path, out: Path) -> None:
    """Compare the Dask run of ``study`` in ``out`` with its local run ``clean``."""
    _same_summary(clean, out, study)
    assert json.loads((out / "run_log.json").read_text())["workers"] == "dask"
    # the particle and PDE runs (their meta.json names the process) ran in the cluster's workers, not here
    pids = {json.loads(m.read_text()).get("pid") for m in (out / "runs").glob("*/meta.json")}
    assert os.getpid() not in pids, f"{study}: a task of the Dask run ran in the test process"


def _on_one_cluster(studies: list[str], quick_study, tmp_path: Path) -> None:
    """Run ``studies`` on one local Dask cluster and compare each with its local quick run; every study is
    checked, and a failure names each study that differs and its first differing key."""
    from distributed import LocalCluster

    # the workers start with the nanny's environment (OMP/MKL/OPENBLAS_NUM_THREADS=1, dask config
    # distributed.nanny.pre-spawn-environ) while this process runs with its own thread counts: a task's
    # numbers must not depend on them (sweep._run_task pins BLAS and torch inside every task; the numba
    # kernels split their work independently of the thread count)
    failures = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        for study in studies:
            run_study(study, tmp_path / study, quick=True, scheduler=cluster.scheduler_address)
    # the local runs after the Dask ones (the cluster closed): by then the other tests have made most of
    # them, and this test does not wait on the lock of a quick run another worker is making
    for study in studies:
        clean, _ = quick_study(study)
        try:
            _on_dask(study, clean, tmp_path / study)
        except (AssertionError, pytest.fail.Exception) as exc:
            failures.append(str(exc).splitlines()[0])
    assert not failures, f"{len(failures)} of {len(studies)} studies differ on Dask:\n" + "\n".join(failures)


def test_studies_on_dask_give_the_local_summary(quick_study, tmp_path):
    _on_one_cluster(STUDIES, quick_study, tmp_path)


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
    return load_script(ROOT / "scripts" / "regen_tables.py")


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
