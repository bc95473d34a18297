"""Exercises 6-8: a training loop with device bugs, a tensor made in ``forward``, gradient accumulation.

Device bugs show on a CPU too: `MoveTracker` sees unused ``.to()`` results, and ``forward`` runs on ``meta``.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from ..device import pick_device
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, is_blank, on_gpu_note, same_code, same_device
from ._tracking import MoveTracker

_TRAIN_STARTER = '''
def train(model, batches, device, lr=0.1):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for xb, yb in batches:
        xb.to(device)
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses
'''


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
    if same_code(train, _TRAIN_STARTER):
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


ex6 = Exercise(
    "ex6", "Bài 6 · Gỡ lỗi: vòng train và device", _evaluate_train,
    hints=[
        "Có 4 lỗi. Ba lỗi về device: model, input, target phải cùng nằm trên device. Một lỗi về bộ nhớ: "
        "danh sách losses.",
        "model.to(device) (Module.to di chuyển tại chỗ); xb, yb = xb.to(device), yb.to(device) (Tensor.to phải gán "
        "lại); losses.append(loss.item()).",
    ],
    starter=_TRAIN_STARTER,
)

_MODULE_STARTER = '''
class NoisyHead(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.scale = torch.linspace(0.5, 1.5, d)
    def forward(self, x):
        if self.training:
            x = x + 0.1 * torch.randn(x.shape)
        return self.fc(x) * self.scale
'''
_D = 16


def _build(report: Report, module_cls, device: torch.device | str = "cpu") -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return report.call(f"NoisyHead({_D})", module_cls, _D).to(device)


def _check_on_meta(report: Report, module: torch.nn.Module) -> None:
    """Run ``forward`` on meta, which stands in for a GPU: a CPU tensor next to a meta one fails too."""
    plain = [f"{name}.{attr}" if name else f"self.{attr}" for name, mod in module.named_modules()
             for attr, value in vars(mod).items()
             if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter)]
    if plain:
        report.problem(f"{', '.join(plain)} là tensor gán thẳng làm thuộc tính: model.to(device) KHÔNG di chuyển nó "
                       "(chỉ tham số và buffer). Đăng ký: self.register_buffer('scale', torch.linspace(0.5, 1.5, d)).")
    on_meta = copy.deepcopy(module).to("meta").train()
    failure = None
    with MoveTracker() as tracker:
        try:
            on_meta(torch.randn(8, _D, device="meta"))
        except Exception as exc:  # noqa: BLE001 - the bug makes the forward fail; that is what we look for
            failure = exc
    made = ", ".join(f"torch.{name}(...)" for name in sorted({n for n, d in tracker.factories if d.type != "meta"}))
    if made and failure is not None:
        report.problem(f"{made} trong forward tạo tensor trên CPU (thiết bị mặc định), bất kể x nằm ở đâu. "
                       "Tạo cùng chỗ với x: torch.randn_like(x), hoặc torch.randn(x.shape, device=x.device).")
    elif made:
        report.note(f"{made} trong forward vẫn tạo tensor trên CPU rồi mới dùng/chép sang thiết bị của x: chạy được, "
                    "nhưng tạo thẳng trên thiết bị (torch.randn_like(x), device=x.device) tránh một lần chép mỗi bước.")
    if failure is not None and not report.problems:
        report.error("forward khi model và x ở thiết bị khác CPU", failure)


def _evaluate_module(report: Report, module_cls=None) -> None:
    if is_blank(module_cls):
        report.missing_part("chưa có lớp NoisyHead.", stop=True)
    if not (isinstance(module_cls, type) and issubclass(module_cls, torch.nn.Module)):
        report.problem("truyền chính lớp (class) NoisyHead, vd ex7.check(NoisyHead), không phải một đối tượng.",
                       stop=True)
    if same_code(module_cls, _MODULE_STARTER):
        report.missing_part("NoisyHead vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.", stop=True)
    _check_on_meta(report, _build(report, module_cls))
    if report.problems:
        return
    device = pick_device()
    module = _build(report, module_cls, device).eval()
    x = torch.randn(8, _D, device=device)
    out = report.call("forward (eval)", module, x)
    if not isinstance(out, torch.Tensor) or not same_device(out.device, device):
        report.problem(f"đầu ra phải là tensor trên {device}.", stop=True)
    with torch.no_grad():
        want = module.fc(x) * torch.linspace(0.5, 1.5, _D, device=device)
    if out.shape != want.shape or not torch.allclose(out, want, rtol=1e-5, atol=1e-6):
        report.problem("ở chế độ eval, đầu ra phải đúng là fc(x) * scale với scale = linspace(0.5, 1.5, d): "
                       "chỉ sửa nơi tạo tensor, đừng đổi phép tính.", stop=True)
    module.train()
    if torch.equal(module(x), module(x)):
        report.problem("ở chế độ train, hai lần forward cho cùng kết quả: nhiễu đã mất. Giữ nhiễu, chỉ tạo nó cùng "
                       "thiết bị với x.", stop=True)
    report.success(f"không còn tensor nào kẹt ở CPU: forward chạy trên meta và trên {device}, scale là buffer "
                   "(đi theo model.to() và nằm trong state_dict).")
    on_gpu_note(report, device,
                "bản có lỗi báo RuntimeError lệch thiết bị (cuda:0 và cpu) ở dòng cộng nhiễu. Ở đây bộ chấm dùng "
                "thiết bị meta để tái hiện đúng lỗi đó mà không cần GPU.")


ex7 = Exercise(
    "ex7", "Bài 7 · Gỡ lỗi: tensor tạo trong forward", _evaluate_module,
    hints=[
        "Hai tensor không đi theo model.to(device): một cái tạo trong forward, một cái gán thẳng trong __init__.",
        "torch.randn_like(x) tạo nhiễu cùng shape, dtype, device với x; self.register_buffer('scale', ...) biến "
        "scale thành buffer.",
    ],
    starter=_MODULE_STARTER,
)

_CASES = ((32, 8), (30, 8))  # (batch size, micro-batch size): the second leaves a smaller last micro-batch


def _grads(model: torch.nn.Module) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def _micro_grads(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, micro: int) -> list[list[torch.Tensor]]:
    out = []
    for start in range(0, len(x), micro):
        twin = copy.deepcopy(model)
        twin.zero_grad(set_to_none=True)
        F.cross_entropy(twin(x[start:start + micro]), y[start:start + micro]).backward()
        out.append(_grads(twin))
    return out


def _close(a: list, b: list) -> bool:
    return all(p is not None and q is not None and torch.allclose(p, q, rtol=1e-4, atol=1e-6)
               for p, q in zip(a, b, strict=True))


def _combine(parts: list[list[torch.Tensor]], weights: list[float]) -> list[torch.Tensor]:
    return [sum(w * part[i] for part, w in zip(parts, weights, strict=True)) for i in range(len(parts[0]))]


def _accumulation_mistake(got, parts, full, n: int, micro: int) -> str:
    k, last = len(parts), n - micro * (len(parts) - 1)
    if _close([g - 1 for g in got], full):
        return "gradient = gradient đúng + phần cũ còn sót: gọi model.zero_grad() ở ĐẦU hàm (trước vòng lặp)."
    if _close(got, _combine(parts, [1.0] * k)):
        return (f"gradient lớn gấp {k} lần gradient của cả batch: chia loss của mỗi micro-batch "
                f"(vd loss * len(xb) / len(x)).")
    if any(_close(got, _combine([parts[-1]], [w])) for w in (1.0, 1.0 / k, last / n)):
        return ("chỉ còn gradient của micro-batch cuối: đừng zero_grad trong vòng lặp, gradient phải CỘNG "
                "DỒN qua mọi micro-batch.")
    if _close(got, _combine(parts, [1.0 / k] * k)):
        return (f"đúng khi các micro-batch bằng nhau, nhưng với batch {n} và micro_batch {micro}, micro-batch "
                f"cuối chỉ có {last} mẫu. Chia cho số bước cho nó trọng số quá lớn; nhân loss với "
                "len(xb) / len(x).")
    worst = max(float((g - f).abs().max()) for g, f in zip(got, full, strict=True))
    return f"gradient khác gradient của cả batch {n} (sai khác lớn nhất {worst:.2e})."


def _evaluate_accumulate(report: Report, accumulate=None) -> None:
    report.require_function(accumulate, "accumulate(model, x, y, micro_batch)")
    device = pick_device()
    for n, micro in _CASES:
        model = make_mlp(8, 3, hidden=16, depth=1, seed=1, device=device)
        x, y = make_classification_data(n, 8, 3, seed=2, device=device)
        parts = _micro_grads(model, x, y, micro)
        full = _combine(parts, [len(x[s:s + micro]) / n for s in range(0, n, micro)])
        before = [p.detach().clone() for p in model.parameters()]
        for p in model.parameters():
            p.grad = torch.ones_like(p)  # gradients left over from an earlier step
        seen: list[int] = []
        hook = model.register_forward_pre_hook(lambda _m, args, seen=seen: seen.append(len(args[0])))
        try:
            report.call(f"accumulate(model, x, y, micro_batch={micro})", accumulate, model, x, y, micro)
        finally:
            hook.remove()
        got = _grads(model)
        if not seen or all(g is None for g in got) or _close(got, [torch.ones_like(p) for p in model.parameters()]):
            report.missing_part("gradient chưa thay đổi: chưa có forward/backward nào (hàm còn trống?).", stop=True)
        if any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True)):
            report.problem("tham số đã bị thay đổi: hàm này chỉ tích luỹ gradient, không gọi optimizer.step().",
                           stop=True)
        if max(seen) > micro:
            report.problem(f"model nhận một batch {max(seen)} mẫu > micro_batch={micro}: tích luỹ nghĩa là chạy từng "
                           "micro-batch nhỏ (đó là chỗ tiết kiệm bộ nhớ).", stop=True)
        if any(g is None for g in got):
            report.problem("có tham số không có gradient: backward trên mọi micro-batch chưa?", stop=True)
        if not _close(got, full):
            report.problem(_accumulation_mistake(got, parts, full, n, micro), stop=True)
    report.success("gradient tích luỹ qua các micro-batch khớp gradient của cả batch (torch.allclose), cả khi "
                   "micro-batch cuối nhỏ hơn.")


ex8 = Exercise(
    "ex8", "Bài 8 · Gradient accumulation", _evaluate_accumulate,
    hints=[
        "model.zero_grad() một lần ở đầu; rồi với mỗi micro-batch: forward, loss, backward (gradient tự cộng dồn "
        "vào .grad).",
        "loss của cả batch là trung bình: mỗi micro-batch đóng góp loss_mb * len(xb) / len(x). "
        "Chia cho số bước chỉ đúng khi mọi micro-batch bằng nhau.",
    ],
)
