"""Lesson 04's checked tasks, on a fake GPU whose ``@`` only queues work: time a matmul, split copies, crossover."""

from __future__ import annotations

import math
import time
from unittest import mock

import torch

from ._core import Case, Exercise, Report, Wrong, number, raised, run_cases

# The fake GPU's costs, in seconds: each upload, the download, one matmul, and the first matmul's extra.
_UP_S, _DOWN_S, _COMPUTE_S, _FIRST_EXTRA_S, _REPEATS = 0.005, 0.015, 0.05, 0.1, 5
_COPY_S = 2 * _UP_S + _DOWN_S
_MS = f"{_COMPUTE_S * 1e3:.0f} ms"  # one matmul's time, as the messages say it


class _FakeGpu:
    """A pretend GPU, also the ``device`` handed to the learner: ``@`` queues work; sync and copies wait for it."""

    def __init__(self):
        self.matmuls = self.syncs = self.uploads = self.downloads = 0
        # clock: what the learner's clock reads (only the fake work advances it); seconds, copy_s: what was returned
        self.pending = self.clock = self.seconds = self.copy_s = 0.0

    def __repr__(self) -> str:
        return "device(type='cuda', index=0)  # giả lập"

    @property
    def ms(self) -> str:
        """Return the time(s) returned, as the messages say them."""
        compute = f"{self.seconds * 1e3:.1f} ms"
        return f"copy {self.copy_s * 1e3:.1f} ms, compute {compute}" if self.copy_s else compute

    def why_fast(self, after: str) -> str:
        return "không gọi sync() lần nào" if self.syncs == 0 else f"không gọi sync() {after}"

    def sync(self, learner: bool = True, then: float = 0.0) -> None:  # what the learner gets as ``sync``
        """Wait for the queued work, then `then` s more: exactly on the checker's clock, at least in real time."""
        self.syncs += learner
        self.clock += self.pending + then
        time.sleep(self.pending + then)
        self.pending = 0.0


class _FakeTensor:
    """A pageable CPU tensor or a CUDA tensor: copies wait for the queued work, ``@`` on the GPU only queues."""

    def __init__(self, gpu: _FakeGpu, on_gpu: bool = False):
        self.gpu, self.on_gpu = gpu, on_gpu
        self.device = torch.device("cuda", 0) if on_gpu else torch.device("cpu")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.matmul, torch.mm, torch.Tensor.matmul, torch.Tensor.__matmul__) and len(args) == 2:
            return args[0] @ args[1]
        return NotImplemented

    def to(self, device, *args, **kwargs):
        if str(device) == "cpu":
            return self.cpu()
        if device is not self.gpu:
            raise TypeError(f"hãy dùng biến device được truyền vào, không phải {device!r}")
        return self if self.on_gpu else self._copy(up=True)

    def cpu(self):
        return self._copy(up=False) if self.on_gpu else self

    def _copy(self, up: bool) -> _FakeTensor:
        self.gpu.sync(learner=False, then=_UP_S if up else _DOWN_S)  # after the queued kernels (same stream)
        self.gpu.uploads += up
        self.gpu.downloads += not up
        return _FakeTensor(self.gpu, on_gpu=up)

    def __matmul__(self, other):
        if not (self.on_gpu and getattr(other, "on_gpu", False)):
            raise TypeError("cả hai ma trận phải nằm trên device trước khi nhân: a.to(device)")
        self.gpu.matmuls += 1
        self.gpu.pending += _COMPUTE_S + (_FIRST_EXTRA_S if self.gpu.matmuls == 1 else 0.0)
        return _FakeTensor(self.gpu, on_gpu=True)

    def item(self):
        self.gpu.sync(learner=False)
        return 0.0


def fake_cuda() -> tuple[_FakeTensor, object]:
    """Return ``(x, sync)``: a fake CUDA matrix whose ``x @ x`` queues 50 ms of sleep (the first 150), and the wait."""
    gpu = _FakeGpu()
    return _FakeTensor(gpu, on_gpu=True), gpu.sync


def _within(value: float, target: float) -> bool:  # a busy machine only makes sleeps longer
    return 0.7 * target <= value <= 2.2 * target


def _nearest(value: float, kinds: dict[str, float]) -> str:  # compared on log scale
    return min(kinds, key=lambda k: abs(math.log(max(value, 1e-9) / kinds[k])))


def _measure(report: Report, fn, what: str, gpu: _FakeGpu, *args):
    """Return what `fn` returns on the fake GPU, its clock and a failing ``torch.cuda.synchronize`` patched in."""
    report.require_function(fn, what)
    # torch.cuda.synchronize fails differently on each build: patched, one mistake gets one message everywhere
    with (mock.patch.multiple(time, **dict.fromkeys(("perf_counter", "monotonic", "time"), lambda: gpu.clock)),
          mock.patch.object(torch.cuda, "synchronize", side_effect=RuntimeError("torch.cuda.synchronize"))):
        result = report.call(what, fn, *args, repeats=_REPEATS, mistakes=[_SYNCHRONIZE])
    report.require_return(result, what.split("(")[0])
    return result


_SYNCHRONIZE = Wrong("torch.cuda.synchronize", raised(Exception, "CUDA|cuda|NVIDIA"),
                     "đừng gọi torch.cuda.synchronize() ở đây: dùng hàm sync được truyền vào.")
_TOO_FEW = Wrong("too few", lambda t: t.matmuls < _REPEATS,
                 lambda t: f"phép nhân chỉ chạy {t.matmuls} lần; cần repeats={_REPEATS} lần có đo.")
_MILLISECONDS = Wrong("milliseconds", lambda t: max(t.seconds, t.copy_s) > 1,
                      lambda t: f"đo được {t.ms}: có vẻ là mili-giây; hãy trả về giây.")
_NO_WARM_UP = Wrong("no warm-up", lambda t: t.matmuls == _REPEATS,
                    "thiếu warm-up: lần nhân đầu chậm hơn hẳn (khởi tạo cuBLAS); chạy một vòng không tính giờ trước.")
_GPU_TIME_WRONGS = (
    _SYNCHRONIZE, _TOO_FEW, _MILLISECONDS,
    Wrong("no sync", lambda t: t.seconds < 0.3 * _COMPUTE_S, lambda t: (
        f"đo được {t.ms}, phép nhân thật mất {_MS}: {t.why_fast('sau x @ x')}, nên đồng hồ chỉ đo lúc xếp hàng; "
        "gọi sync() sau x @ x (time_it(lambda: x @ x, sync=sync) làm vậy).")),
    Wrong("total", lambda t: _within(t.seconds / _REPEATS, _COMPUTE_S) or t.seconds > 2.2 * _COMPUTE_S,
          lambda t: f"đo được {t.ms}, gấp nhiều lần một phép nhân ({_MS}): trả về trung vị, không phải tổng."),
    Wrong("off", lambda t: not _within(t.seconds, _COMPUTE_S), lambda t: f"đo được {t.ms}; phép nhân thật mất {_MS}."),
    _NO_WARM_UP,
)


def _evaluate_gpu_time(report: Report, gpu_time=None) -> None:
    gpu = _FakeGpu()
    result = _measure(report, gpu_time, "gpu_time(x, sync, repeats=5)", gpu, _FakeTensor(gpu, on_gpu=True), gpu.sync)
    if number(result) is None:
        report.problem(f"gpu_time phải trả về MỘT số giây (float), không phải {type(result).__name__}.", stop=True)
    gpu.seconds = number(result)
    report.diagnose(_GPU_TIME_WRONGS, gpu)
    report.success(f"đo được {gpu.ms} trên 'GPU giả' mà mỗi phép nhân mất {_MS}: có warm-up, và sync() sau x @ x.")
    report.note("trên GPU thật, cùng hàm với sync=torch.cuda.synchronize đo đúng như vậy.")


task0 = Exercise("task0", "Bài 14.4 · Nhiệm vụ 1 · Đo một phép tính bất đồng bộ", _evaluate_gpu_time,
                 wrongs=_GPU_TIME_WRONGS, hints=["time_it của mục 3 làm sẵn warm-up, sync và trung vị.",
                                                 "return time_it(lambda: x @ x, sync=sync, repeats=repeats)"])

#: What a copy time close to each value means.
_COPY_KINDS = {"right": _COPY_S, "up_only": 2 * _UP_S, "down_only": _DOWN_S, "with_compute": _COPY_S + _COMPUTE_S}
_PAIR = {"copy": _COPY_S, "compute": _COMPUTE_S}
_SPLIT_WRONGS = (
    _TOO_FEW,
    Wrong("no copies", lambda t: t.uploads < 2 * _REPEATS or t.downloads < _REPEATS, lambda t: (
        f"{t.uploads} lần chép lên, {t.downloads} lần chép về: mỗi lần đo gọi a.to(device), b.to(device) và .cpu().")),
    _MILLISECONDS,
    Wrong("swapped", lambda t: (_nearest(t.copy_s, _PAIR), _nearest(t.seconds, _PAIR)) == ("compute", "copy")
          and t.seconds > 0.3 * _COPY_S,
          lambda t: f"hai số bị đảo thứ tự ({t.ms}): trả về (copy_s, compute_s), copy trước."),
    Wrong("no sync after the matmul", lambda t: t.seconds < 0.3 * _COMPUTE_S, lambda t: (
        f"đo được {t.ms}, phép nhân thật mất {_MS}: {t.why_fast('ngay sau phép nhân')}, nên thời gian tính rơi vào "
        ".cpu(); gọi sync() ngay sau c = a_d @ b_d rồi mới đọc đồng hồ.")),
    Wrong("compute off", lambda t: not _within(t.seconds, _COMPUTE_S), lambda t: (
        f"đo được {t.ms}; phép nhân thật mất {_MS}: đo riêng nó giữa hai sync(), lấy trung vị.")),
    Wrong("upload only", lambda t: _nearest(t.copy_s, _COPY_KINDS) == "up_only",
          lambda t: f"đo được {t.ms}: phần chép thiếu bước chép kết quả về (.cpu())."),
    Wrong("download only", lambda t: _nearest(t.copy_s, _COPY_KINDS) == "down_only",
          lambda t: f"đo được {t.ms}: phần chép thiếu bước chép a, b lên device."),
    Wrong("copy off", lambda t: _nearest(t.copy_s, _COPY_KINDS) == "with_compute" or not _within(t.copy_s, _COPY_S),
          lambda t: f"đo được {t.ms}; chép thật mất {_COPY_S * 1e3:.0f} ms: cộng chép lên và chép về, không gồm "
                    "phép nhân."),
    _NO_WARM_UP,
)


def _evaluate_split(report: Report, split_time=None) -> None:
    gpu = _FakeGpu()
    result = _measure(report, split_time, "split_time(a, b, device, sync, repeats=5)", gpu, _FakeTensor(gpu),
                      _FakeTensor(gpu), gpu, gpu.sync)
    if not isinstance(result, (tuple, list)) or len(result) != 2 or None in map(number, result):
        report.problem(f"split_time phải trả về HAI số giây (copy_s, compute_s), không phải {result!r}.", stop=True)
    gpu.copy_s, gpu.seconds = map(number, result)
    report.diagnose(_SPLIT_WRONGS, gpu)
    report.success(f"đo được {gpu.ms} trên 'GPU giả' mà chép mất {_COPY_S * 1e3:.0f} ms, nhân mất {_MS}.")
    report.note("trên GPU thật, bench.copy_vs_compute(n, 'cuda') đo đúng ba phần này với tensor thật.")


task1 = Exercise("task1", "Bài 14.4 · Nhiệm vụ 2 · Tách thời gian chép và thời gian tính", _evaluate_split,
                 wrongs=_SPLIT_WRONGS, hints=[
    "Sau một vòng warm-up, đọc đồng hồ 4 lần mỗi lần đo: trước chép lên, sau chép lên, sau phép nhân, sau .cpu(), "
    "với sync() trước mỗi lần đọc.",
    "Chép = (t1 - t0) + (t3 - t2), tính = t2 - t1; trả về statistics.median(copies), statistics.median(computes)."])

_N, _CPU_S, _GPU_S = (64, 128, 256, 512, 1024), (1e-5, 6e-5, 4e-4, 3e-3, 2.4e-2), (3e-5, 4e-5, 6e-5, 1.5e-4, 6e-4)
_CURVES = (  # label, sizes, cpu_s, gpu_s, the crossover
    ("đường cong bình thường", _N, _CPU_S, _GPU_S, 128),
    ("một điểm 'ăn may' ở N nhỏ", _N, _CPU_S, (8e-6, 9e-5, 7e-5, 1.5e-4, 6e-4), 256),
    ("GPU không bao giờ nhanh hơn", (16, 32, 64), (1e-6, 2e-6, 5e-6), (2e-5, 2e-5, 2.1e-5), None),
    ("GPU nhanh hơn ngay từ N đầu", _N[2:], _CPU_S[2:], _GPU_S[2:], 256),
)


def _crossover_cases() -> tuple[Case, ...]:
    """Return the cases with fresh lists (the learner's function may change them)."""
    return tuple(Case(f"crossover_n(sizes, cpu_s, gpu_s) với {label} (" + ", ".join(
        f"N={n}: CPU {c * 1e6:g} µs / GPU {g * 1e6:g} µs" for n, c, g in zip(*lists, strict=True)) + ")",
        tuple(map(list, lists)), want) for label, *lists, want in _CURVES)


def _first(a, faster: bool):
    """Return the first size where the GPU is faster (or slower) than the CPU."""
    return next((n for n, c, g in zip(*a.case.args, strict=True) if (g < c if faster else g > c)), None)


_CROSSOVER_WRONGS = (
    Wrong("no None when never faster", lambda a: a.case.want is None,
          lambda a: f"{a.case.label}: khi GPU không bao giờ nhanh hơn, trả về None, không phải {a.got!r}."),
    Wrong("always None", lambda a: a.got is None,
          lambda a: f"{a.case.label}: trả về None, nhưng GPU nhanh hơn từ N={a.case.want}."),
    Wrong("index instead of N", lambda a: type(a.got) is int and 0 <= a.got < len(a.case.args[0])
          and a.case.args[0][a.got] == a.case.want,
          lambda a: f"trả về chỉ số {a.got} trong danh sách; hãy trả về chính kích thước N={a.case.want}."),
    Wrong("first faster point", lambda a: a.got == _first(a, faster=True), lambda a: (
        f"{a.case.label}: N={a.got} là nơi GPU nhanh hơn LẦN ĐẦU, nhưng ở N lớn hơn lại chậm hơn; duyệt từ N lớn "
        "nhất ngược về.")),
    Wrong("inverted comparison", lambda a: a.got == _first(a, faster=False), lambda a: (
        f"{a.case.label}: N={a.got} là nơi GPU CHẬM hơn: GPU nhanh hơn nghĩa là gpu_s < cpu_s.")),
    Wrong("a speedup, not a size", lambda a: number(a.got) is not None and not isinstance(a.got, int),
          lambda a: f"trả về {a.got!r}; hãy trả về một kích thước N trong sizes (int), hoặc None."),
)


def _evaluate_crossover(report: Report, crossover_n=None) -> None:
    run_cases(report, crossover_n, "crossover_n(sizes, cpu_s, gpu_s)", _crossover_cases(), _CROSSOVER_WRONGS,
              same=lambda got, want: got == want and (got is None) == (want is None))
    report.success("crossover_n đúng cả 4 đường cong, kể cả một điểm 'ăn may' và khi GPU không bao giờ nhanh hơn.")


task2 = Exercise("task2", "Bài 14.4 · Nhiệm vụ 3 · Điểm hoà vốn CPU–GPU", _evaluate_crossover, starter=True,
                 wrongs=_CROSSOVER_WRONGS, hints=[
    "Duyệt từ N lớn nhất ngược về; dừng ở N đầu tiên mà GPU KHÔNG nhanh hơn: đáp án là N ngay sau đó.",
    "GPU chậm hơn ở N lớn nhất thì trả về None; nhanh hơn ở mọi N thì trả về sizes[0]."])
