#!/usr/bin/env bash
# The course's two commands. Both do all set-up on a fresh machine (a virtual environment in .venv):
#   bash tools/course.sh lab    set up, then open the course in JupyterLab (on a working copy: notebooks_cua_toi/)
#   bash tools/course.sh test   set up, then run every test (unit tests + every notebook twice per kernel, outputs checked)
#   bash tools/course.sh quick  set up, then the tests not marked slow and the notebooks of the lessons changed
#                               since main (committed or not): the loop while editing, under 90 s
#   bash tools/course.sh check  set up, then the instructor's pre-course check: every notebook twice per kernel, outputs
#                               and %%gpu cells checked, a table per notebook and a verdict (tools/run.py)
#   bash tools/course.sh site   set up, then build the course website into build/site/ (tools/build_site.py)
#   bash tools/course.sh nox ARGS set up, then run nox with the environment's uv (noxfile.py: -l lists the
#                               maintainer's sessions, -s matrix runs the version matrix)
#   bash tools/course.sh grade DIR set up, then grade a folder of learners' notebooks (tools/grade.py; it runs
#                               their code: see README, "Chấm bài cả lớp")
# tools/course.py does the work (standard library only; its docstring lists the options, e.g.
# COURSE_SYSTEM_TORCH=1). This script only finds a Python 3.10+ to run it: $PYTHON if set, else python3, python,
# or the Windows launcher `py -3`. Works in bash 3.2 (macOS) and Git Bash (Windows); in PowerShell run
# `py -m tools.course lab` (or test) instead.
set -eu
cd "$(dirname "$0")/.."
check='import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'

if [ -n "${PYTHON:-}" ]; then
  if ! "$PYTHON" -c "$check" >/dev/null 2>&1; then
    echo "course.sh: PYTHON=$PYTHON không chạy được hoặc cũ hơn Python 3.10" >&2
    exit 1
  fi
  exec "$PYTHON" -m tools.course "$@"
fi
for candidate in python3 python; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "$check" >/dev/null 2>&1; then
    exec "$candidate" -m tools.course "$@"
  fi
done
if command -v py >/dev/null 2>&1 && py -3 -c "$check" >/dev/null 2>&1; then
  exec py -3 -m tools.course "$@"
fi
echo "course.sh: cần Python 3.10 trở lên (python.org; macOS: brew install python@3.12), hoặc đặt PYTHON=/đường/dẫn" >&2
exit 1
