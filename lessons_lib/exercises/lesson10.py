"""Lesson 10's six debugging tasks: each hands out buggy code (unchanged, it is "chưa làm") and sees on a CPU what
the bug does on a GPU: `MoveTracker` sees unused ``.to()`` results, a forward hook sees grad mode and eval, a fake
``non_blocking`` copy fills in only at ``sync()``, torch's own ``DistributedSampler`` and an enabled
``GradScaler("cpu")`` (the same calls as float16 on a GPU) are watched by spies."""

from __future__ import annotations

import math
import os
import tempfile
from types import SimpleNamespace
from unittest import mock

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ..device import pick_device
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, Wrong, on_gpu_note, same_weights
from ._tracking import MoveTracker, scaler_calls

# --------------------------------------------------------------------------- task 1: a training loop and devices

#: How a tensor was moved (see `_move_state`) → what to tell the learner about it (`name` is xb or yb).
MOVE_SLIPS = {
    "none": "{name} không được chuyển lên device: trên GPU, model(...) hoặc cross_entropy sẽ báo lỗi lệch thiết bị. "
            "Thêm {name} = {name}.to(device).",
    "unused": "{name}.to(device) không sửa {name} tại chỗ: kết quả bị bỏ đi. Gán lại: {name} = {name}.to(device).",
    "wrong": "{name} được chuyển tới thiết bị khác {device}: dùng biến device.",
}


def _move_state(tracker: MoveTracker, tensor: torch.Tensor, device: torch.device) -> str:
    """Return "ok", "none" (never moved), "unused" (moved, result thrown away) or "wrong" (moved elsewhere)."""
    moves = [m for m in tracker.moves if m.source is tensor]
    used = [m for m in moves if tracker.used_after(m.result, m.index)]
    if not used:
        return "unused" if moves else "none"
    return "ok" if any(m.target.type == device.type for m in used) else "wrong"


def _evaluate_train(report: Report, train=None) -> None:
    report.require_function(train, "train(model, batches, device)")
    device = pick_device()
    model = make_mlp(16, 3, hidden=32, depth=1, seed=0)  # model and data start on the CPU
    x, y = make_classification_data(192, 16, 3, seed=0)
    pairs = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 192, 32)]
    batches, result = pairs * 3, None
    with MoveTracker() as tracker:
        try:
            result = train(model, batches, device)
        except Exception as exc:  # noqa: BLE001 - a device bug raises on a GPU; keep looking at what ran
            report.error("train(model, batches, device)", exc, stop=False)
        tracker.mark_used(result)
    if not any(m.source is p for m in tracker.moves for p in model.parameters()):
        report.problem("model chưa được đưa lên device: thêm model.to(device) ở đầu hàm (trước khi tạo optimizer "
                       "là thói quen tốt).")
    reached = [pair for pair in pairs if tracker.used_after(pair[0], -1)]
    for index, name in enumerate(("xb", "yb")):
        states = {_move_state(tracker, pair[index], device) for pair in reached}
        state = next((s for s in MOVE_SLIPS if s in states), None)
        if state:
            report.problem(MOVE_SLIPS[state].format(name=name, device=device))
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


task1 = Exercise("task1", "Nhiệm vụ 1 · Gỡ lỗi: vòng train và device", _evaluate_train, starter=True,
                 hints=[
    "Có 4 lỗi. Ba lỗi về device: model, input, target phải cùng nằm trên device. Một lỗi về bộ nhớ: "
    "danh sách losses.",
    "model.to(device) (Module.to di chuyển tại chỗ); xb, yb = xb.to(device), yb.to(device) (Tensor.to phải gán "
    "lại); losses.append(loss.item()).",
])

# --------------------------------------------------------------------------- task 2: an evaluation loop


def _dropout_model() -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                                   torch.nn.Linear(64, 3))


#: Wrong numbers from an evaluation that runs right (`v`: the pair returned, the right loss and accuracy).
EVAL_WRONGS = [
    Wrong("accuracy", lambda v: not math.isclose(v.got[1], v.acc, rel_tol=1e-5), lambda v: (
        f"accuracy = {v.got[1]:.4f}, đúng là {v.acc:.4f} (số dự đoán đúng / tổng số mẫu).")),
    Wrong("mean of batch means", lambda v: not math.isclose(v.got[0], v.loss, rel_tol=1e-4), lambda v: (
        f"loss = {v.got[0]:.4f}, đúng là {v.loss:.4f}: batch cuối chỉ có 4 mẫu, nên trung bình các loss của batch "
        "lệch; cộng loss tổng (reduction='sum') rồi chia cho tổng số mẫu.")),
]


def _evaluate_eval(report: Report, evaluate=None) -> None:
    report.require_function(evaluate, "evaluate(model, batches)")
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
    report.diagnose(EVAL_WRONGS, SimpleNamespace(got=result, loss=loss, acc=acc))
    report.success(f"model.eval(), no_grad và số Python: loss {loss:.4f}, accuracy {acc:.1%}, không batch nào "
                   "giữ đồ thị.")


task2 = Exercise("task2", "Nhiệm vụ 2 · Gỡ lỗi: vòng đánh giá giữ đồ thị", _evaluate_eval, starter=True,
                 wrongs=EVAL_WRONGS, hints=[
    "Có 3 lỗi: model còn ở chế độ train, autograd còn bật, và total_loss/correct cộng dồn tensor.",
    "model.eval(); `with torch.no_grad():` quanh vòng lặp; total_loss += F.cross_entropy(...).item() và "
    "correct += (...).sum().item().",
])

# --------------------------------------------------------------------------- task 3: a non_blocking copy


class _AsyncCopies:
    """Make ``.to("cpu", non_blocking=True)`` act as from a GPU: the result holds its values only after a sync."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._to = torch.Tensor.to

    def to(self, tensor: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        out = self._to(tensor, *args, **kwargs)
        if not kwargs.get("non_blocking") or out.device.type != "cpu":
            return out
        early = torch.zeros_like(out)  # what the page-locked buffer holds before the copy lands
        self.pending.append((early, out.clone()))
        self.events.append("copy")
        return early

    def sync(self) -> None:
        self.events.append("sync")
        for early, value in self.pending:
            early.copy_(value)
        self.pending.clear()


#: What a wrong fix of fetch_predictions does (`c`: whether it read values too early, the copies and syncs in order).
FETCH_WRONGS = [
    Wrong("no sync", lambda c: c.read_early and not c.syncs,
          "đọc kết quả khi lệnh chép chưa xong: non_blocking=True chỉ XẾP HÀNG lệnh chép, nên .tolist() đọc số rác "
          "(ở đây là 0). Gọi sync() sau vòng lặp, trước khi đọc."),
    Wrong("sync before the last copy", lambda c: c.read_early and c.events[-1] == "copy",
          "sync() đứng TRƯỚC lệnh chép cuối cùng, nên batch cuối vẫn là số rác: gọi sync() sau vòng lặp, khi mọi "
          "lệnh chép đã được xếp hàng."),
    Wrong("read before sync", lambda c: c.read_early, "có .tolist() chạy trước sync(): đọc kết quả chỉ SAU khi "
                                                      "sync() xong."),
    Wrong("blocking copies", lambda c: c.copied == 0, "bỏ non_blocking=True thì đọc đúng, nhưng mỗi lần chép CPU "
                                                      "phải đứng chờ GPU. Giữ non_blocking=True và thêm một sync() "
                                                      "trước khi đọc."),
]


def _evaluate_fetch(report: Report, fetch_predictions=None) -> None:
    report.require_function(fetch_predictions, "fetch_predictions(model, batches, sync)")
    model = make_mlp(8, 5, hidden=16, depth=1, seed=5)
    batches = [torch.randn(6, 8, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    with torch.no_grad():
        want = [model(xb).argmax(dim=1).tolist() for xb in batches]
    copies = _AsyncCopies()
    with mock.patch.object(torch.Tensor, "to", lambda t, *a, **k: copies.to(t, *a, **k)), \
            mock.patch.object(torch.cuda, "synchronize", lambda *a, **k: copies.sync()):
        got = report.call("fetch_predictions(model, batches, sync)", fetch_predictions, model, batches, copies.sync)
    report.require_return(got, "fetch_predictions")
    if not isinstance(got, list) or any(not isinstance(p, list) for p in got):
        report.problem("fetch_predictions phải trả về list các list số Python (p.tolist() cho mỗi batch).", stop=True)
    copied, syncs = copies.events.count("copy"), copies.events.count("sync")
    report.diagnose(FETCH_WRONGS, SimpleNamespace(read_early=got != want, events=copies.events, syncs=syncs,
                                                  copied=copied))
    if syncs > 1:
        report.note(f"bạn gọi sync() {syncs} lần: đúng, nhưng mỗi lần CPU đứng chờ GPU. Một lần sau vòng lặp là đủ, "
                    "để các lệnh chép chạy chồng với việc tính các batch sau.")
    report.success(f"{copied} lệnh chép non_blocking, đọc sau sync(): mọi dự đoán đúng.")
    on_gpu_note(report, pick_device(),
                "bản có lỗi không báo gì, chỉ trả về số rác hoặc số cũ, tuỳ lúc. Trên CPU .to('cpu') không chép gì, "
                "nên bộ chấm giả lập lệnh chép bất đồng bộ của GPU: kết quả chỉ có sau sync() (hoặc "
                "torch.cuda.synchronize()).")


task3 = Exercise("task3", "Nhiệm vụ 3 · Gỡ lỗi: đọc bản chép non_blocking quá sớm", _evaluate_fetch, starter=True,
                 wrongs=FETCH_WRONGS, hints=[
    "non_blocking=True trả về ngay, trước khi dữ liệu tới nơi. Phải chờ GPU trước khi đọc.",
    "Sau vòng for, trước dòng return: sync() (trên GPU truyền sync=torch.cuda.synchronize).",
])

# --------------------------------------------------------------------------- task 4: DistributedSampler.set_epoch


#: Why two epochs saw the same order (`e`: what set_epoch received, and every event: a batch or a set_epoch call).
EPOCH_WRONGS = [
    Wrong("no set_epoch", lambda e: not e.epochs,
          "mọi epoch cùng một thứ tự: DistributedSampler xáo bằng seed + epoch, và epoch chỉ đổi khi bạn gọi "
          "sampler.set_epoch(epoch). torch.manual_seed hay shuffle của DataLoader không đổi được nó."),
    Wrong("constant epoch", lambda e: len(set(e.epochs)) == 1, lambda e: (
        f"set_epoch luôn nhận {e.epochs[0]}: truyền số thứ tự epoch, sampler.set_epoch(epoch).")),
    Wrong("set_epoch after the loop", lambda e: isinstance(e.events[0], list),
          "set_epoch được gọi SAU khi duyệt loader, nên epoch 0 và 1 cùng thứ tự: gọi nó ở đầu mỗi epoch, trước "
          "vòng for trên loader."),
    Wrong("other", lambda e: True, "có hai epoch cùng thứ tự: mỗi epoch gọi sampler.set_epoch(epoch) một lần, trước "
                                   "vòng for."),
]


def _evaluate_epochs(report: Report, train_epochs=None) -> None:
    report.require_function(train_epochs, "train_epochs(loader, sampler, epochs, train_step)")
    data = TensorDataset(torch.arange(24), torch.zeros(24, dtype=torch.long))
    sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=0)
    loader, events = DataLoader(data, batch_size=4, sampler=sampler), []
    sampler.set_epoch = mock.Mock(side_effect=lambda e: (events.append(e), DistributedSampler.set_epoch(sampler, e)))
    report.call("train_epochs(loader, sampler, 3, train_step)", train_epochs, loader, sampler, 3,
                lambda xb, _yb: events.append(xb.tolist()))
    seen = [e for e in events if isinstance(e, list)]
    if not seen:
        report.missing_part("train_step chưa được gọi lần nào.", stop=True)
    if len(seen) != 3 * len(loader):
        report.problem(f"train_step được gọi {len(seen)} lần, cần {3 * len(loader)}: mỗi epoch duyệt hết loader.",
                       stop=True)
    orders = [sum(seen[i:i + len(loader)], []) for i in range(0, len(seen), len(loader))]
    epochs = [e for e in events if not isinstance(e, list)]
    if len({tuple(o) for o in orders}) < 3:
        report.diagnose(EPOCH_WRONGS, SimpleNamespace(epochs=epochs, events=events))
    report.success(f"ba epoch, ba thứ tự khác nhau; rank 0 thấy {orders[0][:4]}… rồi {orders[1][:4]}….")


task4 = Exercise("task4", "Nhiệm vụ 4 · Gỡ lỗi: DistributedSampler thiếu set_epoch", _evaluate_epochs, starter=True,
                 wrongs=EPOCH_WRONGS, hints=[
    "DistributedSampler không dùng bộ sinh số ngẫu nhiên toàn cục: nó xáo bằng seed + epoch của chính nó.",
    "Dòng đầu của mỗi epoch: sampler.set_epoch(epoch), trước `for xb, yb in loader:`.",
])

# --------------------------------------------------------------------------- task 5: AMP with accumulation

_ACCUM = 4


def _setup():
    model = make_mlp(8, 3, hidden=16, depth=1, seed=6)
    x, y = make_classification_data(32, 8, 3, seed=7)
    batches = [(x[i:i + 4], y[i:i + 4]) for i in range(0, 32, 4)]  # 8 micro-batches: 2 big batches of 4
    # A small S: a gradient left over from the last big batch is divided by S at unscale, so it must still show.
    return model, torch.optim.SGD(model.parameters(), lr=0.5), torch.amp.GradScaler("cpu", init_scale=16.0), batches


def _reference(divide: bool) -> list[torch.Tensor]:
    model, optimizer, scaler, batches = _setup()
    for i, (xb, yb) in enumerate(batches):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(xb), yb) / (_ACCUM if divide else 1)
        scaler.scale(loss).backward()
        if (i + 1) % _ACCUM == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
    return [p.detach() for p in model.parameters()]


#: Why scaler.step / scaler.update run once per big batch only.
_ONCE_PER_BATCH = {"step": "nếu không, mô hình đổi sau từng micro-batch",
                   "update": "gọi giữa chừng thì S đổi khi gradient của các micro-batch trước còn mang S cũ"}


#: Wrong weights from a loop that calls the scaler right (`got`: its weights).
ACCUM_WRONGS = [
    Wrong("no division", lambda got: same_weights(got, _reference(divide=False)),
          f"loss chưa chia cho accum_steps: gradient là TỔNG của {_ACCUM} micro-batch, lớn gấp {_ACCUM} lần gradient "
          "của batch lớn. Dùng loss = F.cross_entropy(...) / accum_steps."),
    Wrong("other", lambda got: not same_weights(got, _reference(divide=True)),
          "tham số sau train khác bản đúng: zero_grad sau mỗi scaler.step, và không đổi phép tính (autocast "
          "bfloat16, cross-entropy chia accum_steps)."),
]


def _evaluate_accum(report: Report, train_accum=None) -> None:
    report.require_function(train_accum, "train_accum(model, optimizer, scaler, micro_batches, accum_steps)")
    model, optimizer, scaler, batches = _setup()
    failure = None
    with scaler_calls(scaler) as calls:
        try:
            train_accum(model, optimizer, scaler, batches, _ACCUM)
        except Exception as exc:  # noqa: BLE001 - a real GradScaler raises on some wrong orders; the calls say why
            failure = exc
    names = [c.name for c in calls if c.own]
    # For each step and update: how many micro-batches were scaled before it.
    marks = {name: [names[:i].count("scale") for i, n in enumerate(names) if n == name] for name in _ONCE_PER_BATCH}
    n_scale = names.count("scale")
    if n_scale == 0 and failure is None and not marks["step"]:
        report.missing_part("chưa có scaler.scale(loss).backward() nào.", stop=True)
    if n_scale == 0:
        report.problem("loss.backward() không qua scaler: mỗi micro-batch phải gọi scaler.scale(loss).backward(), "
                       "nếu không gradient không được nhân S và scaler.step không có gì để unscale.", stop=True)
    for name, why in _ONCE_PER_BATCH.items():
        at, want = marks[name], n_scale // _ACCUM
        if len(at) != want or any(k % _ACCUM for k in at):
            report.problem(f"scaler.{name}(...) chạy {len(at)} lần sau {n_scale} micro-batch, cần {want}: một lần "
                           f"mỗi {_ACCUM} micro-batch, trong `if (i + 1) % accum_steps == 0:` ({why}).")
    if failure is not None:
        report.error("train_accum(...)", failure)
    if n_scale != len(batches):
        report.problem(f"scaler.scale(loss).backward() chạy {n_scale} lần cho {len(batches)} micro-batch: mỗi "
                       "micro-batch một lần.")
    if report.problems:
        return
    got = [p.detach() for p in model.parameters()]
    report.diagnose(ACCUM_WRONGS, got)
    report.success(f"{n_scale} lần scale().backward(), {n_scale // _ACCUM} lần step() và update(): tham số khớp bản "
                   f"tham chiếu với GradScaler đang bật (S = {scaler.get_scale():.0f}).")
    on_gpu_note(report, pick_device(), "với float16, cùng vòng này giữ gradient khỏi về 0; gọi update() mỗi "
                "micro-batch thì một lần inf làm S giảm giữa chừng và các phần gradient bị chia sai hệ số.")


task5 = Exercise("task5", "Nhiệm vụ 5 · Gỡ lỗi: AMP cùng gradient accumulation", _evaluate_accum, starter=True,
                 wrongs=ACCUM_WRONGS, hints=[
    "Có 2 lỗi: loss của mỗi micro-batch chưa chia cho accum_steps, và scaler.step/update chạy mỗi micro-batch.",
    "loss = F.cross_entropy(...) / accum_steps; scaler.scale(loss).backward() mỗi micro-batch; "
    "chỉ trong `if (i + 1) % accum_steps == 0:` mới scaler.step(optimizer), scaler.update(), zero_grad.",
])

# --------------------------------------------------------------------------- task 6: resuming with a GradScaler

_TRAINED_SCALE = 2.0**11  # a scale that backed off from 65536 after overflows, as in a real float16 run


def _trio(scale: float | None = None):
    model = make_mlp(4, 2, hidden=8, depth=1, seed=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu") if scale is None else torch.amp.GradScaler("cpu", init_scale=scale)
    return model, optimizer, scaler


def _trained():
    model, optimizer, scaler = _trio(_TRAINED_SCALE)
    x, y = make_classification_data(8, 4, 2, seed=9)
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    scaler.step(optimizer)  # momentum buffers now in the optimizer's state
    scaler.update()
    return model, optimizer, scaler


#: What a checkpoint may lack (`c`: the dict saved, the scaler's scale).
SAVE_WRONGS = [
    Wrong("scaler object", lambda c: any(isinstance(v, torch.amp.GradScaler) for v in c.saved.values()),
          "bạn lưu chính đối tượng scaler: torch.load (weights_only=True, mặc định từ torch 2.6) từ chối nó. Lưu "
          "scaler.state_dict(), như model và optimizer."),
    Wrong("no scaler saved", lambda c: not any(isinstance(v, dict) and v.get("scale") == c.scale
                                               for v in c.saved.values()),
          'checkpoint không có trạng thái của scaler: thêm "scaler": scaler.state_dict() vào dict của '
          "save_checkpoint."),
]
#: What loading may leave behind (`c`: the saved and the loaded (model, optimizer, scaler)).
LOAD_WRONGS = [
    Wrong("scaler not loaded", lambda c: c.loaded[2].get_scale() != c.saved[2].get_scale(), lambda c: (
        f"sau khi nạp, scaler truyền vào vẫn có S = {c.loaded[2].get_scale():.0f}, không phải "
        f"{c.saved[2].get_scale():.0f}: gọi scaler.load_state_dict(ckpt['scaler']) trên chính scaler đó. Với "
        f"float16, tới {int(c.loaded[2].get_scale() / c.saved[2].get_scale()).bit_length() - 1} bước đầu sau khi "
        "chạy tiếp có thể bị bỏ qua vì inf, mỗi bước S giảm một nửa.")),
    Wrong("scale only", lambda c: c.loaded[2].state_dict() != c.saved[2].state_dict(),
          "scaler nạp lại có scale đúng nhưng các trường khác (_growth_tracker…) sai: dùng "
          "scaler.load_state_dict(ckpt['scaler'])."),
    Wrong("model not loaded", lambda c: not same_weights(c.saved[0].parameters(), c.loaded[0].parameters()),
          "tham số của model nạp lại khác model đã lưu."),
    Wrong("optimizer not loaded", lambda c: not c.loaded[1].state_dict()["state"],
          "optimizer nạp lại mất trạng thái (momentum): optimizer.load_state_dict(ckpt['optimizer'])."),
]


def _evaluate_resume(report: Report, save_checkpoint=None, load_checkpoint=None) -> None:
    report.require_function(save_checkpoint, "save_checkpoint(path, model, optimizer, scaler)")
    report.require_function(load_checkpoint, "load_checkpoint(path, model, optimizer, scaler)")
    (model, optimizer, scaler), fresh = _trained(), _trio()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        report.call("save_checkpoint(path, model, optimizer, scaler)", save_checkpoint, path, model, optimizer,
                    scaler)
        saved = torch.load(path, weights_only=False) if os.path.exists(path) else None
        if not isinstance(saved, dict):
            report.problem("save_checkpoint phải ghi một dict vào path bằng torch.save(..., path).", stop=True)
        report.diagnose(SAVE_WRONGS, SimpleNamespace(saved=saved, scale=scaler.get_scale()))
        report.call("load_checkpoint(path, model, optimizer, scaler)", load_checkpoint, path, *fresh)
    want = scaler.get_scale()
    report.diagnose(LOAD_WRONGS, SimpleNamespace(saved=(model, optimizer, scaler), loaded=fresh))
    report.success(f"model, optimizer và scaler (S = {want:.0f}) đều đi qua torch.save/torch.load.")


task6 = Exercise("task6", "Nhiệm vụ 6 · Gỡ lỗi: chạy tiếp từ checkpoint mà quên GradScaler", _evaluate_resume,
                 starter=True, wrongs=SAVE_WRONGS + LOAD_WRONGS, hints=[
    "GradScaler cũng có trạng thái (hệ số S, bộ đếm tăng S), lưu và nạp như model và optimizer.",
    'save: thêm "scaler": scaler.state_dict(); load: scaler.load_state_dict(ckpt["scaler"]).',
])
