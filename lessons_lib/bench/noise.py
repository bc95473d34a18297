"""Notice a noisy timing (repeats far apart, or far slower than predicted) and say what to do, in one line."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .._validate import check_number
from ..platforms import detect_platform
from .units import format_seconds

SPREAD_LIMIT = 2.0  # slowest repeat / fastest repeat above this: the repeats disagree
SLOW_LIMIT = 3.0  # median / predicted time above this: something else slowed the work down


def _check_times(times_s) -> list[float]:
    if isinstance(times_s, (str, bytes)) or not isinstance(times_s, Sequence):
        raise TypeError(
            "times_s phải là danh sách (list/tuple) số giây của từng lần đo, vd [0.012, 0.011, 0.013], "
            f"không phải {type(times_s).__name__}"
        )
    if len(times_s) == 0:
        raise ValueError("times_s không được rỗng: cần ít nhất một lần đo")
    for value in times_s:
        check_number("times_s[i]", value, positive=True)
    return [float(t) for t in times_s]


def _advice() -> str:
    text = "chạy lại ô khi máy rảnh, hoặc tăng số lần lặp (repeats=)"
    if detect_platform() in ("colab", "kaggle"):
        text += "; trên CPU miễn phí của Colab/Kaggle (2 vCPU trên một máy chủ dùng chung) nhiễu này hay gặp"
    return text


def noise_warning(times_s: Sequence[float], *, expected_s: float | None = None) -> str | None:
    """Return a "⚠️ số đo nhiễu" line when the repeats of one measurement are not trustworthy, else None.

    Two signs are checked: the slowest repeat takes more than ``SPREAD_LIMIT`` (2) times the fastest
    (something else used the CPU/GPU during some repeats), and, when `expected_s` is given, the median
    takes more than ``SLOW_LIMIT`` (3) times that prediction (e.g. the time the FLOPs or bytes predict
    from a larger, undisturbed measurement).

    Args:
        times_s: Seconds per call, one value per repeat (e.g. ``Timing.times_s``); positive numbers.
        expected_s: Seconds per call the work should take here, or None to check the spread only.

    Returns:
        One Vietnamese line saying what was seen and what to do, or None when the numbers look consistent.

    Raises:
        TypeError / ValueError: `times_s` is not a non-empty list of positive numbers, or `expected_s` is not
            a positive number.
    """
    times = _check_times(times_s)
    if expected_s is not None:
        check_number("expected_s", expected_s, positive=True)
    return noise_line(_signs(times, expected_s))


def _signs(times: list[float], expected_s: float | None) -> list[str]:
    """Return what looks noisy in one measurement's repeats, as phrases (empty when nothing does)."""
    seen = []
    fastest, slowest = min(times), max(times)
    if len(times) > 1 and slowest > SPREAD_LIMIT * fastest:
        seen.append(f"lần chậm nhất gấp {slowest / fastest:.1f}× lần nhanh nhất ({format_seconds(slowest)} so với "
                    f"{format_seconds(fastest)}, {len(times)} lần đo)")
    median = statistics.median(times)
    if expected_s is not None and median > SLOW_LIMIT * expected_s:
        seen.append(f"trung vị {format_seconds(median)} gấp {median / expected_s:.1f}× mức dự kiến "
                    f"{format_seconds(expected_s)}")
    return seen


def noise_line(seen: Sequence[str]) -> str | None:
    """Return the "⚠️ số đo nhiễu" line for what was seen (phrases), with what to do; None when nothing was seen."""
    if isinstance(seen, (str, bytes)) or not isinstance(seen, Sequence) or not all(isinstance(x, str) for x in seen):
        raise TypeError(f"seen phải là danh sách chuỗi (điều đã thấy), không phải {type(seen).__name__}")
    if not seen:
        return None
    return f"⚠️ số đo nhiễu (máy bận?): {'; '.join(seen)}. Nên {_advice()}."
