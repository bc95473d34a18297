"""The exercise checkers check themselves: every solution passes, typical wrong answers fail with the right message,
nothing raises from inside a checker, and the two notebooks generated from course_src/10_exercises.md agree with
the library (solutions pass every check, the learner version runs and reports "chưa làm")."""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sys
import textwrap
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from _lesson_tasks import (
    CELL_SCOPE,
    WEIRD,
    assert_checks_never_raise,
    assert_fails,
    assert_missing,
    code_cells,
    normalised,
    notebook_pair,
    run_cell,
    run_notebook,
)

from lessons_lib import exercises as ex
from lessons_lib.device import pick_device
from lessons_lib.exercises import _core, amp, oom, speed
from lessons_lib.exercises._tracking import MoveTracker
from lessons_lib.memory import SavedTensorMeter
from lessons_lib.training import make_mlp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_course  # noqa: E402

LEARNER_NB, SOLUTION_NB = notebook_pair("10_exercises")
HAS_CUDA = torch.cuda.is_available()


# --------------------------------------------------------------------------- helpers


def load(code: str, tmp_path: Path, **names) -> dict:
    """Run `code` from a real file (so inspect.getsource works, as in a notebook) and return its namespace."""
    return run_cell(code, tmp_path, {**CELL_SCOPE, "device": pick_device(), **names})


def run(exercise, *args) -> _core.Feedback:
    feedback = exercise.evaluate(*args)
    assert isinstance(feedback, _core.Feedback)
    return feedback


def model4():
    return make_mlp(64, 10, hidden=128, depth=2, device=pick_device())


BUDGET = 2**20

SOLUTION_ARGS = {
    "ex1": ("cuda_available", "gpu_count", "device"),
    "ex2a": ("time_it",),
    "ex2b": ("gflops",),
    "ex2c": ("why_small",),
    "ex3": ("roundtrip", "expected"),
    "ex4": ("fits", "largest", "model4", "BUDGET"),
    "ex5": ("train_amp",),
    "ex6": ("train",),
    "ex7": ("NoisyHead",),
    "ex8": ("accumulate",),
}


# --------------------------------------------------------------------------- every solution passes


@pytest.mark.parametrize("key", list(SOLUTION_ARGS))
def test_solution_passes(key, tmp_path):
    exercise = _core.REGISTRY[key]
    ns = load(exercise.solution_code, tmp_path, SavedTensorMeter=SavedTensorMeter, model4=model4(), BUDGET=BUDGET)
    feedback = run(exercise, *[ns[name] for name in SOLUTION_ARGS[key]])
    assert feedback.passed, str(feedback)
    assert str(feedback).startswith("✅")


@pytest.mark.parametrize("key", list(SOLUTION_ARGS))
def test_blank_answers_are_not_done_yet(key):
    exercise = _core.REGISTRY[key]
    n = len(SOLUTION_ARGS[key])
    args = [None] * n if key != "ex4" else [None, None, model4(), BUDGET]
    assert_missing(run(exercise, *args))


@pytest.mark.parametrize("exercise", [ex.ex1_gpu, ex.ex4_gpu, ex.ex5_gpu], ids=lambda e: e.key)
def test_gpu_exercises_without_a_gpu_say_so(exercise):
    if HAS_CUDA:
        pytest.skip("this machine has a GPU")
    feedback = run(exercise)
    assert feedback.status == "fail" and "cần GPU CUDA" in str(feedback)


# --------------------------------------------------------------------------- never raises


#: The shared odd answers, plus nan, a huge int, functions that return odd results, and a type.
ODD_ANSWERS = [*WEIRD, float("nan"), 10**30, lambda *a, **k: None, lambda *a, **k: "?", lambda *a, **k: [1, 2],
               int]


@pytest.mark.parametrize("key", list(_core.REGISTRY))
def test_checkers_never_raise(key, capsys):
    assert_checks_never_raise(_core.REGISTRY[key], capsys, ODD_ANSWERS, arities=(1, 4), keyword=True)


def test_wrong_argument_count_says_what_to_pass():
    assert_fails(run(ex.ex3, 1, 2, 3), "ex3.check(roundtrip, expected)")


def test_errors_in_learner_code_are_summarised_and_explained(tmp_path):
    ns = load('''
        def roundtrip(device):
            x = torch.arange(10).cuda() if not torch.cuda.is_available() else torch.arange(10, device="meta")
            return (x * 2 + 1).cpu()
    ''', tmp_path)
    feedback = run(ex.ex3, ns["roundtrip"], list(range(1, 20, 2)))
    assert_fails(feedback, "roundtrip(device) báo lỗi")
    assert "Traceback" not in str(feedback)


# --------------------------------------------------------------------------- exercise 1


def test_ex1_wrong_answers():
    right_device = pick_device()
    available, count = torch.cuda.is_available(), torch.cuda.device_count()
    assert_fails(run(ex.ex1, torch.cuda.is_available, count, right_device), "quên gọi")
    assert_fails(run(ex.ex1, not available, count, right_device), f"trả về {available}")
    assert_fails(run(ex.ex1, available, count + 3, right_device), f"thấy {count} GPU")
    assert_fails(run(ex.ex1, available, count, 5), "torch.device")
    assert_fails(run(ex.ex1, "yes", count, right_device), "True/False")
    assert_missing(run(ex.ex1, available, None, right_device), "gpu_count")
    if not available:
        assert_fails(run(ex.ex1, available, count, "cuda"), "viết cứng 'cuda'")
        assert run(ex.ex1, available, count, "cpu").passed


def test_ex1_gpu_logic_with_a_fake_gpu(monkeypatch):
    class Props:
        name, total_memory, multi_processor_count, major, minor = "Tesla T4", 15 * 2**30, 40, 7, 5

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: Props())
    assert run(ex.ex1_gpu, "Tesla T4", Props()).passed
    assert "compute capability 7.5" in str(run(ex.ex1_gpu, "Tesla T4", Props()))
    assert_fails(run(ex.ex1_gpu, "A100", Props()), "Tesla T4")
    assert_fails(run(ex.ex1_gpu, "Tesla T4", {"total_memory": 1}), "get_device_properties(0)")
    assert_missing(run(ex.ex1_gpu, None, Props()), "gpu_name")


# --------------------------------------------------------------------------- exercise 2


def _timer(body: str, tmp_path):
    return load("import statistics, time\n\ndef time_it(fn, sync, repeats=5):\n"
                + textwrap.indent(textwrap.dedent(body), "    "), tmp_path)["time_it"]


def test_ex2a_catches_each_timing_mistake(tmp_path):
    no_warmup = _timer('''
        times = []
        for _ in range(repeats):
            sync(); start = time.perf_counter(); fn(); sync(); times.append(time.perf_counter() - start)
        return statistics.median(times)
    ''', tmp_path)
    assert_fails(run(ex.ex2a, no_warmup), "thiếu warm-up")
    no_sync = _timer('''
        fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter(); fn(); times.append(time.perf_counter() - start)
        return statistics.median(times)
    ''', tmp_path)
    assert_fails(run(ex.ex2a, no_sync), "không gọi sync()")
    stop_before_sync = _timer('''
        fn(); sync()
        times = []
        for _ in range(repeats):
            sync(); start = time.perf_counter(); fn(); times.append(time.perf_counter() - start); sync()
        return statistics.median(times)
    ''', tmp_path)
    assert_fails(run(ex.ex2a, stop_before_sync), "đồng hồ dừng TRƯỚC")
    mean_of_total = _timer('''
        fn(); sync()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        sync()
        return (time.perf_counter() - start) / repeats
    ''', tmp_path)
    assert_fails(run(ex.ex2a, mean_of_total), "trung vị")
    milliseconds = _timer('''
        fn(); sync()
        times = []
        for _ in range(repeats):
            sync(); start = time.perf_counter(); fn(); sync(); times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000
    ''', tmp_path)
    assert_fails(run(ex.ex2a, milliseconds), "mili-giây")
    a_list = _timer("fn(); sync(); return [0.02] * repeats", tmp_path)
    assert_fails(run(ex.ex2a, a_list), "MỘT số")
    assert_missing(run(ex.ex2a, _timer("return None", tmp_path)), "thiếu return")
    assert_fails(run(ex.ex2a, lambda fn: 0.02), "TypeError")


def test_fake_gpu_is_asynchronous():
    gpu = speed._FakeGpu()
    start = time.perf_counter()
    gpu.run()
    queued = time.perf_counter() - start
    gpu.sync()
    total = time.perf_counter() - start
    first_call = speed.WORK_S + speed.FIRST_EXTRA_S
    assert queued < 0.005 < 0.9 * first_call < total and gpu.calls == 1 and gpu.syncs == 1 and gpu.pending == 0


def test_ex2b_names_the_mistake():
    assert_fails(run(ex.ex2b, lambda n, s: n**3 / s / 1e9), "hệ số 2")
    assert_fails(run(ex.ex2b, lambda n, s: 2 * n**3 / s), "1e9")
    assert_fails(run(ex.ex2b, lambda n, s: 2 * n**2 / s / 1e9), "N²")
    assert_fails(run(ex.ex2b, lambda n, s: 2 * n**3 / (s * 1000) / 1e9), "mili-giây")
    assert_fails(run(ex.ex2b, lambda n, s: "fast"), "một số")
    assert_missing(run(ex.ex2b, lambda n, s: None))


def test_ex2c_letters():
    assert run(ex.ex2c, "a, c, d").passed and run(ex.ex2c, ["D", "C", "A"]).passed
    assert_fails(run(ex.ex2c, {"A", "B", "C", "D"}), "B sai")
    assert_fails(run(ex.ex2c, {"A", "C"}), "bỏ sót D")
    assert_fails(run(ex.ex2c, {"A", "C", "Z"}), "không có phương án Z")
    assert_fails(run(ex.ex2c, 42), "chữ cái")
    assert_fails(run(ex.ex2c, ["AB"]), "chữ cái")
    assert_missing(run(ex.ex2c, set()))


# --------------------------------------------------------------------------- exercise 3

EXPECTED = [2 * i + 1 for i in range(10)]


@pytest.mark.parametrize(("body", "message"), [
    ("x.to(device); x = x * 2 + 1; x = x.cpu()", "quên gán lại: x.to(device)"),
    ("x = x.to(device); x * 2 + 1; x = x.cpu()", "quên gán lại x = x * 2 + 1"),
    ("x = x.to(device); x = x * 2 + 1; x.cpu()", "quên gán lại: x.cpu()"),
    ("x = x.to(device); x = x * 2 + 1", "thiếu bước đưa x về CPU"),
    ("x = x * 2 + 1; x = x.cpu()", "chưa được chuyển sang device"),
    ("x = x.to(device); x = x * 3; x = x.cpu()", "đúng phải là"),
])
def test_ex3_catches_forgotten_reassignments_and_wrong_values(body, message, tmp_path):
    ns = load(f"def roundtrip(device):\n    x = torch.arange(10)\n    {body}\n    return x\n", tmp_path)
    assert_fails(run(ex.ex3, ns["roundtrip"], EXPECTED), message)


def test_ex3_one_expression_and_wrong_hand_values(tmp_path):
    ns = load("def roundtrip(device):\n    return (torch.arange(10).to(device) * 2 + 1).cpu()\n", tmp_path)
    assert run(ex.ex3, ns["roundtrip"], EXPECTED).passed
    assert run(ex.ex3, ns["roundtrip"], torch.tensor(EXPECTED)).passed
    assert_fails(run(ex.ex3, ns["roundtrip"], [2 * i for i in range(10)]), "expected[0] = 0")
    assert_fails(run(ex.ex3, ns["roundtrip"], [1, 3]), "10 số")
    assert_missing(run(ex.ex3, ns["roundtrip"], None), "expected")


def test_move_tracker_sees_unused_results():
    with MoveTracker() as tracker:
        x = torch.arange(4)
        x.to("cpu")                       # thrown away
        y = x.to("cpu")                   # kept
        z = y + 1
        tracker.mark_used(z)
    assert len(tracker.moves) == 2
    unused = tracker.unused_moves()
    assert len(unused) == 1 and unused[0] is tracker.moves[0]
    assert tracker.moves_of(x) == tracker.moves
    assert tracker.factories == [("arange", torch.device("cpu"))]
    assert torch.equal(y, x) and y is not x          # an alias: same values, a new object


# --------------------------------------------------------------------------- exercise 4


def test_ex4_reference_search_matches_the_meter():
    model = model4()
    right = oom._largest_fitting_batch(model, BUDGET)
    assert oom._activation_bytes(model, right) <= BUDGET < oom._activation_bytes(model, right + 1)
    assert oom._activation_bytes(model, 10) == 10 * oom._activation_bytes(model, 1)
    assert oom._largest_fitting_batch(model, 1) == 0
    assert oom._largest_fitting_batch(model, 3 * oom._activation_bytes(model, 1)) == 3


def test_ex4_wrong_answers(tmp_path):
    model = model4()
    right = oom._largest_fitting_batch(model, BUDGET)
    ns = load(ex.ex4.solution_code, tmp_path, SavedTensorMeter=SavedTensorMeter, model4=model, BUDGET=BUDGET)
    fits = ns["fits"]
    assert_fails(run(ex.ex4, fits, right + 1, model, BUDGET), "lệch một")
    power = 1 << (right.bit_length() - 1)
    assert_fails(run(ex.ex4, fits, power, model, BUDGET), "tìm nhị phân")
    assert_fails(run(ex.ex4, fits, right - 3, model, BUDGET), "chưa phải lớn nhất")
    assert_fails(run(ex.ex4, fits, 5 * right, model, BUDGET), "không vừa")
    assert_fails(run(ex.ex4, fits, "big", model, BUDGET), "số nguyên")
    dropped_output = load('''
        def fits(batch_size):
            x = torch.randn(batch_size, 64, device=device)
            with SavedTensorMeter(exclude=model4) as meter:
                model4(x)                     # the graph is freed at once: the meter reads 0
                held = meter.live_bytes
            return held <= BUDGET
    ''', tmp_path, SavedTensorMeter=SavedTensorMeter, model4=model, BUDGET=BUDGET)["fits"]
    assert_fails(run(ex.ex4, dropped_output, right, model, BUDGET), f"fits({right + 1}) = True")
    assert_missing(run(ex.ex4, lambda b: None, right, model, BUDGET), "thiếu return")
    assert_missing(run(ex.ex4, fits, None, model, BUDGET), "largest")
    assert_fails(run(ex.ex4, fits, right, None, BUDGET), "BUDGET")


def test_ex4_gpu_logic_with_fake_counters(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: 3 * 2**20)
    mib = 2**20
    assert run(ex.ex4_gpu, 10 * mib, 1000 * mib, 10 * mib).passed
    assert_fails(run(ex.ex4_gpu, 10 * mib, 1000 * mib, 900 * mib), "del tensors")
    assert_fails(run(ex.ex4_gpu, 10 * mib, 10 * mib, 10 * mib), "NGAY TRƯỚC")
    assert_missing(run(ex.ex4_gpu, 10 * mib, 1000 * mib, None), "after_cleanup")
    assert_fails(run(ex.ex4_gpu, 10 * mib, 1000 * mib, 1.5), "số byte")
    # baseline read while the previous run's list was still alive (the OOM cell re-run without dropping it)
    assert_fails(run(ex.ex4_gpu, 1000 * mib, 990 * mib, 10 * mib), "lần chạy TRƯỚC")


class _FakeCudaTensor:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


class _FakeCudaMemory:
    """Just enough of torch for the two OOM cells: live fake CUDA tensors are counted until Python drops them."""

    def __init__(self):
        self.live: weakref.WeakSet = weakref.WeakSet()
        self.cap: int | None = None
        self.torch = SimpleNamespace(
            randn=self.randn, OutOfMemoryError=torch.OutOfMemoryError,
            cuda=SimpleNamespace(memory_allocated=self.allocated, empty_cache=lambda: None))

    def allocated(self) -> int:
        return sum(t.nbytes for t in self.live)

    def randn(self, *shape, device=None):
        assert device == "cuda"
        nbytes = 4 * shape[0] * shape[1]
        if self.cap is not None and self.allocated() + nbytes > self.cap:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 MiB (fake)")
        tensor = _FakeCudaTensor(nbytes)
        self.live.add(tensor)
        return tensor

    @contextlib.contextmanager
    def cap_context(self, room_bytes, device=None):
        self.cap = self.allocated() + room_bytes
        try:
            yield self.cap
        finally:
            self.cap = None


def _oom_cells(path: Path) -> tuple[str, str]:
    gpu = [c.split("\n", 1)[1] for c in code_cells(path) if c.startswith("%%gpu")]
    oom_cell = next(c for c in gpu if "cuda_memory_cap" in c)
    cleanup = next(c for c in gpu if "ex4_gpu.check" in c)
    return oom_cell, cleanup


@pytest.mark.parametrize("order", [
    ("oom", "cleanup"), ("oom", "oom", "cleanup"), ("oom", "cleanup", "cleanup"),
    ("oom", "cleanup", "oom", "cleanup"), ("oom", "oom", "oom", "cleanup", "cleanup"),
])
def test_ex4_gpu_cells_can_be_rerun_in_any_order(order, monkeypatch, capsys):
    """The notebook's OOM and clean-up cells, run against a fake CUDA memory counter, pass in every re-run order."""
    fake = _FakeCudaMemory()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: fake.allocated())
    monkeypatch.setattr("lessons_lib.memory.cuda_memory_cap", fake.cap_context)
    oom_cell, cleanup = _oom_cells(SOLUTION_NB)
    ns = {"torch": fake.torch, "format_bytes": oom.format_bytes, "ex4_gpu": ex.ex4_gpu}
    fake.randn(4096, 4096, device="cuda")  # dropped at once: a stray temporary must not matter
    keep = [fake.randn(1024, 1024, device="cuda")]  # something else the notebook keeps on the GPU
    for step in order:
        exec(oom_cell if step == "oom" else cleanup, ns)
        if step == "cleanup":
            out = capsys.readouterr().out
            assert "✅" in out and "❌" not in out, (order, out)
            assert fake.allocated() == keep[0].nbytes
    assert "OOM:" in capsys.readouterr().out or order[-1] == "cleanup"


def test_ex4_gpu_rerun_without_dropping_the_old_list_is_caught(monkeypatch, capsys):
    """The old OOM cell (baseline read before the previous list was dropped) gave a false ❌; the checker says why."""
    fake = _FakeCudaMemory()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: fake.allocated())
    monkeypatch.setattr("lessons_lib.memory.cuda_memory_cap", fake.cap_context)
    oom_cell, cleanup = _oom_cells(SOLUTION_NB)
    old_cell = oom_cell.replace("tensors = []", "pass").replace(
        "baseline, before_error = torch.cuda.memory_allocated(), None",
        "baseline, before_error, tensors = torch.cuda.memory_allocated(), None, []")
    assert old_cell != oom_cell
    ns = {"torch": fake.torch, "format_bytes": oom.format_bytes, "ex4_gpu": ex.ex4_gpu}
    for cell in (old_cell, old_cell, cleanup):
        exec(cell, ns)
    assert "lần chạy TRƯỚC" in capsys.readouterr().out


def test_every_gpu_cell_of_notebook_10_compiles():
    for path in (LEARNER_NB, SOLUTION_NB):
        for source in code_cells(path):
            if source.startswith("%%gpu"):
                compile(source.split("\n", 1)[1], f"<{path.name} %%gpu cell>", "exec")


def test_gpu_timing_cell_runs_with_cpu_standing_in_for_cuda(capsys):
    """Dry-run the %%gpu timing solution on the CPU (small sizes): it prints one comparison line per size."""
    cell = next(c for c in code_cells(SOLUTION_NB) if c.startswith("%%gpu") and "t_copy" in c).split("\n", 1)[1]
    cell = (cell.replace('"cuda"', '"cpu"').replace("torch.cuda.synchronize", "(lambda: None)")
            .replace("(64, 500, 5000)", "(64, 96, 128)"))
    ns: dict = {}
    exec(ex.ex2a.solution_code, ns)
    exec(ex.ex2b.solution_code, ns)
    ns.update(torch=torch, cpu_times={64: 1e-5, 96: 2e-5})
    exec(cell, ns)
    out = capsys.readouterr().out
    assert len(re.findall(r"^N=\d+: CPU", out, re.M)) == 3 and "GPU + chép" in out and "ước lượng từ N=96" in out
    assert re.search(r"(nhanh|CHẬM) hơn \d", out)


# --------------------------------------------------------------------------- exercise 5

_AMP_LOOP = '''
def train_amp(model, x, y, amp_dtype, steps=20):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device_type=x.device.type, dtype={dtype}, enabled={enabled}):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append({keep})
    return losses
'''


def _amp(tmp_path, dtype="amp_dtype", enabled="amp_dtype is not None", keep="loss.item()"):
    return load(_AMP_LOOP.format(dtype=dtype, enabled=enabled, keep=keep), tmp_path)["train_amp"]


def test_ex5_wrong_answers(tmp_path):
    assert amp._amp_dtype(torch.device("cpu")) == torch.bfloat16
    assert_fails(run(ex.ex5, _amp(tmp_path, enabled="False")), "autocast chưa bật")
    assert_fails(run(ex.ex5, _amp(tmp_path, dtype="torch.bfloat16", enabled="True")), "amp_dtype=None")
    assert_fails(run(ex.ex5, _amp(tmp_path, keep="loss")), "loss.item()")
    assert_fails(run(ex.ex5, _amp(tmp_path, keep="'?'")), "loss.item()")
    assert_missing(run(ex.ex5, lambda model, x, y, amp_dtype, steps=20: None), "return losses")
    if not HAS_CUDA:
        assert run(ex.ex5, _amp(tmp_path)).passed  # bf16 on the CPU needs no GradScaler


def test_ex5_fp16_needs_a_grad_scaler(tmp_path, monkeypatch):
    monkeypatch.setattr(amp, "_amp_dtype", lambda device: torch.float16)  # as on a CUDA GPU
    assert_fails(run(ex.ex5, _amp(tmp_path)), "fp16 cần GradScaler")
    ns = load(ex.ex5.solution_code, tmp_path)
    assert run(ex.ex5, ns["train_amp"]).passed
    assert torch.amp.GradScaler.scale.__name__ == "scale"  # the counting patch is undone


def test_ex5_gpu_logic(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert run(ex.ex5_gpu, {"fp32": 1200 * 2**20, "amp": 900 * 2**20}).passed
    assert "25%" in str(run(ex.ex5_gpu, {"fp32": 1200 * 2**20, "amp": 900 * 2**20}))
    assert_fails(run(ex.ex5_gpu, {"fp32": 1200 * 2**20, "amp": 1200 * 2**20}), "reset_peak_memory_stats")
    assert_fails(run(ex.ex5_gpu, {"fp32": 1}), "dict")
    assert_missing(run(ex.ex5_gpu, {}))
    assert_missing(run(ex.ex5_gpu, {"fp32": 5, "amp": None}))


# --------------------------------------------------------------------------- exercise 6

_FIXED_TRAIN = ex.ex6.solution_code


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    model.to(device)                                # Module.to: tại chỗ\n", "", "model chưa được đưa lên device"),
    ("xb, yb = xb.to(device), yb.to(device)", "xb.to(device); yb = yb.to(device)", "xb.to(device) không sửa xb"),
    ("xb, yb = xb.to(device), yb.to(device)", "xb = xb.to(device)", "yb không được chuyển"),
    ("losses.append(loss.item())", "losses.append(loss)", "loss.item()"),
    ("optimizer.step()", "pass", "loss không giảm"),
])
def test_ex6_finds_each_bug(old, new, message, tmp_path):
    assert old in _FIXED_TRAIN
    ns = load(_FIXED_TRAIN.replace(old, new), tmp_path)
    assert_fails(run(ex.ex6, ns["train"]), message)


def test_ex6_unchanged_starter_is_not_done_yet(tmp_path):
    ns = load(ex.ex6.starter_code, tmp_path)
    assert_missing(run(ex.ex6, ns["train"]), "bản có lỗi")
    edited = load(ex.ex6.starter_code.replace("losses.append(loss)", "losses.append(loss.item())"), tmp_path)
    feedback = run(ex.ex6, edited["train"])
    assert_fails(feedback, "model chưa được đưa", "xb.to(device) không sửa", "yb không được chuyển")
    assert "loss.item()" not in str(feedback).split("→")[0]


# --------------------------------------------------------------------------- exercise 7

_FIXED_HEAD = ex.ex7.solution_code


def test_ex7_finds_each_bug(tmp_path):
    randn_bug = _FIXED_HEAD.replace("torch.randn_like(x)", "torch.randn(x.shape)")
    assert_fails(run(ex.ex7, load(randn_bug, tmp_path)["NoisyHead"]), "torch.randn(...) trong forward")
    attribute_bug = _FIXED_HEAD.replace('self.register_buffer("scale", torch.linspace(0.5, 1.5, d))',
                                        "self.scale = torch.linspace(0.5, 1.5, d)")
    assert_fails(run(ex.ex7, load(attribute_bug, tmp_path)["NoisyHead"]), "register_buffer")
    no_noise = _FIXED_HEAD.replace("x = x + 0.1 * torch.randn_like(x)", "x = x")
    assert_fails(run(ex.ex7, load(no_noise, tmp_path)["NoisyHead"]), "nhiễu đã mất")
    changed = _FIXED_HEAD.replace("return self.fc(x) * self.scale", "return self.fc(x)")
    assert_fails(run(ex.ex7, load(changed, tmp_path)["NoisyHead"]), "đừng đổi phép tính")
    fixed = load(_FIXED_HEAD, tmp_path)["NoisyHead"]
    assert_fails(run(ex.ex7, fixed(16)), "chính lớp")
    copied = _FIXED_HEAD.replace("torch.randn_like(x)", "torch.randn(x.shape).to(x.device)")
    feedback = run(ex.ex7, load(copied, tmp_path)["NoisyHead"])
    assert feedback.passed and "tránh một lần chép" in str(feedback)


def test_ex7_unchanged_starter_is_not_done_yet(tmp_path):
    ns = load(ex.ex7.starter_code, tmp_path)
    assert_missing(run(ex.ex7, ns["NoisyHead"]), "bản có lỗi")
    commented = load(ex.ex7.starter_code.replace("    def forward", "    # a comment\n    def forward"), tmp_path)
    assert_missing(run(ex.ex7, commented["NoisyHead"]))


def test_same_code_compares_functions_and_classes(tmp_path):
    ns = load("def f(a):\n    return a + 1  # comment\n\nclass C:\n    def m(self):\n        return 2\n", tmp_path)
    assert _core.same_code(ns["f"], "def f(a):\n    return a+1\n")
    assert not _core.same_code(ns["f"], "def f(a):\n    return a + 2\n")
    assert _core.same_code(ns["C"], "class C:\n    def m(self):  # x\n        return 2\n")
    assert not _core.same_code(ns["C"], "class C:\n    def m(self):\n        return 3\n")
    assert not _core.same_code(len, "def len(x): pass")
    assert not _core.same_code(ns["f"], None)


# --------------------------------------------------------------------------- exercise 8

_FIXED_ACC = ex.ex8.solution_code


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    model.zero_grad()\n", "", "zero_grad() ở ĐẦU"),
    ("(loss * len(xb) / len(x)).backward()", "loss.backward()", "gấp 4 lần"),
    ("(loss * len(xb) / len(x)).backward()", "model.zero_grad(); (loss * len(xb) / len(x)).backward()",
     "micro-batch cuối"),
    ("(loss * len(xb) / len(x)).backward()", "(loss / -(-len(x) // micro_batch)).backward()", "len(xb) / len(x)"),
    ("model(xb)", "model(x)[:len(xb)]", "micro_batch=8"),
])
def test_ex8_catches_each_mistake(old, new, message, tmp_path):
    assert old in _FIXED_ACC
    ns = load(_FIXED_ACC.replace(old, new), tmp_path)
    assert_fails(run(ex.ex8, ns["accumulate"]), message)


def test_ex8_blank_and_optimizer_step(tmp_path):
    assert_missing(run(ex.ex8, load("def accumulate(model, x, y, micro_batch):\n    model.zero_grad()\n    ...\n",
                                    tmp_path)["accumulate"]))
    stepping = _FIXED_ACC + "\n    with torch.no_grad():\n        for p in model.parameters():\n            p -= 0.1 * p.grad\n"
    assert_fails(run(ex.ex8, load(stepping, tmp_path)["accumulate"]), "optimizer.step()")


# --------------------------------------------------------------------------- the Exercise API


def test_check_prints_and_hints_progress(capsys, monkeypatch):
    ex.ex2b.check(None)
    assert "⏳" in capsys.readouterr().out
    monkeypatch.setattr(_core, "_solutions", lambda: {"exercises": {"tmp_ex": "x = 1"}})
    exercise = _core.Exercise("tmp_ex", "Bài X", lambda report, a=None: None, ["gợi ý một", "gợi ý hai"])
    try:
        exercise.hint()
        assert "1/2" in capsys.readouterr().out
        exercise.hint()
        out = capsys.readouterr().out
        assert "2/2" in out and "gợi ý hai" in out and "tmp_ex.solution()" in out
        exercise.hint()
        assert "2/2" in capsys.readouterr().out
        exercise.hint(1)
        assert "gợi ý một" in capsys.readouterr().out
        exercise.solution()
        assert "x = 1" in capsys.readouterr().out
        with pytest.raises(ValueError, match="from 1 to 2"):
            exercise.hint(3)
        with pytest.raises(TypeError, match="int from 1 to 2"):
            exercise.hint("1")
        assert exercise.evaluate().passed and "tmp_ex" in repr(exercise)
    finally:
        del _core.REGISTRY["tmp_ex"]


def test_groups_keep_lesson_tasks_apart(capsys):
    task = _core.Exercise("task1", "Nhiệm vụ thử", lambda report: report.success("ok"), ["gợi ý"], group="lesson99")
    try:
        assert "task1" not in _core.REGISTRY and _core.GROUPS["lesson99"]["task1"] is task
        task.check()
        capsys.readouterr()
        ex.progress("lesson99")
        out = capsys.readouterr().out
        assert "Tiến độ: 1/1 bài đạt" in out and "Nhiệm vụ thử" in out
        ex.progress()
        assert "Nhiệm vụ thử" not in capsys.readouterr().out
    finally:
        del _core.GROUPS["lesson99"]
    with pytest.raises(ValueError, match="group must be one of"):
        ex.progress("lesson99")
    with pytest.raises(TypeError, match="group must be a str"):
        ex.progress(4)


def test_progress_lists_every_exercise(capsys):
    ex.ex2c.check({"A", "C", "D"})
    ex.progress()
    out = capsys.readouterr().out
    assert "Tiến độ:" in out and out.count("Bài ") >= len(_core.REGISTRY)
    assert re.search(r"Bài 2c .*✅ đạt", out)
    lines = [line for line in out.split("Tiến độ:")[1].splitlines() if "Bài " in line]
    assert lines[0].strip().startswith("Bài 1 ") and lines[-1].strip().startswith("Bài 8 ")


def test_helpers():
    assert _core.is_blank(None) and _core.is_blank(...) and not _core.is_blank(0)
    assert _core.as_device("cuda:1") == torch.device("cuda:1") and _core.as_device("nope") is None
    assert _core.as_device(3) is None
    assert _core.same_device(torch.device("cuda"), torch.device("cuda:0"))
    assert not _core.same_device(torch.device("cuda:1"), torch.device("cuda:0"))
    assert _core.number(torch.tensor(2.5)) == 2.5 and _core.number(True) is None
    assert _core.number(torch.zeros(1, device="meta")) is None


# --------------------------------------------------------------------------- the notebooks


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_every_solution_prints_the_solution_region_of_its_lesson(capsys):
    """solution() of every task (notebook 10's and the lessons') prints its SOLUTION region, as built now."""
    for path in sorted((ROOT / "lessons_lib" / "exercises").glob("lesson[0-9][0-9].py")):
        importlib.import_module(f"lessons_lib.exercises.{path.stem}")
    built = json.loads(build_course.solutions_json())
    groups = {group: tasks for group, tasks in _core.GROUPS.items() if tasks}
    assert {g: sorted(t) for g, t in groups.items()} == {g: sorted(t) for g, t in built.items()}
    for group, tasks in groups.items():
        for key, exercise in tasks.items():
            exercise.solution()
            assert capsys.readouterr().out == f"📖 {exercise.title} — lời giải:\n\n{built[group][key]}\n", key


def test_learner_notebook_holds_every_starter_and_both_every_check():
    solutions = "\n".join(code_cells(SOLUTION_NB))
    learner = "\n".join(code_cells(LEARNER_NB))
    for exercise in _core.REGISTRY.values():
        assert f"{exercise.key}.check(" in solutions and f"{exercise.key}.check(" in learner
        if exercise.starter_code:
            assert normalised(exercise.starter_code) in normalised(learner), f"{exercise.key} starter differs"


def test_badges_open_both_notebooks_on_colab_and_kaggle():
    badges = (ROOT / "colab_badges.md").read_text(encoding="utf-8")
    for path in (LEARNER_NB, SOLUTION_NB):
        rel = path.relative_to(ROOT).as_posix()
        first = "".join(_cells(path)[0]["source"])
        assert f"blob/main/{rel}" in first and "kaggle.com/kernels/welcome?src=" in first
        assert rel.replace("/", "%2F") in first
        assert f"blob/main/{rel})" in badges and rel.replace("/", "%2F") + ")" in badges


@pytest.fixture
def fresh_registry():
    saved = {key: e.last_status for key, e in _core.REGISTRY.items()}
    for e in _core.REGISTRY.values():
        e.last_status = None
    yield
    for key, status in saved.items():
        _core.REGISTRY[key].last_status = status


@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the notebooks run their %%gpu cells under nbval instead")
def test_solutions_notebook_passes_every_check(fresh_registry):
    out, _ = run_notebook(SOLUTION_NB)
    assert "❌" not in out and "⏳" not in out, out
    cpu_exercises = [e for e in _core.REGISTRY.values() if not e.gpu]
    assert out.count("✅ Bài") >= len(cpu_exercises), out
    assert all(e.last_status == "pass" for e in cpu_exercises)
    assert f"Tiến độ: {len(cpu_exercises)}/{len(_core.REGISTRY)} bài đạt" in out


@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the notebooks run their %%gpu cells under nbval instead")
def test_learner_notebook_runs_and_reports_not_done(fresh_registry):
    out, _ = run_notebook(LEARNER_NB)
    assert "✅ Bài" not in out and "❌" not in out, out
    assert all(e.last_status == "missing" for e in _core.REGISTRY.values() if not e.gpu)
    assert "Tiến độ: 0/" in out


def test_nothing_leaks_between_tests():
    assert sys.modules["lessons_lib.exercises"] is ex
