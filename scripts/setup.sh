#!/usr/bin/env bash
# Create .venv (once) and install attnflow with its test extras; re-installs when pyproject.toml changes.
# Sourced by scripts/run.sh and scripts/test.sh. PyTorch is pinned to the CPU build that pip takes
# from this machine's local wheel cache (torch==2.13.0); a GPU user installs a CUDA build of torch
# into .venv first and attnflow uses it unchanged (this script keeps any torch already there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
stamp="$venv/.attnflow-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if ! "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check "torch==2.13.0"
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -e "$root[test]"
  echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"
# Headless Chromium for the browser tests of `attnflow report` (tests/test_report_browser.py): installed
# only when missing, only as root with apt-get, tried once per .venv, never failing the set-up (without it
# those tests skip).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
  && [ ! -f "$venv/.chromium-tried" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    touch "$venv/.chromium-tried" || true
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
      >/dev/null 2>&1 || echo "setup: could not install chromium; the browser tests will skip" >&2
  fi
fi
