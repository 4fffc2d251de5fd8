#!/usr/bin/env bash
# Create .venv (once) and install attnflow into it; re-installs when pyproject.toml changes.
# Sourced by scripts/run.sh (the main job: ATTNFLOW_EXTRAS=animate, what it needs), scripts/test.sh and
# scripts/docs.sh (default ATTNFLOW_EXTRAS=test: every optional feature, so CI exercises every path).
# Every step is announced with what it installs, and ends with its time and the size it added to .venv;
# while a step runs a line is printed every 20 s. The log of each step is kept in .venv/setup-logs/.
#   ATTNFLOW_INSTALLER=auto|uv|pip   auto (default): uv where it can be installed (it resolves and links
#                                    the same wheels from the same registry in a fraction of pip's time),
#                                    pip otherwise or when uv fails
# PyTorch: the CPU build (torch==2.13.0) when no torch is present; a GPU user installs a CUDA build of
# torch into .venv first and attnflow uses it unchanged (this script keeps any torch already there).
# Headless Chromium for the browser tests is not installed here: scripts/setup_browser.sh (test command).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"
extras="${ATTNFLOW_EXTRAS:-test}"
logs="$venv/setup-logs"

_say() { echo "setup: $*" >&2; }
_size() { du -sm "$venv" 2>/dev/null | cut -f1; }
# _step "what" cmd...: run cmd with its output in a log; a line every 20 s; time and size at the end
_step() {
  local what="$1"; shift
  local log="$logs/$(date +%s)-$$.log" before t0 pid rc=0
  before="$(_size)"; t0=$(date +%s)
  _say "$what ..."
  "$@" >"$log" 2>&1 &
  pid=$!
  local n=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; n=$((n + 1))
    if [ $((n % ${ATTNFLOW_SETUP_TICK:-20})) -eq 0 ]; then _say "  ... still at it ($n s; $(_size) MB in .venv)"; fi
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    _say "  failed after $(( $(date +%s) - t0 )) s (exit $rc); the last lines of $log:"
    tail -n 25 "$log" >&2
    return "$rc"
  fi
  _say "  done in $(( $(date +%s) - t0 )) s (+$(( $(_size) - before )) MB, .venv now $(_size) MB)"
}

# uv reads its own settings: hand it pip's find-links, extra indexes and constraints when pip has them
_uv_env() {
  local cfg v
  cfg="$("$venv/bin/python" -m pip config list 2>/dev/null || true)"  # one call: global.X='value' lines
  pipcfg() { printf '%s\n' "$cfg" | sed -n "s/^$1='\(.*\)'\$/\1/p" | head -n 1; }
  export UV_FIND_LINKS="${UV_FIND_LINKS:-${PIP_FIND_LINKS:-$(pipcfg global.find-links)}}"
  v="$(pipcfg global.extra-index-url)"; [ -n "$v" ] && export UV_EXTRA_INDEX_URL="${UV_EXTRA_INDEX_URL:-$v}"
  v="$(pipcfg global.constraint)"; [ -n "$v" ] && [ -f "$v" ] && export UV_CONSTRAINT="${UV_CONSTRAINT:-$v}"
  [ -z "$UV_FIND_LINKS" ] && unset UV_FIND_LINKS
  return 0
}

# _install pkgs...: uv or pip into .venv
_install() {
  if [ "$installer" = "uv" ]; then
    if "$venv/bin/uv" pip install --python "$venv/bin/python" "$@"; then return 0; fi
    echo "uv failed; falling back to pip" && installer=pip
  fi
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@"
}

# tests/test_setup_scripts.py loads the functions above without setting anything up
if [ "${ATTNFLOW_SETUP_FUNCTIONS_ONLY:-0}" = "1" ]; then return 0 2>/dev/null || exit 0; fi

if [ ! -x "$venv/bin/python" ]; then
  _say "creating the virtual environment .venv ($("$py" --version 2>&1))"
  "$py" -m venv "$venv"
fi
mkdir -p "$logs"
stamp="$venv/.attnflow-installed-$extras"
want="$(sha256sum "$root/pyproject.toml" | cut -c1-16)"
_current() { [ -f "$venv/.attnflow-installed-$1" ] && [ "$(cat "$venv/.attnflow-installed-$1")" = "$want" ]; }
# the test extra holds every other one
if ! _current "$extras" && ! _current test; then
  t_all=$(date +%s)
  _say "installing attnflow[$extras] into .venv ($(_size) MB now)"
  installer="${ATTNFLOW_INSTALLER:-auto}"
  if [ "$installer" != "pip" ]; then
    if [ -x "$venv/bin/uv" ] || _step "installing uv, the fast installer (about 20 MB)" \
        "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off uv; then
      installer=uv; _uv_env
    elif [ "$installer" = "uv" ]; then
      _say "uv could not be installed"; exit 1
    else
      _say "uv could not be installed; using pip"; installer=pip
    fi
  fi
  if ! "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
    _step "installing PyTorch 2.13.0, CPU build (about 190 MB download, 700 MB installed) with $installer" \
      _install "torch==2.13.0"
  fi
  _step "installing attnflow[$extras] and its dependencies (numpy, scipy, xarray, zarr, numba, POT, dask,\
 matplotlib$([ "$extras" = test ] && echo ", transformers, plotly, mkdocs, pytest ..."); about 150-400 MB) with $installer" \
    _install -e "$root[$extras]"
  echo "$want" > "$stamp"
  _say "set-up done in $(( $(date +%s) - t_all )) s; .venv is $(_size) MB"
fi
export PATH="$venv/bin:$PATH"
