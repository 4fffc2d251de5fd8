#!/usr/bin/env bash
# Set up (if needed) and run the main job: the reproduction of Sec. 6 of arXiv 2605.18870.
#   bash scripts/run.sh                      -> attnflow reproduce massucco2026 --out out/massucco2026
#   bash scripts/run.sh <attnflow args...>   -> any attnflow command
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
if [ "$#" -eq 0 ]; then
  set -- reproduce massucco2026 --out out/massucco2026
fi
exec attnflow "$@"
