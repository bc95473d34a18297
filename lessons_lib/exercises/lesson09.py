"""Lesson 09's checked tasks: name a profile's dominant op, pick ``num_workers`` from measurements; each
typical mistake (a ``record_function`` label, total time, call count, min, a strict >, an unsorted dict…)
gives a different answer on the checker's own profiles and cases."""

from __future__ import annotations

import contextlib
import operator
import os
import sys
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from ._core import Exercise, Report

GROUP = "lesson09"  # the exercise group (tools/grade.py reads it)


@contextlib.contextmanager
def _quiet_fd2():
    """Hide what C++ libraries (Kineto's log lines) write straight to file descriptor 2."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real fd 2 here: nothing to hide
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _profile_with_traps():
    """Record a profile dominated by aten::mm, with a label whose sleep (2× the work) has the largest self time."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(384, 384, generator=gen)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = nn.Linear(384, 384, bias=False)
    with torch.no_grad():
        layer(a), a[:1] + a[:1]                     # warm-up: first calls pay one-off set-up costs
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        with record_function("model"):
            for _ in range(4):
                layer(a)                           # aten::linear → aten::matmul → aten::mm (the real work)
            for _ in range(40):
                a[:1] + a[:1]                      # many cheap calls: aten::slice, aten::add
        work_s = time.perf_counter() - start
        with record_function("python_wait"):
            time.sleep(max(0.05, 2 * work_s))      # Python time, no PyTorch op: a label with a big self time
    return prof


def _profile_of_tiny_ops():
    """Record a profile dominated by 3000 tiny aten::add calls next to one small matmul (32×32)."""
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(32, 32, generator=gen), torch.randn(32, 32, generator=gen)
    x @ w, x + x                                    # warm-up
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        x @ w
        for _ in range(3000):
            x + x
    return prof


def _evaluate_dominant(report: Report, dominant_op=None) -> None:
    report.require_function(dominant_op, "dominant_op(prof)")
    answers = []
    for label, make in (("profile 1", _profile_with_traps), ("profile 2", _profile_of_tiny_ops)):
        with _quiet_fd2():
            prof = make()
        rows = prof.key_averages()
        ops = [row for row in rows if row.key.startswith("aten::")]
        right = max(ops, key=lambda r: r.self_cpu_time_total).key
        got = report.call(f"dominant_op({label})", dominant_op, prof)
        report.require_return(got, "dominant_op")
        if hasattr(got, "key") and hasattr(got, "self_cpu_time_total"):
            report.problem("dominant_op trả về cả dòng của profiler; hãy trả về TÊN của nó: row.key (một chuỗi "
                           "như 'aten::mm').", stop=True)
        if not isinstance(got, str):
            report.problem(f"dominant_op phải trả về tên phép (str), vd 'aten::mm', không phải {type(got).__name__}.",
                           stop=True)
        if got == right:
            answers.append(right)
            continue
        by_key = {row.key: row for row in rows}
        if got not in by_key:
            short = got if len(got) <= 60 else got[:57] + "..."
            report.problem(f"{label}: '{short}' không phải tên một dòng của profile; trả về row.key của dòng "
                           "bạn chọn, không phải cả bảng hay một chuỗi tự gõ.", stop=True)
        row = by_key[got]
        if not got.startswith("aten::"):
            report.problem(f"{label}: '{got}' là một nhãn record_function, không phải phép PyTorch. Self time của nhãn "
                           "là thời gian Python chạy bên trong nhãn mà không nằm trong phép nào (ở đây: time.sleep). "
                           "Chỉ xét các dòng có tên bắt đầu bằng 'aten::'.", stop=True)
        report.first([
            (got == max(ops, key=lambda r: r.cpu_time_total).key,
             f"{label}: '{got}' có CPU TOTAL lớn nhất, nhưng total gồm cả các phép con nó gọi (aten::linear gọi "
             "aten::matmul, rồi aten::matmul gọi aten::mm). Xếp theo self time: row.self_cpu_time_total. "
             f"Đáp án của profile này là '{right}'."),
            (row.count == max(r.count for r in ops),
             f"{label}: '{got}' được gọi NHIỀU LẦN nhất ({row.count} lần), nhưng không tốn nhiều thời gian nhất. "
             "Xếp theo row.self_cpu_time_total, không theo row.count."),
            (got == min(ops, key=lambda r: r.self_cpu_time_total).key,
             f"{label}: '{got}' là phép có self time NHỎ nhất; cần lớn nhất (max, không phải min)."),
            (True, f"{label}: '{got}' chưa phải phép có self CPU time lớn nhất; đáp án là '{right}' "
                   f"({by_key[right].self_cpu_time_total / 1e3:.2f} ms so với "
                   f"{row.self_cpu_time_total / 1e3:.2f} ms)."),
        ])
    report.success(f"đúng trên cả hai profile: một profile mà nhãn Python, CPU total và số lần gọi đều chỉ sai chỗ "
                   f"(đáp án {answers[0]}), và một profile toàn phép nhỏ (đáp án {answers[1]}).")


task1 = Exercise("task1", "Nhiệm vụ 1 · Phép nào tốn thời gian nhất?", _evaluate_dominant,
                 group=GROUP, hints=[
    "prof.key_averages() là danh sách các dòng; mỗi dòng có row.key (tên), row.self_cpu_time_total (µs, "
    "không tính phép con), row.cpu_time_total (µs, tính cả phép con) và row.count (số lần gọi).",
    "Lọc: [r for r in prof.key_averages() if r.key.startswith('aten::')], rồi max(..., key=lambda r: "
    "r.self_cpu_time_total) và trả về .key của dòng đó.",
])

#: (loader samples/s by num_workers, step samples/s, right answer, what the case is about).
_WORKER_CASES = (
    ({0: 400.0, 1: 800.0, 2: 1500.0, 4: 2900.0}, 1000.0, 2, "needs-workers"),
    ({0: 2000.0, 1: 3900.0, 2: 7000.0}, 1000.0, 0, "already-fast"),
    ({0: 300.0, 1: 550.0, 2: 800.0}, 1000.0, 2, "none-enough"),
    ({2: 1500.0, 0: 400.0, 1: 800.0}, 700.0, 1, "unordered"),
    ({0: 500.0, 1: 1000.0, 2: 1900.0}, 1000.0, 1, "equal"),
)


def _evaluate_workers(report: Report, pick_num_workers=None) -> None:
    report.require_function(pick_num_workers, "pick_num_workers(loader_sps, step_sps)")
    for number, (loader_sps, step_sps, right, case) in enumerate(_WORKER_CASES):
        shown = dict(loader_sps)
        got = report.call(f"pick_num_workers({shown}, {step_sps:g})", pick_num_workers, dict(loader_sps), step_sps)
        if got is None and number == 0:
            report.missing_part("pick_num_workers chưa trả về gì (thiếu return).", stop=True)
        if got is None:
            report.problem(f"pick_num_workers({shown}, {step_sps:g}) trả về None. Khi không cấu hình nào đủ nhanh, "
                           "vẫn phải chọn một: cấu hình nhanh nhất, max(loader_sps, key=loader_sps.get).",
                           stop=True)
        if isinstance(got, bool):
            report.problem("pick_num_workers phải trả về SỐ worker (int), không phải True/False.", stop=True)
        try:
            value = operator.index(got)
        except TypeError:
            value = None
        if value is None and isinstance(got, float) and got in loader_sps.values():
            report.problem(f"pick_num_workers({shown}, {step_sps:g}) trả về {got:g}: đó là TỐC ĐỘ (mẫu/s) của "
                           "một cấu hình; hãy trả về SỐ worker của nó (khoá của dict).", stop=True)
        if value is None:
            report.problem(f"pick_num_workers phải trả về một số nguyên (số worker), không phải {type(got).__name__}.",
                           stop=True)
        if value == right:
            continue
        case_text = f"pick_num_workers({shown}, {step_sps:g}) = {value}"
        if value not in loader_sps:
            report.problem(f"{case_text}: không có cấu hình {value} worker nào được đo; chọn một khoá của loader_sps.",
                           stop=True)
        report.first([
            (case == "already-fast",
             f"{case_text}: nhưng 0 worker đã đưa ra {loader_sps[0]:g} mẫu/s, hơn {step_sps:g} mẫu/s bước train tiêu "
             "thụ. Thêm worker không làm train nhanh hơn, chỉ tốn thêm tiến trình, RAM và thời gian khởi động: chọn "
             "số worker NHỎ NHẤT đủ nhanh."),
            (case == "none-enough",
             f"{case_text}: không cấu hình nào theo kịp {step_sps:g} mẫu/s, nên chọn cấu hình nhanh nhất ({right} "
             "worker) và ghi nhớ rằng loader là nút cổ chai (làm __getitem__ rẻ hơn, hoặc thêm CPU)."),
            (case == "unordered",
             f"{case_text}: dict không xếp theo số worker ({list(loader_sps)}); duyệt sorted(loader_sps) để gặp số "
             f"worker nhỏ trước. Đáp án: {right}."),
            (case == "equal",
             f"{case_text}: với {right} worker loader đưa ra đúng {loader_sps[right]:g} mẫu/s = tốc độ bước train: "
             "vậy là đủ (so sánh bằng >=, không phải >)."),
            (loader_sps[value] < step_sps,
             f"{case_text}: với {value} worker loader chỉ đưa ra {loader_sps[value]:g} mẫu/s, ít hơn {step_sps:g} "
             f"mẫu/s bước train cần, nên GPU sẽ chờ dữ liệu. Đáp án: {right}."),
            (True, f"{case_text}: đủ nhanh, nhưng {right} worker cũng đủ nhanh và ít hơn: chọn số NHỎ NHẤT có "
                   "loader_sps >= step_sps."),
        ])
    report.success("đúng ở cả năm trường hợp: ít worker nhất mà loader theo kịp bước train; không cấu hình nào kịp "
                   "thì chọn cấu hình nhanh nhất.")


task2 = Exercise("task2", "Nhiệm vụ 2 · Chọn num_workers từ số đo", _evaluate_workers, group=GROUP, hints=[
    "Duyệt số worker từ nhỏ đến lớn (sorted(loader_sps)); số đầu tiên có loader_sps[w] >= step_sps là đáp án.",
    "Nếu không số nào đủ nhanh, trả về số worker nhanh nhất: max(loader_sps, key=loader_sps.get).",
])
