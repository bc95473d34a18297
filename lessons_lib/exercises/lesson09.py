"""Lesson 09's checked tasks: name a profile's dominant op, pick ``num_workers`` from measurements; each
typical mistake (a ``record_function`` label, total time, call count, min, a strict >, an unsorted dict…)
gives a different answer on the checker's own profiles and cases."""

from __future__ import annotations

import contextlib
import operator
import os
import sys
import time
from types import SimpleNamespace

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from ._core import Attempt, Case, Exercise, Report, Wrong


@contextlib.contextmanager
def _quiet_fd2():
    """Hide what C++ libraries (Kineto's log lines) write straight to file descriptor 2."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real fd 2 here: nothing to hide
        yield
        return
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


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


#: What a wrong answer to "which op dominates" may be (`p`: the answer `got` for the profile `label`, its rows by
#: key, its aten ops and the `right` one).
DOMINANT_WRONGS = [
    Wrong("whole row", lambda p: hasattr(p.got, "key") and hasattr(p.got, "self_cpu_time_total"),
          "dominant_op trả về cả dòng của profiler; hãy trả về TÊN của nó: row.key (một chuỗi như 'aten::mm')."),
    Wrong("not a name", lambda p: not isinstance(p.got, str), lambda p: (
        f"dominant_op phải trả về tên phép (str), vd 'aten::mm', không phải {type(p.got).__name__}.")),
    Wrong("not a row", lambda p: p.got not in p.by_key, lambda p: (
        f"{p.label}: '{p.got if len(p.got) <= 60 else p.got[:57] + '...'}' không phải tên một dòng của profile; trả "
        "về row.key của dòng bạn chọn, không phải cả bảng hay một chuỗi tự gõ.")),
    Wrong("a label", lambda p: not p.got.startswith("aten::"), lambda p: (
        f"{p.label}: '{p.got}' là một nhãn record_function, không phải phép PyTorch. Self time của nhãn là thời gian "
        "Python chạy bên trong nhãn mà không nằm trong phép nào (ở đây: time.sleep). Chỉ xét các dòng có tên bắt "
        "đầu bằng 'aten::'.")),
    Wrong("cpu total", lambda p: p.got == max(p.ops, key=lambda r: r.cpu_time_total).key, lambda p: (
        f"{p.label}: '{p.got}' có CPU TOTAL lớn nhất, nhưng total gồm cả các phép con nó gọi (aten::linear gọi "
        "aten::matmul, rồi aten::matmul gọi aten::mm). Xếp theo self time: row.self_cpu_time_total. Đáp án của "
        f"profile này là '{p.right}'.")),
    Wrong("count", lambda p: p.by_key[p.got].count == max(r.count for r in p.ops), lambda p: (
        f"{p.label}: '{p.got}' được gọi NHIỀU LẦN nhất ({p.by_key[p.got].count} lần), nhưng không tốn nhiều thời "
        "gian nhất. Xếp theo row.self_cpu_time_total, không theo row.count.")),
    Wrong("min", lambda p: p.got == min(p.ops, key=lambda r: r.self_cpu_time_total).key, lambda p: (
        f"{p.label}: '{p.got}' là phép có self time NHỎ nhất; cần lớn nhất (max, không phải min).")),
    Wrong("other", lambda p: True, lambda p: (
        f"{p.label}: '{p.got}' chưa phải phép có self CPU time lớn nhất; đáp án là '{p.right}' "
        f"({p.by_key[p.right].self_cpu_time_total / 1e3:.2f} ms so với "
        f"{p.by_key[p.got].self_cpu_time_total / 1e3:.2f} ms).")),
]


def _evaluate_dominant(report: Report, dominant_op=None) -> None:
    report.require_function(dominant_op, "dominant_op(prof)")
    answers = []
    for label, make in (("profile 1", _profile_with_traps), ("profile 2", _profile_of_tiny_ops)):
        with _quiet_fd2():
            prof = make()
        got = report.call(f"dominant_op({label})", dominant_op, prof)
        report.require_return(got, "dominant_op")
        rows = prof.key_averages()
        ops = [row for row in rows if row.key.startswith("aten::")]
        pick = SimpleNamespace(label=label, got=got, ops=ops, by_key={row.key: row for row in rows},
                               right=max(ops, key=lambda r: r.self_cpu_time_total).key)
        if not (isinstance(got, str) and got == pick.right):
            report.diagnose(DOMINANT_WRONGS, pick)
        answers.append(got)
    report.success(f"đúng trên cả hai profile: một profile mà nhãn Python, CPU total và số lần gọi đều chỉ sai chỗ "
                   f"(đáp án {answers[0]}), và một profile toàn phép nhỏ (đáp án {answers[1]}).")


task1 = Exercise("task1", "Nhiệm vụ 1 · Phép nào tốn thời gian nhất?", _evaluate_dominant,
                 wrongs=DOMINANT_WRONGS, hints=[
    "prof.key_averages() là danh sách các dòng; mỗi dòng có row.key (tên), row.self_cpu_time_total (µs, "
    "không tính phép con), row.cpu_time_total (µs, tính cả phép con) và row.count (số lần gọi).",
    "Lọc: [r for r in prof.key_averages() if r.key.startswith('aten::')], rồi max(..., key=lambda r: "
    "r.self_cpu_time_total) và trả về .key của dòng đó.",
])

#: (loader samples/s by num_workers, step samples/s) → the fewest workers fast enough, else the fastest.
_WORKER_CASES = [Case(f"pick_num_workers({speeds}, {step:g})", (speeds, step), right) for speeds, step, right in [
    ({0: 400.0, 1: 800.0, 2: 1500.0, 4: 2900.0}, 1000.0, 2),
    ({0: 2000.0, 1: 3900.0, 2: 7000.0}, 1000.0, 0),          # already fast enough without workers
    ({0: 300.0, 1: 550.0, 2: 800.0}, 1000.0, 2),             # none fast enough
    ({2: 1500.0, 0: 400.0, 1: 800.0}, 700.0, 1),             # a dict not ordered by workers
    ({0: 500.0, 1: 1000.0, 2: 1900.0}, 1000.0, 1),           # exactly as fast as the step
]]


def _workers(value) -> int | None:
    """Return `value` as a number of workers (an int, not a bool), else None."""
    try:
        return None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        return None


def _said(a) -> str:
    return f"{a.case.label} = {a.got}"


#: A wrong answer, by what it is and by what the case it fails is about (``a.case.args`` is (loader_sps, step_sps)).
WORKER_WRONGS = [
    Wrong("none", lambda a: a.got is None, lambda a: (
        f"{a.case.label} trả về None. Khi không cấu hình nào đủ nhanh, vẫn phải chọn một: cấu hình nhanh nhất, "
        "max(loader_sps, key=loader_sps.get).")),
    Wrong("bool", lambda a: isinstance(a.got, bool), "pick_num_workers phải trả về SỐ worker (int), không phải "
                                                     "True/False."),
    Wrong("a speed", lambda a: isinstance(a.got, float) and a.got in a.case.args[0].values(), lambda a: (
        f"{a.case.label} trả về {a.got:g}: đó là TỐC ĐỘ (mẫu/s) của một cấu hình; hãy trả về SỐ worker của nó "
        "(khoá của dict).")),
    Wrong("not an int", lambda a: _workers(a.got) is None, lambda a: (
        f"pick_num_workers phải trả về một số nguyên (số worker), không phải {type(a.got).__name__}.")),
    Wrong("not measured", lambda a: a.got not in a.case.args[0], lambda a: (
        f"{_said(a)}: không có cấu hình {a.got} worker nào được đo; chọn một khoá của loader_sps.")),
    Wrong("already fast", lambda a: a.case.args[0][0] >= a.case.args[1], lambda a: (
        f"{_said(a)}: nhưng 0 worker đã đưa ra {a.case.args[0][0]:g} mẫu/s, hơn {a.case.args[1]:g} mẫu/s bước train "
        "tiêu thụ. Thêm worker không làm train nhanh hơn, chỉ tốn thêm tiến trình, RAM và thời gian khởi động: "
        "chọn số worker NHỎ NHẤT đủ nhanh.")),
    Wrong("none enough", lambda a: max(a.case.args[0].values()) < a.case.args[1], lambda a: (
        f"{_said(a)}: không cấu hình nào theo kịp {a.case.args[1]:g} mẫu/s, nên chọn cấu hình nhanh nhất "
        f"({a.case.want} worker) và ghi nhớ rằng loader là nút cổ chai (làm __getitem__ rẻ hơn, hoặc thêm CPU).")),
    Wrong("unordered", lambda a: list(a.case.args[0]) != sorted(a.case.args[0]), lambda a: (
        f"{_said(a)}: dict không xếp theo số worker ({list(a.case.args[0])}); duyệt sorted(loader_sps) để gặp số "
        f"worker nhỏ trước. Đáp án: {a.case.want}.")),
    Wrong("strict", lambda a: a.case.args[0][a.case.want] == a.case.args[1], lambda a: (
        f"{_said(a)}: với {a.case.want} worker loader đưa ra đúng {a.case.args[1]:g} mẫu/s = tốc độ bước train: "
        "vậy là đủ (so sánh bằng >=, không phải >).")),
    Wrong("too slow", lambda a: a.case.args[0][a.got] < a.case.args[1], lambda a: (
        f"{_said(a)}: với {a.got} worker loader chỉ đưa ra {a.case.args[0][a.got]:g} mẫu/s, ít hơn "
        f"{a.case.args[1]:g} mẫu/s bước train cần, nên GPU sẽ chờ dữ liệu. Đáp án: {a.case.want}.")),
    Wrong("not the fewest", lambda a: True, lambda a: (
        f"{_said(a)}: đủ nhanh, nhưng {a.case.want} worker cũng đủ nhanh và ít hơn: chọn số NHỎ NHẤT có "
        "loader_sps >= step_sps.")),
]


def _evaluate_workers(report: Report, pick_num_workers=None) -> None:
    report.require_function(pick_num_workers, "pick_num_workers(loader_sps, step_sps)")
    for case in _WORKER_CASES:
        speeds, step = case.args
        got = report.call(case.label, pick_num_workers, dict(speeds), step)  # a copy: the table stays as it is
        if got is None and case is _WORKER_CASES[0]:
            report.missing_part("pick_num_workers chưa trả về gì (thiếu return).", stop=True)
        if _workers(got) != case.want:
            report.diagnose(WORKER_WRONGS, Attempt(case, got, pick_num_workers, None))
    report.success("đúng ở cả năm trường hợp: ít worker nhất mà loader theo kịp bước train; không cấu hình nào kịp "
                   "thì chọn cấu hình nhanh nhất.")


task2 = Exercise("task2", "Nhiệm vụ 2 · Chọn num_workers từ số đo", _evaluate_workers,
                 wrongs=WORKER_WRONGS, hints=[
    "Duyệt số worker từ nhỏ đến lớn (sorted(loader_sps)); số đầu tiên có loader_sps[w] >= step_sps là đáp án.",
    "Nếu không số nào đủ nhanh, trả về số worker nhanh nhất: max(loader_sps, key=loader_sps.get).",
])
