"""Exercises 1-2: a training loop with device bugs, an evaluation that keeps every batch's graph.

Device bugs show on a CPU too: `MoveTracker` sees unused ``.to()`` results; a forward hook sees grad mode and eval.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..device import pick_device
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, on_gpu_note, same_code
from ._tracking import MoveTracker


def _move_state(tracker: MoveTracker, tensor: torch.Tensor, device: torch.device) -> str:
    """Return "ok", "none" (never moved), "unused" (moved, result thrown away) or "wrong" (moved elsewhere)."""
    moves = tracker.moves_of(tensor)
    used = [m for m in moves if tracker.used_after(m.result, m.index)]
    if not moves or not used:
        return "unused" if moves else "none"
    return "ok" if any(m.target.type == device.type for m in used) else "wrong"


def _check_train_devices(report: Report, tracker: MoveTracker, model, pairs, device: torch.device) -> None:
    if not any(m.source is p for m in tracker.moves for p in model.parameters()):
        report.problem("model chưa được đưa lên device: thêm model.to(device) ở đầu hàm (trước khi tạo optimizer "
                       "là thói quen tốt).")
    elif device.type != "cpu" and not all(p.device.type == device.type for p in model.parameters()):
        report.problem(f"sau khi train, tham số của model không nằm trên {device}.")
    reached = [pair for pair in pairs if tracker.used_after(pair[0], -1)]
    for index, name in enumerate(("xb", "yb")):
        states = {_move_state(tracker, pair[index], device) for pair in reached}
        if "none" in states:
            report.problem(f"{name} không được chuyển lên device: trên GPU, model(...) hoặc cross_entropy sẽ báo lỗi "
                           f"lệch thiết bị. Thêm {name} = {name}.to(device).")
        elif "unused" in states:
            report.problem(f"{name}.to(device) không sửa {name} tại chỗ: kết quả bị bỏ đi. Gán lại: "
                           f"{name} = {name}.to(device).")
        elif "wrong" in states:
            report.problem(f"{name} được chuyển tới thiết bị khác {device}: dùng biến device.")


def _evaluate_train(report: Report, train=None) -> None:
    report.require_function(train, "train(model, batches, device)")
    if same_code(train, ex1.starter_code):
        report.missing_part("hàm train vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.", stop=True)
    device = pick_device()
    model = make_mlp(16, 3, hidden=32, depth=1, seed=0)  # model and data start on the CPU
    x, y = make_classification_data(192, 16, 3, seed=0)
    pairs = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 192, 32)]
    batches = pairs * 3
    result = None
    with MoveTracker() as tracker:
        try:
            result = train(model, batches, device)
        except Exception as exc:  # noqa: BLE001 - a device bug raises on a GPU; keep looking at what ran
            report.error("train(model, batches, device)", exc, stop=False)
        tracker.mark_used(result)
    _check_train_devices(report, tracker, model, pairs, device)
    if isinstance(result, (list, tuple)) and any(isinstance(v, torch.Tensor) and v.grad_fn is not None
                                                 for v in result):
        report.problem("losses.append(loss) giữ cả đồ thị autograd của MỖI bước trong bộ nhớ (trên GPU: bộ nhớ tăng "
                       "dần tới OOM). Lưu một số: losses.append(loss.item()).")
    if report.problems:
        return
    if not isinstance(result, (list, tuple)) or len(result) != len(batches):
        report.problem(f"train phải trả về danh sách {len(batches)} loss (mỗi batch một số).", stop=True)
    try:
        values = [float(v) for v in result]
    except (TypeError, ValueError, RuntimeError):
        report.problem("mỗi loss phải là một số (loss.item()).", stop=True)
    if not all(math.isfinite(v) for v in values) or not sum(values[-6:]) < sum(values[:6]):
        report.problem(f"loss không giảm ({values[0]:.3f} → {values[-1]:.3f}): zero_grad, backward, step đủ cả chưa?",
                       stop=True)
    report.success(f"model và mọi batch đều lên {device}, loss giảm {values[0]:.3f} → {values[-1]:.3f} và không giữ "
                   "đồ thị.")
    on_gpu_note(report, device,
                "bản có lỗi vẫn chạy không báo gì, nhưng hoàn toàn trên CPU (model và dữ liệu chưa hề lên GPU): "
                "GPU ngồi không. Sửa một nửa (chỉ model.to(device)) thì RuntimeError lệch thiết bị (cuda:0 và cpu) "
                "mới hiện ra. Trên CPU không lỗi nào lộ ra, nên bộ chấm theo dõi từng lời gọi .to().")


ex1 = Exercise("ex1", "Nhiệm vụ 1 · Gỡ lỗi: vòng train và device", _evaluate_train, starter=True, hints=[
    "Có 4 lỗi. Ba lỗi về device: model, input, target phải cùng nằm trên device. Một lỗi về bộ nhớ: "
    "danh sách losses.",
    "model.to(device) (Module.to di chuyển tại chỗ); xb, yb = xb.to(device), yb.to(device) (Tensor.to phải gán "
    "lại); losses.append(loss.item()).",
])


def _dropout_model() -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                                   torch.nn.Linear(64, 3))


def _evaluate_eval(report: Report, evaluate=None) -> None:
    report.require_function(evaluate, "evaluate(model, batches)")
    if same_code(evaluate, ex2.starter_code):
        report.missing_part("hàm evaluate vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.", stop=True)
    model = _dropout_model().train()  # as a training loop leaves it
    x, y = make_classification_data(100, 16, 3, seed=4)
    batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 100, 32)]  # the last batch has 4 samples
    seen: list[tuple[bool, bool]] = []  # (grad enabled, training) at each forward
    hook = model.register_forward_hook(lambda m, _a, _o: seen.append((torch.is_grad_enabled(), m.training)))
    try:
        result = report.call("evaluate(model, batches)", evaluate, model, batches)
    finally:
        hook.remove()
    if not seen:
        report.missing_part("model chưa được gọi trên batch nào.", stop=True)
    if any(training for _, training in seen):
        report.problem("model vẫn ở chế độ train: Dropout còn tắt ngẫu nhiên một nửa neuron, nên loss và accuracy "
                       "đổi sau mỗi lần chạy. Gọi model.eval() ở đầu hàm.")
    if any(grad for grad, _ in seen):
        report.problem("forward chạy khi autograd bật: mỗi batch lưu activation cho một backward không bao giờ "
                       "đến. Bọc vòng lặp trong `with torch.no_grad():`; .item() hay .detach() sau forward thì "
                       "activation đã được lưu rồi.")
    if not (isinstance(result, tuple) and len(result) == 2):
        report.problem("evaluate phải trả về một cặp (loss trung bình, accuracy).", stop=True)
    if any(isinstance(v, torch.Tensor) and v.grad_fn is not None for v in result):
        report.problem("kết quả còn grad_fn: total_loss += loss cộng TENSOR, nên đồ thị của mọi batch bị giữ tới "
                       "cuối. Cộng số Python: loss.item().")
    elif not all(isinstance(v, float) for v in result):
        report.problem(f"trả về {', '.join(type(v).__name__ for v in result)}: hãy trả về hai số Python (float), "
                       "dùng .item() cho loss và cho số dự đoán đúng.")
    if report.problems:
        return
    with torch.no_grad():
        logits = model.eval()(x)
    loss, acc = F.cross_entropy(logits, y).item(), (logits.argmax(dim=1) == y).float().mean().item()
    if not math.isclose(result[1], acc, rel_tol=1e-5):
        report.problem(f"accuracy = {result[1]:.4f}, đúng là {acc:.4f} (số dự đoán đúng / tổng số mẫu).", stop=True)
    if not math.isclose(result[0], loss, rel_tol=1e-4):
        report.problem(f"loss = {result[0]:.4f}, đúng là {loss:.4f}: batch cuối chỉ có 4 mẫu, nên trung bình các "
                       "loss của batch lệch; cộng loss tổng (reduction='sum') rồi chia cho tổng số mẫu.", stop=True)
    report.success(f"model.eval(), no_grad và số Python: loss {loss:.4f}, accuracy {acc:.1%}, không batch nào "
                   "giữ đồ thị.")


ex2 = Exercise("ex2", "Nhiệm vụ 2 · Gỡ lỗi: vòng đánh giá giữ đồ thị", _evaluate_eval,
               starter=True, hints=[
    "Có 3 lỗi: model còn ở chế độ train, autograd còn bật, và total_loss/correct cộng dồn tensor.",
    "model.eval(); `with torch.no_grad():` quanh vòng lặp; total_loss += F.cross_entropy(...).item() và "
    "correct += (...).sum().item().",
])
