#!/usr/bin/env bash
# Validate the course on a machine with an NVIDIA GPU and keep the evidence (details: tools/gpu_validate.py).
#   bash tools/gpu_validate.sh [-o OUT] [--keep-going] [NOTEBOOK ...]
# Runs in the course environment, set up as `bash tools/course.sh test` sets it up (COURSE_SYSTEM_TORCH=1 reuses
# the machine's own CUDA torch). Exits 1, saying why in Vietnamese, unless a CUDA GPU is usable, the tests and the
# notebooks pass (tools/run.py), and every %%gpu cell that the machine's GPU count allows ran. The executed
# notebooks (with outputs) are kept in OUT/executed/<notebook path>; OUT defaults to gpu-validation-<date>-<time>/.
set -eu
cd "$(dirname "$0")/.."
exec bash tools/course.sh python -m tools.gpu_validate "$@"
