#!/usr/bin/env bash
# Set up (if needed) and run what CI runs: bash scripts/test.sh [pytest args]
#   bash scripts/test.sh            lint, import contracts, the numba warm-up (scripts/warm_numba.py), then
#                                   the docstring examples and the default (fast) test tier in one run
#   bash scripts/test.sh -m slow    the same checks and the docstring examples, then the slow tier only
#                                   (long statistical and convergence tests, marked @pytest.mark.slow)
#   bash scripts/test.sh -m ''      the same checks and the docstring examples, then every test
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
bash "$root/scripts/setup_browser.sh"  # headless Chromium for the browser tests (root with apt only)
cd "$root"
# Python may write its bytecode caches (__pycache__/*.pyc) in .venv and src/: a fresh .venv installed by uv
# has none, and with PYTHONDONTWRITEBYTECODE set (as in some shells and CI images) every one of the suite's
# Python subprocesses (tutorials, CLI runs, sweep and Dask workers, ...) compiled torch, transformers and
# attnflow from source again: `import attnflow, attnflow.studies, attnflow.bridge` took 12.3 s CPU per
# process without the caches, 6.3 s with them (fresh clone, 2026-12-03)
unset PYTHONDONTWRITEBYTECODE
# name the machine, so that a failure that depends on it (issue 28: round-off that differs between CPUs)
# says where it ran: CPU model, cores, and the thread counts the tests run numba and torch with
cpu="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)"
[ -n "$cpu" ] || cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1 || true)"
[ -n "$cpu" ] || cpu="$(uname -m) (model unknown)"
simd="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -ow -e avx2 -e fma -e avx512f | sort -u | tr '\n' ' ' || true)"
echo "machine: ${cpu}; $(nproc 2>/dev/null || echo '?') cores; SIMD: ${simd:-unknown}; $(uname -sr)"
python - <<'PY'
import os
import numba
import torch
threads = os.environ.get("NUMBA_NUM_THREADS")
print(
    f"numba {numba.__version__}: NUMBA_NUM_THREADS={threads or 'unset'} (the tests use "
    f"{threads or 1}; tests/conftest.py sets 1 when unset), {numba.config.NUMBA_NUM_THREADS} available; "
    f"torch {torch.__version__}: {torch.get_num_threads()} threads (the tests use 1)"
)
PY
_t=$(date +%s)
_took() { echo "test.sh: $1 in $(( $(date +%s) - _t )) s"; _t=$(date +%s); }
python -m ruff check src tests benchmarks
lint-imports  # the contracts in pyproject.toml [tool.importlinter]
_took "ruff and import contracts"
# compile the numba kernels the tests use into the on-disk cache once, 2 processes splitting the list
# (else each compile lands in the first test that needs it, and both workers may compile the same one)
python scripts/warm_numba.py --jobs 2
_took "numba warm-up"
# 2 workers, handed whole test files (--dist loadfile), the files with the most CPU time first
# (tests/conftest.py orders them by tests/durations.json; --no-loadscope-reorder keeps that order): a worker
# that finishes a file takes the next, and the run ends on the cheap files, not on one worker idle while the
# other runs a long test it was handed last. Whole files: the tests of a file share its numba compiles and
# module fixtures (handed out test by test, both workers compiled the same kernels at once). Each test's
# wall and CPU time goes to a temporary directory; scripts/test_times.py prints each worker's busy time
# (ATTNFLOW_TEST_TABLE=FILE also writes the per-file CPU table there: copy it to tests/durations.json).
times="$(mktemp -d "${TMPDIR:-/tmp}/attnflow-test-times.XXXXXX")"
status=0
if [ $# -eq 0 ]; then
  # the default tier: the docstring examples of src/attnflow in the same 2-worker run as the tests
  ATTNFLOW_TEST_TIMES="$times" python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q --durations=30 \
    --doctest-modules src/attnflow tests || status=$?
else
  # a selection (-m slow, -k ...): the docstring examples first, on their own (a marker would deselect them)
  python -m pytest -q -p no:cacheprovider --doctest-modules src/attnflow
  _took "docstring examples"
  ATTNFLOW_TEST_TIMES="$times" python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q "$@" || status=$?
fi
_took "pytest"
python scripts/test_times.py "$times" --top 10 ${ATTNFLOW_TEST_TABLE:+--table "$ATTNFLOW_TEST_TABLE"} || true
rm -rf "$times"
exit "$status"
