"""A control to pick N and a dtype and rerun one checked, time-bounded matmul comparison.

On an accelerator: fp32 against fp16 or bf16 there, next to the CPU in fp32, at multiples of 8 (what tensor
cores want); on a CPU-only machine: 1 CPU thread against all. It uses only widgets that ipywidgets 7.7.1
(Colab) and 8.x share; the browser test reads the result area by its CSS class ``lessons-speed-result``.
"""

from __future__ import annotations

import html

import torch

from .bench import compare_matmul
from .bench.matmul import Comparison
from .bench.precisions import CPU_MAX_CALL_S, CPU_MAX_TIME_S, DtypeComparison, bf16_emulated, compare_dtypes
from .bench.timing import _device, _dtype, cpu_threads
from .errors import explain
from .precision import format_name
from .widget_display import show_widget

RESULT_CLASS = "lessons-speed-result"
CONTROL_CLASS = "lessons-speed-control"
_CPU_SIZES = (64, 128, 256, 500, 1024, 2048, 5000)
_GPU_SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 5000, 8192)
_CPU_DTYPES = (("float32", "fp32"), ("float16", "fp16"), ("bfloat16", "bf16"))
_GPU_DTYPES = (("fp16 (float16)", "fp16"), ("bf16 (bfloat16)", "bf16"))
_BF16_EMULATED_LABEL = "bf16 (giả lập: GPU này không có tensor core bf16)"


class SpeedControl:
    """Rerun one checked, time-bounded matmul comparison for a chosen N and dtype, and show it.

    It starts at N=2048 fp16 on an accelerator and N=500 fp32 on a CPU, and measures that right away; the CPU
    side is not run when one of its matmuls is estimated to take over 1 s, and each CPU measurement stops
    after 2 s.
    """

    def __init__(self, device: str | torch.device | None = None):
        self.device = _device(device)
        self.accelerated = self.device.type != "cpu"
        self.sizes = list(_GPU_SIZES if self.accelerated else _CPU_SIZES)
        default_n = 2048 if self.accelerated else 500
        self.n = default_n if default_n in self.sizes else self.sizes[0]
        self.dtype = "fp16" if self.accelerated else "fp32"
        self.last: Comparison | DtypeComparison | None = None  # the latest comparison (None after an error)
        self.error = ""
        self._box = self._result = self._slider = self._dtype = None
        self._syncing = False
        self.run()

    def run(self, n: int | None = None, dtype: str | torch.dtype | None = None):
        """Run the comparison for `n` and `dtype` (default: the current choice); show it and return it.

        An error while measuring is shown in the result area and None returned: callbacks must not raise.
        """
        if n is not None and n not in self.sizes:
            raise ValueError(f"n phải là một trong các kích thước {self.sizes}, nhận được {n!r}")
        label = self.dtype if dtype is None else format_name(dtype)
        if self.accelerated and label == "fp32":
            raise ValueError("Trên GPU, dtype là kiểu 16 bit để so với fp32: 'fp16' hoặc 'bf16' "
                             "(fp32 luôn được đo).")
        self.n, self.dtype = self.n if n is None else n, label
        self._sync_widgets()
        self._show(f"⏳ Đang đo N={self.n} {self.dtype}…")
        try:
            if self.accelerated:
                result = compare_dtypes(self.n, self.device, _dtype(self.dtype), threads=cpu_threads())
            else:
                result = compare_matmul(self.n, self.dtype, self.device, max_call_s=CPU_MAX_CALL_S,
                                        max_time_s=CPU_MAX_TIME_S)
        except Exception as exc:  # shown to the learner instead of lost in a widget callback
            hint = explain(exc)
            self.error = f"❌ {type(exc).__name__}: {exc}" + (f"\n{hint}" if hint else "")
            self.last = None
            self._show(self.error)
            return None
        self.error, self.last = "", result
        self._show(self.text())
        return result

    def text(self) -> str:
        """Return the current result as plain text."""
        if self.error:
            return self.error
        text = str(self.last)
        if isinstance(self.last, Comparison) and self.last.more_threads_not_faster:
            text += ("\nĐiều chính của bài vẫn đúng: phép nhân ma trận lớn chia được cho nhiều lõi, khi máy có đủ lõi "
                     "vật lý và đang rảnh; xem mục 5 của bài này (Timer và cái bẫy một luồng).")
        return text

    def dtype_options(self) -> list[tuple[str, str]]:
        """Return the dtype menu's (label, value) pairs; bf16 says so where it is emulated."""
        if not self.accelerated:
            return list(_CPU_DTYPES)
        emulated = bf16_emulated(self.device)
        return [(_BF16_EMULATED_LABEL if emulated and value == "bf16" else label, value)
                for label, value in _GPU_DTYPES]

    def widget(self):
        """Return the ipywidgets box (built once): N slider, dtype menu, rerun button, result area."""
        if self._box is not None:
            return self._box
        import ipywidgets as widgets

        self._slider = widgets.SelectionSlider(options=list(self.sizes), value=self.n, description="N",
                                               continuous_update=False, layout=widgets.Layout(width="420px"))
        options = self.dtype_options()
        width = "400px" if any(text == _BF16_EMULATED_LABEL for text, _ in options) else "220px"
        self._dtype = widgets.Dropdown(options=options, value=self.dtype,
                                       description="fp32 vs" if self.accelerated else "dtype",
                                       layout=widgets.Layout(width=width))
        button = widgets.Button(description="Đo lại", layout=widgets.Layout(width="120px"))
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
        """Return the last result as HTML for a static page, saying the controls need a live notebook."""
        note = ("🎛️ Trên trang tĩnh không có thanh trượt: mở notebook (Colab, Kaggle hoặc máy bạn) để chọn N, "
                "dtype và đo lại.")
        body = f"{self._html(self.text())}<p><em>{html.escape(note)}</em></p>"
        return f'<div class="{CONTROL_CLASS}">{body}</div>'

    def _ipython_display_(self) -> None:
        show_widget(self.widget, self.text(), static_html=self.static_html())


def speed_control(device: str | torch.device | None = None) -> SpeedControl:
    """Return a ``SpeedControl`` for `device` (None: the best one here), already run once."""
    return SpeedControl(device)
