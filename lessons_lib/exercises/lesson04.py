"""Lesson 04's checked tasks: time an asynchronous matmul, split copies from compute, find the crossover size.

``gpu_time`` and ``split_time`` run on a fake GPU, on any machine: ``@`` only queues work (the first one slower, as
cuBLAS warms up), ``sync()`` waits for it, ``.to(device)`` and ``.cpu()`` wait for it and then copy; so without a
``sync()`` right after ``@`` the matmul's time lands in ``.cpu()``, as on a GPU. ``fake_cuda()`` hands it to the lesson.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from unittest import mock

import torch

from ._core import Case, Exercise, Report, Wrong, number, raised, run_cases, same_code

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
    seconds: float = 0.0  # what the learner's function returned: the (compute) time, and the copy time
    copy_s: float = 0.0

    def __repr__(self) -> str:
        return "device(type='cuda', index=0)  # giả lập"

    def spend(self, seconds: float) -> None:
        """Take `seconds`: on the checker's clock exactly, in real time at least (a busy machine adds more)."""
        self.clock += seconds
        time.sleep(seconds)

    def now(self) -> float:
        return self.clock

    @property
    def ms(self) -> str:
        """Return the time(s) returned, as the messages say them."""
        return f"{self.seconds * 1e3:.1f} ms" if not self.copy_s else (
            f"copy {self.copy_s * 1e3:.1f} ms, compute {self.seconds * 1e3:.1f} ms")

    def why_fast(self, after: str) -> str:
        return "không gọi sync() lần nào" if self.syncs == 0 else f"không gọi sync() {after}"

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


_MS = f"{_COMPUTE_S * 1e3:.0f} ms"  # one matmul's time, as the messages say it


def _within(value: float, target: float) -> bool:  # a busy machine only makes sleeps longer
    return 0.7 * target <= value <= 2.2 * target


def _nearest(value: float, kinds: dict[str, float]) -> str:  # compared on log scale
    return min(kinds, key=lambda k: abs(math.log(max(value, 1e-9) / kinds[k])))


_SYNCHRONIZE = Wrong("torch.cuda.synchronize", raised(Exception, "CUDA|cuda|NVIDIA"),
                     "đừng gọi torch.cuda.synchronize() ở đây: dùng hàm sync được truyền vào (GPU giả chỉ hiểu nó).")
_TOO_FEW = Wrong("too few", lambda t: t.matmuls < _REPEATS,
                 lambda t: f"phép nhân chỉ chạy {t.matmuls} lần; cần repeats={_REPEATS} lần có đo.")
_MILLISECONDS = Wrong("milliseconds", lambda t: max(t.seconds, t.copy_s) > 1,
                      lambda t: f"đo được {t.ms}: có vẻ là mili-giây; hãy trả về giây.")
_NO_WARM_UP = Wrong("no warm-up", lambda t: t.matmuls == _REPEATS,
                    "thiếu warm-up: lần nhân đầu tiên trên GPU chậm hơn hẳn (khởi tạo cuBLAS); chạy một vòng không "
                    "tính giờ TRƯỚC khi đo.")
_GPU_TIME_WRONGS = (
    _SYNCHRONIZE,
    _TOO_FEW,
    _MILLISECONDS,
    Wrong("no sync", lambda t: t.seconds < 0.3 * _COMPUTE_S, lambda t: (
        f"đo được {t.ms}, nhưng phép nhân thật mất {_MS}: {t.why_fast('sau x @ x, trước khi đọc đồng hồ')}. x @ x "
        "chỉ XẾP HÀNG việc rồi trả về ngay, nên đồng hồ chỉ đo lúc xếp hàng. Gọi sync() sau x @ x rồi mới dừng giờ "
        "(time_it(lambda: x @ x, sync=sync) làm đúng như vậy).")),
    Wrong("total", lambda t: _within(t.seconds / _REPEATS, _COMPUTE_S) or t.seconds > 2.2 * _COMPUTE_S,
          lambda t: f"đo được {t.ms}, gấp nhiều lần một phép nhân ({_MS}): có vẻ là tổng của nhiều lần. Trả về thời "
                    "gian MỘT lời gọi: trung vị của các lần đo."),
    Wrong("off", lambda t: not _within(t.seconds, _COMPUTE_S), lambda t: f"đo được {t.ms}; phép nhân thật mất {_MS}."),
    _NO_WARM_UP,
)


def _evaluate_gpu_time(report: Report, gpu_time=None) -> None:
    report.require_function(gpu_time, "gpu_time(x, sync, repeats=5)")
    gpu = _FakeGpu()
    # torch.cuda.synchronize fails differently on each build (CPU build, CUDA build without a driver, a real GPU that
    # has nothing queued): patched, the same mistake gets the same message everywhere
    with (mock.patch.multiple(time, perf_counter=gpu.now, monotonic=gpu.now, time=gpu.now),
          mock.patch.object(torch.cuda, "synchronize", side_effect=RuntimeError("torch.cuda.synchronize"))):
        result = report.call("gpu_time(x, sync, repeats=5)", gpu_time, _FakeTensor(gpu, on_gpu=True), gpu.sync,
                             repeats=_REPEATS, mistakes=[_SYNCHRONIZE])
    report.require_return(result, "gpu_time", "giây")
    if number(result) is None:
        report.problem(f"gpu_time phải trả về MỘT số giây (float), không phải {type(result).__name__}.", stop=True)
    gpu.seconds = number(result)
    report.diagnose(_GPU_TIME_WRONGS, gpu)
    report.success(f"đo được {gpu.ms} trên 'GPU giả' mà mỗi phép nhân mất {_MS}: có warm-up, và sync() sau x @ x "
                   "nên đồng hồ đo thời gian tính, không phải thời gian xếp hàng.")
    report.note("trên GPU thật, cùng hàm với sync=torch.cuda.synchronize đo đúng như vậy.")


task0 = Exercise("task0", "Bài 14.4 · Nhiệm vụ 1 · Đo một phép tính bất đồng bộ", _evaluate_gpu_time,
                 wrongs=_GPU_TIME_WRONGS, hints=[
    "time_it của mục 3 đã làm warm-up, sync và trung vị: chỉ cần truyền sync cho nó.",
    "return time_it(lambda: x @ x, sync=sync, repeats=repeats)",
])

#: What a copy time close to each value means.
_COPY_KINDS = {"right": _COPY_S, "up_only": 2 * _UP_S, "down_only": _DOWN_S, "with_compute": _COPY_S + _COMPUTE_S}
_PAIR = {"copy": _COPY_S, "compute": _COMPUTE_S}

_SPLIT_WRONGS = (
    _TOO_FEW,
    Wrong("no copies", lambda t: t.uploads < 2 * _REPEATS or t.downloads < _REPEATS, lambda t: (
        "mỗi lần đo phải chép a và b lên device (a.to(device), b.to(device)) và chép kết quả về (.cpu()); đếm "
        f"được {t.uploads} lần chép lên, {t.downloads} lần chép về.")),
    _MILLISECONDS,
    Wrong("swapped", lambda t: (_nearest(t.copy_s, _PAIR), _nearest(t.seconds, _PAIR)) == ("compute", "copy")
          and t.seconds > 0.3 * _COPY_S,
          lambda t: f"hai số bị đảo thứ tự ({t.ms}): trả về (copy_s, compute_s), copy trước."),
    Wrong("no sync after the matmul", lambda t: t.seconds < 0.3 * _COMPUTE_S, lambda t: (
        f"đo được {t.ms}, nhưng phép nhân thật mất {_MS}: {t.why_fast('ngay sau phép nhân')}, nên đồng hồ chỉ đo "
        "lúc XẾP HÀNG kernel; thời gian tính thật rơi vào .cpu() (nó phải chờ GPU tính xong), làm phần chép trông "
        "lớn hơn. Gọi sync() ngay sau c = a_d @ b_d rồi mới đọc đồng hồ.")),
    Wrong("compute off", lambda t: not _within(t.seconds, _COMPUTE_S),
          lambda t: f"đo được {t.ms}; phép nhân thật mất {_MS}. Đo RIÊNG phép nhân: sync() → bấm giờ → c = a_d @ b_d "
                    "→ sync() → dừng giờ, và lấy trung vị."),
    Wrong("upload only", lambda t: _nearest(t.copy_s, _COPY_KINDS) == "up_only",
          lambda t: f"đo được {t.ms}: phần chép thiếu bước chép kết quả về (.cpu()); cộng cả hai phần chép."),
    Wrong("download only", lambda t: _nearest(t.copy_s, _COPY_KINDS) == "down_only",
          lambda t: f"đo được {t.ms}: phần chép thiếu bước chép a, b lên device; cộng cả hai phần chép."),
    Wrong("copy off", lambda t: _nearest(t.copy_s, _COPY_KINDS) == "with_compute" or not _within(t.copy_s, _COPY_S),
          lambda t: f"đo được {t.ms}; chép thật mất {_COPY_S * 1e3:.0f} ms (a, b lên + kết quả về). Đo phần chép "
                    "lên (kèm sync()) và phần chép về, cộng lại (không gồm phép nhân), lấy trung vị."),
    _NO_WARM_UP,
)


def _evaluate_split(report: Report, split_time=None) -> None:
    what = "split_time(a, b, device, sync, repeats=5)"
    report.require_function(split_time, what)
    gpu = _FakeGpu()
    # The learner's clock reads the fake GPU's time, so a busy machine cannot blur copy and compute apart.
    with mock.patch.multiple(time, perf_counter=gpu.now, monotonic=gpu.now, time=gpu.now):
        result = report.call(what, split_time, _FakeTensor(gpu), _FakeTensor(gpu), gpu, gpu.sync, repeats=_REPEATS,
                             mistakes=[(TypeError, "", lambda exc: f"gọi {what} báo TypeError: {exc}.")])
    report.require_return(result, "split_time", "copy_s, compute_s")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        report.problem(f"split_time phải trả về HAI số (copy_s, compute_s), không phải {result!r}.", stop=True)
    if number(result[0]) is None or number(result[1]) is None:
        report.problem("copy_s và compute_s phải là số giây (float).", stop=True)
    gpu.copy_s, gpu.seconds = number(result[0]), number(result[1])
    report.diagnose(_SPLIT_WRONGS, gpu)
    report.success(f"đo được {gpu.ms} trên một 'GPU giả' mà chép thật mất {_COPY_S * 1e3:.0f} ms, nhân thật mất "
                   f"{_MS}: sync đặt đúng chỗ nên thời gian tính không lẫn vào .cpu().")
    report.note("trên GPU thật, bench.copy_vs_compute(n, 'cuda') đo đúng ba phần này với tensor thật.")


task1 = Exercise("task1", "Bài 14.4 · Nhiệm vụ 2 · Tách thời gian chép và thời gian tính", _evaluate_split,
                 wrongs=_SPLIT_WRONGS, hints=[
    "Trong mỗi lần đo, đọc đồng hồ 4 lần: trước khi chép lên, sau khi chép lên (sau sync()), sau phép nhân "
     "(sau sync()!), sau .cpu(). Chép = (t1 - t0) + (t3 - t2), tính = t2 - t1.",
    "Trước vòng đo, chạy một vòng warm-up: (a.to(device) @ b.to(device)).cpu(). Trả về "
     "statistics.median(copies), statistics.median(computes).",
])


def _crossover(label: str, sizes, cpu_s, gpu_s, want) -> Case:
    table = ", ".join(f"N={n}: CPU {c * 1e6:g} µs / GPU {g * 1e6:g} µs" for n, c, g in zip(sizes, cpu_s, gpu_s,
                                                                                          strict=True))
    return Case(f"crossover_n(sizes, cpu_s, gpu_s) với {label} ({table})", (sizes, cpu_s, gpu_s), want)


_CROSSOVER_CASES = (
    _crossover("đường cong bình thường", [64, 128, 256, 512, 1024], [1e-5, 6e-5, 4e-4, 3e-3, 2.4e-2],
               [3e-5, 4e-5, 6e-5, 1.5e-4, 6e-4], 128),
    _crossover("một điểm 'ăn may' ở N nhỏ", [64, 128, 256, 512, 1024], [1e-5, 6e-5, 4e-4, 3e-3, 2.4e-2],
               [8e-6, 9e-5, 7e-5, 1.5e-4, 6e-4], 256),
    _crossover("GPU không bao giờ nhanh hơn", [16, 32, 64], [1e-6, 2e-6, 5e-6], [2e-5, 2e-5, 2.1e-5], None),
    _crossover("GPU nhanh hơn ngay từ N đầu", [256, 512, 1024], [4e-4, 3e-3, 2.4e-2], [6e-5, 1.5e-4, 6e-4], 256),
)


def _first(a, faster: bool):
    """Return the first size where the GPU is faster (or slower) than the CPU."""
    return next((n for n, c, g in zip(*a.case.args, strict=True) if (g < c if faster else g > c)), None)


_CROSSOVER_WRONGS = (
    Wrong("no None when never faster", lambda a: a.case.want is None,
          lambda a: f"{a.case.label}: khi GPU không bao giờ nhanh hơn, trả về None, không phải {a.got!r}."),
    Wrong("always None", lambda a: a.got is None, lambda a: f"{a.case.label}: trả về None, nhưng GPU nhanh hơn từ "
                                                              f"N={a.case.want}."),
    Wrong("index instead of N", lambda a: type(a.got) is int and 0 <= a.got < len(a.case.args[0])
          and a.case.args[0][a.got] == a.case.want,
          lambda a: f"trả về chỉ số {a.got} trong danh sách; hãy trả về chính kích thước N={a.case.want}."),
    Wrong("first faster point", lambda a: a.got == _first(a, faster=True), lambda a: (
        f"{a.case.label}: trả về N={a.got}, nơi GPU nhanh hơn LẦN ĐẦU; nhưng ở N lớn hơn nó lại chậm hơn. Điểm hoà "
        "vốn là N nhỏ nhất mà GPU nhanh hơn ở N đó VÀ mọi N lớn hơn: duyệt từ N lớn nhất ngược về.")),
    Wrong("inverted comparison", lambda a: a.got == _first(a, faster=False), lambda a: (
        f"{a.case.label}: phép so sánh bị đảo: N={a.got} là nơi GPU CHẬM hơn CPU. GPU nhanh hơn nghĩa là gpu_s nhỏ "
        "hơn cpu_s.")),
    Wrong("a speedup, not a size", lambda a: number(a.got) is not None and not isinstance(a.got, int),
          lambda a: f"trả về {a.got!r}; hãy trả về một kích thước N trong sizes (int), hoặc None."),
)


def _evaluate_crossover(report: Report, crossover_n=None) -> None:
    if same_code(crossover_n, task2.starter_code):
        report.missing_part("crossover_n chưa làm gì (thân hàm còn là ...).", stop=True)
    run_cases(report, crossover_n, "crossover_n(sizes, cpu_s, gpu_s)", _CROSSOVER_CASES, _CROSSOVER_WRONGS,
              same=lambda got, want: got == want and (got is None) == (want is None))
    report.success("crossover_n đúng cả 4 trường hợp: đường cong bình thường, một điểm 'ăn may' ở N nhỏ, GPU không "
                   "bao giờ nhanh hơn (None), và nhanh hơn ngay từ N đầu.")


task2 = Exercise("task2", "Bài 14.4 · Nhiệm vụ 3 · Điểm hoà vốn CPU–GPU", _evaluate_crossover, starter=True,
                 cases=_CROSSOVER_CASES, wrongs=_CROSSOVER_WRONGS, hints=[
    "Duyệt từ N lớn nhất ngược về N nhỏ; dừng ở N đầu tiên mà GPU KHÔNG nhanh hơn. Đáp án là N ngay sau đó.",
    "Nếu GPU chậm hơn ở N lớn nhất thì trả về None; nếu nhanh hơn ở mọi N thì trả về sizes[0].",
])
