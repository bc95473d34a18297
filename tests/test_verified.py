"""tools/verified.py: where each lesson last ran, read from the records (docs/MAINTAINING.md's table and the site's block)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tools import verified
from tools import version_matrix as vm

ROOT = Path(__file__).resolve().parent.parent

SOURCE = "course_src/02_moving_tensors.md"
LAST = (vm.git("log", "-1", "--format=%h", "--", SOURCE) or "").strip()
needs_git = pytest.mark.skipif(not LAST,
                               reason="no git history here: the staleness marks are not computed")


def test_source_of_maps_both_notebooks_of_a_lesson():
    assert verified.source_of("notebooks/02_moving_tensors.ipynb") == SOURCE
    assert verified.source_of("notebooks/solutions/02_moving_tensors_solutions.ipynb") == SOURCE


@needs_git
def test_the_verified_table_is_current():
    page = vm.PAGE.read_text(encoding="utf-8")
    table = verified.lessons_table(vm.load_results())
    assert vm.replace_table(page, table, verified.VERIFIED_START, verified.VERIFIED_END) == page, \
        f"{vm.PAGE.name}'s table is stale: run `nox -s table`"


@needs_git
def test_a_record_older_than_the_lessons_last_change_says_so():
    last = LAST
    assert verified.changed_after(last, SOURCE) is None  # the record's commit holds the change
    assert verified.changed_after(f"{last}~1", SOURCE).startswith(last)
    assert verified.changed_after("0" * 12, SOURCE) is None  # a commit this clone lacks: say nothing


def test_block_lists_the_cpu_run_each_matrix_row_and_the_gpu_run():
    data = {"combos": {"a": {"python": "3.12.1", "torch": "2.11.0+cu130", "who": "Colab", "date": "2026-12-02",
                             "kind": "cuda-no-gpu", "checkout": {"commit": None}, "notebooks": [
                                 {"notebook": "notebooks/02_moving_tensors.ipynb", "ok": False}]}}}
    run = {"cpu": "Xeon", "cores": 2, "torch": "2.13.0", "python": "3.11.7", "date": "2026-12-06"}
    block = verified.block_html("notebooks/02_moving_tensors.ipynb", run, data)
    assert "✅ CPU, bản dựng trang này: Xeon, 2 lõi · torch 2.13.0 · Python 3.11.7 · 2026-12-06" in block
    assert "❌ ma trận phiên bản (cuda-no-gpu), Python 3.12.1 · torch 2.11.0+cu130 (Colab) · 2026-12-02" in block
    assert "⚠️" not in block and "chưa có lần chạy GPU" in block
    gpu_run = SimpleNamespace(label="Tesla T4, 2026-11-30")
    assert "✅ GPU: Tesla T4, 2026-11-30" in verified.block_html("x.ipynb", run, data, gpu_run, gpu_ok=True)
