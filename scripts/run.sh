#!/usr/bin/env bash
# Set up (if needed) and run the main job: the reproduction of Sec. 6 of arXiv 2605.18870.
#   bash scripts/run.sh                      -> attnflow reproduce massucco2026 --out out/massucco2026,
#                                               then the animations of the OU and oscillating H = 100 runs
#   bash scripts/run.sh <attnflow args...>   -> any attnflow command
# Progress: one line per finished run ("run k/N name: done in s; overall left m:ss", or "already
# complete, skipped" on a rerun); while a run goes, a bar on a terminal, or a line every 30 s in a log
# (bash scripts/run.sh > run.log 2>&1). A regime's figures appear as soon as its runs finish.
# Ctrl-C stops after the step under way: "interrupted at step k of N; rerun to resume".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# the main job installs what it needs (the MP4 writer for its animations); other commands get every feature
if [ "$#" -gt 0 ]; then
  export ATTNFLOW_EXTRAS="${ATTNFLOW_EXTRAS:-models,pde,report,animate}"
else
  export ATTNFLOW_EXTRAS="${ATTNFLOW_EXTRAS:-animate}"
fi
source "$root/scripts/setup.sh"
cd "$root"
if [ "$#" -gt 0 ]; then
  exec attnflow "$@"
fi
out=out/massucco2026
# the job's first run is small and the others large: the kernel's parallel passes for all, one compiled variant
# (the same bits as the serial ones; dynamics/numba_kernel.py, PARALLEL_MIN_PAIRS)
export ATTNFLOW_PARALLEL_MIN_PAIRS="${ATTNFLOW_PARALLEL_MIN_PAIRS:-0}"
attnflow reproduce massucco2026 --out "$out"
attnflow animate "$out/runs/ou_H100" --mean --output "$out/anim_ou_H100.mp4"
attnflow animate "$out/runs/osc_shared_H100" --output "$out/anim_osc_shared_H100.mp4"
attnflow info "$out"
