"""Lesson 04's checked tasks: time an asynchronous matmul, split copies from compute, find the crossover size.

``fake_cuda()`` hands the lesson a stand-in CUDA matrix on any machine: ``x @ x`` only queues work (it returns at
once), ``sync()`` waits for it. ``gpu_time`` (task 0, on the core path) is graded on it.

``split_time`` runs on stand-ins for pageable CUDA tensors: ``.to(device)`` and ``.cpu()`` wait for the queued
work, then copy; ``@`` only queues (the first one slower, as cuBLAS warms up); ``sync()`` waits. Without a
``sync()`` right after ``@`` the matmul's time lands in ``.cpu()``, as on a GPU.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from unittest import mock

import torch

from ._core import Exercise, Report, number, same_code

GROUP = "lesson04"  # the exercise group (tools/grade.py reads it)

# The fake GPU's costs, in seconds: each upload, the download, one matmul, and the first matmul's extra.
_UP_S, _DOWN_S, _COMPUTE_S, _FIRST_EXTRA_S, _REPEATS = 0.005, 0.015, 0.05, 0.1, 5
_COPY_S = 2 * _UP_S + _DOWN_S
_CPU = torch.device("cpu")


@dataclass
class _FakeGpu:
    """A pretend GPU, also the ``device`` handed to the learner: ``@`` queues work; sync and copies wait for it."""

    pending: float = 0.0
    matmuls: int = 0
    syncs: int = 0
    uploads: int = 0
    downloads: int = 0
    clock: float = 0.0  # the time the learner's clock reads while checking: only the fake work advances it

    def __repr__(self) -> str:
        return "device(type='cuda', index=0)  # giả lập"

    def spend(self, seconds: float) -> None:
        """Take `seconds`: on the checker's clock exactly, in real time at least (a busy machine adds more)."""
        self.clock += seconds
        time.sleep(seconds)

    def now(self) -> float:
        return self.clock

    def wait(self) -> None:
        self.spend(self.pending)
        self.pending = 0.0

    def sync(self) -> None:  # the ``sync`` handed to the learner's function
        self.syncs += 1
        self.wait()


class _FakeTensor:
    """A pageable CPU tensor or a CUDA tensor: copies wait for the queued work, ``@`` on the GPU only queues."""

    def __init__(self, gpu: _FakeGpu, on_gpu: bool = False):
        self.gpu, self.on_gpu = gpu, on_gpu
        self.device = torch.device("cuda", 0) if on_gpu else _CPU

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.matmul, torch.mm, torch.Tensor.matmul, torch.Tensor.__matmul__) and len(args) == 2:
            return args[0] @ args[1]
        return NotImplemented

    def to(self, device, *args, **kwargs):
        if device == "cpu" or (isinstance(device, torch.device) and device.type == "cpu"):
            return self.cpu()
        if device is not self.gpu:
            raise TypeError(f"hãy dùng biến device được truyền vào, không phải {device!r}")
        if self.on_gpu:
            return self
        self.gpu.wait()                      # the copy runs after the queued kernels (same stream)
        self.gpu.spend(_UP_S)
        self.gpu.uploads += 1
        return _FakeTensor(self.gpu, on_gpu=True)

    def cpu(self):
        if not self.on_gpu:
            return self
        self.gpu.wait()                      # a download waits for the kernels that produce the data
        self.gpu.spend(_DOWN_S)
        self.gpu.downloads += 1
        return _FakeTensor(self.gpu)

    def cuda(self, *args, **kwargs):
        raise TypeError("hãy dùng .to(device) với biến device được truyền vào")

    def __matmul__(self, other):
        if not self.on_gpu:
            raise TypeError("phép nhân phải chạy trên device: chép a, b lên trước (a.to(device))")
        if not getattr(other, "on_gpu", False):
            raise TypeError("cả hai ma trận phải nằm trên device trước khi nhân")
        self.gpu.matmuls += 1
        self.gpu.pending += _COMPUTE_S + (_FIRST_EXTRA_S if self.gpu.matmuls == 1 else 0.0)
        return _FakeTensor(self.gpu, on_gpu=True)

    def item(self):
        self.gpu.wait()
        return 0.0


def fake_cuda() -> tuple[_FakeTensor, object]:
    """Return ``(x, sync)``: a fake CUDA matrix whose ``x @ x`` queues 50 ms of work and returns at once, and the wait.

    It runs on any machine (no GPU): the work is a sleep that ``sync()``, ``.cpu()`` or ``.item()`` waits for, as
    ``torch.cuda.synchronize()`` waits for queued kernels. The first ``@`` queues 100 ms more, like cuBLAS's start-up.
    """
    gpu = _FakeGpu()
    return _FakeTensor(gpu, on_gpu=True), gpu.sync


_GPU_TIME = "gpu_time(x, sync, repeats=5)"


class _RealSynchronize(RuntimeError):
    """Raised by torch.cuda.synchronize while a check runs: the fake GPU only knows the `sync` it hands out."""


def _evaluate_gpu_time(report: Report, gpu_time=None) -> None:
    report.require_function(gpu_time, _GPU_TIME)
    gpu = _FakeGpu()
    # torch.cuda.synchronize fails differently on each build (CPU build, CUDA build without a driver, a real GPU that
    # has nothing queued): patched, the same mistake gets the same message everywhere
    with (mock.patch.multiple(time, perf_counter=gpu.now, monotonic=gpu.now, time=gpu.now),
          mock.patch.object(torch.cuda, "synchronize", side_effect=_RealSynchronize("torch.cuda.synchronize"))):
        result = report.call(_GPU_TIME, gpu_time, _FakeTensor(gpu, on_gpu=True), gpu.sync, repeats=_REPEATS,
                             mistakes=[(Exception, "CUDA|cuda|NVIDIA", "đừng gọi torch.cuda.synchronize() ở đây: dùng "
                                                                       "hàm sync được truyền vào (GPU giả chỉ hiểu nó).")])
    report.require_return(result, "gpu_time", "giây")
    seconds = number(result)
    if seconds is None:
        report.problem(f"gpu_time phải trả về MỘT số giây (float), không phải {type(result).__name__}.", stop=True)
    if gpu.matmuls < _REPEATS:
        report.problem(f"x @ x chỉ chạy {gpu.matmuls} lần; cần đo repeats={_REPEATS} lần.", stop=True)
    ms = f"{seconds * 1e3:.1f} ms"
    if seconds > 1:
        report.problem(f"gpu_time trả về {seconds:.1f}: có vẻ là mili-giây; hãy trả về giây.", stop=True)
    if seconds < 0.3 * _COMPUTE_S:
        why = "không gọi sync() lần nào" if gpu.syncs == 0 else "không gọi sync() sau x @ x, trước khi đọc đồng hồ"
        report.problem(f"đo được {ms}, nhưng phép nhân thật mất {_COMPUTE_S * 1e3:.0f} ms: {why}. x @ x chỉ XẾP HÀNG "
                       "việc rồi trả về ngay, nên đồng hồ chỉ đo lúc xếp hàng. Gọi sync() sau x @ x rồi mới dừng giờ "
                       "(time_it(lambda: x @ x, sync=sync) làm đúng như vậy).", stop=True)
    if _within(seconds / _REPEATS, _COMPUTE_S) or seconds > 2.2 * _COMPUTE_S:
        report.problem(f"đo được {ms}, gấp nhiều lần một phép nhân ({_COMPUTE_S * 1e3:.0f} ms): có vẻ là tổng của "
                       "nhiều lần. Trả về thời gian MỘT lời gọi: trung vị của các lần đo.", stop=True)
    if not _within(seconds, _COMPUTE_S):
        report.problem(f"đo được {ms}; phép nhân thật mất {_COMPUTE_S * 1e3:.0f} ms.", stop=True)
    if gpu.matmuls == _REPEATS:
        report.problem("thiếu warm-up: lần x @ x đầu tiên chậm hơn hẳn (khởi tạo cuBLAS); chạy nó một lần không "
                       "tính giờ trước khi đo.", stop=True)
    report.success(f"đo được {ms} trên 'GPU giả' mà mỗi phép nhân mất {_COMPUTE_S * 1e3:.0f} ms: có warm-up, và "
                   "sync() sau x @ x nên đồng hồ đo thời gian tính, không phải thời gian xếp hàng.")
    report.note("trên GPU thật, cùng hàm với sync=torch.cuda.synchronize đo đúng như vậy.")


task0 = Exercise("task0", "Bài 14.4 · Nhiệm vụ 1 · Đo một phép tính bất đồng bộ", _evaluate_gpu_time,
                 group=GROUP, hints=[
    "time_it của mục 3 đã làm warm-up, sync và trung vị: chỉ cần truyền sync cho nó.",
    "return time_it(lambda: x @ x, sync=sync, repeats=repeats)",
])


# What a copy time close to each value means (compared on log scale; sleeps only ever overshoot).
_COPY_KINDS = {"right": _COPY_S, "up_only": 2 * _UP_S, "down_only": _DOWN_S, "with_compute": _COPY_S + _COMPUTE_S}


def _nearest(value: float, kinds: dict[str, float]) -> str:
    return min(kinds, key=lambda k: abs(math.log(max(value, 1e-9) / kinds[k])))


def _within(value: float, target: float) -> bool:  # a busy machine only makes sleeps longer
    return 0.7 * target <= value <= 2.2 * target


def _evaluate_split(report: Report, split_time=None) -> None:
    report.require_function(split_time, "split_time(a, b, device, sync, repeats=5)")
    gpu = _FakeGpu()
    what = "split_time(a, b, device, sync, repeats=5)"
    # The learner's clock reads the fake GPU's time, so a busy machine cannot blur copy and compute apart.
    with mock.patch.multiple(time, perf_counter=gpu.now, monotonic=gpu.now, time=gpu.now):
        result = report.call(what, split_time, _FakeTensor(gpu), _FakeTensor(gpu), gpu, gpu.sync, repeats=_REPEATS,
                             mistakes=[(TypeError, "", lambda exc: f"gọi {what} báo TypeError: {exc}.")])
    report.require_return(result, "split_time", "copy_s, compute_s")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        report.problem(f"split_time phải trả về HAI số (copy_s, compute_s), không phải {result!r}.", stop=True)
    copy_s, compute_s = number(result[0]), number(result[1])
    if copy_s is None or compute_s is None:
        report.problem("copy_s và compute_s phải là số giây (float).", stop=True)
    if gpu.matmuls < _REPEATS:
        report.problem(f"phép nhân chỉ chạy {gpu.matmuls} lần; cần repeats={_REPEATS} lần có đo.", stop=True)
    if gpu.uploads < 2 * _REPEATS or gpu.downloads < _REPEATS:
        report.problem("mỗi lần đo phải chép a và b lên device (a.to(device), b.to(device)) và chép kết quả về "
                       f"(.cpu()); đếm được {gpu.uploads} lần chép lên, {gpu.downloads} lần chép về.",
                       stop=True)
    if gpu.matmuls == _REPEATS:
        report.problem("thiếu warm-up: chạy một vòng chép lên → nhân → chép về TRƯỚC khi đo (lần nhân đầu trên GPU "
                       "chậm hơn hẳn vì khởi tạo cuBLAS).")
    ms = f"copy {copy_s * 1e3:.1f} ms, compute {compute_s * 1e3:.1f} ms"
    if copy_s > 1 or compute_s > 1:
        report.problem(f"split_time trả về {copy_s:.1f} và {compute_s:.1f}: có vẻ là mili-giây; hãy trả về giây.",
                       stop=True)
    pair = {"copy": _COPY_S, "compute": _COMPUTE_S}
    if _nearest(copy_s, pair) == "compute" and _nearest(compute_s, pair) == "copy" and compute_s > 0.3 * _COPY_S:
        report.problem(f"hai số bị đảo thứ tự ({ms}): trả về (copy_s, compute_s), copy trước.", stop=True)
    if compute_s < 0.3 * _COMPUTE_S:
        why = "không gọi sync() lần nào" if gpu.syncs == 0 else "không gọi sync() ngay sau phép nhân"
        report.problem(f"đo được {ms}, nhưng phép nhân thật mất {_COMPUTE_S * 1e3:.0f} ms: {why}, nên đồng hồ chỉ "
                       "đo lúc XẾP HÀNG kernel; thời gian tính thật rơi vào .cpu() (nó phải chờ GPU tính xong), làm "
                       "phần chép trông lớn hơn. Gọi sync() ngay sau c = a_d @ b_d rồi mới đọc đồng hồ.",
                       stop=True)
    if not _within(compute_s, _COMPUTE_S):
        report.problem(f"đo được {ms}; phép nhân thật mất {_COMPUTE_S * 1e3:.0f} ms. Đo RIÊNG phép nhân: "
                       "sync() → bấm giờ → c = a_d @ b_d → sync() → dừng giờ, và lấy trung vị.", stop=True)
    kind = _nearest(copy_s, _COPY_KINDS)
    slip = {"up_only": "phần chép thiếu bước chép kết quả về (.cpu())",
            "down_only": "phần chép thiếu bước chép a, b lên device"}.get(kind)
    if slip:
        report.problem(f"đo được {ms}: {slip}; cộng cả hai phần chép.", stop=True)
    if kind == "with_compute" or not _within(copy_s, _COPY_S):
        report.problem(f"đo được {ms}; chép thật mất {_COPY_S * 1e3:.0f} ms (a, b lên + kết quả về). Đo phần chép "
                       "lên (kèm sync()) và phần chép về, cộng lại (không gồm phép nhân), lấy trung vị.",
                       stop=True)
    if report.problems:  # only the missing warm-up is recorded without stopping
        return
    report.success(f"đo được {ms} trên một 'GPU giả' mà chép thật mất {_COPY_S * 1e3:.0f} ms, nhân thật mất "
                   f"{_COMPUTE_S * 1e3:.0f} ms: sync đặt đúng chỗ nên thời gian tính không lẫn vào .cpu().")
    report.note("trên GPU thật, bench.copy_vs_compute(n, 'cuda') đo đúng ba phần này với tensor thật.")


task1 = Exercise("task1", "Bài 14.4 · Nhiệm vụ 2 · Tách thời gian chép và thời gian tính", _evaluate_split,
                 group=GROUP, hints=[
    "Trong mỗi lần đo, đọc đồng hồ 4 lần: trước khi chép lên, sau khi chép lên (sau sync()), sau phép nhân "
     "(sau sync()!), sau .cpu(). Chép = (t1 - t0) + (t3 - t2), tính = t2 - t1.",
    "Trước vòng đo, chạy một vòng warm-up: (a.to(device) @ b.to(device)).cpu(). Trả về "
     "statistics.median(copies), statistics.median(computes).",
])

#: (sizes, cpu seconds, gpu seconds, the answer): an ordinary curve, a lucky early point, never, always.
_CROSSOVER_CASES = (
    ([64, 128, 256, 512, 1024], [1e-5, 6e-5, 4e-4, 3e-3, 2.4e-2], [3e-5, 4e-5, 6e-5, 1.5e-4, 6e-4], 128),
    ([64, 128, 256, 512, 1024], [1e-5, 6e-5, 4e-4, 3e-3, 2.4e-2], [8e-6, 9e-5, 7e-5, 1.5e-4, 6e-4], 256),
    ([16, 32, 64], [1e-6, 2e-6, 5e-6], [2e-5, 2e-5, 2.1e-5], None),
    ([256, 512, 1024], [4e-4, 3e-3, 2.4e-2], [6e-5, 1.5e-4, 6e-4], 256),
)


def _evaluate_crossover(report: Report, crossover_n=None) -> None:
    report.require_function(crossover_n, "crossover_n(sizes, cpu_s, gpu_s)")
    if same_code(crossover_n, task2.starter_code):
        report.missing_part("crossover_n chưa làm gì (thân hàm còn là ...).", stop=True)
    for sizes, cpu_s, gpu_s, want in _CROSSOVER_CASES:
        table = ", ".join(f"N={n}: CPU {c * 1e6:g} µs / GPU {g * 1e6:g} µs"
                          for n, c, g in zip(sizes, cpu_s, gpu_s, strict=True))
        got = report.call("crossover_n(sizes, cpu_s, gpu_s)", crossover_n, list(sizes), list(cpu_s), list(gpu_s))
        if got == want and (got is None) == (want is None):
            continue
        value = number(got)
        first_faster = next((n for n, c, g in zip(sizes, cpu_s, gpu_s, strict=True) if g < c), None)
        first_slower = next((n for n, c, g in zip(sizes, cpu_s, gpu_s, strict=True) if g > c), None)
        report.first([
            (want is None, f"khi GPU không bao giờ nhanh hơn ({table}), trả về None, không phải {got!r}."),
            (got is None, f"trả về None, nhưng GPU nhanh hơn từ N={want} ({table})."),
            (value is not None and isinstance(got, int) and 0 <= got < len(sizes) and sizes[got] == want,
             f"trả về chỉ số {got} trong danh sách; hãy trả về chính kích thước N={want}."),
            (got == first_faster, f"trả về N={got}, nơi GPU nhanh hơn LẦN ĐẦU; nhưng ở N lớn hơn nó lại chậm hơn "
                                  f"({table}). Điểm hoà vốn là N nhỏ nhất mà GPU nhanh hơn ở N đó VÀ mọi N lớn "
                                  "hơn: duyệt từ N lớn nhất ngược về."),
            (got == first_slower, f"phép so sánh bị đảo: N={got} là nơi GPU CHẬM hơn CPU ({table}). GPU nhanh hơn "
                                  "nghĩa là gpu_s nhỏ hơn cpu_s."),
            (value is not None and not isinstance(got, int),
             f"trả về {got!r}; hãy trả về một kích thước N trong sizes (int), hoặc None."),
            (True, f"với {table}: cần N={want}, nhận được {got!r}."),
        ])
    report.success("crossover_n đúng cả 4 trường hợp: đường cong bình thường, một điểm 'ăn may' ở N nhỏ, GPU không "
                   "bao giờ nhanh hơn (None), và nhanh hơn ngay từ N đầu.")


task2 = Exercise("task2", "Bài 14.4 · Nhiệm vụ 3 · Điểm hoà vốn CPU–GPU", _evaluate_crossover,
                 starter=True, group=GROUP, hints=[
    "Duyệt từ N lớn nhất ngược về N nhỏ; dừng ở N đầu tiên mà GPU KHÔNG nhanh hơn. Đáp án là N ngay sau đó.",
    "Nếu GPU chậm hơn ở N lớn nhất thì trả về None; nếu nhanh hơn ở mọi N thì trả về sizes[0].",
])
