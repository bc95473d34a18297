"""Say what 1 CPU thread against several measured, including why more threads can be slower."""

from __future__ import annotations

from .._validate import check_int, check_number
from ..platforms import detect_platform

CLOSE = 1.2  # within this factor either way, 1 thread and several count as "about the same"


def physical_cores() -> int | None:
    """Return the machine's physical CPU cores as psutil reports them, or None without psutil (or when unknown)."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        cores = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001  (psutil raises different errors on different systems)
        return None
    return cores if isinstance(cores, int) and cores > 0 else None


def threads_reason(threads: int) -> str:
    """Return why `threads` CPU threads may be no faster (or slower) than 1, naming this machine's cores when known."""
    check_int("threads", threads, 1)
    cores = physical_cores()
    if cores is not None and cores < threads:
        why = (f"máy này chỉ có {cores} lõi vật lý cho {threads} luồng (psutil), nên các luồng chia nhau cùng bộ "
               "tính của một lõi (Hyper-Threading)")
    else:
        why = ("máy có ít lõi vật lý (lệnh !lscpu cho biết ở hai dòng Core(s) per socket và Thread(s) per core), "
               "nên các luồng chia nhau cùng bộ tính")
    text = (f"Lý do hay gặp: {why}; hoặc máy đang bận việc khác, và mỗi phép nhân phải chờ luồng chậm nhất. "
            "Chạy lại ô khi máy rảnh để xem kết quả có lặp lại không.")
    if detect_platform() in ("colab", "kaggle"):
        text += (" Trên CPU miễn phí của Colab/Kaggle (2 vCPU trên một máy chủ dùng chung, có thể chỉ là hai luồng của "
                 "một lõi) điều này hay gặp.")
    return text


def threads_verdict(one_thread_s: float, many_threads_s: float, threads: int) -> str:
    """Return one verdict on 1 CPU thread against `threads` threads, built from the two measured times.

    Args:
        one_thread_s: Seconds per call with 1 thread (e.g. a median).
        many_threads_s: Seconds per call with `threads` threads.
        threads: How many threads the second measurement used.

    Returns:
        A Vietnamese sentence starting with "→": how much faster the threads were, or, when they were about
        as fast or slower, that this goes against the usual result and why that can happen here.

    Raises:
        TypeError / ValueError: the times are not positive numbers, or `threads` is not an int ≥ 1.
    """
    check_number("one_thread_s", one_thread_s, positive=True)
    check_number("many_threads_s", many_threads_s, positive=True)
    check_int("threads", threads, 1)
    if threads == 1:
        return "→ Chỉ có 1 CPU khả dụng nên \"mọi luồng\" cũng là 1 luồng: không có gì để so ở máy này."
    ratio = one_thread_s / many_threads_s
    if ratio >= CLOSE:
        return (f"→ {threads} luồng nhanh hơn 1 luồng {ratio:.1f}× (thời gian 1 luồng / {threads} luồng = {ratio:.2f}): "
                "nhân ma trận chia được cho nhiều lõi.")
    if ratio > 1 / CLOSE:
        head = (f"→ {threads} luồng và 1 luồng gần như bằng nhau (thời gian 1 luồng / {threads} luồng = {ratio:.2f}): "
                "ở đây thêm luồng không giúp gì.")
    else:
        head = (f"→ 1 luồng NHANH hơn {threads} luồng {1 / ratio:.1f}× (thời gian 1 luồng / {threads} luồng = "
                f"{ratio:.2f}), ngược với điều thường thấy.")
    return f"{head} {threads_reason(threads)}"
