"""A synthetic image dataset whose ``__getitem__`` does real CPU work, for timing DataLoader settings."""
# It lives in a module, not a notebook cell: "spawn"/"forkserver" workers re-import it by module path.

from __future__ import annotations

import multiprocessing
import operator
import sys

import numpy as np
import torch
from torch.utils.data import Dataset

from ._validate import check_int

# per-channel mean and std that normalise the images (the usual ImageNet values)
_MEAN = np.array((0.485, 0.456, 0.406), dtype=np.float32).reshape(3, 1, 1)
_STD = np.array((0.229, 0.224, 0.225), dtype=np.float32).reshape(3, 1, 1)
_MARGIN = 16  # the "decoded" image is this many pixels larger than the crop
_CLASSES, _SEED = 10, 0  # labels are 0 … 9; item i is drawn from seed _SEED * 1_000_003 + i


def _box_blur(img: np.ndarray) -> np.ndarray:
    """Return the 5×5 mean of every pixel of a (C, H, W) array (edges repeated): one "decode" pass."""
    padded = np.pad(img, ((0, 0), (2, 2), (2, 2)), mode="edge")
    h, w = img.shape[1:]
    rows = sum(padded[:, i:i + h, :] for i in range(5))
    return sum(rows[:, :, j:j + w] for j in range(5)) / 25


class SyntheticImages(Dataset):
    """Seeded synthetic 3×size×size images, made like a real pipeline: decode, crop, flip, jitter, normalise."""

    def __init__(self, n: int = 1024, size: int = 64, work: int = 2):
        self.n = check_int("n", n, minimum=1)
        self.size = check_int("size", size, minimum=8)
        self.work = check_int("work", work, minimum=0)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if isinstance(index, bool) or not hasattr(type(index), "__index__"):
            raise TypeError(f"chỉ số phải là số nguyên (int), không phải {type(index).__name__}")
        index = operator.index(index)
        if not -self.n <= index < self.n:
            raise IndexError(f"chỉ số {index} nằm ngoài bộ dữ liệu {self.n} phần tử")
        index %= self.n
        rng = np.random.default_rng(_SEED * 1_000_003 + index)
        side = self.size + _MARGIN
        raw = rng.integers(0, 256, size=(3, side, side), dtype=np.uint8)  # "the file's bytes"
        img = raw.astype(np.float32) / 255
        for _ in range(self.work):  # "decoding": smoothing passes, each a 5×5 mean around every pixel
            img = _box_blur(img)
        top, left = rng.integers(0, _MARGIN + 1, size=2)
        img = img[:, top:top + self.size, left:left + self.size]  # random crop
        if rng.random() < 0.5:
            img = img[:, :, ::-1]  # random horizontal flip
        brightness, contrast = 0.8 + 0.4 * rng.random(2)
        mean = img.mean()
        img = np.clip((img - mean) * contrast + mean * brightness, 0, 1)  # colour jitter
        img = (img - _MEAN) / _STD  # normalise
        label = int(rng.integers(0, _CLASSES))
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)), label

    def __repr__(self) -> str:
        return (f"SyntheticImages(n={self.n}, size={self.size}, classes={_CLASSES}, work={self.work}, "
                f"seed={_SEED})")


def worker_context() -> multiprocessing.context.BaseContext:
    """Return a safe way to start DataLoader workers from a notebook: pass it as ``multiprocessing_context``."""
    if sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch", __name__])  # takes effect when the server (re)starts
        return context
    return multiprocessing.get_context()
