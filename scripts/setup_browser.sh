#!/usr/bin/env bash
# Headless Chromium for the browser tests of `attnflow report` (tests/test_report_browser.py), for the test
# command only (scripts/test.sh sources this after scripts/setup.sh; the main job never needs it).
# Installed only when missing, only as root with apt-get, tried once per .venv, never failing the set-up:
# without it the browser tests skip with the reason. Announces itself before it starts (about 3 min and
# 300 MB on a fresh Debian machine) and prints a line every 20 s while apt works.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  :
elif [ -f "$venv/.chromium-tried" ]; then
  echo "setup: chromium missing (its install failed before; rm .venv/.chromium-tried to retry); browser tests skip" >&2
elif [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: not root with apt-get: chromium not installed, the browser tests will skip" >&2
else
  mkdir -p "$venv"; touch "$venv/.chromium-tried" || true
  echo "setup: installing chromium + chromium-driver with apt-get for the browser tests (about 3 min, 300 MB) ..." >&2
  t0=$(date +%s)
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
    >"$venv/setup-chromium.log" 2>&1 &
  pid=$!; n=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; n=$((n + 1))
    if [ $((n % 20)) -eq 0 ]; then echo "setup:   ... apt-get still at it ($n s)" >&2; fi
  done
  if wait "$pid"; then
    echo "setup:   chromium installed in $(( $(date +%s) - t0 )) s" >&2
  else
    echo "setup: could not install chromium (log: .venv/setup-chromium.log); the browser tests will skip" >&2
  fi
fi
