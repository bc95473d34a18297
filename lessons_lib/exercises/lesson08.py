"""Lesson 08's checked tasks: the GB per GPU of DDP and ZeRO-1/2/3 (against ``sharded_training_memory``), and the
indices each rank gets (against torch's own ``DistributedSampler``)."""

from __future__ import annotations

import math

import torch
from torch.utils.data.distributed import DistributedSampler

from ..memory import sharded_training_memory
from ._core import Case, Exercise, Report, Wrong, number, run_cases


def _expected_shard(n: int, world_size: int, rank: int) -> list[int]:
    """Return the indices torch's ``DistributedSampler(shuffle=False, drop_last=False)`` gives `rank`."""
    return list(DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False))


# (data set size, world size): even splits, uneven ones (padding), and more ranks than samples; every rank.
_SHARD_CASES = [Case(f"shard_indices({n}, {world}, {rank})", (n, world, rank), _expected_shard(n, world, rank))
                for n, world in [(10, 4), (10, 3), (7, 2), (3, 8), (64, 2)] for rank in range(world)]


def _as_int_list(report: Report, value) -> list[int]:
    """Return `value` as a list of ints (list, tuple, range or 1-D integer tensor), else stop with a problem."""
    if isinstance(value, torch.Tensor) and value.dim() == 1 and not (
            value.is_floating_point() or value.is_complex() or value.device.type == "meta"):
        return [int(v) for v in value.tolist()]
    if isinstance(value, (list, tuple, range)):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return list(value)
        if all(isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_floating_point() for v in value):
            return [int(v) for v in value]
    report.problem(f"shard_indices phải trả về một list chỉ số (int), không phải {type(value).__name__}.", stop=True)


def _show(indices: list[int], limit: int = 8) -> str:
    """Return a short text form of a list of indices: ``[0, 2, 4, …] (32 chỉ số)`` when it is long."""
    if len(indices) <= limit:
        return str(indices)
    return "[" + ", ".join(map(str, indices[:limit])) + ", …] " + f"({len(indices)} chỉ số)"


def _with(a) -> str:
    n, world, rank = a.case.args
    return f"với n={n}, world_size={world}, rank={rank}: bạn trả về {_show(a.got)}"


def _block(n: int, world: int, rank: int) -> list[int]:
    per = math.ceil(n / world)
    return list(range(rank * per, min((rank + 1) * per, n)))


#: How a rank's indices may differ from DistributedSampler's (``a.case.args`` is (n, world_size, rank)).
SHARD_WRONGS = [
    Wrong("blocks", lambda a: a.got == _block(*a.case.args), lambda a: (
        f"{_with(a)}, một khúc liền. DistributedSampler chia xen kẽ: rank r lấy các vị trí r, r + world_size, "
        f"r + 2·world_size, … (ở đây {_show(a.case.want)}).")),
    Wrong("no padding", lambda a: a.got == list(range(a.case.args[2], a.case.args[0], a.case.args[1])), lambda a: (
        f"{_with(a)} ({len(a.got)} mẫu), nhưng mọi rank phải có cùng số mẫu ceil(n / world_size) = "
        f"{len(a.case.want)}, nếu không các rank sẽ chờ nhau ở all-reduce của bước cuối. DistributedSampler bù bằng "
        f"cách lặp lại các mẫu đầu (0, 1, …): đúng là {_show(a.case.want)}.")),
    Wrong("ranks from one", lambda a: a.case.args[1] > 1 and a.got == _expected_shard(
        *a.case.args[:2], (a.case.args[2] + 1) % a.case.args[1]), lambda a: (
        f"{_with(a)}, phần của rank {(a.case.args[2] + 1) % a.case.args[1]}. Rank đếm từ 0: rank 0 lấy vị trí 0, "
        f"world_size, …; đúng là {_show(a.case.want)}.")),
    Wrong("pads with others", lambda a: len(a.got) == len(a.case.want) and a.got[:-1] == a.case.want[:-1],
          lambda a: (f"{_with(a)}: mẫu cuối là {a.got[-1]}, đúng là {a.case.want[-1]}. Khi bù, DistributedSampler "
                     "lặp lại các mẫu ĐẦU của tập dữ liệu (chỉ số i % n), không phải mẫu cuối hay mẫu bất kỳ.")),
    Wrong("other", lambda a: True, lambda a: f"{_with(a)}, DistributedSampler trả về {_show(a.case.want)}."),
]


def _evaluate_shard(report: Report, shard_indices=None) -> None:
    run_cases(report, shard_indices, "shard_indices(n, world_size, rank)", _SHARD_CASES, SHARD_WRONGS,
              returns=(object,), read=_as_int_list)
    report.success("mỗi rank nhận đúng các chỉ số như DistributedSampler, cả khi số mẫu không chia hết.")


task2 = Exercise("task2", "Bài 14.8 · Nhiệm vụ 2 · Mỗi rank một phần dữ liệu", _evaluate_shard,
                 wrongs=SHARD_WRONGS, hints=[
    "Không xáo (shuffle=False), thứ tự là 0, 1, …, n-1. Rank r lấy các vị trí r, r + world_size, "
    "r + 2·world_size, … Thử với n=64, world_size=2: rank 0 lấy 0, 2, 4, …",
    "Mọi rank phải có cùng số mẫu: total = ceil(n / world_size) · world_size. Khi n không chia hết, kéo dài danh "
    "sách chỉ số thành `total` phần tử bằng cách quay vòng: vị trí i chứa mẫu i % n.",
    "indices = [i % n for i in range(total)], rồi return indices[rank:total:world_size].",
])

# (parameters, GPUs): the lesson's 7 B on 8 GPUs, the ZeRO paper's 7.5 B on 64, an uneven split.
_MEMORY_CASES = [(7_000_000_000, 8), (7_500_000_000, 64), (1_300_000_000, 4), (1_000_003, 3)]


def _expected_gb(n_params: int, n_gpus: int, stage: int) -> float:
    """Return the GB (1e9 bytes) per GPU of ``sharded_training_memory`` (ZeRO paper accounting)."""
    return sharded_training_memory(n_params, num_gpus=n_gpus, stage=stage).total / 1e9


def _formula_gb(n: int, g: int, stage: int, *, p: float = 2, gr: float = 2, o: float = 12,
                shard_p: int = 3, shard_g: int = 2, shard_o: int = 1, unit: float = 1e9, ddp_divides: bool = False) -> float:
    """Return GB per GPU under a (possibly wrong) rule: which stage shards which part, bytes per part, unit."""
    def part(bytes_per_param: float, from_stage: int) -> float:
        sharded = stage >= from_stage or (ddp_divides and stage == 0)
        return bytes_per_param * n / (g if sharded else 1)
    return (part(p, shard_p) + part(gr, shard_g) + part(o, shard_o)) / unit


_ADAM_12 = ("trạng thái Adam với mixed precision là 12 byte mỗi tham số: bản fp32 của tham số (4) + "
            "momentum (4) + ")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-6)


def _follows(rule: dict):
    """Return the test "every answer (a dict (n, g, stage) → GB) follows the wrong `rule`"."""
    return lambda answers: all(_close(v, _formula_gb(*k, **rule)) for k, v in answers.items())


#: Typical wrong rules (keyword arguments of `_formula_gb` that all the answers follow) and what to say about them.
MEMORY_WRONGS = [
    Wrong("ddp divides", _follows({"ddp_divides": True}),
          "DDP (stage 0) không chia gì cho các GPU: mỗi GPU giữ đủ tham số, gradient và trạng thái Adam, 16 byte mỗi "
          "tham số dù có bao nhiêu GPU."),
    Wrong("adam 8", _follows({"o": 8}), _ADAM_12 + "variance (4), không phải 8."),
    Wrong("adam 4", _follows({"o": 4}), _ADAM_12 + "variance (4)."),
    Wrong("fp32 adam", _follows({"p": 4, "gr": 4, "o": 8}),
          "đây là Adam fp32 (4 + 4 + 8 byte); bài này dùng cách tính của bài báo ZeRO cho mixed precision: tham số "
          "fp16 (2) + gradient fp16 (2) + trạng thái Adam (12) = 16 byte."),
    Wrong("stages reversed", _follows({"shard_p": 1, "shard_g": 2, "shard_o": 3}),
          "thứ tự các stage bị đảo: ZeRO-1 chia trạng thái optimizer trước (phần lớn nhất), ZeRO-2 chia thêm "
          "gradient, ZeRO-3 chia thêm tham số."),
    Wrong("zero-1 shards gradients", _follows({"shard_g": 1}),
          "ZeRO-1 chỉ chia trạng thái optimizer; gradient được chia từ ZeRO-2."),
    Wrong("zero-2 shards parameters", _follows({"shard_p": 2}),
          "ZeRO-2 chia trạng thái optimizer và gradient, nhưng mỗi GPU vẫn giữ đủ tham số; tham số chỉ được chia ở "
          "ZeRO-3."),
    Wrong("zero-3 keeps parameters", _follows({"shard_p": 4}),
          "ZeRO-3 (như FSDP chia hết) chia cả tham số: mỗi GPU chỉ giữ 1/N tham số."),
    Wrong("GiB", _follows({"unit": 2**30}),
          "đơn vị là GB = 1e9 byte (như bài báo ZeRO và bảng trong bài), không phải GiB = 2**30 byte."),
    Wrong("bytes", _follows({"unit": 1}), "hàm trả về số byte; hãy chia cho 1e9 để ra GB."),
]


def _evaluate_memory(report: Report, per_gpu_gb=None) -> None:
    report.require_function(per_gpu_gb, "per_gpu_gb(n_params, n_gpus, stage)")
    answers: dict[tuple[int, int, int], float] = {}
    for n, g in _MEMORY_CASES:
        for stage in range(4):
            raw = report.call(f"per_gpu_gb({n}, {g}, {stage})", per_gpu_gb, n, g, stage)
            report.require_return(raw, "per_gpu_gb")
            value = number(raw)
            if value is None or not math.isfinite(value):
                report.problem(f"per_gpu_gb phải trả về một số GB (float), không phải {type(raw).__name__}.",
                               stop=True)
            answers[(n, g, stage)] = value
    wrong = [(k, v) for k, v in answers.items() if not _close(v, _expected_gb(*k))]
    if not wrong:
        report.success("đúng cho DDP và ZeRO-1/2/3, khớp sharded_training_memory (và các con số của bài báo ZeRO).")
        return
    report.diagnose(MEMORY_WRONGS, answers, stop=False)
    (n, g, stage), value = wrong[0]
    report.problem(f"ví dụ: per_gpu_gb({n:_}, {g}, {stage}) trả về {value:.4g} GB, đúng là {_expected_gb(n, g, stage):.4g} GB.")


task1 = Exercise("task1", "Bài 14.8 · Nhiệm vụ 1 · Bộ nhớ mỗi GPU: DDP và ZeRO", _evaluate_memory,
                 wrongs=MEMORY_WRONGS, hints=[
    "Mỗi tham số: 2 byte tham số fp16, 2 byte gradient fp16, 12 byte trạng thái Adam. Một phần được 'chia' thì "
    "mỗi GPU chỉ giữ 1/n_gpus của nó.",
    "Stage 0 (DDP): không chia gì. Stage 1: chia trạng thái Adam. Stage 2: thêm gradient. Stage 3: thêm tham số. "
    "Kết quả tính bằng GB = 1e9 byte.",
    "params = 2 * n_params / (n_gpus if stage >= 3 else 1); tương tự grads (stage >= 2) và optim (12 byte, stage >= 1); "
    "return (params + grads + optim) / 1e9.",
])

