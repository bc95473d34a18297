"""lessons_lib.profiling (the compact profile table, call counts, compare_timings) and plots.plot_trace."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from lessons_lib import profiling
from lessons_lib.plots import plot_trace


@pytest.fixture(scope="module")
def prof():
    """A real CPU profile: one label around a matmul and 30 cheap adds."""
    a = torch.randn(128, 128)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        with record_function("work"):
            a @ a
            for _ in range(30):
                a + 1
    return p


@pytest.fixture(scope="module")
def trace_file(prof, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    prof.export_chrome_trace(str(path))
    return path


def fake_row(key, self_cpu=0.0, cpu=0.0, self_dev=0.0, dev=0.0, count=1, device_type=DeviceType.CPU,
             annotation=False):
    return SimpleNamespace(key=key, self_cpu_time_total=self_cpu, cpu_time_total=cpu or self_cpu,
                           self_device_time_total=self_dev, device_time_total=dev or self_dev, count=count,
                           device_type=device_type, is_user_annotation=annotation)


# --------------------------------------------------------------------------- row kinds


@pytest.mark.parametrize(("name", "annotation", "kind"), [
    ("aten::mm", False, "op"),
    ("forward", True, "label"),
    ("ProfilerStep#3", False, "label"),
    ("Optimizer.step#Adam.step", False, "label"),
    ("cudaLaunchKernel", False, "runtime"),
    ("cudaStreamSynchronize", False, "runtime"),
    ("cuLaunchKernel", False, "runtime"),
    ("autograd::engine::evaluate_function: AddmmBackward0", False, "autograd"),
    ("AddmmBackward0", False, "autograd"),
    ("Memcpy HtoD (Pinned -> Device)", False, "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, ...>", False, "kernel"),
    ("ampere_sgemm_32x32_sliced1x4_tn", False, "kernel"),
    ("cutlass::Kernel2<...>", False, "kernel"),
    ("something else", False, "other"),
    ("work", None, "label"),             # torch < 2.5 has no is_user_annotation: a plain name is a label
    ("c10d::allreduce_", None, "other"),
    ("aten::mm", None, "op"),
])
def test_row_kind(name, annotation, kind):
    assert profiling.top_ops([fake_row(name, self_cpu=1.0, annotation=annotation)]).rows[0].kind == kind


# --------------------------------------------------------------------------- top_ops on a real profile


def test_top_ops_sorts_by_self_cpu_and_trims(prof):
    table = profiling.top_ops(prof, n=3)
    assert len(table.rows) == 3 and table.total_rows > 3
    times = [row.self_s for row in table.rows]
    assert times == sorted(times, reverse=True)
    assert all(0 < row.share <= 1 for row in table.rows)
    assert sum(row.share for row in table.rows) <= 1 + 1e-9
    every = {e.key: e for e in prof.key_averages()}
    top = table.rows[0]
    assert top.name == max(every.values(), key=lambda e: e.self_cpu_time_total).key
    assert top.self_s == pytest.approx(every[top.name].self_cpu_time_total / 1e6)
    assert top.calls == every[top.name].count
    assert top.per_call_s == pytest.approx(top.self_s / top.calls)


def test_top_ops_reads_key_averages_too_and_filters_kinds(prof):
    ops = profiling.top_ops(prof.key_averages(), n=50, kinds={"op"})
    assert ops.rows and all(row.name.startswith("aten::") for row in ops.rows)
    add = next(row for row in ops.rows if row.name == "aten::add")
    assert add.calls == 30 and add.kind == "op"
    labels = profiling.top_ops(prof, kinds="label")
    assert [row.name for row in labels.rows] == ["work"]


def test_top_ops_text_fits_a_cell_and_names_the_kinds(prof):
    text = str(profiling.top_ops(prof, n=4))
    lines = text.splitlines()
    assert lines[0].startswith("4/") and "self time CPU" in lines[0]
    assert len(lines) == 2 + 4 and max(map(len, lines)) < 100
    assert "(phép PyTorch)" in text
    assert not re.search(r"\d\.\d{3}\b|\d,\d", text)  # no 3-decimal or comma number that reads as thousands


def test_top_ops_groups_thousands_by_a_space_and_shortens_long_names():
    table = profiling.top_ops([fake_row("aten::mm", self_cpu=9074.3 * 15, count=15)])
    assert "9 074.3" in str(table) and "136.11" in str(table)
    long_name = "void at::native::" + "x" * 200
    line = str(profiling.top_ops([fake_row(long_name, self_cpu=5.0)])).splitlines()[-1]
    assert "…" in line and len(line) < 100


def test_top_ops_by_device_keeps_gpu_rows_only():
    rows = [
        fake_row("aten::mm", self_cpu=50.0, self_dev=30.0, dev=30.0),           # CPU op with its kernel's time
        fake_row("ampere_sgemm_64x64_nn", self_dev=30.0, device_type=DeviceType.CUDA),
        fake_row("Memcpy HtoD (Pageable -> Device)", self_dev=10.0, device_type=DeviceType.CUDA),
        fake_row("forward", self_dev=40.0, device_type=DeviceType.CUDA, annotation=True),  # GPU-side label
        fake_row("cudaLaunchKernel", self_cpu=20.0, count=4),
    ]
    table = profiling.top_ops(rows, by="device")
    assert [row.name for row in table.rows] == ["ampere_sgemm_64x64_nn", "Memcpy HtoD (Pageable -> Device)"]
    assert [row.kind for row in table.rows] == ["kernel", "copy"]
    assert table.total_self_s == pytest.approx(40e-6)  # as the table's "Self CUDA time total": no double count
    assert table.rows[0].share == pytest.approx(0.75)
    cpu = profiling.top_ops(rows)
    assert [row.name for row in cpu.rows] == ["aten::mm", "cudaLaunchKernel"]
    assert cpu.rows[1].kind == "runtime"


def test_top_ops_on_a_cpu_only_profile_by_device_is_empty_and_says_so(prof):
    table = profiling.top_ops(prof, by="device")
    assert table.rows == ()
    assert "Không có dòng nào" in str(table)


def test_count_calls(prof):
    assert profiling.count_calls(prof, "aten::add") == 30
    assert profiling.count_calls(prof, "cudaStreamSynchronize") == 0


# --------------------------------------------------------------------------- reading and drawing a trace


def test_plot_trace_draws_rows_per_nesting_level(trace_file):
    ax = plot_trace(trace_file, max_depth=1, title="t")
    assert ax.get_title() == "t"
    assert [t.get_text() for t in ax.get_yticklabels()][0].startswith("CPU ")
    rows = {round(c.get_paths()[0].vertices[:, 1].mean(), 1) for c in ax.collections}
    assert len(rows) == 2  # depth 0 (the label) and depth 1 (its ops)
    texts = [t.get_text() for t in ax.texts]
    assert "work" in texts  # the label spans the whole trace, so it is named on its bar
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "nhãn (record_function)" in legend and "phép PyTorch (CPU)" in legend


def test_plot_trace_puts_gpu_tracks_below_cpu(tmp_path):
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5.0, "dur": 10.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 20.0},
        {"ph": "X", "cat": "python_function", "name": "odd", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {}},  # metadata and the profiler's own
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e6},  # span
    ]}), encoding="utf-8")
    ax = plot_trace(path, max_depth=0)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["CPU 1", "GPU 0 · stream 7"]
    assert ax.get_xlim()[1] == pytest.approx(0.02 * 1.01)  # 20 µs from the first event: the long spans are left out
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "kernel GPU" in legend and "khác" in legend


# --------------------------------------------------------------------------- compare_timings


def _timing(*times, label=""):
    from lessons_lib.bench import Timing

    return Timing(tuple(times), "cpu", 2, 1, 1, label=label)


def test_compare_timings_calls_a_difference_only_beyond_the_noise():
    quiet = _timing(1.0, 1.01, 1.02, label="eager")
    assert profiling.compare_timings(quiet, _timing(0.5, 0.5, 0.51)).outcome == "faster"
    slower = profiling.compare_timings(quiet, _timing(1.33, 1.34, 1.35, label="compile"))
    assert slower.outcome == "slower" and "chậm hơn" in str(slower) and "0.75×" in str(slower)
    same = profiling.compare_timings(quiet, _timing(1.1, 1.05, 1.0))
    assert same.outcome == "same" and "ngang nhau" in str(same) and not same.notes()


def test_a_noisy_measurement_widens_the_band_and_says_so():
    noisy = _timing(1.0, 1.6, 1.7, 1.8, 6.0, label="eager")  # a typical repeat 1.7× the fastest
    cmp = profiling.compare_timings(noisy, _timing(1.1, 1.1, 1.1, label="compile"))
    assert cmp.factor == pytest.approx(1.7) and cmp.outcome == "same"  # 1.55× is inside that spread
    assert profiling.compare_timings(noisy, _timing(0.5, 0.5, 0.5)).outcome == "faster"
    assert cmp.notes() == ["eager: lần chậm nhất gấp 6.0× lần nhanh nhất (6.00 s so với 1.00 s, 5 lần đo)"]
    assert "⚠️" not in str(cmp)  # bench.measure printed the ⚠️ line already: each warning once
    unsure = str(profiling.compare_timings(noisy, _timing(0.5, 0.5, 0.5)))
    assert "nhanh hơn" in unsure and "chưa chắc" in unsure and "xem dòng ⚠️ ở trên" in unsure


def test_a_stalled_median_with_equal_fastest_repeats_is_not_a_difference():
    """Medians 4.59 vs 6.72 ms but fastest repeats 4.43 vs 4.61 ms, no ⚠️: "ngang nhau", not "chậm hơn 1.47×"."""
    eager = _timing(4.43e-3, 4.5e-3, 4.59e-3, 4.7e-3, 6.98e-3, label="eager")
    compiled = _timing(4.61e-3, 6.6e-3, 6.72e-3, 6.8e-3, 6.94e-3, label="torch.compile")
    cmp = profiling.compare_timings(eager, compiled)
    assert cmp.outcome == "same" and not cmp.notes()
    text = str(cmp)
    assert "ngang nhau" in text and "lần nhanh nhất 0.96×" in text and "chậm hơn" not in text
    assert profiling.compare_timings(eager, _timing(9e-3, 9.1e-3, 9.2e-3)).outcome == "slower"  # both agree


# (call on the fixtures, error, what the message must name): one row per argument check a lesson can reach
BAD_ARGUMENTS = {
    "top_ops n": (lambda f: profiling.top_ops(f.prof, n=0), ValueError, "n"),
    "top_ops n type": (lambda f: profiling.top_ops(f.prof, n="3"), TypeError, "n"),
    "top_ops by": (lambda f: profiling.top_ops(f.prof, by="gpu"), ValueError, "'cpu' hoặc 'device'"),
    "top_ops kinds": (lambda f: profiling.top_ops(f.prof, kinds={"op", "bogus"}), ValueError, "bogus"),
    "top_ops number": (lambda f: profiling.top_ops(42), TypeError, "torch.profiler.profile"),
    "top_ops list": (lambda f: profiling.top_ops([1, 2]), TypeError, "FunctionEventAvg"),
    "top_ops never entered": (lambda f: profiling.top_ops(profile(activities=[ProfilerActivity.CPU])), ValueError,
                              "chưa có kết quả"),
    "count_calls name": (lambda f: profiling.count_calls([], ""), TypeError, "name"),
    "trace path type": (lambda f: plot_trace([1, 2]), TypeError, "đường dẫn"),
    "trace missing": (lambda f: plot_trace(f.dir / "missing.json"), ValueError, "export_chrome_trace"),
    "trace not json": (lambda f: plot_trace(f.dir / "bad.json"), ValueError, "JSON"),
    "trace no events list": (lambda f: plot_trace(f.dir / "other.json"), ValueError, "traceEvents"),
    "trace empty": (lambda f: plot_trace(f.dir / "empty.json"), ValueError, "không có sự kiện"),
    "trace max_depth": (lambda f: plot_trace(f.trace, max_depth=-1), ValueError, "max_depth"),
    "compare number": (lambda f: profiling.compare_timings(1.0, _timing(1.0)), TypeError, "bench.measure"),
    "compare other": (lambda f: profiling.compare_timings(_timing(1.0), None), TypeError, "other"),
}


@pytest.mark.parametrize(("call", "error", "names"), BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS)
def test_bad_arguments_raise_and_say_what_to_pass(call, error, names, prof, trace_file, tmp_path):
    for name, text in (("bad", "{not json"), ("other", '{"foo": 1}'), ("empty", '{"traceEvents": []}')):
        (tmp_path / f"{name}.json").write_text(text, encoding="utf-8")
    with pytest.raises(error, match=names):
        call(SimpleNamespace(prof=prof, trace=trace_file, dir=tmp_path))
