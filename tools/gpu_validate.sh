#!/usr/bin/env bash
# Validate the course on a machine with an NVIDIA GPU and keep the evidence.
#   bash tools/gpu_validate.sh [OUT_DIR]      (default: gpu-validation-<date>/, outside git via .gitignore)
# It records the GPU, driver, CUDA and torch versions, runs the README's test command (every %%gpu cell runs;
# only cells needing more GPUs than present are skipped), then runs every notebook top to bottom with plain
# nbclient and reports per-notebook wall time and peak memory. Uses the project's .venv when present
# (bash tools/course.sh test creates it), else the current python3 (e.g. a GPU image with torch preinstalled).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-validation-$(date +%Y%m%d)}
mkdir -p "$out"
py=python3; [ -x .venv/bin/python ] && py=.venv/bin/python
export PYTHONUNBUFFERED=1
{
  date -u +"date: %Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi: not found"
  "$py" -c "import torch; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| GPUs', torch.cuda.device_count())"
} | tee "$out/environment.txt"
"$py" -m pytest -rs -p no:cacheprovider 2>&1 | tee "$out/pytest.log"
status=${PIPESTATUS[0]}
"$py" tools/run_notebooks.py --markdown 2>&1 | tee "$out/notebooks.log"
echo "pytest exit status: $status; logs in $out/"
exit "$status"
