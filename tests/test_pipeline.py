"""lessons_lib.pipeline.SyntheticImages: seeded items, real CPU work, and DataLoader workers that start and end cleanly.

The worker tests are the ones notebook 09 relies on: the dataset works with the default start method
(fork on Linux), with "spawn" (macOS, Windows, and what a notebook-defined class cannot survive), and every
worker process is gone once the loop, or the persistent DataLoader, is gone.
"""

from __future__ import annotations

import gc
import multiprocessing
import sys
import time

import pytest
import torch
from torch.utils.data import DataLoader

from lessons_lib.pipeline import _MEAN, _STD, SyntheticImages


def no_workers_left(timeout_s: float = 10.0) -> bool:
    """Return True once no child process of this test process is alive (workers may take a moment to exit)."""
    deadline = time.monotonic() + timeout_s
    while multiprocessing.active_children():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_items_are_seeded_images_with_labels():
    ds = SyntheticImages(n=10, size=32, work=1)
    assert len(ds) == 10
    image, label = ds[2]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32 and image.is_contiguous()
    assert isinstance(label, int) and 0 <= label < 10
    assert len({ds[i][1] for i in range(10)}) > 1
    again, label_again = SyntheticImages(n=10, size=32, work=1)[2]
    assert torch.equal(image, again) and label == label_again
    assert not torch.equal(image, ds[3][0])
    assert torch.equal(ds[-1][0], ds[9][0])
    assert repr(ds) == "SyntheticImages(n=10, size=32, classes=10, work=1, seed=0)"


def test_images_are_normalised_and_smoothed():
    low, high = torch.from_numpy((0 - _MEAN) / _STD), torch.from_numpy((1 - _MEAN) / _STD)
    rough = SyntheticImages(n=4, work=0)[0][0]
    smooth = SyntheticImages(n=4, work=3)[0][0]
    for image in (rough, smooth):
        assert bool(((image >= low - 1e-5) & (image <= high + 1e-5)).all())
    # smoothing ("decoding") passes make neighbouring pixels alike
    def roughness(img):
        return float((img[:, :, 1:] - img[:, :, :-1]).abs().mean())
    assert roughness(smooth) < 0.5 * roughness(rough)


def test_work_costs_cpu_time():
    def cost(work):
        ds = SyntheticImages(n=8, size=64, work=work)
        ds[0]
        start = time.process_time()
        for _ in range(3):
            for i in range(8):
                ds[i]
        return time.process_time() - start
    assert cost(8) > cost(0)


# --------------------------------------------------------------------------- DataLoader workers


def batches(loader):
    return [(images.clone(), labels.clone()) for images, labels in loader]


def test_workers_give_the_same_batches_and_exit():
    ds = SyntheticImages(n=24, size=16, work=1)
    plain = batches(DataLoader(ds, batch_size=8))
    with_workers = batches(DataLoader(ds, batch_size=8, num_workers=2))
    assert len(plain) == len(with_workers) == 3
    for (a, la), (b, lb) in zip(plain, with_workers, strict=True):
        assert torch.equal(a, b) and torch.equal(la, lb)
    assert no_workers_left()


def test_stopping_a_loop_early_ends_its_workers():
    ds = SyntheticImages(n=64, size=16, work=1)
    for i, _ in enumerate(DataLoader(ds, batch_size=4, num_workers=2)):
        if i == 1:
            break
    gc.collect()
    assert no_workers_left()


def test_persistent_workers_live_across_epochs_and_end_with_the_loader():
    ds = SyntheticImages(n=16, size=16, work=1)
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    first = batches(loader)
    alive = {p.pid for p in multiprocessing.active_children()}
    assert len(alive) == 2
    second = batches(loader)
    assert {p.pid for p in multiprocessing.active_children()} == alive  # the same two processes
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(first, second, strict=True))
    del loader
    gc.collect()
    assert no_workers_left()


@pytest.mark.slow
def test_spawned_workers_can_rebuild_the_dataset():
    """Spawn (macOS, Windows, Python 3.14's forkserver alike) re-imports the class by module path: it must work."""
    ds = SyntheticImages(n=8, size=16, work=1)
    loader = DataLoader(ds, batch_size=4, num_workers=1, multiprocessing_context="spawn")
    spawned = batches(loader)
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(batches(DataLoader(ds, batch_size=4)), spawned,
                                                             strict=True))
    del loader
    assert no_workers_left()


def test_worker_context_is_forkserver_on_linux_and_the_default_elsewhere(monkeypatch):
    from lessons_lib import pipeline

    if sys.platform.startswith("linux"):
        assert pipeline.worker_context().get_start_method() == "forkserver"
    monkeypatch.setattr(pipeline.sys, "platform", "darwin")
    assert pipeline.worker_context().get_start_method() == multiprocessing.get_start_method()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forkserver is what worker_context picks on Linux")
@pytest.mark.slow
def test_workers_from_the_worker_context_give_the_same_batches_and_exit_twice():
    """Twice, as when a notebook is run again in one kernel: the second loader reuses the running server."""
    from lessons_lib.pipeline import worker_context

    ds = SyntheticImages(n=16, size=16, work=1)
    plain = batches(DataLoader(ds, batch_size=8))
    for _ in range(2):
        loader = DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context=worker_context(), timeout=60)
        served = batches(loader)
        assert all(torch.equal(a, b) and torch.equal(la, lb)
                   for (a, la), (b, lb) in zip(plain, served, strict=True))
        del loader
        assert no_workers_left()


def _item(index):
    return SyntheticImages(n=3)[index]


# (callable, arguments, error, what the message must name): one row per argument check a lesson can reach
BAD_ARGUMENTS = {
    "n": (SyntheticImages, {"n": 0}, ValueError, "n"),
    "n type": (SyntheticImages, {"n": 2.5}, TypeError, "n"),
    "size": (SyntheticImages, {"size": 4}, ValueError, "size"),
    "work": (SyntheticImages, {"work": -1}, ValueError, "work"),
    "work type": (SyntheticImages, {"work": "2"}, TypeError, "work"),
    "index outside": (_item, {"index": 3}, IndexError, "nằm ngoài"),
    "index text": (_item, {"index": "0"}, TypeError, "str"),
    "index bool": (_item, {"index": True}, TypeError, "bool"),
}


@pytest.mark.parametrize(("call", "kwargs", "error", "names"), BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS)
def test_bad_arguments_raise_and_say_what_to_pass(call, kwargs, error, names):
    with pytest.raises(error, match=names):
        call(**kwargs)
