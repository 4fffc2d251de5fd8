#!/usr/bin/env bash
# Build the documentation site into site/ in strict mode (warnings are errors), executing every tutorial
# of docs/tutorials/ (scripts/docs_hooks.py): bash scripts/docs.sh [mkdocs build options]
#   ATTNFLOW_SKIP_SETUP=1   use the python on PATH (attnflow and the docs extra installed) instead of
#                           sourcing scripts/setup.sh
#   ATTNFLOW_TUTORIAL_TIMEOUT=SECONDS   per-tutorial limit (default 600)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${ATTNFLOW_SKIP_SETUP:-0}" != "1" ]; then
  source "$root/scripts/setup.sh"
fi
cd "$root"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"  # this checkout, also for the tutorials
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" NUMBA_NUM_THREADS="${NUMBA_NUM_THREADS:-1}" NO_MKDOCS_2_WARNING=1
start=$(date +%s)
python -m mkdocs build --strict --clean "$@"
echo "docs: site/ built in $(( $(date +%s) - start )) s (strict, tutorials executed)"
