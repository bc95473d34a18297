"""Tests of lessons_lib.memory: sizes against hand-computed bytes, the saved-tensor meter, OOM helpers."""

from __future__ import annotations

import math
import weakref

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from lessons_lib.memory import (
    MemoryBudgetExceeded,
    SavedTensorMeter,
    compare_gradients,
    cuda_memory_cap,
    find_max_batch_size,
    format_bytes,
    gpu_memory_stats,
    gradient_snapshot,
    is_oom_error,
    oom_demo,
    oom_safe_train_step,
    parse_oom_message,
    saved_activation_bytes,
    sharded_training_memory,
    train_with_oom_retry,
    training_state_sizes,
)
from lessons_lib.memory import cuda as memory_cuda
from lessons_lib.memory.sizes import trainable_bytes

F32 = 4  # bytes per float32


def _mlp(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _data(n: int = 32, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g), torch.randint(0, 4, (n,), generator=g)


# --------------------------------------------------------------------------- bytes


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (1536, "1.50 KiB"),
     (3 * 2**20, "3.00 MiB"), (2**30 + 2**29, "1.50 GiB"), (-(2**20), "-1.00 MiB"), (2.5 * 2**40, "2.50 TiB")],
)
def test_format_bytes(value, text):
    assert format_bytes(value) == text


# --------------------------------------------------------------------------- state sizes


def _one_step(model, optimizer):
    x, y = _data(4)
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


PARAMS_BYTES = (8 * 16 + 16 + 16 * 4 + 4) * F32  # _mlp(): 212 float32


@pytest.mark.parametrize(("make", "by_key"), [
    (lambda ps: torch.optim.SGD(ps, lr=0.1), {}),
    (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), {"momentum_buffer": PARAMS_BYTES}),
    # Adam: two moments, and one float32 step counter per parameter tensor (4 tensors)
    (lambda ps: torch.optim.Adam(ps), {"exp_avg": PARAMS_BYTES, "exp_avg_sq": PARAMS_BYTES, "step": 4 * F32}),
], ids=["sgd", "momentum", "adam"])
def test_state_sizes_hand_computed(make, by_key):
    model = _mlp()
    sizes = training_state_sizes(model)
    assert (sizes.params, sizes.grads, sizes.optimizer) == (PARAMS_BYTES, 0, 0)
    optimizer = make(model.parameters())
    _one_step(model, optimizer)
    sizes = training_state_sizes(model, optimizer)
    assert (sizes.params, sizes.grads, sizes.optimizer_by_key) == (PARAMS_BYTES, PARAMS_BYTES, by_key)
    assert sizes.optimizer == sum(by_key.values()) and sizes.total == 2 * PARAMS_BYTES + sizes.optimizer
    assert all(key in str(sizes) for key in by_key)


def test_state_sizes_count_buffers_tied_weights_and_set_to_none():
    bn = nn.BatchNorm1d(3)  # running_mean, running_var (3 float32 each) + num_batches_tracked (int64)
    assert training_state_sizes(bn).buffers == 3 * F32 * 2 + 8
    assert training_state_sizes(bn).breakdown(activations=100) == {"params": 6 * F32 + 3 * F32 * 2 + 8, "grads": 0,
                                                                   "optimizer": 0, "activations": 100}

    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied: one tensor
    tied = nn.ModuleList([emb, head])
    assert training_state_sizes(tied).params == 40 * F32

    model = _mlp()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    _one_step(model, sgd)
    sgd.zero_grad(set_to_none=True)
    assert training_state_sizes(model, sgd).grads == 0


def test_state_sizes_on_meta_device_need_no_memory():
    big = nn.Linear(50_000, 50_000, device="meta")  # 10 GB of float32 if it were real
    assert training_state_sizes(big).params == (50_000 * 50_000 + 50_000) * F32


def test_trainable_bytes_skips_frozen():
    model = _mlp()
    model[0].requires_grad_(False)
    assert trainable_bytes(model) == (16 * 4 + 4) * F32


# --------------------------------------------------------------------------- saved-tensor meter


def test_meter_counts_prints_and_records_saved_tensors_hand_computed():
    lin = nn.Linear(4, 3)
    x = torch.randn(5, 4)
    with SavedTensorMeter(exclude=lin) as meter:
        out = torch.relu(lin(x)).sum()
        forward_end = len(meter.timeline)
    # addmm saves x (x needs no grad, so the weight is not saved); relu saves its output: 80 + 60 bytes
    assert meter.live_bytes == meter.peak_bytes == 5 * 4 * F32 + 5 * 3 * F32
    assert repr(meter) == str(meter) == "SavedTensorMeter(live=140 B, peak=140 B)"
    out.backward()
    assert str(meter) == "SavedTensorMeter(live=0 B, peak=140 B)"  # backward freed the graph
    assert lin.weight.grad is not None
    # the timeline starts at 0; + x (addmm), + relu's output; backward lets both go
    assert meter.timeline[:forward_end] == [0, 5 * 4 * F32, 5 * 4 * F32 + 5 * 3 * F32]
    assert meter.timeline[-1] == 0 and len(meter.timeline) == forward_end + 2


def test_meter_counts_shared_storage_once():
    w = torch.randn(100, requires_grad=True)
    with SavedTensorMeter() as meter:
        u = w * 2  # saves nothing (scalar multiply)
        y = u.sin() + u.cos() + u.view(4, 25).exp().view(100)  # u saved twice + a view, exp's output
    assert meter.live_bytes == 100 * F32 + 100 * F32  # u once, exp's result once
    y.sum().backward()
    assert meter.live_bytes == 0


def test_meter_excludes_weights_when_given_the_model():
    model = _mlp()
    x, _ = _data(6)
    with SavedTensorMeter() as everything:
        out1 = model(x)
    with SavedTensorMeter(exclude=model) as activations:
        out2 = model(x)
    # the second Linear saves its weight to get the input's gradient
    assert everything.live_bytes - activations.live_bytes == 16 * 4 * F32  # that weight
    del out1, out2


def test_meter_grows_with_batch_size_linearly():
    model = _mlp()

    def step(n):
        return saved_activation_bytes(lambda: nn.functional.cross_entropy(model(torch.randn(n, 8)), torch.zeros(n, dtype=torch.long)), exclude=model)

    b8, b16, b32 = step(8), step(16), step(32)
    assert b8 < b16 < b32
    assert b32 - b16 == 2 * (b16 - b8)


def test_meter_total_loss_keeps_graphs_alive_item_does_not():
    model = _mlp()
    x, y = _data(16)
    with SavedTensorMeter(exclude=model) as kept:
        total = 0
        sizes = []
        for _ in range(3):
            total = total + nn.functional.cross_entropy(model(x.clone()), y)
            sizes.append(kept.live_bytes)
    assert sizes[0] < sizes[1] < sizes[2] and sizes[2] - sizes[1] == sizes[1] - sizes[0]
    with SavedTensorMeter(exclude=model) as freed:
        total = 0.0
        for _ in range(3):
            total += nn.functional.cross_entropy(model(x.clone()), y).item()
    assert freed.live_bytes == 0 and freed.peak_bytes == sizes[0]


def test_meter_timeline_is_bounded(monkeypatch):
    monkeypatch.setattr(SavedTensorMeter, "TIMELINE_LIMIT", 3)
    w = torch.randn(10, requires_grad=True)
    with SavedTensorMeter() as meter:
        kept = [(w * i).exp() for i in range(5)]
    assert len(meter.timeline) == 3 and meter.live_bytes == 5 * 10 * F32  # the counters keep going
    del kept


def test_meter_works_on_meta_device():
    lin = nn.Linear(1024, 4096, device="meta")
    x = torch.randn(8, 1024, device="meta")
    with SavedTensorMeter(exclude=lin) as meter:
        y = torch.relu(lin(x))
    assert meter.live_bytes == 8 * 1024 * F32 + 8 * 4096 * F32
    del y


def test_meter_keeps_autograds_inplace_check():
    a = torch.randn(3, requires_grad=True)
    with SavedTensorMeter():
        b = a.sigmoid()
    b.mul_(2)
    with pytest.raises(RuntimeError, match="inplace"):
        b.sum().backward()


def test_meter_gives_same_gradients_as_without_it():
    model, (x, y) = _mlp(), _data()
    nn.functional.cross_entropy(model(x), y).backward()
    plain = gradient_snapshot(model)
    model.zero_grad()
    with SavedTensorMeter(exclude=model):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    after = gradient_snapshot(model)
    assert all(torch.equal(plain[name], after[name]) for name in plain)


def test_checkpointing_same_gradients_fewer_saved_bytes():
    torch.manual_seed(0)
    blocks = nn.Sequential(*[nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)) for _ in range(3)])
    x = torch.randn(32, 16)
    with SavedTensorMeter(exclude=blocks) as plain:
        loss = blocks(x).square().mean()
    loss.backward()
    expected = gradient_snapshot(blocks)
    blocks.zero_grad()
    with SavedTensorMeter(exclude=blocks) as ckpt:
        h = x
        for block in blocks:
            h = checkpoint(block, h, use_reentrant=False)
        loss = h.square().mean()
    loss.backward()
    assert "KHÔNG" not in compare_gradients(expected, gradient_snapshot(blocks))
    assert ckpt.peak_bytes < plain.peak_bytes / 3


# --------------------------------------------------------------------------- gradients


def test_compare_gradients_reports_the_difference():
    a = {"w": torch.zeros(3)}
    result = compare_gradients(a, {"w": torch.tensor([0.0, 0.5, 0.0])})
    assert result == "1 gradient KHÔNG khớp (sai khác tuyệt đối lớn nhất 5.00e-01)"


# --------------------------------------------------------------------------- OOM errors


def test_is_oom_error():
    assert is_oom_error(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom_error(RuntimeError("CUDA error: out of memory"))
    assert is_oom_error(MemoryBudgetExceeded("x"))
    assert not is_oom_error(ValueError("out of memory"))
    assert not is_oom_error(RuntimeError("Expected all tensors to be on the same device"))
    with pytest.raises(RuntimeError) as info:
        torch.empty(2**58, dtype=torch.float32)  # 1 EiB: more than any address space, fails at once
    assert is_oom_error(info.value)
    with pytest.raises(TypeError, match="exception"):
        is_oom_error("out of memory")


# --------------------------------------------------------------------------- reading OOM messages

NEW_FORMAT = (
    "CUDA out of memory. Tried to allocate 1.22 GiB. GPU 0 has a total capacity of 15.77 GiB of which "
    "959.44 MiB is free. Process 12447 has 14.83 GiB memory in use. Of the allocated memory 14.01 GiB is "
    "allocated by PyTorch, and 472.05 MiB is reserved by PyTorch but unallocated. If reserved but unallocated "
    "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
    "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def test_parse_new_format():
    msg = parse_oom_message(NEW_FORMAT)
    assert msg.tried_to_allocate == round(1.22 * 2**30)
    assert msg.gpu == 0
    assert msg.total_capacity == round(15.77 * 2**30)
    assert msg.free == round(959.44 * 2**20)
    assert msg.other_processes == ((12447, round(14.83 * 2**30)),)
    assert msg.allocated_by_pytorch == round(14.01 * 2**30)
    assert msg.reserved_unallocated == round(472.05 * 2**20)
    assert msg.allowed is None
    text = msg.explain()
    assert "Tried to allocate 1.22 GiB" in text and "Process" not in text.splitlines()[0]
    assert "Tiến trình 12447" in text


def test_parse_this_process_allowed_and_fragmentation_verdict():
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "8.00 GiB of which 0 bytes is free. Including non-PyTorch memory, this process has 2.10 GiB memory in "
            "use. 2.00 GiB allowed; Of the allocated memory 1.50 GiB is allocated by PyTorch, and 300.00 MiB is "
            "reserved by PyTorch but unallocated. If reserved but unallocated memory is large ...")
    msg = parse_oom_message(text)
    assert msg.free == 0 and msg.this_process == round(2.10 * 2**30) and msg.allowed == 2 * 2**30
    assert "expandable_segments" in msg.explain()  # 300 MiB of cache >= the 20 MiB asked: fragmentation
    assert "set_per_process_memory_fraction" in msg.explain()


def test_parse_reads_the_private_pools_clause():
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 768.00 MiB. GPU 0 has a total capacity of "
            "83.05 GiB of which 140.38 MiB is free. Including non-PyTorch memory, this process has 23.33 GiB memory in "
            "use. Of the allocated memory 21.92 GiB is allocated by PyTorch, with 104.00 MiB allocated in private pools "
            "(e.g., CUDA Graphs), and 797.79 MiB is reserved by PyTorch but unallocated.")
    msg = parse_oom_message(text)
    assert msg.private_pools == 104 * 2**20 and msg.reserved_unallocated == round(797.79 * 2**20)
    assert "private pools" in msg.explain() and "CUDA Graphs" in msg.explain()
    assert parse_oom_message(text.replace(", with 104.00 MiB allocated in private pools (e.g., CUDA Graphs)", "")
                             ).private_pools is None


def test_parse_old_format_from_the_seed():
    msg = parse_oom_message("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n(GPU 0; 24.00 GiB total "
                            "capacity; 22.10 GiB already allocated;\n 1.50 GiB free; 22.50 GiB reserved in total by PyTorch)")
    assert (msg.tried_to_allocate, msg.total_capacity, msg.free) == (2 * 2**30, 24 * 2**30, round(1.5 * 2**30))
    assert msg.reserved_unallocated == round(22.5 * 2**30) - round(22.1 * 2**30)


def test_explain_says_when_one_tensor_is_larger_than_the_gpu():
    msg = parse_oom_message("CUDA out of memory. Tried to allocate 40.00 GiB. GPU 0 has a total capacity of "
                            "14.56 GiB of which 14.00 GiB is free. Of the allocated memory 0 bytes is allocated by "
                            "PyTorch, and 0 bytes is reserved by PyTorch but unallocated.")
    assert "lớn hơn cả" in msg.explain()


# --------------------------------------------------------------------------- GPU allocator stats and the OOM demo


def test_without_cuda_stats_say_not_available_and_the_demo_and_cap_ask_for_a_gpu(monkeypatch):
    monkeypatch.setattr(memory_cuda._cuda, "is_available", lambda: False)
    assert "không khả dụng" in gpu_memory_stats() and "không có GPU CUDA" in gpu_memory_stats()
    assert "'cpu' không phải CUDA" in gpu_memory_stats("cpu")  # names the device given
    with pytest.raises(ValueError, match="%%gpu"):
        oom_demo()
    with pytest.raises(ValueError, match="không có GPU CUDA"), cuda_memory_cap(2**30):
        pass


class FakeCuda:
    """A stand-in for torch.cuda: allocations are small CPU tensors, counted at their nominal size while alive."""

    def __init__(self, total=16 * 2**30, fraction_api=True, fail_with=None):
        self.total = total
        self.fraction = 1.0
        if fraction_api:  # older PyTorch has no getter
            self.get_per_process_memory_fraction = lambda index: self.fraction
        self.fail_with = fail_with
        self.live = []  # (weakref, nominal bytes)
        self.cached = 0
        self.set_calls = []
        self.allocation_calls = 0

    def install(self, monkeypatch):
        monkeypatch.setattr(memory_cuda, "_cuda", self)
        monkeypatch.setattr(memory_cuda, "_allocate", self.allocate)
        return self

    def is_available(self):
        return True

    def current_device(self):
        return 0

    def device_count(self):
        return 1

    def get_device_name(self, index):
        return "FakeGPU"

    def memory_allocated(self, index):
        return sum(nbytes for ref, nbytes in self.live if ref() is not None)

    def memory_reserved(self, index):
        return self.memory_allocated(index) + self.cached

    def max_memory_allocated(self, index):
        return self.memory_allocated(index)

    def mem_get_info(self, index):
        return self.total - self.memory_reserved(index), self.total

    def empty_cache(self):
        self.cached = 0

    def set_per_process_memory_fraction(self, fraction, index):
        assert isinstance(fraction, float) and 0 <= fraction <= 1
        self.fraction = fraction
        self.set_calls.append(fraction)

    def allocate(self, shape, index):
        self.allocation_calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        nbytes = math.prod(shape) * F32
        if self.memory_reserved(index) + nbytes > self.fraction * self.total:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {format_bytes(nbytes)}. GPU 0")
        tensor = torch.empty(1)
        self.live.append((weakref.ref(tensor), nbytes))
        return tensor


def test_stats_reads_the_allocator(monkeypatch):
    fake = FakeCuda()
    fake.install(monkeypatch)
    keep = fake.allocate((256, 1024), 0)  # 1 MiB
    fake.cached = 2**20
    text = gpu_memory_stats("cuda:0")
    assert text.splitlines()[0] == "cuda:0 (FakeGPU)"
    rows = dict(line.strip().rsplit("  ", 1) for line in text.splitlines()[1:])
    rows = {label.strip(): value.strip() for label, value in rows.items()}
    assert rows["allocated (tensor đang sống)"] == "1.00 MiB"
    assert rows["reserved (PyTorch giữ, gồm cache)"] == "2.00 MiB"
    assert rows["trong đó cache trống"] == "1.00 MiB" and rows["driver: đã dùng trên cả GPU"] == "2.00 MiB"
    assert rows["ngoài PyTorch (context, tiến trình khác)"] == "0 B"
    with pytest.raises(ValueError, match="cuda:3"):
        gpu_memory_stats("cuda:3")
    del keep


def test_oom_demo_hits_the_cap_cleans_up_and_restores(monkeypatch):
    fake = FakeCuda()
    fake.fraction = 0.9  # a cap the user had before
    fake.install(monkeypatch)
    tensor = 10_000 * 10_000 * F32
    result = oom_demo(room_bytes=2 * 2**30)
    assert result.oom and result.allocations == (2 * 2**30) // tensor  # 5 tensors of 381 MiB fit in 2 GiB
    assert result.allocated_before_error == result.allocations * tensor
    assert result.allocated_after_cleanup == result.reserved_after_cleanup == 0  # tensors dropped, cache given back
    assert fake.fraction == 0.9 and result.fraction_restored == 0.9
    assert fake.allocation_calls == result.allocations + 1
    assert "out of memory" in result.error_message
    assert "OutOfMemoryError" in str(result)


def test_oom_demo_is_bounded_and_restores_default_without_getter(monkeypatch):
    fake = FakeCuda(fraction_api=False)
    fake.install(monkeypatch)
    fake.set_per_process_memory_fraction = lambda fraction, index: fake.set_calls.append(fraction)  # never bites
    result = oom_demo(room_bytes=2**30)
    assert not result.oom and result.allocations == 4 and fake.allocation_calls == 4
    assert fake.set_calls[-1] == 1.0  # no getter in this PyTorch: back to the default
    assert "KHÔNG" in str(result)


def test_oom_demo_restores_cap_when_something_else_fails(monkeypatch):
    fake = FakeCuda(fail_with=RuntimeError("CUDA error: an illegal memory access"))
    fake.fraction = 0.5
    fake.install(monkeypatch)
    with pytest.raises(RuntimeError, match="illegal"):
        oom_demo()
    assert fake.fraction == 0.5


def test_cuda_memory_cap(monkeypatch):
    fake = FakeCuda(total=10 * 2**30)
    fake.cached = 2**30
    fake.install(monkeypatch)
    with cuda_memory_cap(2**30) as fraction:
        assert fraction == pytest.approx(0.1)  # cache emptied first, then 0 held + 1 GiB room
        assert fake.fraction == fraction
    assert fake.fraction == 1.0
    with pytest.raises(KeyError), cuda_memory_cap(2**30):
        raise KeyError("boom")
    assert fake.fraction == 1.0


# --------------------------------------------------------------------------- batch-size search


def _fits_up_to(limit):
    calls = []

    def try_batch(size):
        calls.append(size)
        if size > limit:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {size} MiB")
        return size

    return try_batch, calls


def test_finder_halves_on_oom():
    try_batch, calls = _fits_up_to(300)
    result = find_max_batch_size(try_batch, start=1024)
    assert result.batch_size == 256 and calls == [1024, 512, 256]
    assert [ok for _, ok in result.attempts] == [False, False, True]
    assert "256" in str(result)


def test_finder_refine_finds_the_exact_largest():
    try_batch, calls = _fits_up_to(300)
    result = find_max_batch_size(try_batch, start=1024, refine=True)
    assert result.batch_size == 300
    assert len(calls) <= 3 + 8  # halving, then bisection between 256 and 512


def test_finder_gives_up_and_propagates_other_errors():
    try_batch, _ = _fits_up_to(0)
    assert find_max_batch_size(try_batch, start=64).batch_size is None

    def broken(size):
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError, match="shape mismatch"):
        find_max_batch_size(broken, start=8)


# --------------------------------------------------------------------------- OOM-safe training


def test_train_step_takes_a_real_step():
    model, (x, y) = _mlp(), _data()
    before = [p.detach().clone() for p in model.parameters()]
    sgd = torch.optim.SGD(model.parameters(), lr=0.5)
    loss = oom_safe_train_step(model, nn.CrossEntropyLoss(), x, y, sgd)
    assert isinstance(loss, float)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters())  # zero_grad(set_to_none=True) after the step


def test_train_step_over_budget_raises_and_frees_gradients():
    model, (x, y) = _mlp(), _data()
    model[0].weight.grad = torch.ones_like(model[0].weight)
    with pytest.raises(MemoryBudgetExceeded, match="ngân sách") as info:
        oom_safe_train_step(model, nn.CrossEntropyLoss(), x, y, budget_bytes=1000)
    assert "> ngân sách 1000 B." in str(info.value)
    assert all(p.grad is None for p in model.parameters())


def test_retry_loop_lowers_micro_batch_and_matches_training_at_that_size():
    x, y = _data(128)
    loss_fn = nn.CrossEntropyLoss()
    probe = _mlp()
    per_sample = saved_activation_bytes(lambda: loss_fn(probe(x[:64].clone()), y[:64]), exclude=probe) / 64
    state = training_state_sizes(probe)
    budget = int(state.params + trainable_bytes(probe) + 40 * per_sample)  # 32 samples fit, 64 do not

    model = _mlp()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    log = train_with_oom_retry(model, loss_fn, x, y, sgd, batch_size=64, budget_bytes=budget)
    assert [micro for _, micro, _ in log.oom_events] == [64]
    assert log.micro_batch_sizes == [32, 32] and len(log.losses) == 2
    assert "OOM" in str(log) and "bước 1: OOM với micro-batch 64" in str(log)  # printed steps count from 1

    reference = _mlp()  # whole batches of 64 without a budget: micro-batches of 32 accumulate the same gradients
    sgd_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    losses = [oom_safe_train_step(reference, loss_fn, x[start:start + 64], y[start:start + 64], sgd_ref)
              for start in (0, 64)]
    assert log.losses == pytest.approx(losses, rel=1e-5)
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_retry_loop_gives_up_at_the_minimum():
    x, y = _data(16)
    model = _mlp()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(MemoryBudgetExceeded):
        train_with_oom_retry(model, nn.CrossEntropyLoss(), x, y, sgd, batch_size=16, budget_bytes=100)


# --------------------------------------------------------------------------- sharding arithmetic


def test_sharding_matches_the_zero_paper():
    # ZeRO paper, Figure 1: 7.5B parameters, 64 GPUs, mixed-precision Adam (K = 12)
    gb = [sharded_training_memory(7_500_000_000, 64, stage).total / 1e9 for stage in range(4)]
    assert gb[0] == pytest.approx(120.0)
    assert gb[1] == pytest.approx(31.4, abs=0.05)
    assert gb[2] == pytest.approx(16.6, abs=0.05)
    assert gb[3] == pytest.approx(1.9, abs=0.05)


def test_sharding_parts_and_rounding():
    ddp = sharded_training_memory(10, 3, 0)
    assert (ddp.params, ddp.grads, ddp.optimizer) == (20, 20, 120)
    full = sharded_training_memory(10, 3, 3)  # a shard is ceil(10 / 3) = 4 parameters
    assert (full.params, full.grads, full.optimizer) == (8, 8, 48)
    assert "DDP" in ddp.name and "GB" in str(ddp) and ddp.total == 160


def test_train_step_and_retry_let_other_errors_through():
    model, (x, y) = _mlp(), _data()
    model[0].weight.grad = torch.ones_like(model[0].weight)
    with pytest.raises(RuntimeError, match="shape|size|mat"):
        oom_safe_train_step(model, nn.CrossEntropyLoss(), x[:, :5], y)  # wrong input width: not an OOM
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="shape|size|mat"):
        train_with_oom_retry(model, nn.CrossEntropyLoss(), x[:, :5], y, sgd, batch_size=8)


def _reenter_meter():
    with SavedTensorMeter() as meter:
        meter.__enter__()


def _enter(context):
    with context:
        pass


X, Y = _data()
_MODEL = _mlp()
_SGD = torch.optim.SGD(_MODEL.parameters(), lr=0.1)
_W = {"w": torch.zeros(3)}
# (call, error, what the message must name): one row per argument check a lesson can reach
BAD_ARGUMENTS = {
    "format_bytes text": (lambda: format_bytes("1024"), TypeError, "num_bytes"),
    "format_bytes nan": (lambda: format_bytes(float("nan")), ValueError, "num_bytes"),
    "breakdown activations": (lambda: training_state_sizes(_mlp()).breakdown(activations=-1), ValueError, "activations"),
    "state sizes model": (lambda: training_state_sizes("model"), TypeError, "nn.Module"),
    "state sizes optimizer": (lambda: training_state_sizes(_mlp(), optimizer="adam"), TypeError, "Optimizer"),
    "meter exclude": (lambda: SavedTensorMeter(exclude=5), TypeError, "exclude"),
    "meter exclude items": (lambda: SavedTensorMeter(exclude=[torch.ones(1), "x"]), TypeError, "exclude"),
    "meter reused": (_reenter_meter, RuntimeError, "SavedTensorMeter"),
    "saved bytes fn": (lambda: saved_activation_bytes(42), TypeError, "fn"),
    "compare names": (lambda: compare_gradients(_W, {"v": torch.zeros(3)}), ValueError, "khác nhau"),
    "compare shapes": (lambda: compare_gradients(_W, {"w": torch.zeros(4)}), ValueError, "shape"),
    "compare type": (lambda: compare_gradients([torch.zeros(1)], _W), TypeError, "gradient_snapshot"),
    "snapshot model": (lambda: gradient_snapshot(None), TypeError, "nn.Module"),
    "parse not oom": (lambda: parse_oom_message("RuntimeError: Expected all tensors to be on the same device"),
                      ValueError, "out of memory"),
    "parse type": (lambda: parse_oom_message(RuntimeError("CUDA out of memory")), TypeError, "str"),
    "stats name": (lambda: gpu_memory_stats("gpu-ish"), ValueError, "cuda"),
    "stats int": (lambda: gpu_memory_stats(0), TypeError, "torch.device"),
    "oom_demo room": (lambda: oom_demo(room_bytes=0), ValueError, "room_bytes"),
    "cap room": (lambda: _enter(cuda_memory_cap(1.5)), TypeError, "room_bytes"),
    "finder try_batch": (lambda: find_max_batch_size(None, start=8), TypeError, "try_batch"),
    "finder start type": (lambda: find_max_batch_size(print, start="8"), TypeError, "start"),
    "finder start": (lambda: find_max_batch_size(print, start=0), ValueError, "start"),
    "finder refine": (lambda: find_max_batch_size(print, start=4, refine="yes"), TypeError, "refine"),
    "step loss_fn": (lambda: oom_safe_train_step(_mlp(), "ce", X, Y), TypeError, "loss_fn"),
    "step inputs": (lambda: oom_safe_train_step(_mlp(), nn.CrossEntropyLoss(), X.tolist(), Y), TypeError, "tensor"),
    "step rows": (lambda: oom_safe_train_step(_mlp(), nn.CrossEntropyLoss(), X, Y[:3]), ValueError, "số mẫu"),
    "step budget": (lambda: oom_safe_train_step(_mlp(), nn.CrossEntropyLoss(), X, Y, budget_bytes=1e6), TypeError,
                    "budget_bytes"),
    "retry optimizer": (lambda: train_with_oom_retry(_mlp(), nn.CrossEntropyLoss(), X, Y, None, batch_size=4),
                        TypeError, "Optimizer"),
    "retry batch_size": (lambda: train_with_oom_retry(_MODEL, nn.CrossEntropyLoss(), X, Y, _SGD, batch_size=0),
                         ValueError, "batch_size"),
    "shard num_params": (lambda: sharded_training_memory(num_params=-1), ValueError, "num_params"),
    "shard num_params type": (lambda: sharded_training_memory(num_params=1.5e9), TypeError, "num_params"),
    "shard num_gpus": (lambda: sharded_training_memory(1000, num_gpus=0), ValueError, "num_gpus"),
    "shard stage": (lambda: sharded_training_memory(1000, stage=4), ValueError, "stage"),
    "shard stage type": (lambda: sharded_training_memory(1000, stage="zero3"), TypeError, "stage"),
}


@pytest.mark.parametrize(("call", "error", "names"), BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS)
def test_bad_arguments_raise_and_say_what_to_pass(call, error, names, monkeypatch):
    FakeCuda().install(monkeypatch)  # the CUDA helpers check their arguments on a (fake) GPU
    with pytest.raises(error, match=names):
        call()
