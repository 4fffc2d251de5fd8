"""The CI run's test order and time report (scripts/test.sh): the collected tests ordered file by file, the
files with the most CPU time in ``tests/durations.json`` first (tests/conftest.py), and the per-test times
that scripts/test_times.py reads and turns into that table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _test_times():
    return conftest.load_script(ROOT / "scripts" / "test_times.py")


def test_every_file_of_the_durations_table_exists():
    table = json.loads(conftest.DURATIONS.read_text())
    missing = [f for f in table if not (ROOT / f).is_file()]
    assert not missing, (
        f"tests/durations.json names files that do not exist: {missing}; regenerate it "
        "(scripts/test_times.py DIR --table tests/durations.json, DIR from ATTNFLOW_TEST_TIMES=DIR)"
    )
    assert all(isinstance(s, int) and s >= 0 for s in table.values())


def test_workers_order_the_files_by_cpu_time_and_keep_each_file_together(tmp_path, monkeypatch):
    table = tmp_path / "durations.json"
    table.write_text(json.dumps({"tests/test_b.py": 50, "tests/test_c.py": 10, "src/m.py": 20}))
    monkeypatch.setattr(conftest, "DURATIONS", table)
    ids = [
        "src/m.py::m.f",
        "tests/test_a.py::test_1",
        "tests/test_a.py::test_2",
        "tests/test_b.py::test_1[x]",
        "tests/test_b.py::test_1[y]",
        "tests/test_b.py::test_0",
        "tests/test_c.py::test_1",
        "tests/test_d.py::test_1",
    ]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, SimpleNamespace(workerinput={}), items)
    assert [i.nodeid for i in items] == [
        "tests/test_b.py::test_1[x]",  # 50 s: first, its tests in pytest's order
        "tests/test_b.py::test_1[y]",
        "tests/test_b.py::test_0",
        "src/m.py::m.f",  # 20 s
        "tests/test_c.py::test_1",  # 10 s
        "tests/test_a.py::test_1",  # not in the table: last, in pytest's order
        "tests/test_a.py::test_2",
        "tests/test_d.py::test_1",
    ]
    # outside a pytest-xdist worker (one process) the order is pytest's
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, SimpleNamespace(), items)
    assert [i.nodeid for i in items] == ids


def test_the_time_report_gives_busy_and_idle_time_per_worker_and_the_table(tmp_path, capsys):
    rows = {
        "gw0": [("tests/test_a.py::t1", 0.0, 10.0, 4.0, 5.0), ("tests/test_b.py::t1", 10.0, 12.0, 1.5, 0.0)],
        "gw1": [("tests/test_a.py::t2", 0.0, 3.0, 2.0, 0.0), ("src/m.py::m.f", 3.0, 3.5, 0.2, 0.0)],
    }
    for worker, tests in rows.items():
        (tmp_path / f"{worker}.jsonl").write_text(
            "".join(
                json.dumps({"id": i, "worker": worker, "start": s, "end": e, "cpu": c, "cpu_children": k})
                + "\n"
                for i, s, e, c, k in tests
            )
        )
    tt = _test_times()
    assert tt.main([str(tmp_path), "--top", "2", "--table", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "4 tests, 12 s from the first start to the last end" in out
    assert "gw0: 2 tests, busy 12 s, span 12 s (starts at +0 s, idle 0 s at the end), CPU 10 s" in out
    assert "gw1: 2 tests, busy 4 s, span 4 s (starts at +0 s, idle 8 s at the end), CPU 2 s" in out
    assert "tests/test_a.py::t1" in out and "src/m.py::m.f" not in out  # --top 2: the two longest
    # per file: CPU of the tests and their children, files under 1 s left out, the most first
    assert json.loads((tmp_path / "t.json").read_text()) == {"tests/test_a.py": 11, "tests/test_b.py": 2}
    assert list(json.loads((tmp_path / "t.json").read_text())) == ["tests/test_a.py", "tests/test_b.py"]


def test_the_time_report_names_the_variable_when_there_is_nothing_to_read(tmp_path):
    with pytest.raises(SystemExit, match=r"no per-test times in .*: run pytest with ATTNFLOW_TEST_TIMES="):
        _test_times().main([str(tmp_path)])


def test_the_conftest_is_the_one_of_this_directory():
    # `import conftest` above must be tests/conftest.py (tests/ is on sys.path first), not another one
    assert Path(conftest.__file__).resolve() == Path(__file__).resolve().parent / "conftest.py"
    assert str(Path(__file__).resolve().parent) in sys.path
