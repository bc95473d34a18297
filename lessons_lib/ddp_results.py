"""What a DDP run produced, and the checks that say whether DDP did what it promises.

``DDPRun`` holds every rank's record (its shard, and per step its batch, local gradient, all-reduced gradient and
weights), the single-process full-batch reference and how the run went. ``compare_ranks()`` measures how far the
ranks are from each other and from that reference (``DDPComparison``); ``single_process_steps()`` computes the
reference in this process from the ranks' data set and model.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .ddp_diagnosis import DDPRunError
from .i18n import tr


def load_ddp_results(out_dir: str | os.PathLike) -> tuple[list[dict], list[dict]]:
    """Read the files a finished demo run wrote: (one dict per rank, the reference steps of rank 0)."""
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a folder path (str or Path), got {type(out_dir).__name__}")
    out = Path(out_dir)
    files = sorted(out.glob("rank*.json"), key=lambda p: int(p.stem[4:]))
    if not files or not (out / "reference.json").exists():
        raise ValueError(f"{out} holds no finished DDP run (rank*.json and reference.json are missing)")
    ranks = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    world = ranks[0]["world_size"]
    if [r["rank"] for r in ranks] != list(range(world)):
        raise ValueError(f"{out} holds results of ranks {[r['rank'] for r in ranks]}, expected 0..{world - 1}")
    reference = json.loads((out / "reference.json").read_text(encoding="utf-8"))["steps"]
    return ranks, reference


def _max_abs(a: list[float], b: list[float]) -> float:
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of lengths {len(a)} and {len(b)}")
    return max((abs(x - y) for x, y in zip(a, b, strict=True)), default=0.0)


def _close(a: list[float], b: list[float], atol: float, rtol: float) -> bool:
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of lengths {len(a)} and {len(b)}")
    return all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class DDPComparison:
    """Max absolute differences between ranks and against the single-process run."""

    world_size: int
    steps: int
    shard_sizes: tuple[int, ...]
    shards_disjoint: bool
    shards_cover_data: bool
    init_diff_before_ddp: float
    init_diff_after_ddp: float
    local_grad_diff_between_ranks: float
    mean_local_vs_allreduced: float
    grad_diff_between_ranks: float
    grad_diff_vs_single: float
    weight_diff_between_ranks: float
    weight_diff_vs_single: float
    grads_allclose: bool
    weights_allclose: bool
    atol: float
    rtol: float

    @property
    def ok(self) -> bool:
        """Return True when DDP did what it promises: same gradients/weights everywhere, equal to one process."""
        return (self.shards_disjoint and self.grad_diff_between_ranks == 0.0 and self.weight_diff_between_ranks == 0.0
                and self.init_diff_after_ddp == 0.0 and self.grads_allclose and self.weights_allclose)

    def rows(self) -> list[tuple[str, float]]:
        """Return (label, max abs difference) rows, for a table or a plot."""
        return [
            (tr("trọng số đầu, giữa các rank, trước DDP", "initial weights across ranks, before DDP"), self.init_diff_before_ddp),
            (tr("trọng số đầu, giữa các rank, sau DDP", "initial weights across ranks, after DDP"), self.init_diff_after_ddp),
            (tr("gradient cục bộ, giữa các rank", "local gradients across ranks"), self.local_grad_diff_between_ranks),
            (tr("gradient all-reduce, giữa các rank", "all-reduced gradients across ranks"), self.grad_diff_between_ranks),
            (tr("trung bình gradient cục bộ vs all-reduce", "mean of local gradients vs all-reduced"), self.mean_local_vs_allreduced),
            (tr("gradient all-reduce vs 1 tiến trình", "all-reduced gradient vs one process"), self.grad_diff_vs_single),
            (tr("trọng số sau các bước, giữa các rank", "weights after the steps, across ranks"), self.weight_diff_between_ranks),
            (tr("trọng số sau các bước vs 1 tiến trình", "weights after the steps vs one process"), self.weight_diff_vs_single),
        ]


def compare_ranks(ranks: list[dict], reference: list[dict], atol: float = 1e-6, rtol: float = 1e-5) -> DDPComparison:
    """Compare the ranks' shards, gradients and weights with each other and with the single-process steps.

    Args:
        ranks: One dict per rank, as written by the demo (``load_ddp_results``).
        reference: Rank 0's single-process steps (full-batch gradient and weights per step).
        atol: Absolute tolerance of the allclose checks.
        rtol: Relative tolerance of the allclose checks.

    Returns:
        A ``DDPComparison``.
    """
    if not isinstance(ranks, list) or not ranks or not all(isinstance(r, dict) for r in ranks):
        raise TypeError("ranks must be a non-empty list of per-rank dicts (see load_ddp_results)")
    if not isinstance(reference, list) or not all(isinstance(s, dict) for s in reference):
        raise TypeError("reference must be the list of rank 0's single-process step dicts (see load_ddp_results)")
    for name, tol in (("atol", atol), ("rtol", rtol)):
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0 or math.isinf(tol):
            raise ValueError(f"{name} must be a finite number >= 0, got {tol!r}")
    steps = len(reference)
    if steps == 0 or any(len(r["steps"]) != steps for r in ranks):
        raise ValueError(f"every rank and the reference must hold the same number (>0) of steps; "
                         f"reference has {steps}, ranks have {[len(r['steps']) for r in ranks]}")
    world = len(ranks)
    shards = [r["shard"] for r in ranks]
    all_indices = [i for s in shards for i in s]
    n_samples = ranks[0].get("n_samples", len(all_indices))

    def across(key_fn) -> float:
        first = ranks[0]
        return max((_max_abs(key_fn(first, k), key_fn(r, k)) for r in ranks[1:] for k in range(steps)), default=0.0)

    mean_local = []
    for k in range(steps):
        local = [r["steps"][k]["local_grad"] for r in ranks]
        mean_local.append([sum(v) / world for v in zip(*local, strict=True)])
    grads_close = all(_close(r["steps"][k]["grad"], reference[k]["grad"], atol, rtol) for r in ranks for k in range(steps))
    weights_close = all(_close(r["steps"][k]["weights"], reference[k]["weights"], atol, rtol)
                        for r in ranks for k in range(steps))
    return DDPComparison(
        world_size=world,
        steps=steps,
        shard_sizes=tuple(len(s) for s in shards),
        shards_disjoint=len(set(all_indices)) == len(all_indices),
        shards_cover_data=set(all_indices) == set(range(n_samples)),
        init_diff_before_ddp=max((_max_abs(ranks[0]["init_before_ddp"], r["init_before_ddp"]) for r in ranks[1:]), default=0.0),
        init_diff_after_ddp=max((_max_abs(ranks[0]["init_after_ddp"], r["init_after_ddp"]) for r in ranks[1:]), default=0.0),
        local_grad_diff_between_ranks=across(lambda r, k: r["steps"][k]["local_grad"]),
        mean_local_vs_allreduced=max(_max_abs(mean_local[k], r["steps"][k]["grad"]) for r in ranks for k in range(steps)),
        grad_diff_between_ranks=across(lambda r, k: r["steps"][k]["grad"]),
        grad_diff_vs_single=max(_max_abs(r["steps"][k]["grad"], reference[k]["grad"]) for r in ranks for k in range(steps)),
        weight_diff_between_ranks=across(lambda r, k: r["steps"][k]["weights"]),
        weight_diff_vs_single=max(_max_abs(r["steps"][k]["weights"], reference[k]["weights"])
                                  for r in ranks for k in range(steps)),
        grads_allclose=grads_close,
        weights_allclose=weights_close,
        atol=float(atol),
        rtol=float(rtol),
    )


def _fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.1e}"


def single_process_steps(data, model, ranks: list[dict], lr: float) -> list[dict]:
    """Redo the ranks' SGD steps in this process on the union of their batches: the full-batch reference.

    Args:
        data: The data set the ranks used (a ``TensorDataset`` of inputs and labels, same on every rank).
        model: A fresh instance of the ranks' model; its weights are set to the ranks' weights after DDP.
        ranks: One dict per rank (``DDPRun.ranks``), with ``init_after_ddp`` and per step its ``batch``.
        lr: The SGD learning rate of the ranks.

    Returns:
        One dict per step: the full batch, its loss, gradient and the weights after ``optimizer.step()``.
    """
    import torch
    from torch import nn

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a fresh nn.Module like the ranks' model, got {type(model).__name__}")
    if not isinstance(ranks, list) or not ranks or not all(isinstance(r, dict) for r in ranks):
        raise TypeError("ranks must be the non-empty list of per-rank dicts of a finished run (run.ranks)")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"lr must be the ranks' positive learning rate, got {lr!r}")
    tensors = getattr(data, "tensors", None)
    if not isinstance(tensors, tuple) or len(tensors) != 2:
        raise TypeError(f"data must be a TensorDataset of (inputs, labels), got {type(data).__name__}")
    params = list(model.parameters())
    init = torch.tensor(ranks[0]["init_after_ddp"])
    if init.numel() != sum(p.numel() for p in params):
        raise ValueError(f"model has {sum(p.numel() for p in params)} parameters but the ranks' model has "
                         f"{init.numel()}: pass a fresh instance of the same model")
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(init.to(params[0].dtype), params)
    opt = torch.optim.SGD(params, lr=lr)
    steps = []
    for k in range(min(len(r["steps"]) for r in ranks)):
        batch = [i for r in ranks for i in r["steps"][k]["batch"]]
        x, y = tensors[0][batch], tensors[1][batch]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        grad = [float(v) for p in params for v in p.grad.reshape(-1)]
        opt.step()
        steps.append({"step": k, "batch": batch, "loss": loss.item(), "grad": grad,
                      "weights": [float(v) for p in params for v in p.detach().reshape(-1)]})
    return steps


@dataclass
class DDPRun:
    """What one DDP run produced: per-rank records, the single-process reference, timing, and how it went.

    ``run_ddp_demo()`` fills everything (rank 0 of the demo computes the reference). ``launch()`` fills the
    ranks; ``compare_with_single_process()`` then adds the reference. A failed ``launch()`` returns a run
    with ``ok=False``, no ranks and the error: every method then says so instead of raising.
    """

    ranks: list[dict]
    reference: list[dict]
    wall_s: float
    command: list[str] | str
    output: str = ""
    comparison: DDPComparison | None = field(default=None)
    ok: bool = True
    error: DDPRunError | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.comparison is None and self.ranks and self.reference:
            self.comparison = compare_ranks(self.ranks, self.reference)

    @property
    def world_size(self) -> int:
        """Return the number of ranks that reported results."""
        return len(self.ranks)

    @property
    def backend(self) -> str | None:
        """Return the process-group backend the ranks used ("gloo" or "nccl"); None without results."""
        return self.ranks[0]["backend"] if self.ranks else None

    @property
    def shell_command(self) -> str:
        """Return the run's command as a learner would type it: ``torchrun --nproc_per_node=2 ...``."""
        cmd = self.command
        if isinstance(cmd, str):
            return cmd
        args = cmd[cmd.index("torch.distributed.run") + 1:] if "torch.distributed.run" in cmd else cmd
        return shlex.join(["torchrun", *args])

    def _no_results(self) -> str:
        why = str(self.error).splitlines()[0] if self.error else tr("chưa có kết quả", "no results yet")
        return tr(f"(Lượt chạy DDP không thành công nên không có kết quả để xem: {why})",
                  f"(The DDP run failed, so there are no results to show: {why})")

    def compare_with_single_process(self, data, model, lr: float) -> DDPComparison | None:
        """Compute the single-process full-batch reference (``single_process_steps``) and compare the ranks with it.

        Args:
            data: The ranks' data set (a ``TensorDataset``).
            model: A fresh instance of the ranks' model.
            lr: The ranks' SGD learning rate.

        Returns:
            The ``DDPComparison`` (also kept in ``self.comparison``), or None when the run has no results.
        """
        if not self.ranks:
            print(self._no_results())
            return None
        self.reference = single_process_steps(data, model, self.ranks, lr)
        self.comparison = compare_ranks(self.ranks, self.reference)
        return self.comparison

    def rank_table(self) -> str:
        """Return one line per rank: pid, device, shard size and the first samples of its shard."""
        if not self.ranks:
            return self._no_results()
        lines = []
        for r in self.ranks:
            head = ", ".join(str(i) for i in r["shard"][:8])
            lines.append(f"rank {r['rank']} (LOCAL_RANK {r['local_rank']}) · pid {r['pid']} · {r['device']} · "
                         + tr(f"{len(r['shard'])} mẫu: [{head}, …]", f"{len(r['shard'])} samples: [{head}, …]"))
        return "\n".join(lines)

    def summary(self) -> str:
        """Return a few sentences, built from the measured values, on what the run shows."""
        c = self.comparison
        if c is None:
            if not self.ranks:
                return self._no_results()
            return tr("(Chưa so với một tiến trình: gọi run.compare_with_single_process(data, model, lr) trước.)",
                      "(Not compared with one process yet: call run.compare_with_single_process(data, model, lr).)")
        ok = tr("✅ khớp", "✅ match") if c.grads_allclose else tr("❌ KHÔNG khớp", "❌ do NOT match")
        wok = tr("✅ khớp", "✅ match") if c.weights_allclose else tr("❌ KHÔNG khớp", "❌ do NOT match")
        shard_ok = tr("không trùng nhau" if c.shards_disjoint else "CÓ TRÙNG NHAU",
                      "disjoint" if c.shards_disjoint else "OVERLAPPING")
        return "\n".join([
            tr(f"{c.world_size} tiến trình, backend {self.backend}, {c.steps} bước, chạy hết {self.wall_s:.1f} s.",
               f"{c.world_size} processes, backend {self.backend}, {c.steps} steps, {self.wall_s:.1f} s in all."),
            tr(f"Phần dữ liệu của các rank: {list(c.shard_sizes)} mẫu, {shard_ok}.",
               f"Shards of the ranks: {list(c.shard_sizes)} samples, {shard_ok}."),
            tr(f"Trọng số đầu lệch {_fmt(c.init_diff_before_ddp)} trước DDP, {_fmt(c.init_diff_after_ddp)} sau DDP.",
               f"Initial weights differ by {_fmt(c.init_diff_before_ddp)} before DDP, {_fmt(c.init_diff_after_ddp)} after."),
            tr(f"Gradient cục bộ lệch nhau {_fmt(c.local_grad_diff_between_ranks)}; sau all-reduce lệch "
               f"{_fmt(c.grad_diff_between_ranks)} giữa các rank và {_fmt(c.grad_diff_vs_single)} so với 1 tiến trình "
               f"full-batch → {ok} (atol={c.atol:g}, rtol={c.rtol:g}).",
               f"Local gradients differ by {_fmt(c.local_grad_diff_between_ranks)}; after the all-reduce they differ by "
               f"{_fmt(c.grad_diff_between_ranks)} across ranks and {_fmt(c.grad_diff_vs_single)} from one full-batch "
               f"process → {ok} (atol={c.atol:g}, rtol={c.rtol:g})."),
            tr(f"Trọng số sau {c.steps} bước lệch {_fmt(c.weight_diff_between_ranks)} giữa các rank và "
               f"{_fmt(c.weight_diff_vs_single)} so với 1 tiến trình → {wok}.",
               f"Weights after {c.steps} steps differ by {_fmt(c.weight_diff_between_ranks)} across ranks and "
               f"{_fmt(c.weight_diff_vs_single)} from one process → {wok}."),
        ])

    def __str__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(self.summary())
