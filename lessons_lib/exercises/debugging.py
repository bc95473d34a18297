"""Debugging exercises: a training loop with device bugs, a tensor created in ``forward`` without a device,
and gradient accumulation that must equal the large-batch gradient.

The device bugs are found on a CPU too: the loop runs under a `MoveTracker` (which sees a ``.to(device)``
whose result is thrown away), and the module's ``forward`` runs on the ``meta`` device, where a tensor
created on the CPU makes the op fail just as a CPU tensor does next to a GPU one.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from ..device import pick_device
from ..i18n import tr
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, error_text, is_blank, on_gpu_note, same_code, same_device
from ._tracking import MoveTracker

# =========================================================================== 6: a training loop

TRAIN_STARTER = '''
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


def _moved_ok(tracker: MoveTracker, tensor: torch.Tensor, device: torch.device) -> str:
    """Return "ok", "none" (never moved), "unused" (moved, result thrown away) or "wrong" (moved elsewhere)."""
    moves = tracker.moves_of(tensor)
    if not moves:
        return "none"
    used = [m for m in moves if tracker.used_after(m.result, m.index)]
    if not used:
        return "unused"
    return "ok" if any(m.target.type == device.type for m in used) else "wrong"


def _evaluate_train(report: Report, train=None) -> None:
    report.require_function(train, "train(model, batches, device)")
    if same_code(train, TRAIN_STARTER):
        report.missing_part("hàm train vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.",
                            "train is still the buggy version: fix it, then run this cell again.", stop=True)
    device = pick_device()
    model = make_mlp(16, 3, hidden=32, depth=1, seed=0)            # starts on the CPU, like a fresh model
    x, y = make_classification_data(192, 16, 3, seed=0)             # the data starts on the CPU too
    pairs = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 192, 32)]
    batches = pairs * 3
    params = list(model.parameters())
    failure = None
    with MoveTracker() as tracker:
        try:
            result = train(model, batches, device)
        except Exception as exc:  # noqa: BLE001 - a device bug raises on a GPU; keep looking at what ran
            failure, result = exc, None
        tracker.mark_used(result)
    if failure is not None:
        report.problems.append(error_text("train(model, batches, device)", failure))
    model_moved = any(m.source is p for m in tracker.moves for p in params)
    if not model_moved:
        report.problem("model chưa được đưa lên device: thêm model.to(device) ở đầu hàm (trước khi tạo optimizer "
                       "là thói quen tốt).",
                       "the model is never moved to the device: add model.to(device) at the top (before creating the "
                       "optimizer is a good habit).")
    elif device.type != "cpu" and not all(p.device.type == device.type for p in model.parameters()):
        report.problem(f"sau khi train, tham số của model không nằm trên {device}.",
                       f"after train, the model's parameters are not on {device}.")
    reached = [(xb, yb) for xb, yb in pairs if tracker.used_after(xb, -1)]
    for name, index in (("xb", 0), ("yb", 1)):
        states = {_moved_ok(tracker, pair[index], device) for pair in reached}
        if "none" in states:
            report.problem(f"{name} không được chuyển lên device: trên GPU, model(...) hoặc cross_entropy sẽ báo lỗi "
                           f"lệch thiết bị. Thêm {name} = {name}.to(device).",
                           f"{name} is never moved to the device: on a GPU, model(...) or cross_entropy raises a device "
                           f"mismatch. Add {name} = {name}.to(device).")
        elif "unused" in states:
            report.problem(f"{name}.to(device) không sửa {name} tại chỗ: kết quả bị bỏ đi. Gán lại: "
                           f"{name} = {name}.to(device).",
                           f"{name}.to(device) does not change {name} in place: its result is thrown away. Reassign: "
                           f"{name} = {name}.to(device).")
        elif "wrong" in states:
            report.problem(f"{name} được chuyển tới thiết bị khác {device}: dùng biến device.",
                           f"{name} is moved to a device other than {device}: use the device variable.")
    keeps_graph = isinstance(result, (list, tuple)) and any(
        isinstance(v, torch.Tensor) and v.grad_fn is not None for v in result)
    if keeps_graph:
        report.problem("losses.append(loss) giữ cả đồ thị autograd của MỖI bước trong bộ nhớ (trên GPU: bộ nhớ tăng "
                       "dần tới OOM). Lưu một số: losses.append(loss.item()).",
                       "losses.append(loss) keeps EVERY step's autograd graph alive (on a GPU memory grows until OOM). "
                       "Store a number: losses.append(loss.item()).")
    if failure is not None or report.problems:
        return
    if not isinstance(result, (list, tuple)) or len(result) != len(batches):
        report.problem(f"train phải trả về danh sách {len(batches)} loss (mỗi batch một số).",
                       f"train must return a list of {len(batches)} losses (one per batch).", stop=True)
    try:
        values = [float(v) for v in result]
    except (TypeError, ValueError, RuntimeError):
        report.problem("mỗi loss phải là một số (loss.item()).", "each loss must be a number (loss.item()).", stop=True)
    if not all(math.isfinite(v) for v in values) or not sum(values[-6:]) < sum(values[:6]):
        report.problem(f"loss không giảm ({values[0]:.3f} → {values[-1]:.3f}): zero_grad, backward, step đủ cả chưa?",
                       f"the loss does not go down ({values[0]:.3f} → {values[-1]:.3f}): zero_grad, backward, step all "
                       "there?", stop=True)
    report.success(f"model và mọi batch đều lên {device}, loss giảm {values[0]:.3f} → {values[-1]:.3f} và không giữ đồ thị.",
                   f"the model and every batch go to {device}, the loss goes {values[0]:.3f} → {values[-1]:.3f} and no "
                   "graph is kept.")
    on_gpu_note(report, device,
                "bản có lỗi vẫn chạy không báo gì, nhưng hoàn toàn trên CPU (model và dữ liệu chưa hề lên GPU): "
                "GPU ngồi không. Sửa một nửa (chỉ model.to(device)) thì RuntimeError lệch thiết bị (cuda:0 và cpu) "
                "mới hiện ra. Trên CPU không lỗi nào lộ ra, nên bộ chấm theo dõi từng lời gọi .to().",
                "the buggy version runs without a word, but entirely on the CPU (neither model nor data ever reach "
                "the GPU): the GPU sits idle. Fix half of it (only model.to(device)) and the device-mismatch "
                "RuntimeError (cuda:0 and cpu) appears. On a CPU none of this shows, so the checker watches every "
                ".to() call.")

ex6 = Exercise(
    "ex6",
    ("Bài 6 · Gỡ lỗi: vòng train và device", "Exercise 6 · Debugging: a training loop and devices"),
    _evaluate_train,
    hints=[
        ("Có 4 lỗi. Ba lỗi về device: model, input, target phải cùng nằm trên device. Một lỗi về bộ nhớ: "
         "danh sách losses.",
         "There are 4 bugs. Three about devices: the model, the inputs and the targets must all be on the device. "
         "One about memory: the losses list."),
        ("model.to(device) (Module.to di chuyển tại chỗ); xb, yb = xb.to(device), yb.to(device) (Tensor.to phải gán "
         "lại); losses.append(loss.item()).",
         "model.to(device) (Module.to moves in place); xb, yb = xb.to(device), yb.to(device) (Tensor.to must be "
         "reassigned); losses.append(loss.item())."),
    ],
    solution='''
def train(model, batches, device, lr=0.1):
    model.to(device)                                # Module.to: tại chỗ
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for xb, yb in batches:
        xb, yb = xb.to(device), yb.to(device)       # Tensor.to: phải gán lại, cả target
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())                  # một số, không giữ đồ thị
    return losses
''',
    starter=TRAIN_STARTER,
)

# =========================================================================== 7: a tensor made in forward

MODULE_STARTER = '''
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


def _plain_tensor_attributes(module: torch.nn.Module) -> list[str]:
    names = []
    for mod_name, mod in module.named_modules():
        for attr, value in vars(mod).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                names.append(f"{mod_name}.{attr}" if mod_name else f"self.{attr}")
    return names


def _evaluate_module(report: Report, module_cls=None) -> None:
    if is_blank(module_cls):
        report.missing_part("chưa có lớp NoisyHead.", "NoisyHead is not defined yet.", stop=True)
    if not (isinstance(module_cls, type) and issubclass(module_cls, torch.nn.Module)):
        report.problem("truyền chính lớp (class) NoisyHead, vd ex7.check(NoisyHead), không phải một đối tượng.",
                       "pass the class NoisyHead itself, e.g. ex7.check(NoisyHead), not an instance.", stop=True)
    if same_code(module_cls, MODULE_STARTER):
        report.missing_part("NoisyHead vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.",
                            "NoisyHead is still the buggy version: fix it, then run this cell again.", stop=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = report.call(f"NoisyHead({_D})", module_cls, _D)
    plain = _plain_tensor_attributes(module)
    if plain:
        report.problem(f"{', '.join(plain)} là tensor gán thẳng làm thuộc tính: model.to(device) KHÔNG di chuyển nó "
                       "(chỉ tham số và buffer). Đăng ký: self.register_buffer('scale', torch.linspace(0.5, 1.5, d)).",
                       f"{', '.join(plain)} is a tensor stored as a plain attribute: model.to(device) does NOT move it "
                       "(only parameters and buffers). Register it: self.register_buffer('scale', "
                       "torch.linspace(0.5, 1.5, d)).")
    # The meta device stands in for a GPU: a CPU tensor next to a meta tensor fails like one next to a cuda tensor.
    on_meta = copy.deepcopy(module).to("meta")
    on_meta.train()
    failure = None
    with MoveTracker() as tracker:
        try:
            on_meta(torch.randn(8, _D, device="meta"))
        except Exception as exc:  # noqa: BLE001 - the bug makes the forward fail; that is what we look for
            failure = exc
    stray = sorted({f.name for f in tracker.factories if f.device.type != "meta"})
    made = ", ".join(f"torch.{name}(...)" for name in stray)
    if stray and failure is not None:
        report.problem(f"{made} trong forward tạo tensor trên CPU (thiết bị mặc định), bất kể x nằm ở đâu. "
                       "Tạo cùng chỗ với x: torch.randn_like(x), hoặc torch.randn(x.shape, device=x.device).",
                       f"{made} in forward creates its tensor on the CPU (the default device) wherever x is. "
                       "Create it next to x: torch.randn_like(x), or torch.randn(x.shape, device=x.device).")
    elif stray:
        report.note(f"{made} trong forward vẫn tạo tensor trên CPU rồi mới dùng/chép sang thiết bị của x: chạy được, "
                    "nhưng tạo thẳng trên thiết bị (torch.randn_like(x), device=x.device) tránh một lần chép mỗi bước.",
                    f"{made} in forward still creates a tensor on the CPU before it is used on / copied to x's "
                    "device: it works, but creating it there directly (torch.randn_like(x), device=x.device) "
                    "saves a copy every step.")
    if failure is not None and not report.problems:
        report.problems.append(error_text(tr("forward khi model và x ở thiết bị khác CPU",
                                             "forward with the model and x off the CPU"), failure))
    if report.problems:
        return
    device = pick_device()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = report.call(f"NoisyHead({_D})", module_cls, _D).to(device)
    x = torch.randn(8, _D, device=device)
    module.eval()
    out = report.call("forward (eval)", module, x)
    scale = torch.linspace(0.5, 1.5, _D, device=device)
    if not isinstance(out, torch.Tensor) or not same_device(out.device, device):
        report.problem(f"đầu ra phải là tensor trên {device}.", f"the output must be a tensor on {device}.", stop=True)
    with torch.no_grad():
        want = module.fc(x) * scale
    if out.shape != want.shape or not torch.allclose(out, want, rtol=1e-5, atol=1e-6):
        report.problem("ở chế độ eval, đầu ra phải đúng là fc(x) * scale với scale = linspace(0.5, 1.5, d): "
                       "chỉ sửa nơi tạo tensor, đừng đổi phép tính.",
                       "in eval mode the output must be exactly fc(x) * scale with scale = linspace(0.5, 1.5, d): "
                       "only fix where tensors are created, keep the computation.", stop=True)
    module.train()
    a, b = module(x), module(x)
    if torch.equal(a, b):
        report.problem("ở chế độ train, hai lần forward cho cùng kết quả: nhiễu đã mất. Giữ nhiễu, chỉ tạo nó cùng "
                       "thiết bị với x.",
                       "in train mode two forward passes give the same result: the noise is gone. Keep the noise, "
                       "just create it on x's device.", stop=True)
    report.success(f"không còn tensor nào kẹt ở CPU: forward chạy trên meta và trên {device}, scale là buffer "
                   "(đi theo model.to() và nằm trong state_dict).",
                   f"no tensor is stuck on the CPU: forward runs on meta and on {device}, scale is a buffer (moves "
                   "with model.to() and is in the state_dict).")
    on_gpu_note(report, device,
                "bản có lỗi báo RuntimeError lệch thiết bị (cuda:0 và cpu) ở dòng cộng nhiễu. Ở đây bộ chấm dùng "
                "thiết bị meta để tái hiện đúng lỗi đó mà không cần GPU.",
                "the buggy version raises a device-mismatch RuntimeError (cuda:0 and cpu) at the noise line. Here the "
                "checker uses the meta device to reproduce that very error without a GPU.")


ex7 = Exercise(
    "ex7",
    ("Bài 7 · Gỡ lỗi: tensor tạo trong forward", "Exercise 7 · Debugging: a tensor made in forward"),
    _evaluate_module,
    hints=[
        ("Hai tensor không đi theo model.to(device): một cái tạo trong forward, một cái gán thẳng trong __init__.",
         "Two tensors do not follow model.to(device): one created in forward, one stored directly in __init__."),
        ("torch.randn_like(x) tạo nhiễu cùng shape, dtype, device với x; self.register_buffer('scale', ...) biến "
         "scale thành buffer.",
         "torch.randn_like(x) makes noise with x's shape, dtype and device; self.register_buffer('scale', ...) makes "
         "scale a buffer."),
    ],
    solution='''
class NoisyHead(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, d))  # buffer: đi theo model.to()
    def forward(self, x):
        if self.training:
            x = x + 0.1 * torch.randn_like(x)       # cùng device, dtype với x
        return self.fc(x) * self.scale
''',
    starter=MODULE_STARTER,
)

# =========================================================================== 8: gradient accumulation

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
    return all(p is not None and q is not None and torch.allclose(p, q, rtol=1e-4, atol=1e-6) for p, q in zip(a, b, strict=True))


def _combine(parts: list[list[torch.Tensor]], weights: list[float]) -> list[torch.Tensor]:
    return [sum(w * part[i] for part, w in zip(parts, weights, strict=True)) for i in range(len(parts[0]))]


def _evaluate_accumulate(report: Report, accumulate=None) -> None:
    report.require_function(accumulate, "accumulate(model, x, y, micro_batch)")
    device = pick_device()
    for n, micro in _CASES:
        model = make_mlp(8, 3, hidden=16, depth=1, seed=1, device=device)
        x, y = make_classification_data(n, 8, 3, seed=2, device=device)
        parts = _micro_grads(model, x, y, micro)
        sizes = [len(x[s:s + micro]) for s in range(0, n, micro)]
        full = _combine(parts, [k / n for k in sizes])
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
        ones = [torch.ones_like(p) for p in model.parameters()]
        if not seen or all(g is None for g in got) or _close(got, ones):
            report.missing_part("gradient chưa thay đổi: chưa có forward/backward nào (hàm còn trống?).",
                                "the gradients did not change: no forward/backward happened (is the function empty?).",
                                stop=True)
        if any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True)):
            report.problem("tham số đã bị thay đổi: hàm này chỉ tích luỹ gradient, không gọi optimizer.step().",
                           "the parameters changed: this function only accumulates gradients; no optimizer.step().",
                           stop=True)
        if max(seen) > micro:
            report.problem(f"model nhận một batch {max(seen)} mẫu > micro_batch={micro}: tích luỹ nghĩa là chạy từng "
                           "micro-batch nhỏ (đó là chỗ tiết kiệm bộ nhớ).",
                           f"the model got a batch of {max(seen)} samples > micro_batch={micro}: accumulating means "
                           "running small micro-batches (that is where the memory is saved).", stop=True)
        if any(g is None for g in got):
            report.problem("có tham số không có gradient: backward trên mọi micro-batch chưa?",
                           "some parameters have no gradient: did every micro-batch call backward?", stop=True)
        if _close(got, full):
            continue
        k = len(parts)
        if _close([g - 1 for g in got], full):
            report.problem("gradient = gradient đúng + phần cũ còn sót: gọi model.zero_grad() ở ĐẦU hàm (trước vòng lặp).",
                           "gradient = the right one + leftovers: call model.zero_grad() at the START (before the loop).")
        elif _close(got, _combine(parts, [1.0] * k)):
            report.problem(f"gradient lớn gấp {k} lần gradient của cả batch: chia loss của mỗi micro-batch "
                           f"(vd loss * len(xb) / len(x)).",
                           f"the gradient is {k}× the full-batch one: scale each micro-batch's loss "
                           "(e.g. loss * len(xb) / len(x)).")
        elif any(_close(got, _combine([parts[-1]], [w])) for w in (1.0, 1.0 / k, sizes[-1] / n)):
            report.problem("chỉ còn gradient của micro-batch cuối: đừng zero_grad trong vòng lặp, gradient phải CỘNG "
                           "DỒN qua mọi micro-batch.",
                           "only the last micro-batch's gradient is left: do not zero_grad inside the loop; gradients "
                           "must ADD UP over all micro-batches.")
        elif _close(got, _combine(parts, [1.0 / k] * k)):
            report.problem(f"đúng khi các micro-batch bằng nhau, nhưng với batch {n} và micro_batch {micro}, micro-batch "
                           f"cuối chỉ có {sizes[-1]} mẫu. Chia cho số bước cho nó trọng số quá lớn; nhân loss với "
                           "len(xb) / len(x).",
                           f"right when micro-batches are equal, but with batch {n} and micro_batch {micro} the last one "
                           f"has only {sizes[-1]} samples. Dividing by the number of steps overweights it; multiply the "
                           "loss by len(xb) / len(x).")
        else:
            worst = max(float((g - f).abs().max()) for g, f in zip(got, full, strict=True))
            report.problem(f"gradient khác gradient của cả batch {n} (sai khác lớn nhất {worst:.2e}).",
                           f"the gradient differs from the full batch-{n} gradient (largest difference {worst:.2e}).")
        return
    report.success("gradient tích luỹ qua các micro-batch khớp gradient của cả batch (torch.allclose), cả khi "
                   "micro-batch cuối nhỏ hơn.",
                   "the gradient accumulated over micro-batches matches the full-batch gradient (torch.allclose), "
                   "even when the last micro-batch is smaller.")


ex8 = Exercise(
    "ex8",
    ("Bài 8 · Gradient accumulation", "Exercise 8 · Gradient accumulation"),
    _evaluate_accumulate,
    hints=[
        ("model.zero_grad() một lần ở đầu; rồi với mỗi micro-batch: forward, loss, backward (gradient tự cộng dồn "
         "vào .grad).",
         "model.zero_grad() once at the start; then for each micro-batch: forward, loss, backward (gradients add up "
         "in .grad)."),
        ("loss của cả batch là trung bình: mỗi micro-batch đóng góp loss_mb * len(xb) / len(x). "
         "Chia cho số bước chỉ đúng khi mọi micro-batch bằng nhau.",
         "The batch loss is a mean: each micro-batch contributes loss_mb * len(xb) / len(x). Dividing by the number "
         "of steps is right only when all micro-batches are equal."),
    ],
    solution='''
def accumulate(model, x, y, micro_batch):
    model.zero_grad()
    for start in range(0, len(x), micro_batch):
        xb, yb = x[start:start + micro_batch], y[start:start + micro_batch]
        loss = F.cross_entropy(model(xb), yb)
        (loss * len(xb) / len(x)).backward()    # trọng số = phần của micro-batch trong batch
''',
)
