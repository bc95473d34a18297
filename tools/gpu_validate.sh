#!/usr/bin/env bash
# Validate the course on a machine with an NVIDIA GPU and keep the evidence: tools/gpu_validate.py (what it checks,
# what it keeps), run in the course environment as `bash tools/course.sh test` sets it up (COURSE_SYSTEM_TORCH=1
# reuses the machine's own CUDA torch).  Usage: bash tools/gpu_validate.sh [-o OUT] [--keep-going] [NOTEBOOK ...]
set -eu
cd "$(dirname "$0")/.."
exec bash tools/course.sh python -m tools.gpu_validate "$@"
