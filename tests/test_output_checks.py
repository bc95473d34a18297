"""tools/output_checks.py: the machine kinds, and each rule of check_outputs on synthetic executed notebooks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tools import output_checks
from tools.run import keep_first_pass_streams

ROOT = Path(__file__).resolve().parent.parent

v4 = nbformat.v4


def stdout(text):
    return v4.new_output("stream", name="stdout", text=text)


def stderr(text):
    return v4.new_output("stream", name="stderr", text=text)


def cell(outputs, source="print(device)", **course):
    node = v4.new_code_cell(source, outputs=outputs)
    if course:
        node.metadata["course"] = course
    return node


def notebook(*cells):
    return v4.new_notebook(cells=[v4.new_markdown_cell("# T"), *cells])


def fake_torch(cuda=None, hip=None, available=False, mps=None):
    backends = SimpleNamespace() if mps is None else SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps))
    return SimpleNamespace(version=SimpleNamespace(cuda=cuda, hip=hip), backends=backends,
                           cuda=SimpleNamespace(is_available=lambda: available))


@pytest.mark.parametrize("torch, kind", [
    (fake_torch(), "cpu-build"),
    (fake_torch(mps=False), "cpu-build"),
    (fake_torch(cuda="13.0"), "cuda-no-gpu"),
    (fake_torch(hip="6.4"), "cuda-no-gpu"),
    (fake_torch(cuda="12.6", available=True), "cuda"),
    (fake_torch(mps=True), "mps"),
])
def test_machine_kind_of_each_build(torch, kind):
    assert output_checks.machine_kind(torch) == kind


EXPECT = {"expect": [[["cpu-build", "cuda-no-gpu"], r"^→ device: cpu$"]]}
EXPECT_NOT = {"expect_not": [[["cuda-no-gpu"], "device: cuda"]]}
BF16 = v4.new_output("execute_result", data={"text/plain": "'bf16: có'"}, execution_count=1)


@pytest.mark.parametrize("output, course, kind, shown", [
    (stdout("x\n→ device: cpu\n"), EXPECT, "cuda-no-gpu", []),
    (stdout("→ device: cuda\n"), EXPECT, "cuda", []),  # not one of its kinds
    (stdout("→ device: cuda\n"), EXPECT, "cuda-no-gpu", ["cell 1 `print(device)`", "must match", "→ device: cuda"]),
    (BF16, {"expect": [[["any"], "bf16: có"]]}, "mps", []),  # text results count too
    (stdout("device: cpu\n"), EXPECT_NOT, "cuda-no-gpu", []),
    (stdout("device: cuda\n"), EXPECT_NOT, "cuda", []),
    (stdout("device: cuda\n"), EXPECT_NOT, "cuda-no-gpu", ["must not match", "'device: cuda'"]),
    (stdout("hello\n"), {}, "cuda", []),
])
def test_expect_and_expect_not_hold_on_their_kinds_and_a_failure_says_what_the_cell_showed(output, course, kind, shown):
    problems = output_checks.check_outputs(notebook(cell([output], **course)), kind)
    assert len(problems) == bool(shown) and all(part in problems[0] for part in shown), problems


def test_every_stderr_line_fails_unless_its_cell_allows_it():
    text = "W1201 05:00:00.1 12 torch/utils/cpp_extension.py:140] No CUDA runtime is found\nsomething else\n"
    problems = output_checks.check_outputs(notebook(cell([stderr(text)])), "cpu-build")
    assert len(problems) == 2 and "No CUDA runtime" in problems[0] and "something else" in problems[1]
    allowed = notebook(cell([stderr(text)], allow_stderr=["No CUDA runtime", "^something"]))
    assert output_checks.check_outputs(allowed, "cpu-build") == []


def test_an_allowed_warning_allows_its_indented_source_line_only():
    text = "/x/profiler.py:9: UserWarning: CUDA is not available\n  warn(\nother.py:1: FutureWarning: old\n  f(\n"
    (problem,) = output_checks.check_outputs(notebook(cell([stderr(text)], allow_stderr=["UserWarning: CUDA"])),
                                             "cpu-build")
    assert "FutureWarning: old" in problem
    long = "/root/.cache/envs/x" * 20 + "/lib/python3.12/site-packages/torch/profiler/profiler.py:9: UserWarning: y\n"
    (problem,) = output_checks.check_outputs(notebook(cell([stderr(long)])), "cpu-build")
    assert problem.endswith("…/torch/profiler/profiler.py:9: UserWarning: y"), "the report shows the warning itself"


@pytest.mark.parametrize("line", ["file.py:3: DeprecationWarning: use torch.amp", "E1201 05:00:00.000 7 a.cpp:48] x",
                                  "ERROR: gpuGetDeviceCount failed"])
def test_warning_and_log_lines_on_stdout_fail_but_ordinary_text_does_not(line):
    nb = notebook(cell([stdout(f"→ device: cpu\nRuntimeError: expected, shown on purpose\n{line}\n")]))
    (problem,) = output_checks.check_outputs(nb, "cpu-build")
    assert line in problem


def test_first_pass_stderr_counts_repeats_are_reported_once_and_identical_passes_keep_nothing():
    first = [stderr("UserWarning: shown once\n")]
    last = cell([stdout("ok\n")])
    first_cell = cell(first)
    keep_first_pass_streams([first_cell], [last])
    assert last.metadata["first_pass_streams"] == first
    (problem,) = output_checks.check_outputs(notebook(last), "cpu-build")
    assert "shown once" in problem
    twice = cell([stderr("W same\n")])
    twice.metadata["first_pass_streams"] = [stderr("W same\n")]
    assert len(output_checks.check_outputs(notebook(twice), "cpu-build")) == 1
    same, again = cell([stdout("a\n")]), cell([stdout("a\n")])
    keep_first_pass_streams([same], [again])
    keep_first_pass_streams([same], [same])
    assert "first_pass_streams" not in again.metadata and "first_pass_streams" not in same.metadata


def test_a_bad_kind_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        output_checks.check_outputs(notebook(), "gpu")


def test_a_notebook_file_read_as_plain_json_works_too(tmp_path):
    nb = notebook(cell([stdout("→ device: cpu\n"), stderr("W1201 x\n")], source="a\nb", **EXPECT))
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(raw["cells"][1]["source"], list)
    (problem,) = output_checks.check_outputs(raw, "cpu-build")
    assert "`a`" in problem and "W1201 x" in problem


@pytest.mark.parametrize("text, shown", [
    ("<lessons_lib.memory.meter.SavedTensorMeter object at 0x7f59f320bd10>\n", "object at 0x7f59f320bd10"),
    ("⚠️ N=64 chậm hơn (đến 2,185×)\n", "'2,185'"),
    ("1,857.5 mẫu/s\n", "'1,857.5'"),
    ("67,108,864 số\n", "'67,108,864'"),
])
def test_an_unreadable_repr_or_an_english_grouped_number_fails(text, shown):
    (problem,) = output_checks.check_outputs(notebook(cell([stdout(text)])), "cpu-build")
    assert shown in problem and ("printable form" in problem or "format_count" in problem)


@pytest.mark.parametrize("text", ["tensor([1, 2, 3])\n", "2 185×\n", "(64, 784)\n", "[1000, 2000]\n", "7.41 ms\n",
                                  "torch.Size([32, 512, 512])\n", "0.1,0.2\n", "SavedTensorMeter(live=163.00 KiB)\n"])
def test_readable_values_and_code_like_lists_pass(text):
    assert output_checks.check_outputs(notebook(cell([stdout(text)])), "cpu-build") == []
