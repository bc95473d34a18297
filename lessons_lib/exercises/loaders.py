"""Exercises 3-4: a ``non_blocking`` copy read before a sync, a ``DistributedSampler`` without ``set_epoch``.

The copy is faked as on a GPU (its result filled in only at ``sync()``); the sampler is torch's own, rank 0 of 2.
"""

from __future__ import annotations

from unittest import mock

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ..device import pick_device
from ..training import make_mlp
from ._core import Exercise, Report, on_gpu_note, same_code


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


def _evaluate_fetch(report: Report, fetch_predictions=None) -> None:
    report.require_function(fetch_predictions, "fetch_predictions(model, batches, sync)")
    if same_code(fetch_predictions, ex3.starter_code):
        report.missing_part("hàm vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.", stop=True)
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
    if got != want:
        if "sync" not in copies.events:
            report.problem("đọc kết quả khi lệnh chép chưa xong: non_blocking=True chỉ XẾP HÀNG lệnh chép, nên "
                           ".tolist() đọc số rác (ở đây là 0). Gọi sync() sau vòng lặp, trước khi đọc.", stop=True)
        if copies.events[-1] == "copy":
            report.problem("sync() đứng TRƯỚC lệnh chép cuối cùng, nên batch cuối vẫn là số rác: gọi sync() sau "
                           "vòng lặp, khi mọi lệnh chép đã được xếp hàng.", stop=True)
        report.problem("có .tolist() chạy trước sync(): đọc kết quả chỉ SAU khi sync() xong.", stop=True)
    copied, syncs = copies.events.count("copy"), copies.events.count("sync")
    if copied == 0:
        report.problem("bỏ non_blocking=True thì đọc đúng, nhưng mỗi lần chép CPU phải đứng chờ GPU. Giữ "
                       "non_blocking=True và thêm một sync() trước khi đọc.", stop=True)
    if syncs > 1:
        report.note(f"bạn gọi sync() {syncs} lần: đúng, nhưng mỗi lần CPU đứng chờ GPU. Một lần sau vòng lặp là đủ, "
                    "để các lệnh chép chạy chồng với việc tính các batch sau.")
    report.success(f"{copied} lệnh chép non_blocking, đọc sau sync(): mọi dự đoán đúng.")
    on_gpu_note(report, pick_device(),
                "bản có lỗi không báo gì, chỉ trả về số rác hoặc số cũ, tuỳ lúc. Trên CPU .to('cpu') không chép gì, "
                "nên bộ chấm giả lập lệnh chép bất đồng bộ của GPU: kết quả chỉ có sau sync() (hoặc "
                "torch.cuda.synchronize()).")


ex3 = Exercise("ex3", "Nhiệm vụ 3 · Gỡ lỗi: đọc bản chép non_blocking quá sớm", _evaluate_fetch,
               starter=True, hints=[
    "non_blocking=True trả về ngay, trước khi dữ liệu tới nơi. Phải chờ GPU trước khi đọc.",
    "Sau vòng for, trước dòng return: sync() (trên GPU truyền sync=torch.cuda.synchronize).",
])


def _evaluate_epochs(report: Report, train_epochs=None) -> None:
    report.require_function(train_epochs, "train_epochs(loader, sampler, epochs, train_step)")
    if same_code(train_epochs, ex4.starter_code):
        report.missing_part("hàm vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.", stop=True)
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
    if len({tuple(o) for o in orders}) == 3:
        report.success(f"ba epoch, ba thứ tự khác nhau; rank 0 thấy {orders[0][:4]}… rồi {orders[1][:4]}….")
        return
    if not epochs:
        report.problem("mọi epoch cùng một thứ tự: DistributedSampler xáo bằng seed + epoch, và epoch chỉ đổi khi "
                       "bạn gọi sampler.set_epoch(epoch). torch.manual_seed hay shuffle của DataLoader không đổi "
                       "được nó.", stop=True)
    if len(set(epochs)) == 1:
        report.problem(f"set_epoch luôn nhận {epochs[0]}: truyền số thứ tự epoch, sampler.set_epoch(epoch).",
                       stop=True)
    if isinstance(events[0], list):
        report.problem("set_epoch được gọi SAU khi duyệt loader, nên epoch 0 và 1 cùng thứ tự: gọi nó ở đầu mỗi "
                       "epoch, trước vòng for trên loader.", stop=True)
    report.problem("có hai epoch cùng thứ tự: mỗi epoch gọi sampler.set_epoch(epoch) một lần, trước vòng for.")


ex4 = Exercise("ex4", "Nhiệm vụ 4 · Gỡ lỗi: DistributedSampler thiếu set_epoch", _evaluate_epochs,
               starter=True, hints=[
    "DistributedSampler không dùng bộ sinh số ngẫu nhiên toàn cục: nó xáo bằng seed + epoch của chính nó.",
    "Dòng đầu của mỗi epoch: sampler.set_epoch(epoch), trước `for xb, yb in loader:`.",
])
