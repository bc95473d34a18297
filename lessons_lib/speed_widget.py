"""A small control to pick N and a dtype and rerun one checked, time-bounded matmul comparison.

On a GPU (or another accelerator) it shows what lesson 04 is about: fp32 against a 16-bit dtype (fp16 on
tensor cores, or bf16) on the same GPU, next to the CPU in fp32 (``bench.compare_dtypes``); the sizes are
multiples of 8 (what tensor cores want). On a CPU-only machine it compares 1 CPU thread with all of them
(``bench.compare_matmul``). Every side is bounded in time: a size whose single matmul is estimated to take
longer than the limit is not run, and the result says so and why, so moving the slider never blocks the
notebook for long.

Works with ipywidgets 7.7.1 (Colab) and 8.x: it only uses SelectionSlider, Dropdown, Button, HTML,
HBox/VBox, ``add_class`` and ``observe(names="value")``. The result area carries the CSS class
``lessons-speed-result`` so a browser test can read it. Without a widget frontend the control shows
its last result as plain text, and ``control.run(n, dtype)`` does the same work.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import torch

from . import bench
from .errors import explain
from .i18n import tr
from .widget_display import show_widget

RESULT_CLASS = "lessons-speed-result"
CONTROL_CLASS = "lessons-speed-control"
_CPU_SIZES = (64, 128, 256, 500, 1024, 2048, 5000)
_GPU_SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 5000, 8192)  # multiples of 8: what tensor cores want
_CPU_DEFAULT_N, _GPU_DEFAULT_N = 500, 2048
_CPU_DTYPES = (("float32", "fp32"), ("float16", "fp16"), ("bfloat16", "bf16"))
_GPU_DTYPES = (("fp16 (float16)", "fp16"), ("bf16 (bfloat16)", "bf16"))
_BF16_EMULATED_LABEL = "bf16 (giả lập: GPU này không có tensor core bf16)"


class SpeedControl:
    """Rerun one checked, time-bounded matmul comparison for a chosen N and dtype, and show it.

    With an accelerator (``device`` is not the CPU), each run times fp32 and `dtype` (fp16 or bf16) on it,
    and the CPU in fp32 (all threads): ``bench.compare_dtypes``. On a CPU-only machine it times 1 CPU
    thread against all of them in `dtype` (fp32, fp16 or bf16): ``bench.compare_matmul``. Moving the slider
    or changing the dtype reruns the comparison.

    Args:
        device: The device to compare (None: the best one here).
        sizes: The slider's sizes N, increasing (default: multiples of 8 up to 8192 on an accelerator;
            the seed exercise's 500 and 5000 among others on a CPU).
        n: The first size (default 2048 on an accelerator, 500 on a CPU).
        dtype: On an accelerator the 16-bit dtype compared with fp32 ("fp16", default, or "bf16"); on a CPU
            the dtype of both sides ("fp32", default, "fp16" or "bf16").
        max_call_s: The CPU side is not run when one of its matmuls is estimated to take longer.
        max_time_s: Time limit of each CPU measurement.
        run_now: Run the first comparison right away.
    """

    def __init__(self, device: str | torch.device | None = None, *, sizes: Sequence[int] | None = None,
                 n: int | None = None, dtype: str | None = None, max_call_s: float = 1.0, max_time_s: float = 2.0,
                 run_now: bool = True):
        self.device = bench.resolve_device(device)
        self.accelerated = self.device.type != "cpu"
        default_sizes = _GPU_SIZES if self.accelerated else _CPU_SIZES
        default_n = _GPU_DEFAULT_N if self.accelerated else _CPU_DEFAULT_N
        self.sizes = bench._check_sizes(default_sizes if sizes is None else sizes)
        self.n = (default_n if default_n in self.sizes else self.sizes[0]) if n is None else n
        if self.n not in self.sizes:
            raise ValueError(
                tr(f"n phải là một trong các kích thước {self.sizes}, nhận được {self.n}",
                   f"n must be one of the sizes {self.sizes}, got {self.n}")
            )
        self.dtype = self._check_dtype(dtype if dtype is not None else ("fp16" if self.accelerated else "fp32"))
        bench._check_positive_number("max_call_s", max_call_s)
        bench._check_positive_number("max_time_s", max_time_s)
        self.max_call_s = float(max_call_s)
        self.max_time_s = float(max_time_s)
        self.history: list[bench.Comparison | bench.DtypeComparison] = []
        self.error: str = ""
        self._box = None
        self._result = None
        self._slider = None
        self._dtype = None
        self._syncing = False
        if run_now:
            self.run()

    def _check_dtype(self, dtype) -> str:
        label = bench.dtype_label(dtype)
        if self.accelerated and label == "fp32":
            raise ValueError(
                tr("Trên GPU, dtype là kiểu 16 bit để so với fp32: 'fp16' hoặc 'bf16' (fp32 luôn được đo).",
                   "On a GPU, dtype is the 16-bit dtype compared with fp32: 'fp16' or 'bf16' (fp32 is always timed).")
            )
        return label

    # ------------------------------------------------------------------ running

    @property
    def last(self) -> bench.Comparison | bench.DtypeComparison | None:
        """The latest comparison, or None before the first run (or after an error)."""
        return self.history[-1] if self.history and not self.error else None

    def measure(self, n: int, dtype: str) -> bench.Comparison | bench.DtypeComparison:
        """Run the comparison for `n` and `dtype` (no widget update); what ``run`` calls."""
        if self.accelerated:
            return bench.compare_dtypes(n, self.device, dtype, cpu_max_call_s=self.max_call_s,
                                        cpu_max_time_s=self.max_time_s)
        return bench.compare_matmul(n, dtype, self.device, max_call_s=self.max_call_s, max_time_s=self.max_time_s)

    def run(self, n: int | None = None, dtype: str | torch.dtype | None = None):
        """Run the comparison for `n` and `dtype` (default: the current choice); show it and return it.

        An error while measuring is shown in the result area and returned as None, so a widget callback
        never raises into the void.
        """
        if n is not None:
            if n not in self.sizes:
                raise ValueError(
                    tr(f"n phải là một trong các kích thước {self.sizes}, nhận được {n!r}",
                       f"n must be one of the sizes {self.sizes}, got {n!r}")
                )
            self.n = n
        if dtype is not None:
            self.dtype = self._check_dtype(dtype)
        self._sync_widgets()
        self._show(tr(f"⏳ Đang đo N={self.n} {self.dtype}…", f"⏳ Measuring N={self.n} {self.dtype}…"))
        try:
            result = self.measure(self.n, self.dtype)
        except Exception as exc:  # shown to the learner instead of lost in a widget callback
            hint = explain(exc)
            self.error = f"❌ {type(exc).__name__}: {exc}" + (f"\n{hint}" if hint else "")
            self._show(self.error)
            return None
        self.error = ""
        self.history.append(result)
        self._show(self.text())
        return result

    def text(self) -> str:
        """Return the current result as plain text."""
        if self.error:
            return self.error
        if self.last is None:
            return tr("(chưa đo)", "(not measured yet)")
        text = str(self.last)
        if isinstance(self.last, bench.Comparison) and self.last.more_threads_not_faster:
            text += ("\nĐiều chính của bài vẫn đúng: phép nhân ma trận lớn chia được cho nhiều lõi, khi máy có đủ lõi "
                     "vật lý và đang rảnh; xem mục 5 của bài này (Timer và cái bẫy một luồng).")
        return text

    def dtype_options(self) -> list[tuple[str, str]]:
        """Return the dtype menu's (label, value) pairs; on a GPU without bf16 tensor cores bf16 says it is emulated."""
        if not self.accelerated:
            return list(_CPU_DTYPES)
        if bench.bf16_emulated(self.device):
            return [(_BF16_EMULATED_LABEL if value == "bf16" else label, value) for label, value in _GPU_DTYPES]
        return list(_GPU_DTYPES)

    # ------------------------------------------------------------------ widgets

    def widget(self):
        """Return the ipywidgets box (built once): N slider, dtype menu, rerun button, result area."""
        if self._box is not None:
            return self._box
        import ipywidgets as widgets

        self._slider = widgets.SelectionSlider(
            options=list(self.sizes), value=self.n, description="N", continuous_update=False,
            layout=widgets.Layout(width="420px"),
        )
        options = self.dtype_options()
        label = "fp32 vs" if self.accelerated else "dtype"
        width = "400px" if any(text == _BF16_EMULATED_LABEL for text, _ in options) else "220px"
        self._dtype = widgets.Dropdown(options=options, value=self.dtype, description=label,
                                       layout=widgets.Layout(width=width))
        button = widgets.Button(description=tr("Đo lại", "Measure again"), layout=widgets.Layout(width="120px"))
        self._result = widgets.HTML(value=self._html(self.text()))
        self._result.add_class(RESULT_CLASS)
        self._slider.observe(self._on_change, names="value")
        self._dtype.observe(self._on_change, names="value")
        button.on_click(lambda _button: self.run())
        self._box = widgets.VBox([widgets.HBox([self._slider, self._dtype, button]), self._result])
        self._box.add_class(CONTROL_CLASS)
        return self._box

    def _on_change(self, _change) -> None:
        if not self._syncing:
            self.run(n=self._slider.value, dtype=self._dtype.value)

    def _sync_widgets(self) -> None:
        """Show a choice made with run(n, dtype) on the slider and menu without triggering another run."""
        if self._slider is None:
            return
        self._syncing = True
        try:
            self._slider.value = self.n
            self._dtype.value = self.dtype
        finally:
            self._syncing = False

    @staticmethod
    def _html(text: str) -> str:
        return f"<pre style='white-space: pre-wrap; margin: 0'>{html.escape(text)}</pre>"

    def _show(self, text: str) -> None:
        if self._result is not None:
            self._result.value = self._html(text)

    def __repr__(self) -> str:
        return self.text()

    def static_html(self) -> str:
        """Return the last result as HTML for a static page, with a note that the controls need a live notebook."""
        note = tr("🎛️ Trên trang tĩnh không có thanh trượt: mở notebook (Colab, Kaggle hoặc máy bạn) để chọn N, "
                  "dtype và đo lại.",
                  "🎛️ A static page has no slider: open the notebook (Colab, Kaggle or your machine) to pick N and "
                  "the dtype and measure again.")
        return f'<div class="{CONTROL_CLASS}">{self._html(self.text())}<p><em>{html.escape(note)}</em></p></div>'

    def _ipython_display_(self) -> None:
        show_widget(self.widget, self.text(), static_html=self.static_html())


def speed_control(device: str | torch.device | None = None, **kwargs) -> SpeedControl:
    """Return a ``SpeedControl`` for `device` (None: the best one here), already run once.

    The first run is N=2048, fp32 vs fp16 on an accelerator; N=500, 1 thread vs all in fp32 on a CPU.
    Keyword arguments go to ``SpeedControl`` (sizes, n, dtype, max_call_s, max_time_s, run_now).
    """
    return SpeedControl(device, **kwargs)
