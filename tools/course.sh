#!/usr/bin/env bash
# The course's commands. Each does all set-up on a fresh machine (a virtualenv in .venv).
#   bash tools/course.sh lab    set up, then open the course in JupyterLab
#   bash tools/course.sh test   set up, then run every test (unit tests + every notebook under nbval)
#   bash tools/course.sh matrix set up, then run the course on several Python + torch versions
#                               (tools/version_matrix.py; --combo ID for one, --help for the options)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv

setup() {
  local stamp="$VENV/.requirements.sha"
  local want; want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -r requirements.txt
    "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e . 2>/dev/null \
      || "$VENV/bin/python" -m pip install -q --no-deps -e .
    echo "$want" > "$stamp"
  fi
}

ensure_chromium() {  # the browser test (tests/e2e, marker "browser") drives Debian's chromium; Playwright never downloads one
  if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-color-emoji >/dev/null; } \
      || echo "course.sh: could not install chromium; the browser test will be skipped" >&2
  fi
}

case "${1:-}" in
  lab)
    setup
    exec "$VENV/bin/jupyter" lab notebooks/
    ;;
  test)
    setup
    ensure_chromium
    shift
    exec "$VENV/bin/python" -m pytest "$@"
    ;;
  matrix)
    setup
    shift
    exec "$VENV/bin/python" tools/version_matrix.py "$@"
    ;;
  *)
    echo "usage: bash tools/course.sh lab|test [pytest args] | matrix [--combo ID ...]" >&2
    exit 2
    ;;
esac
