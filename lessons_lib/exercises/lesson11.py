"""Lesson 11's checked tasks (``evaluate``, ``train_epoch``) on load_digits, and section 7's verdicts.

scikit-learn is imported only when a check runs; ``reference_evaluate`` / ``reference_train_epoch`` are the
lesson's solutions, so the later sections run whether the tasks are done or not.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from types import SimpleNamespace
from unittest import mock

import torch
from torch import nn

from .._validate import check_number
from ..device import pick_device
from ._core import Exercise, Report, Wrong, first_true, number, on_gpu_note
from ._tracking import scaler_calls

_TEST_SIZE, _SPLIT_SEED = 0.25, 0  # how the notebook splits load_digits
_BATCH_SIZE, _LR, _MAX_EPOCHS, _TARGET_ACCURACY = 64, 1e-2, 10, 0.95
_DIGITS: dict[str, torch.Tensor] = {}


def _data(report: Report, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Return fresh ``X_train, y_train, X_test, y_test`` of load_digits (pixels 0..1) split as in notebook 11."""
    if not _DIGITS:
        try:  # an optional dependency, imported only when a check runs
            from sklearn.datasets import load_digits
            from sklearn.model_selection import train_test_split
        except ImportError:
            report.problem("bài 14.11 cần scikit-learn (Colab và Kaggle có sẵn): chạy `pip install scikit-learn` rồi "
                           "khởi động lại kernel.", stop=True)
        digits = load_digits()
        parts = train_test_split(digits.data, digits.target, test_size=_TEST_SIZE, stratify=digits.target,
                                 random_state=_SPLIT_SEED)
        for key, value in zip(("X_train", "X_test", "y_train", "y_test"), parts, strict=True):
            tensor = torch.from_numpy(value)
            _DIGITS[key] = tensor.float() / 16 if key.startswith("X") else tensor.long()
    return tuple(_DIGITS[key].to(device, copy=True) for key in ("X_train", "y_train", "X_test", "y_test"))


def _make_digits_model(dropout: float = 0.2) -> nn.Sequential:
    """Return the notebook's MLP (64 pixels → 128 → 10 digits), seeded, leaving the global RNG alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(dropout), nn.Linear(128, 10))


def _rng_guard(device: torch.device):
    """Return a context that restores the global RNG afterwards: a check never shifts the notebook's numbers."""
    return torch.random.fork_rng(devices=[torch.cuda.current_device()] if device.type == "cuda" else [])


class _Watch:
    """Record each forward's (training, grad mode, rows, output dtype); with `keep_next`, its input too."""

    def __init__(self, model: nn.Module):
        self.calls: list[tuple[bool, bool, int, torch.dtype | None]] = []
        self.first_batches: list[torch.Tensor] = []
        self.keep_next = False
        self.close = model.register_forward_hook(self._hook).remove

    def _hook(self, module, inputs, output) -> None:
        x = inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None
        rows = int(x.shape[0]) if x is not None and x.dim() > 0 else 0
        dtype = output.dtype if isinstance(output, torch.Tensor) else None
        self.calls.append((module.training, torch.is_grad_enabled(), rows, dtype))
        if self.keep_next and x is not None:
            self.first_batches.append(x.detach().float().cpu())
            self.keep_next = False


#: How evaluate() may predict wrongly (`e`: its forwards' (training, grad mode, …), what it returned, the right value):
#: every one found is reported.
MODE_WRONGS = [
    Wrong("train mode", lambda e: any(training for training, *_ in e.calls),
          "model vẫn ở chế độ train khi dự đoán: gọi model.eval() trước (dropout đang bật nên kết quả ngẫu nhiên mỗi "
          "lần và thấp hơn thật; BatchNorm cũng sẽ dùng thống kê của batch)."),
    Wrong("autograd on", lambda e: any(grad for _, grad, *_ in e.calls),
          "autograd vẫn bật khi dự đoán: bọc forward trong `with torch.no_grad():` (hoặc torch.inference_mode()), "
          "nếu không PyTorch giữ đồ thị và activation chỉ để bỏ đi."),
    Wrong("autograd off for good", lambda e: e.grad_left_off,
          "evaluate tắt autograd cho cả chương trình (torch.set_grad_enabled(False)) mà không bật lại: các ô train "
          "sau sẽ không học được. Dùng `with torch.no_grad():` để chỉ tắt bên trong khối."),
]
#: What evaluate() may return wrongly: the first one found is reported (the value ones only when predicting right).
RESULT_WRONGS = [
    Wrong("no forward", lambda e: not e.calls, "evaluate không gọi model(X) (bộ chấm không thấy lần forward nào)."),
    Wrong("graph", lambda e: isinstance(e.got, torch.Tensor) and e.got.requires_grad,
          "evaluate trả về tensor còn gắn đồ thị autograd: trả về một số Python (.item())."),
    Wrong("tensor", lambda e: isinstance(e.got, torch.Tensor),
          "evaluate trả về một tensor, không phải số Python: kết thúc bằng `return (pred == y).float().mean().item()`. "
          "Trên GPU, tensor đó còn nằm trên GPU, và mỗi phép so hay in nó sau này lại bắt CPU chờ."),
    Wrong("not a number", lambda e: e.value is None, lambda e: (
        f"evaluate phải trả về độ chính xác là một số (vd 0.93), không phải {type(e.got).__name__}.")),
]
VALUE_WRONGS = [
    Wrong("percent", lambda e: math.isclose(e.value, 100 * e.right, abs_tol=1e-2), lambda e: (
        f"evaluate trả về phần trăm ({e.value:.2f}); hãy trả về tỉ lệ từ 0 đến 1 ({e.right:.4f}).")),
    Wrong("count", lambda e: math.isclose(e.value, e.right * e.n, abs_tol=0.5), lambda e: (
        f"evaluate trả về số ảnh đoán đúng ({e.value:.0f}); chia cho len(y) = {e.n} để được tỉ lệ.")),
    Wrong("other", lambda e: not math.isclose(e.value, e.right, abs_tol=1e-4), lambda e: (
        f"evaluate trả về {e.value:.4f}, nhưng mô hình đoán đúng {e.right:.4f} ảnh test. Dự đoán là "
        "model(X).argmax(dim=1) (lớp có logit lớn nhất của TỪNG ảnh), rồi so với y trên cả tập.")),
]


def _evaluate_task1(report: Report, evaluate=None) -> None:
    report.require_function(evaluate, "evaluate(model, X, y)")
    device = pick_device()
    X_train, y_train, X_test, y_test = _data(report, device)
    model = _make_digits_model(dropout=0.5).to(device)       # strong dropout: train mode changes the answers
    optimizer = torch.optim.Adam(model.parameters(), lr=_LR)
    with _rng_guard(device):
        torch.manual_seed(0)
        scaler = torch.amp.GradScaler(device.type, enabled=False)
        reference_train_epoch(model, optimizer, scaler, X_train, y_train, _BATCH_SIZE)  # a partly trained model
    right = reference_evaluate(model, X_test, y_test)
    model.train()                                            # as after a training epoch
    watch = _Watch(model)
    try:
        with torch.enable_grad(), _rng_guard(device):
            got = report.call("evaluate(model, X_test, y_test)", evaluate, model, X_test, y_test)
            grad_left_off = not torch.is_grad_enabled()
    finally:
        watch.close()
    report.require_return(got, "evaluate", "độ chính xác")
    seen = SimpleNamespace(calls=watch.calls, got=got, value=number(got), grad_left_off=grad_left_off, right=right,
                           n=len(y_test))
    for row in MODE_WRONGS:
        report.diagnose([row], seen, stop=False)
    report.diagnose(RESULT_WRONGS, seen)
    if report.problems or report.diagnose(VALUE_WRONGS, seen):
        return
    report.success(f"model.eval() + no_grad, độ chính xác {seen.value:.1%} trên {seen.n} ảnh test (mô hình mới "
                   "train 1 epoch của bộ chấm).")
    report.note("evaluate để mô hình ở chế độ eval: vòng train phải gọi model.train() ở đầu mỗi epoch (nhiệm vụ 2).")


task1 = Exercise("task1", "Nhiệm vụ 1 · Hàm evaluate đúng cách", _evaluate_task1,
                 wrongs=MODE_WRONGS + RESULT_WRONGS + VALUE_WRONGS, hints=[
    "Hai việc trước khi dự đoán: model.eval() (tắt dropout) và `with torch.no_grad():` (tắt autograd). "
    "Rồi pred = model(X).argmax(dim=1).",
    "Độ chính xác = (pred == y).float().mean().item(): tỉ lệ từ 0 đến 1, một số Python.",
])


def _amp_dtype_for_check(device: torch.device) -> torch.dtype | None:
    """Return the autocast dtype task2's check trains with on `device`: fp16 on CUDA, bf16 on the CPU, else None."""
    return {"cuda": torch.float16, "cpu": torch.bfloat16}.get(device.type)


def _nonzero(grad) -> bool:
    return grad is not None and bool(grad.abs().sum() > 0)


class _GradientWatch:
    """Count steps and backwards; see stale gradients (not cleared between a step and a backward)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer):
        self.steps = self.backwards = self._since_step = 0
        self.stale = self.zero_at_step = False
        self._param = next(model.parameters())
        self._handles = [self._param.register_hook(self._before_accumulate),
                         optimizer.register_step_pre_hook(self._pre_step),
                         optimizer.register_step_post_hook(self._post_step)]

    def _before_accumulate(self, grad):
        self.backwards += 1
        self.stale |= bool(self._since_step) and _nonzero(self._param.grad)
        self._since_step = 0
        return grad

    def _pre_step(self, optimizer, args, kwargs) -> None:
        self.zero_at_step |= not any(_nonzero(p.grad) for group in optimizer.param_groups for p in group["params"])

    def _post_step(self, optimizer, args, kwargs) -> None:
        self.steps += 1
        self._since_step += 1

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


#: What train_epoch may return instead of the epoch's mean loss as a Python number.
LOSS_WRONGS = [
    Wrong("graph", lambda v: isinstance(v, torch.Tensor) and v.requires_grad,
          "train_epoch trả về tensor còn gắn đồ thị autograd: cộng loss.detach() và trả về .item() (giữ đồ thị của "
          "mọi bước là một nguyên nhân OOM)."),
    Wrong("tensor", lambda v: isinstance(v, torch.Tensor),
          "train_epoch trả về một tensor, không phải số Python: cuối hàm `return (total / len(X)).item()` (một lần "
          ".item() mỗi epoch)."),
    Wrong("not a number", lambda v: number(v) is None, lambda v: (
        f"train_epoch phải trả về loss trung bình của epoch (một số), không phải {type(v).__name__}.")),
    Wrong("diverged", lambda v: not math.isfinite(number(v)), lambda v: (
        f"train_epoch trả về loss {number(v)}: mô hình đã phân kỳ (NaN/inf).")),
]


@contextlib.contextmanager
def _item_calls():
    """Yield a one-item list counting the learner's own `.item()` and `float(tensor)` calls (not Adam's, …)."""
    count, torch_dir = [0], os.path.dirname(torch.__file__)

    def counted(original):
        def wrapper(tensor, *args, **kwargs):
            count[0] += not sys._getframe(1).f_code.co_filename.startswith(torch_dir)
            return original(tensor, *args, **kwargs)
        return wrapper

    with mock.patch.multiple(torch.Tensor, item=counted(torch.Tensor.item), __float__=counted(torch.Tensor.__float__)):
        yield count


#: What one epoch may do wrong (`e`: its forwards, .item() calls, the optimizer and scaler, the weights), in groups: the first row of each group that holds is reported (all groups are
#: looked at; the last one only when the weights did not change, and it ends the check).
EPOCH_WRONGS = [
    [Wrong("item each step", lambda e: e.items > 2 and e.items >= len(e.calls) // 2, lambda e: (
        f"train_epoch gọi .item() (hoặc float(loss)) {e.items} lần cho {len(e.calls)} batch: trên GPU, mỗi lần như "
        "vậy bắt CPU chờ GPU làm xong bước đó. Cộng trên device (total += loss.detach().float() * len(idx)) và chỉ "
        "gọi .item() một lần ở cuối epoch."))],
    [Wrong("eval mode", lambda e: any(not training for training, *_ in e.calls),
           "mô hình còn ở chế độ eval khi train (evaluate đã gọi model.eval()): gọi model.train() ở đầu train_epoch, "
           "nếu không dropout bị tắt suốt quá trình train.")],
    [Wrong("whole data", lambda e: e.largest > _BATCH_SIZE, lambda e: (
        f"một lần forward nhận {e.largest} ảnh, lớn hơn batch_size={_BATCH_SIZE}: mỗi bước chỉ đưa vào X[idx] với "
        "idx là batch_size chỉ số.")),
     Wrong("last batch left out", lambda e: 0 < e.n_rows - e.seen < _BATCH_SIZE, lambda e: (
         f"một epoch chỉ đưa {e.seen}/{e.n_rows} ảnh vào mô hình: vòng lặp bỏ sót batch cuối (dùng "
         "range(0, len(X), batch_size), batch cuối có thể ngắn hơn).")),
     Wrong("batches left out", lambda e: e.seen < e.n_rows, lambda e: (
         f"một epoch chỉ đưa {e.seen}/{e.n_rows} ảnh vào mô hình: các batch phải phủ hết tập train, bước nhảy của "
         "vòng for bằng đúng kích thước batch (idx = order[start:start + batch_size]).")),
     Wrong("samples twice", lambda e: e.seen > e.n_rows, lambda e: (
         f"một epoch đưa {e.seen} lượt ảnh vào mô hình, trong khi tập train có {e.n_rows}: mỗi ảnh chỉ nên đi qua "
         "đúng một lần mỗi epoch.")),
     Wrong("fixed batch size", lambda e: e.largest < _BATCH_SIZE, lambda e: (
         f"batch lớn nhất chỉ có {e.largest} ảnh: dùng tham số batch_size={_BATCH_SIZE}."))],
    [Wrong("no autocast", lambda e: e.amp_dtype is not None and e.amp_dtype not in {d for *_, d in e.calls},
           lambda e: (f"với amp_dtype={e.short}, đầu ra của mô hình vẫn là {sorted({str(d) for *_, d in e.calls})}: "
                      "forward và loss phải nằm trong `with torch.autocast(X.device.type, dtype=amp_dtype, "
                      "enabled=amp_dtype is not None):`."))],
    [Wrong("no step", lambda e: e.grads.steps == 0,
           "optimizer được truyền vào không được step lần nào: sau backward gọi scaler.step(optimizer) với chính "
           "optimizer là tham số của train_epoch (đừng tạo optimizer mới trong hàm)."),
     Wrong("two steps", lambda e: e.grads.steps > len(e.calls), lambda e: (
         f"{e.grads.steps} lần optimizer.step() cho {len(e.calls)} batch: scaler.step(optimizer) đã gọi "
         "optimizer.step() rồi, đừng gọi thêm."))],
    [Wrong("stale gradients", lambda e: e.grads.stale,
           "gradient của batch trước còn nguyên khi backward batch sau: gọi optimizer.zero_grad() mỗi batch, nếu "
           "không gradient cộng dồn qua mọi bước.")],
    [Wrong("no scaler", lambda e: e.unused, lambda e: (
        "chưa dùng " + ", ".join(f"scaler.{name}(...)" for name in e.unused) + ": với float16 trên GPU, "
        "scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update() giữ gradient nhỏ khỏi về 0; với "
        "bf16/FP32 scaler tắt và ba lời gọi đó không đổi gì, nên cùng một hàm chạy mọi nơi."))],
    [Wrong("no backward", lambda e: not e.learned and e.grads.backwards == 0,
           "không có lần backward nào: gradient không được tính. Mỗi batch gọi scaler.scale(loss).backward()."),
     Wrong("zero_grad before step", lambda e: not e.learned and e.grads.steps and e.grads.zero_at_step,
           "gradient bằng 0 lúc optimizer.step(): zero_grad() phải đứng TRƯỚC backward() (hoặc sau step()), không "
           "phải giữa backward() và step()."),
     Wrong("not learning", lambda e: not e.learned,
           "sau một epoch, tham số không đổi: mô hình không học. Mỗi batch cần scaler.scale(loss).backward() rồi "
           "scaler.step(optimizer) (tức optimizer.step()).")],
]


#: Why a run that trains may still miss the target (`r`: the first batch of each epoch, accuracies, losses).
RUN_WRONGS = [
    Wrong("not shuffled", lambda r: len(r.first_batches) >= 2 and torch.equal(*r.first_batches[:2]),
          "epoch 1 và epoch 2 bắt đầu bằng cùng một batch: dữ liệu không được xáo trộn. Lấy thứ tự mới mỗi epoch: "
          "order = torch.randperm(len(X), device=X.device), rồi idx = order[start:start + batch_size]."),
    Wrong("below target", lambda r: r.accuracies[-1] < _TARGET_ACCURACY, lambda r: (
        f"sau {_MAX_EPOCHS} epoch, độ chính xác test chỉ {max(r.accuracies):.1%} (cần ≥ {_TARGET_ACCURACY:.0%}). "
        "Loss trung bình từng epoch: " + ", ".join(f"{v:.3f}" for v in r.losses) + ". Kiểm tra: X và y lấy CÙNG "
        "chỉ số idx, loss là F.cross_entropy(logits, nhãn), và mỗi batch theo thứ tự zero_grad → backward → step.")),
]


def _evaluate_task2(report: Report, train_epoch=None) -> None:
    report.require_function(train_epoch, "train_epoch(model, optimizer, scaler, X, y, batch_size, amp_dtype)")
    device = pick_device()
    X_train, y_train, X_test, y_test = _data(report, device)
    amp_dtype = _amp_dtype_for_check(device)
    short = str(amp_dtype).removeprefix("torch.") if amp_dtype is not None else "FP32"
    what = f"train_epoch(..., batch_size={_BATCH_SIZE}, amp_dtype={'None' if amp_dtype is None else short})"
    model = _make_digits_model().to(device)
    model.eval()                                       # as after evaluate(): train_epoch must switch back
    optimizer = torch.optim.Adam(model.parameters(), lr=_LR)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    watch, grads = _Watch(model), _GradientWatch(model, optimizer)
    run = SimpleNamespace(first_batches=watch.first_batches, accuracies=[], losses=[])
    try:
        with _rng_guard(device), scaler_calls(scaler) as used:
            torch.manual_seed(0)
            for epoch in range(1, _MAX_EPOCHS + 1):
                before = [p.detach().clone() for p in model.parameters()]
                calls_before, watch.keep_next = len(watch.calls), True
                with torch.enable_grad(), _item_calls() as items:
                    value = report.call(what, train_epoch, model, optimizer, scaler, X_train, y_train, _BATCH_SIZE,
                                        amp_dtype)
                report.require_return(value, "train_epoch", "loss trung bình của epoch")
                report.diagnose(LOSS_WRONGS, value)
                run.losses.append(number(value))
                if epoch == 1:
                    grads.close()                      # one epoch tells enough about zero_grad and step
                    calls = watch.calls[calls_before:]
                    if not calls:
                        report.problem("train_epoch không gọi model(...) (bộ chấm không thấy lần forward nào).",
                                       stop=True)
                    learned = any(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters(),
                                                                                 strict=True))
                    rows = [r for *_, r, _ in calls]
                    on_scaler = {c.name for c in used if c.own}
                    first = SimpleNamespace(calls=calls, n_rows=len(X_train), items=items[0], grads=grads,
                                            amp_dtype=amp_dtype, short=short, learned=learned, seen=sum(rows),
                                            largest=max(rows), unused=[name for name in ("scale", "step", "update")
                                                                       if name not in on_scaler])
                    for group in EPOCH_WRONGS:
                        report.diagnose(group, first, stop=group is EPOCH_WRONGS[-1])
                    if report.problems:
                        return
                run.accuracies.append(reference_evaluate(model, X_test, y_test))  # leaves eval mode, as the notebook
                if epoch >= 2 and run.accuracies[-1] >= _TARGET_ACCURACY:
                    break
    finally:
        watch.close()
        grads.close()
    if report.diagnose(RUN_WRONGS, run, stop=False):
        return
    precision = f"autocast {short}" if amp_dtype is not None else "FP32"
    report.success(f"độ chính xác test {run.accuracies[-1]:.1%} sau {len(run.accuracies)} epoch (mục tiêu ≥ "
                   f"{_TARGET_ACCURACY:.0%} trong {_MAX_EPOCHS} epoch) trên {device.type}, {precision}; "
                   f"loss trung bình {run.losses[0]:.3f} → {run.losses[-1]:.3f}.")
    on_gpu_note(report, device, "cùng hàm này chạy với float16 và một GradScaler đang bật (ô %%gpu của mục 8).")


task2 = Exercise("task2", "Nhiệm vụ 2 · Vòng train một epoch (AMP)", _evaluate_task2,
                 wrongs=LOSS_WRONGS + [row for group in EPOCH_WRONGS for row in group] + RUN_WRONGS, hints=[
    "Khung của một epoch: model.train(); order = torch.randperm(len(X), device=X.device); rồi với start chạy "
    "range(0, len(X), batch_size): idx = order[start:start + batch_size], forward + loss trên X[idx], y[idx].",
    "Mỗi batch: forward + F.cross_entropy trong `with torch.autocast(X.device.type, dtype=amp_dtype, "
    "enabled=amp_dtype is not None):`; rồi optimizer.zero_grad(), scaler.scale(loss).backward(), "
    "scaler.step(optimizer), scaler.update().",
    "Loss trung bình: total += loss.detach().float() * len(idx) trong vòng lặp (không đồng bộ GPU mỗi bước), "
    "cuối epoch return (total / len(X)).item().",
])


reference_evaluate = task1.solution_function("evaluate")
reference_train_epoch = task2.solution_function("train_epoch")

# Section 8's verdicts on the CPU times (the learner answers q2/q3 first).

_EQUAL_WITHIN = 1.1  # a ratio within 10% of 1 is "about equal" (a shared CPU often varies more between runs)
_BUSY = "số đo nhiễu (máy bận?): chạy lại ô đo, đừng rút kết luận từ lần này"


def _check_times(times, gflop=None) -> tuple[str, str]:
    """Validate section 7's ``times[name, label]`` (seconds) and ``gflop[name]``; return (smallest, largest) name."""
    if not isinstance(times, dict) or not times:
        raise TypeError("times phải là một dict không rỗng {(tên_mô_hình, 'fp32' | 'bf16'): giây}, "
                        f"không phải {type(times).__name__}")
    for key, value in times.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            raise TypeError(f"khoá của times phải là cặp str (tên_mô_hình, nhãn_dtype), không phải {key!r}")
        check_number(f"times[{key!r}]", value, positive=True)
    names = list(dict.fromkeys(name for name, _ in times))
    if gflop is None:
        return names[0], names[-1]
    if not isinstance(gflop, dict) or set(gflop) != set(names):
        raise ValueError(f"gflop phải là dict có đúng một số GFLOP cho mỗi mô hình {names}, nhận được {gflop!r}")
    for name in names:
        check_number(f"gflop[{name!r}]", gflop[name], positive=True)
    by_work = sorted(names, key=gflop.__getitem__)
    return by_work[0], by_work[-1]


def epoch_time_warnings(times: dict, gflop: dict) -> list[str]:
    """Return a ⚠️ line for each dtype where the model with the least work took longer per epoch than the most.

    ``times``: median seconds per epoch keyed ``(model_name, dtype_label)``; ``gflop``: GFLOP/epoch by name.
    """
    small, wide = _check_times(times, gflop)
    ratio = gflop[wide] / gflop[small]
    slower = [label for label in dict.fromkeys(label for _, label in times)
              if (small, label) in times and (wide, label) in times and times[small, label] > times[wide, label]]
    return [f"⚠️ {label}: mô hình {small} ({times[small, label] * 1e3:.1f} ms/epoch) CHẬM hơn mô hình {wide} "
            f"({times[wide, label] * 1e3:.1f} ms) dù ít việc hơn {ratio:.0f}×. Nó có nhiều bước hơn (batch "
            f"nhỏ hơn), nhưng chi phí cố định của chừng đó bước hiếm khi vượt được {ratio:.0f}× số phép tính: "
            f"nhiều khả năng là {_BUSY}." for label in slower]


def work_time_verdict(times: dict, gflop: dict, label: str = "fp32") -> str:
    """Return the sentence comparing how much more time the bigger model took with how much more work it does."""
    small, wide = _check_times(times, gflop)
    if not isinstance(label, str):
        raise TypeError(f"label phải là nhãn dtype dạng str như 'fp32', không phải {type(label).__name__}")
    if (small, label) not in times or (wide, label) not in times:
        raise ValueError(f"times thiếu thời gian {label!r} của {small!r} hoặc {wide!r}")
    work, slower = gflop[wide] / gflop[small], times[wide, label] / times[small, label]
    head = f"Mô hình {wide}: {work:.0f}× số phép tính, nhưng {slower:.1f}× thời gian trên CPU ({label})."
    return head + "\n" + first_true([
        (slower < 1, "⚠️ Ít thời gian hơn cho nhiều việc hơn: chi phí cố định của các bước nhỏ hiếm khi lớn "
                     f"đến thế, nhiều khả năng là {_BUSY}."),
        (slower * 2 <= work, f"→ Thời gian tăng chậm hơn hẳn số phép tính: phần lớn thời gian của mô hình {small} "
                             "là chi phí cố định của từng phép tính nhỏ, không phải phép nhân (trên máy bận, thời "
                             "gian chờ CPU cũng rơi vào phần này: nếu ô đo chậm bất thường, chạy lại)."),
        (True, f"→ Thời gian tăng gần bằng (hoặc hơn) số phép tính: trên CPU này, cả mô hình {small} cũng "
               "chủ yếu là tính, chi phí cố định không lớn (một CPU bận hay chậm cũng cho kết quả như vậy)."),
    ])


def bf16_verdict(times: dict) -> list[str]:
    """Return one line per model ("bf16 nhanh hơn 1.3×" …) and a conclusion, flagging what contradicts section 7."""
    small, wide = _check_times(times)
    names = list(dict.fromkeys(name for name, _ in times))
    missing = [name for name in names if (name, "fp32") not in times or (name, "bf16") not in times]
    if missing:
        raise ValueError(f"times cần cả 'fp32' và 'bf16' cho mọi mô hình, thiếu ở {missing}")
    speedup = {name: times[name, "fp32"] / times[name, "bf16"] for name in names}
    lines = [f"mô hình {name}: " + (f"bf16 nhanh hơn {ratio:.1f}×" if ratio > _EQUAL_WITHIN else
                                   f"bf16 CHẬM hơn {1 / ratio:.1f}×" if ratio < 1 / _EQUAL_WITHIN else
                                   "gần như bằng nhau (±10%)")
             for name, ratio in speedup.items()]
    return lines + [first_true([
        (any(times[small, label] > times[wide, label] for label in ("fp32", "bf16")),
         f"⚠️ Chưa kết luận được: mô hình {small} đo chậm hơn mô hình {wide} (xem dòng ⚠️ của ô đo), nên "
         f"các tỉ số trên không đáng tin; {_BUSY}."),
        (speedup[small] > _EQUAL_WITHIN and speedup[small] > speedup[wide] * _EQUAL_WITHIN,
         f"⚠️ bf16 giúp mô hình {small} nhiều hơn mô hình {wide}: ngược với lý do (bf16 chỉ "
         f"tiết kiệm ở phép nhân ma trận, mà phép nhân của mô hình {small} rất nhỏ). Nhiều khả năng là "
         f"{_BUSY}."),
        (speedup[wide] > _EQUAL_WITHIN, f"→ Trên CPU này bf16 có ích khi phép nhân đủ lớn (mô hình {wide})."),
        (True, "→ Trên CPU này bf16 không làm train nhanh hơn: giữ FP32."),
    ])]
