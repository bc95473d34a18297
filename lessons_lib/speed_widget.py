"""A small control to pick N and a dtype and rerun one CPU-vs-GPU matmul comparison.

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
_GPU_SIZES = (64, 128, 256, 500, 1024, 2048, 4096, 5000, 8192)
_DTYPE_OPTIONS = (("float32", "fp32"), ("float16", "fp16"), ("bfloat16", "bf16"))


class SpeedControl:
    """Rerun ``bench.compare_matmul`` for a chosen N and dtype; show the checked, measured result.

    On a machine with an accelerator it compares the CPU (all threads) with it; on a CPU-only machine,
    1 CPU thread with all threads. Moving the slider or changing the dtype reruns the comparison.
    """

    def __init__(self, device: str | torch.device | None = None, *, sizes: Sequence[int] | None = None,
                 n: int | None = None, dtype: str = "fp32", include_copy: bool = False,
                 max_call_s: float = 5.0, run_now: bool = True):
        self.device = bench.resolve_device(device)
        default = _CPU_SIZES if self.device.type == "cpu" else _GPU_SIZES
        self.sizes = bench._check_sizes(default if sizes is None else sizes)
        self.n = 500 if n is None and 500 in self.sizes else (self.sizes[0] if n is None else n)
        if self.n not in self.sizes:
            raise ValueError(
                tr(f"n phải là một trong các kích thước {self.sizes}, nhận được {self.n}",
                   f"n must be one of the sizes {self.sizes}, got {self.n}")
            )
        self.dtype = bench.dtype_label(dtype)
        if not isinstance(include_copy, bool):
            raise TypeError(f"include_copy must be True or False, got {type(include_copy).__name__}")
        bench._check_positive_number("max_call_s", max_call_s)
        self.include_copy = include_copy
        self.max_call_s = float(max_call_s)
        self.history: list[bench.Comparison] = []
        self.error: str = ""
        self._box = None
        self._result = None
        self._slider = None
        self._dtype = None
        self._syncing = False
        if run_now:
            self.run()

    # ------------------------------------------------------------------ running

    @property
    def last(self) -> bench.Comparison | None:
        """The latest comparison, or None before the first run (or after an error)."""
        return self.history[-1] if self.history and not self.error else None

    def run(self, n: int | None = None, dtype: str | torch.dtype | None = None) -> bench.Comparison | None:
        """Run the comparison for `n` and `dtype` (default: the current choice); return it.

        An error while measuring (e.g. out of memory) is shown in the result area and returned as None,
        so a widget callback never raises into the void.
        """
        if n is not None:
            if n not in self.sizes:
                raise ValueError(
                    tr(f"n phải là một trong các kích thước {self.sizes}, nhận được {n!r}",
                       f"n must be one of the sizes {self.sizes}, got {n!r}")
                )
            self.n = n
        if dtype is not None:
            self.dtype = bench.dtype_label(dtype)
        self._sync_widgets()
        self._show(tr(f"⏳ Đang đo N={self.n} {self.dtype}…", f"⏳ Measuring N={self.n} {self.dtype}…"))
        try:
            result = bench.compare_matmul(self.n, self.dtype, self.device, include_copy=self.include_copy,
                                          max_call_s=self.max_call_s)
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
        return str(self.last)

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
        self._dtype = widgets.Dropdown(options=list(_DTYPE_OPTIONS), value=self.dtype, description="dtype",
                                       layout=widgets.Layout(width="200px"))
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
    """Return a ``SpeedControl`` for `device` (None: the best one here), already run once at N=500, fp32.

    Keyword arguments go to ``SpeedControl`` (sizes, n, dtype, include_copy, max_call_s, run_now).
    """
    return SpeedControl(device, **kwargs)
