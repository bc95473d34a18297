"""Notebook lint: generated files match their sources, and every notebook follows the skeleton."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_course  # noqa: E402

NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in str(p))
MAX_CODE_LINES = 16
# Calls that fail without a CUDA GPU: allowed only in %%gpu cells.
CUDA_ONLY = re.compile(
    r"\.cuda\(|device\s*=\s*[\"']cuda|\.to\(\s*[\"']cuda|torch\.cuda\.(get_device_name|get_device_properties|"
    r"get_device_capability|set_device|current_device|synchronize|memory_allocated|memory_reserved|"
    r"max_memory_allocated|reset_peak_memory_stats|memory_summary|empty_cache|set_per_process_memory_fraction)\("
)


def test_generated_files_are_up_to_date():
    planned = build_course.planned_outputs()
    stale = [p.relative_to(ROOT).as_posix() for p, text in planned.items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"run `python tools/build_course.py`; out of date: {stale}"


def test_every_notebook_has_a_source():
    planned = set(build_course.planned_outputs())
    assert set(NOTEBOOKS) <= planned, "a notebook exists that tools/build_course.py does not generate"
    assert NOTEBOOKS, "no notebooks found"


def test_parse_source_splits_cells():
    text = "# T\n\nintro\n+++\nmore\n```python\nx = 1\n```\n```setup\n```\n```text\nkept\n```\nend\n"
    cells = build_course.parse_source(text)
    assert [c.kind for c in cells] == ["markdown", "markdown", "code", "setup", "markdown", "markdown"]
    assert cells[2].source == "x = 1"
    assert "kept" in cells[4].source


def test_select_variant_keeps_the_right_region():
    text = "a\n### BEGIN SOLUTION\nsol\n### BEGIN LEARNER\nlearn\n### END\nz\n"
    assert build_course.select_variant(text, "solution") == "a\nsol\nz"
    assert build_course.select_variant(text, "learner") == "a\nlearn\nz"
    with pytest.raises(ValueError, match="variant"):
        build_course.select_variant(text, "teacher")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
class TestNotebookLint:
    def nb(self, path):
        return nbformat.read(path, as_version=4)

    def test_valid_nbformat_and_kernelspec(self, path):
        nb = self.nb(path)
        nbformat.validate(nb)
        assert nb.nbformat == 4
        assert nb.metadata["kernelspec"]["name"] == "python3"
        assert nb.metadata["accelerator"] == "GPU" and nb.metadata["colab"]["gpuType"] == "T4"

    def test_outputs_stripped(self, path):
        raw = json.loads(path.read_text(encoding="utf-8"))
        for cell in raw["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None

    def test_badge_and_setup_cells_match_the_generator(self, path):
        nb = self.nb(path)
        config = build_course.load_config()
        rel = path.relative_to(ROOT).as_posix()
        assert nb.cells[0].source == build_course.badge_cell_source(config, rel)
        setup = [c for c in nb.cells if c.cell_type == "code" and "Ô cài đặt" in c.source]
        assert len(setup) == 1 and setup[0].source == build_course.setup_cell_source(config)

    def test_skeleton_sections(self, path):
        md = "\n".join(c.source for c in self.nb(path).cells if c.cell_type == "markdown")
        assert re.search(r"^# Bài 14\.\d+ · ", md, re.M), "title '# Bài 14.N · ...' missing"
        for heading in ("## Mục tiêu", "## Cài đặt", "## Tóm tắt", "## Tiếp theo"):
            assert re.search(rf"^{heading}\b", md, re.M), f"section {heading!r} missing"
        assert "GPU:" in md, "the title block must say 'GPU: tuỳ chọn/cần'"

    def test_cuda_only_code_is_in_gpu_cells(self, path):
        for cell in self.nb(path).cells:
            if cell.cell_type != "code" or cell.source.startswith("%%gpu"):
                continue
            assert not CUDA_ONLY.search(cell.source), f"CUDA-only call outside a %%gpu cell:\n{cell.source}"

    def test_code_cells_are_short(self, path):
        lengths = [len(c.source.splitlines()) for c in self.nb(path).cells
                   if c.cell_type == "code" and "Ô cài đặt" not in c.source]
        assert max(lengths) <= MAX_CODE_LINES, f"a code cell has {max(lengths)} lines (max {MAX_CODE_LINES})"
        assert sorted(lengths)[len(lengths) // 2] <= 6, "median code cell must be ≤ 6 lines"


def test_badge_links_point_at_existing_files():
    text = (ROOT / "colab_badges.md").read_text(encoding="utf-8")
    config = build_course.load_config()
    targets = re.findall(rf"colab\.research\.google\.com/github/{re.escape(config.repo)}/blob/[^/]+/([^)\s]+)", text)
    assert targets and all((ROOT / t).exists() for t in targets)
    assert len(targets) == len(NOTEBOOKS)
