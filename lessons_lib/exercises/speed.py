"""Exercise 2: time a call correctly (warm-up, sync, median), GFLOP/s, why a small matmul can lose on a GPU.

``time_it`` gets a fake asynchronous "GPU" with a slow first call and one disturbed call.
"""

from __future__ import annotations

import math
import re
import time
from unittest import mock

from ._core import Exercise, Report, is_blank, number

# The fake GPU: seconds of queued work per call, extra on the first call, one disturbed call.
WORK_S, FIRST_EXTRA_S, OUTLIER_S, OUTLIER_CALL, REPEATS = 0.02, 0.08, 0.2, 3, 5


class _FakeGpu:
    """A stand-in for an asynchronous GPU: `run` queues work and returns at once, `sync` waits for it."""

    def __init__(self) -> None:
        self.pending, self.calls, self.syncs = 0.0, 0, 0
        self.clock = 0.0  # what the learner's clock reads while checking: only the fake work advances it

    def now(self) -> float:
        return self.clock

    def run(self) -> None:
        """Queue one call's work (returns immediately, as a CUDA kernel launch does)."""
        self.calls += 1
        self.pending += WORK_S + FIRST_EXTRA_S * (self.calls == 1) + OUTLIER_S * (self.calls == OUTLIER_CALL)

    def sync(self) -> None:
        """Wait until the queued work is done (as torch.cuda.synchronize() does)."""
        self.syncs += 1
        self.clock += self.pending
        time.sleep(self.pending)  # real time too, at least: a learner's own clock still sees the work
        self.pending = 0.0


def _timing_problem(gpu: _FakeGpu, seconds: float) -> str | None:
    if gpu.syncs == 0:
        return ("không gọi sync() lần nào: trên GPU, fn() chỉ XẾP HÀNG kernel rồi trả về ngay, nên đồng hồ "
                "chỉ đo thời gian xếp hàng. Gọi sync() trước khi bấm giờ và trước khi dừng giờ.")
    if seconds < 0.4 * WORK_S:
        return (f"đo được {seconds * 1e3:.2f} ms/lần trong khi mỗi lần thật mất {WORK_S * 1e3:.0f} ms: đồng hồ "
                "dừng TRƯỚC khi GPU làm xong. Gọi sync() ngay sau fn() rồi mới đọc time.perf_counter().")
    if 0.4 * WORK_S * 1e3 <= seconds <= 3 * WORK_S * 1e3:
        return f"time_it trả về {seconds:.1f}, có vẻ là mili-giây: hãy trả về giây (time.perf_counter() đo giây)."
    if seconds > 2 * WORK_S:
        mean = (REPEATS * WORK_S + OUTLIER_S) / REPEATS
        return (f"đo được {seconds * 1e3:.0f} ms/lần, thật ra mỗi lần mất {WORK_S * 1e3:.0f} ms. Một lần đo bị "
                f"chen ngang (chậm hơn {OUTLIER_S * 1e3:.0f} ms) kéo cả kết quả lên (trung bình ≈ "
                f"{mean * 1e3:.0f} ms): đo TỪNG lần riêng và trả về trung vị statistics.median(times), "
                "đừng chia tổng thời gian cho số lần.")
    return None


def _evaluate_timer(report: Report, time_it=None) -> None:
    report.require_function(time_it, "time_it(fn, sync, repeats=5)")
    gpu = _FakeGpu()
    try:
        # The learner's clock reads the fake GPU's time, so a busy machine cannot make a right answer look wrong.
        with mock.patch.multiple(time, perf_counter=gpu.now, monotonic=gpu.now, time=gpu.now):
            result = time_it(gpu.run, gpu.sync, repeats=REPEATS)
    except TypeError as exc:
        report.problem(f"gọi time_it(fn, sync, repeats=5) báo TypeError ({exc}). Hàm cần đúng ba tham số: "
                       "fn (việc cần đo), sync (hàm chờ GPU xong), repeats (số lần đo).", stop=True)
    except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
        report.error("time_it", exc)
    report.require_return(result, "time_it")
    if isinstance(result, (list, tuple)):
        report.problem("time_it trả về cả danh sách; hãy trả về MỘT số: trung vị, statistics.median(times).",
                       stop=True)
    seconds = number(result)
    if seconds is None:
        report.problem(f"time_it phải trả về số giây (float), không phải {type(result).__name__}.", stop=True)
    if gpu.calls < REPEATS:
        report.problem(f"fn chỉ được gọi {gpu.calls} lần; cần gọi ít nhất repeats={REPEATS} lần có đo "
                       "(và thêm lần warm-up).")
    elif gpu.calls == REPEATS:
        report.problem("thiếu warm-up: gọi fn() một lần TRƯỚC khi đo (lần đầu trên GPU chậm vì nạp cuBLAS, "
                       "chọn kernel, cấp bộ nhớ).")
    if timing := _timing_problem(gpu, seconds):
        report.problem(timing)
    report.success(f"warm-up, sync và trung vị đều đúng: đo được {seconds * 1e3:.1f} ms/lần trên một 'GPU giả' "
                   f"mỗi lần mất {WORK_S * 1e3:.0f} ms (kể cả khi một lần bị chen ngang).")


ex2a = Exercise(
    "ex2a", "Bài 2a · Hàm đo thời gian đúng cách", _evaluate_timer,
    hints=[
        "Ba bước: (1) gọi fn() một lần để warm-up rồi sync(); (2) lặp repeats lần: sync(), bấm giờ, fn(), sync(), "
        "dừng giờ; (3) trả về trung vị của các lần đo.",
        "Dùng time.perf_counter() (không phải time.time()) và statistics.median(times). "
        "Trên CPU truyền sync=lambda: None; trên GPU truyền sync=torch.cuda.synchronize.",
    ],
)


def _gflops_mistake(n: int, seconds: float, value: float) -> str:
    right = 2 * n**3 / seconds / 1e9
    ratio = value / right

    def near(*targets: float) -> bool:
        return any(math.isclose(ratio, t, rel_tol=1e-6) for t in targets)

    if near(0.5):
        return "thiếu hệ số 2: mỗi phần tử kết quả cần N phép nhân VÀ N phép cộng, tổng 2·N³ FLOP."
    if near(1e9, 0.5e9):
        return "quên chia cho 1e9: kết quả phải tính bằng GFLOP/s (tỷ phép tính mỗi giây)."
    if near(1 / n):
        return "N² là số phần tử của kết quả; số phép tính là 2·N³."
    if near(1e-3, 1e3):
        return "lệch 1000 lần: seconds là giây, không phải mili-giây."
    return f"gflops({n}, {seconds}) = {value:.4g}, đúng phải là 2·{n}³ / {seconds} / 1e9 = {right:.4g}."


def _evaluate_gflops(report: Report, gflops=None) -> None:
    report.require_function(gflops, "gflops(n, seconds)")
    for n, seconds in ((1024, 0.5), (500, 0.002), (2048, 1.25)):
        got = report.call(f"gflops({n}, {seconds})", gflops, n, seconds)
        report.require_return(got, "gflops")
        value = number(got)
        if value is None:
            report.problem(f"gflops({n}, {seconds}) phải trả về một số, không phải {type(got).__name__}.", stop=True)
        if not math.isclose(value, 2 * n**3 / seconds / 1e9, rel_tol=1e-6):
            report.problem(_gflops_mistake(n, seconds, value), stop=True)
    report.success("gflops(n, seconds) = 2·n³ / seconds / 1e9 đúng với mọi trường hợp thử.")


ex2b = Exercise(
    "ex2b", "Bài 2b · Tốc độ tính bằng GFLOP/s", _evaluate_gflops,
    hints=[
        "Nhân hai ma trận N×N: N² phần tử kết quả, mỗi phần tử cần N phép nhân và N phép cộng.",
        "gflops = 2 * n**3 / seconds / 1e9",
    ],
)

_OPTIONS, _RIGHT = "ABCDE", frozenset("ACD")  # the statements themselves are in the notebook
_WRONG = {
    "B": "B sai: GPU tính đúng ở mọi kích thước (sai khác chỉ ở mức làm tròn, như CPU).",
    "E": "E sai: với N lớn, GPU nhanh hơn CPU nhiều lần ngay cả ở float32; float16/bf16 chỉ làm khoảng cách lớn thêm.",
}
_MISSED = {
    "A": "bạn bỏ sót A: chi phí cố định mỗi lần gọi kernel (launch, đồng bộ) không phụ thuộc N.",
    "C": "bạn bỏ sót C: ma trận nhỏ không đủ việc cho mọi lõi GPU, còn CPU làm tốt trong cache.",
    "D": "bạn bỏ sót D: chép dữ liệu CPU ↔ GPU cũng tốn thời gian và dễ vượt phần tính.",
}


def _letters(answer: object) -> set[str] | None:
    """Return the option letters in an answer like {"A", "C"}, ["a", "c"] or "A, C"; None if unreadable."""
    if isinstance(answer, str):
        letters = re.findall(r"[A-Za-z]", answer)
    elif isinstance(answer, (set, frozenset, list, tuple)) and all(isinstance(a, str) for a in answer):
        letters = [a.strip() for a in answer]
    else:
        return None
    return {a.upper() for a in letters} if all(len(a) == 1 for a in letters) else None


def _evaluate_why(report: Report, answer=None) -> None:
    letters = _letters(answer)
    if is_blank(answer) or letters == set():
        report.missing_part("chưa chọn phương án nào.", stop=True)
    if letters is None:
        report.problem(f"hãy trả lời bằng các chữ cái, vd {{'A', 'C'}} hoặc \"A, C\", không phải {answer!r}.",
                       stop=True)
    unknown = sorted(letters - set(_OPTIONS))
    if unknown:
        report.problem(f"không có phương án {', '.join(unknown)}; chọn trong {', '.join(_OPTIONS)}.", stop=True)
    for letter in sorted(letters - _RIGHT):
        report.problem(_WRONG[letter])
    for letter in sorted(_RIGHT - letters):
        report.problem(_MISSED[letter])
    report.success("A, C, D: chi phí cố định mỗi lần gọi, không đủ việc để lấp đầy GPU, và chi phí chép dữ liệu. "
                   "Với N lớn, phần tính (2·N³) lấn át cả ba, nên GPU thắng.")


ex2c = Exercise(
    "ex2c", "Bài 2c · Vì sao ma trận nhỏ có thể thua trên GPU?", _evaluate_why,
    hints=[
        "Có ba phát biểu đúng. Nghĩ về: chi phí không phụ thuộc N, số lõi GPU, và dữ liệu đang nằm ở đâu.",
        "GPU không tính sai, và không chậm hơn CPU ở float32 khi N lớn.",
    ],
)
