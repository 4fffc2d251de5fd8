#!/usr/bin/env bash
# Set up (if needed) and run the test suite: bash scripts/test.sh [pytest args]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
python -m ruff check src tests benchmarks
exec python -m pytest -n 2 -q "$@"
