"""Exercise 2: time a matmul correctly (warm-up, synchronize, median), compute GFLOP/s, explain small-matrix losses.

The timer check needs no GPU: it hands the learner's ``time_it`` a fake "GPU" whose work is queued
asynchronously (``fn()`` returns at once, ``sync()`` waits for the queued work), whose first call is slow
(like cuBLAS loading) and one of whose calls is disturbed. Only a timer that warms up, synchronizes before
reading the clock and reports the median gets the true per-call time.
"""

from __future__ import annotations

import math
import re
import time

from ._core import Exercise, Report, is_blank, number

# The fake GPU: seconds of queued work per call, extra on the first call, one disturbed call.
WORK_S, FIRST_EXTRA_S, OUTLIER_S, OUTLIER_CALL, REPEATS = 0.02, 0.08, 0.2, 3, 5


class FakeGpu:
    """A stand-in for an asynchronous GPU: `run` queues work and returns at once, `sync` waits for it."""

    def __init__(self, work_s: float = WORK_S, first_extra_s: float = FIRST_EXTRA_S, outlier_s: float = OUTLIER_S,
                 outlier_call: int = OUTLIER_CALL):
        self.work_s, self.first_extra_s, self.outlier_s, self.outlier_call = work_s, first_extra_s, outlier_s, outlier_call
        self.pending = 0.0
        self.calls = 0
        self.syncs = 0

    def run(self) -> None:
        """Queue one call's work (returns immediately, as a CUDA kernel launch does)."""
        self.calls += 1
        cost = self.work_s
        if self.calls == 1:
            cost += self.first_extra_s
        if self.calls == self.outlier_call:
            cost += self.outlier_s
        self.pending += cost

    def sync(self) -> None:
        """Wait until the queued work is done (as torch.cuda.synchronize() does)."""
        self.syncs += 1
        if self.pending > 0:
            time.sleep(self.pending)
        self.pending = 0.0


def _evaluate_timer(report: Report, time_it=None) -> None:
    report.require_function(time_it, "time_it(fn, sync, repeats=5)")
    gpu = FakeGpu()
    try:
        result = time_it(gpu.run, gpu.sync, repeats=REPEATS)
    except TypeError as exc:
        report.problem(f"gọi time_it(fn, sync, repeats=5) báo TypeError ({exc}). Hàm cần đúng ba tham số: "
                       "fn (việc cần đo), sync (hàm chờ GPU xong), repeats (số lần đo).",
                       f"calling time_it(fn, sync, repeats=5) raised TypeError ({exc}). The function needs exactly "
                       "fn (the work), sync (waits for the GPU), repeats (how many timings).", stop=True)
    except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
        report.error("time_it", exc)
    if result is None:
        report.missing_part("time_it chưa trả về gì (thiếu return).", "time_it returns nothing yet (no return).",
                            stop=True)
    if isinstance(result, (list, tuple)):
        report.problem("time_it trả về cả danh sách; hãy trả về MỘT số: trung vị, statistics.median(times).",
                       "time_it returns a whole list; return ONE number: the median, statistics.median(times).",
                       stop=True)
    seconds = number(result)
    if seconds is None:
        report.problem(f"time_it phải trả về số giây (float), không phải {type(result).__name__}.",
                       f"time_it must return seconds (a float), not {type(result).__name__}.", stop=True)
    timed_calls = REPEATS
    if gpu.calls < timed_calls:
        report.problem(f"fn chỉ được gọi {gpu.calls} lần; cần gọi ít nhất repeats={REPEATS} lần có đo (và thêm lần warm-up).",
                       f"fn was called only {gpu.calls} times; it needs repeats={REPEATS} timed calls (plus warm-up).")
    elif gpu.calls == timed_calls:
        report.problem("thiếu warm-up: gọi fn() một lần TRƯỚC khi đo (lần đầu trên GPU chậm vì nạp cuBLAS, "
                       "chọn kernel, cấp bộ nhớ).",
                       "no warm-up: call fn() once BEFORE timing (the first GPU call is slow: cuBLAS loading, "
                       "kernel selection, memory allocation).")
    if gpu.syncs == 0:
        report.problem("không gọi sync() lần nào: trên GPU, fn() chỉ XẾP HÀNG kernel rồi trả về ngay, nên đồng hồ "
                       "chỉ đo thời gian xếp hàng. Gọi sync() trước khi bấm giờ và trước khi dừng giờ.",
                       "sync() is never called: on a GPU, fn() only QUEUES kernels and returns at once, so the clock "
                       "measures the queueing. Call sync() before starting and before stopping the clock.")
    elif seconds < 0.4 * WORK_S:
        report.problem(f"đo được {seconds * 1e3:.2f} ms/lần trong khi mỗi lần thật mất {WORK_S * 1e3:.0f} ms: đồng hồ "
                       "dừng TRƯỚC khi GPU làm xong. Gọi sync() ngay sau fn() rồi mới đọc time.perf_counter().",
                       f"measured {seconds * 1e3:.2f} ms/call while each call really takes {WORK_S * 1e3:.0f} ms: the "
                       "clock stops BEFORE the GPU is done. Call sync() right after fn(), then read time.perf_counter().")
    elif 0.4 * WORK_S * 1e3 <= seconds <= 3 * WORK_S * 1e3:
        report.problem(f"time_it trả về {seconds:.1f}, có vẻ là mili-giây: hãy trả về giây (time.perf_counter() đo giây).",
                       f"time_it returned {seconds:.1f}, which looks like milliseconds: return seconds "
                       "(time.perf_counter() measures seconds).")
    elif seconds > 2 * WORK_S:
        mean = (REPEATS * WORK_S + OUTLIER_S) / REPEATS
        report.problem(f"đo được {seconds * 1e3:.0f} ms/lần, thật ra mỗi lần mất {WORK_S * 1e3:.0f} ms. Một lần đo bị "
                       f"chen ngang (chậm hơn {OUTLIER_S * 1e3:.0f} ms) kéo cả kết quả lên (trung bình ≈ "
                       f"{mean * 1e3:.0f} ms): đo TỪNG lần riêng và trả về trung vị statistics.median(times), "
                       "đừng chia tổng thời gian cho số lần.",
                       f"measured {seconds * 1e3:.0f} ms/call, really {WORK_S * 1e3:.0f} ms. One disturbed call "
                       f"({OUTLIER_S * 1e3:.0f} ms slower) drags the result up (mean ≈ {mean * 1e3:.0f} ms): time EACH "
                       "call and return the median statistics.median(times), not total time / count.")
    if report.problems:
        return
    report.success(f"warm-up, sync và trung vị đều đúng: đo được {seconds * 1e3:.1f} ms/lần trên một 'GPU giả' "
                   f"mỗi lần mất {WORK_S * 1e3:.0f} ms (kể cả khi một lần bị chen ngang).",
                   f"warm-up, sync and median all right: measured {seconds * 1e3:.1f} ms/call on a 'fake GPU' whose "
                   f"calls take {WORK_S * 1e3:.0f} ms each (even with one disturbed call).")


ex2a = Exercise(
    "ex2a",
    ("Bài 2a · Hàm đo thời gian đúng cách", "Exercise 2a · A correct timer"),
    _evaluate_timer,
    hints=[
        ("Ba bước: (1) gọi fn() một lần để warm-up rồi sync(); (2) lặp repeats lần: sync(), bấm giờ, fn(), sync(), "
         "dừng giờ; (3) trả về trung vị của các lần đo.",
         "Three steps: (1) call fn() once to warm up, then sync(); (2) repeat: sync(), start the clock, fn(), "
         "sync(), stop the clock; (3) return the median of the timings."),
        ("Dùng time.perf_counter() (không phải time.time()) và statistics.median(times). "
         "Trên CPU truyền sync=lambda: None; trên GPU truyền sync=torch.cuda.synchronize.",
         "Use time.perf_counter() (not time.time()) and statistics.median(times). "
         "On the CPU pass sync=lambda: None; on a GPU pass sync=torch.cuda.synchronize."),
    ],
    solution='''
import statistics, time

def time_it(fn, sync, repeats=5):
    fn()                                   # warm-up: lần đầu luôn chậm hơn
    sync()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()                             # chờ GPU làm xong rồi mới dừng đồng hồ
        times.append(time.perf_counter() - start)
    return statistics.median(times)
''',
)


# --------------------------------------------------------------------------- 2b: GFLOP/s

_GFLOPS_CASES = ((1024, 0.5), (500, 0.002), (2048, 1.25))


def _evaluate_gflops(report: Report, gflops=None) -> None:
    report.require_function(gflops, "gflops(n, seconds)")
    for n, seconds in _GFLOPS_CASES:
        got = report.call(f"gflops({n}, {seconds})", gflops, n, seconds)
        if got is None:
            report.missing_part("gflops chưa trả về gì (thiếu return).", "gflops returns nothing yet (no return).",
                                stop=True)
        value = number(got)
        right = 2 * n**3 / seconds / 1e9
        if value is None:
            report.problem(f"gflops({n}, {seconds}) phải trả về một số, không phải {type(got).__name__}.",
                           f"gflops({n}, {seconds}) must return a number, not {type(got).__name__}.", stop=True)
        if math.isclose(value, right, rel_tol=1e-6):
            continue
        ratio = value / right if right else float("nan")
        if math.isclose(ratio, 0.5, rel_tol=1e-6):
            why = ("thiếu hệ số 2: mỗi phần tử kết quả cần N phép nhân VÀ N phép cộng, tổng 2·N³ FLOP.",
                   "the factor 2 is missing: each output element needs N multiplies AND N adds, 2·N³ FLOP in all.")
        elif math.isclose(ratio, 1e9, rel_tol=1e-6) or math.isclose(ratio, 0.5e9, rel_tol=1e-6):
            why = ("quên chia cho 1e9: kết quả phải tính bằng GFLOP/s (tỷ phép tính mỗi giây).",
                   "you forgot to divide by 1e9: the result is in GFLOP/s (billions of operations per second).")
        elif math.isclose(value, 2 * n**2 / seconds / 1e9, rel_tol=1e-6):
            why = ("N² là số phần tử của kết quả; số phép tính là 2·N³.",
                   "N² is the number of output elements; the operation count is 2·N³.")
        elif math.isclose(ratio, 1e-3, rel_tol=1e-6) or math.isclose(ratio, 1e3, rel_tol=1e-6):
            why = ("lệch 1000 lần: seconds là giây, không phải mili-giây.",
                   "off by 1000: seconds are seconds, not milliseconds.")
        else:
            why = (f"gflops({n}, {seconds}) = {value:.4g}, đúng phải là 2·{n}³ / {seconds} / 1e9 = {right:.4g}.",
                   f"gflops({n}, {seconds}) = {value:.4g}, should be 2·{n}³ / {seconds} / 1e9 = {right:.4g}.")
        report.problem(*why, stop=True)
    report.success("gflops(n, seconds) = 2·n³ / seconds / 1e9 đúng với mọi trường hợp thử.",
                   "gflops(n, seconds) = 2·n³ / seconds / 1e9 is right on every test case.")


ex2b = Exercise(
    "ex2b",
    ("Bài 2b · Tốc độ tính bằng GFLOP/s", "Exercise 2b · Speed in GFLOP/s"),
    _evaluate_gflops,
    hints=[
        ("Nhân hai ma trận N×N: N² phần tử kết quả, mỗi phần tử cần N phép nhân và N phép cộng.",
         "An N×N matmul: N² output elements, each needing N multiplies and N adds."),
        ("gflops = 2 * n**3 / seconds / 1e9", "gflops = 2 * n**3 / seconds / 1e9"),
    ],
    solution='''
def gflops(n, seconds):
    return 2 * n**3 / seconds / 1e9        # 2·N³ phép tính, đổi ra tỷ phép/giây
''',
)


# --------------------------------------------------------------------------- 2c: why can a small matmul lose on a GPU?

#: The statements learners judge, as (vi, en) pairs; the notebook lists them with these letters.
WHY_OPTIONS = {
    "A": ("Mỗi lần chạy một phép trên GPU có chi phí cố định (Python → dispatcher → khởi chạy kernel, đồng bộ), cỡ "
          "vài micro-giây; N=64 chỉ có khoảng 0,5 triệu phép tính nên chi phí cố định chiếm gần hết thời gian.",
          "Every GPU op has a fixed cost (Python → dispatcher → kernel launch, synchronization) of a few microseconds; "
          "N=64 is only about 0.5 million operations, so the fixed cost is nearly all of the time."),
    "B": ("GPU tính sai với ma trận nhỏ nên phải tính lại.",
          "The GPU computes small matrices wrongly and has to redo them."),
    "C": ("Ma trận nhỏ không đủ việc để lấp đầy hàng nghìn lõi của GPU, trong khi CPU xử lý ma trận nhỏ nằm gọn "
          "trong cache rất hiệu quả.",
          "A small matrix is not enough work to fill the GPU's thousands of cores, while the CPU handles a small "
          "matrix that fits in its cache very efficiently."),
    "D": ("Nếu tính cả việc chép a, b từ RAM sang VRAM và chép kết quả về, thời gian chép có thể lớn hơn thời gian tính.",
          "Counting the copies of a, b from RAM to VRAM and of the result back, copying can take longer than computing."),
    "E": ("GPU luôn chậm hơn CPU với float32; chỉ nhanh hơn với float16.",
          "GPUs are always slower than CPUs in float32 and only faster in float16."),
}
WHY_RIGHT = frozenset({"A", "C", "D"})
_WHY_WRONG = {
    "B": ("B sai: GPU tính đúng ở mọi kích thước (sai khác chỉ ở mức làm tròn, như CPU).",
          "B is wrong: the GPU is correct at every size (differences are rounding, as on the CPU)."),
    "E": ("E sai: với N lớn, GPU nhanh hơn CPU nhiều lần ngay cả ở float32; float16/bf16 chỉ làm khoảng cách lớn thêm.",
          "E is wrong: for large N the GPU is many times faster even in float32; float16/bf16 only widen the gap."),
}
_WHY_MISSED = {
    "A": ("bạn bỏ sót A: chi phí cố định mỗi lần gọi kernel (launch, đồng bộ) không phụ thuộc N.",
          "you left out A: the fixed cost per kernel call (launch, synchronization) does not depend on N."),
    "C": ("bạn bỏ sót C: ma trận nhỏ không đủ việc cho mọi lõi GPU, còn CPU làm tốt trong cache.",
          "you left out C: a small matrix does not keep every GPU core busy, and the CPU does it well in cache."),
    "D": ("bạn bỏ sót D: chép dữ liệu CPU ↔ GPU cũng tốn thời gian và dễ vượt phần tính.",
          "you left out D: copying data CPU ↔ GPU takes time too and can exceed the compute."),
}


def parse_letters(answer: object) -> set[str] | None:
    """Return the option letters in an answer like {"A", "C"}, ["a", "c"] or "A, C"; None if unreadable."""
    if isinstance(answer, str):
        letters = re.findall(r"[A-Za-z]", answer)
    elif isinstance(answer, (set, frozenset, list, tuple)) and all(isinstance(a, str) for a in answer):
        letters = [a.strip() for a in answer]
    else:
        return None
    if not all(len(a) == 1 for a in letters):
        return None
    return {a.upper() for a in letters}


def _evaluate_why(report: Report, answer=None) -> None:
    letters = parse_letters(answer)
    if is_blank(answer) or letters == set():
        report.missing_part("chưa chọn phương án nào.", "no option chosen yet.", stop=True)
    if letters is None:
        report.problem(f"hãy trả lời bằng các chữ cái, vd {{'A', 'C'}} hoặc \"A, C\", không phải {answer!r}.",
                       f"answer with letters, e.g. {{'A', 'C'}} or \"A, C\", not {answer!r}.", stop=True)
    unknown = sorted(letters - set(WHY_OPTIONS))
    if unknown:
        report.problem(f"không có phương án {', '.join(unknown)}; chọn trong {', '.join(WHY_OPTIONS)}.",
                       f"there is no option {', '.join(unknown)}; choose among {', '.join(WHY_OPTIONS)}.", stop=True)
    for letter in sorted(letters - WHY_RIGHT):
        report.problem(*_WHY_WRONG[letter])
    for letter in sorted(WHY_RIGHT - letters):
        report.problem(*_WHY_MISSED[letter])
    report.success("A, C, D: chi phí cố định mỗi lần gọi, không đủ việc để lấp đầy GPU, và chi phí chép dữ liệu. "
                   "Với N lớn, phần tính (2·N³) lấn át cả ba, nên GPU thắng.",
                   "A, C, D: the fixed cost per call, too little work to fill the GPU, and the copy cost. For large N "
                   "the compute (2·N³) dwarfs all three, so the GPU wins.")


ex2c = Exercise(
    "ex2c",
    ("Bài 2c · Vì sao ma trận nhỏ có thể thua trên GPU?", "Exercise 2c · Why can a small matmul lose on a GPU?"),
    _evaluate_why,
    hints=[
        ("Có ba phát biểu đúng. Nghĩ về: chi phí không phụ thuộc N, số lõi GPU, và dữ liệu đang nằm ở đâu.",
         "Three statements are right. Think about: costs that do not depend on N, the number of GPU cores, and "
         "where the data lives."),
        ("GPU không tính sai, và không chậm hơn CPU ở float32 khi N lớn.",
         "The GPU does not compute wrongly, and is not slower than the CPU in float32 for large N."),
    ],
    solution='''
why_small = {"A", "C", "D"}
''',
)
