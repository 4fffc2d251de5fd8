#!/usr/bin/env bash
# Set up (if needed) and run what CI runs: bash scripts/test.sh [pytest args]
#   bash scripts/test.sh            lint, import contracts, docstring examples, the default (fast) test tier
#   bash scripts/test.sh -m slow    the same checks, then the slow tier only (long statistical and
#                                   convergence tests, marked @pytest.mark.slow)
#   bash scripts/test.sh -m ''      the same checks, then every test
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
bash "$root/scripts/setup_browser.sh"  # headless Chromium for the browser tests (root with apt only)
cd "$root"
python -m ruff check src tests benchmarks
lint-imports  # the contracts in pyproject.toml [tool.importlinter]
python -m pytest -q -p no:cacheprovider --doctest-modules src/attnflow
exec python -m pytest -n 2 -q "$@"
