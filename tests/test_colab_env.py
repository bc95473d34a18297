"""The course in Colab's conditions: Colab's pinned notebook stack (envs/colab-pins.txt) with lessons_lib installed
as the setup cell does. The tests marked colab_env run inside a Colab row (`nox -s colab`, which sets
BAI14_COLAB_ROW=1 and has already checked the pins, `pip check` and that the install changed nothing else);
elsewhere they skip. The others check the pins file anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
import torch

from lessons_lib.errors import explain
from tools import colab_pins

ROOT = Path(__file__).resolve().parent.parent

in_colab_row = pytest.mark.skipif(os.environ.get("BAI14_COLAB_ROW") != "1",
                                  reason="runs in a Colab row of the matrix: nox -s colab")


def test_pins_file_pins_the_colab_notebook_stack_with_colabs_python_and_torch():
    pins = colab_pins.read_pins()
    stack = {"ipython", "ipykernel", "ipywidgets", "widgetsnbextension", "jupyter-client", "matplotlib"}
    assert stack <= set(pins), "the pins file pins Colab's notebook stack"
    head = colab_pins.PINS.read_text(encoding="utf-8")[:1500]  # its Python and torch: test_version_matrix.py
    assert "googlecolab/backend-info" in head and "retrieved 20" in head, "the pins file must name source and date"


def test_read_pins_rejects_lines_that_do_not_pin(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("# comment\nJinja2==3.1.6  # note\n\ntorch==2.13.0+cpu\n", encoding="utf-8")
    assert colab_pins.read_pins(good) == {"jinja2": "3.1.6", "torch": "2.13.0+cpu"}
    for bad_line, message in (("numpy>=2", "name==version"), ("numpy", "name==version"),
                              ("numpy==2.0.2\nNumPy==2.0.2", "pinned twice")):
        bad = tmp_path / "bad.txt"
        bad.write_text(bad_line + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            colab_pins.read_pins(bad)


# --------------------------------------------------------------------------- inside a Colab row


_FEATURE_CELLS = [
    ("%reload_ext lessons_lib.notebook", []),  # the setup cell's last line, run twice as learners do
    ("%reload_ext lessons_lib.notebook", []),
    ("%%gpu\nprint('GPU BODY RAN')", []),
    ("%%gpu 2\nprint('GPU BODY RAN')", []),
    ("import torch\ntorch.ones(2, device='meta') + torch.ones(2)", ["raises-exception"]),
    ("import ipywidgets as w\nfrom lessons_lib.quiz import choice\n"
     "q = choice('2 + 2 = ?', ['3', '4'], 1, '2 + 2 = 4.')\nbox = q._widget()\n"
     "walk = lambda x: [x] + [d for c in getattr(x, 'children', ()) for d in walk(c)]\n"
     "feedback = next(x for x in walk(box) if 'lessons-quiz-feedback' in x._dom_classes)\n"
     "for b in [x for x in walk(box) if isinstance(x, w.Button)]:\n"
     "    b._handle_button_msg(None, {'event': 'click'}, [])\n"
     "    print('CLICK', b.button_style, feedback.value)", []),
    ("q", []),
]


@pytest.mark.colab_env
@in_colab_row
def test_lessons_lib_features_work_on_colabs_ipython_and_ipywidgets(tmp_path):
    """%%gpu, the hint under a traceback and the quiz buttons, in a kernel of IPython 7.34 / ipywidgets 7.7.1."""
    import nbclient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"tags": tags}) for src, tags in _FEATURE_CELLS]
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    cells = nb.cells

    def stdout(i):
        return "".join(o.get("text", "") for o in cells[i].outputs if o.get("name") == "stdout")

    for i in (0, 1):  # a re-run of the setup cell's %reload_ext prints the banner again, no "already loaded"
        assert "torch" in stdout(i) and "already loaded" not in stdout(i), stdout(i)
    for i in (2, 3):
        assert "GPU BODY RAN" not in stdout(i) and "Bỏ qua ô này" in stdout(i), stdout(i)
    with pytest.raises(RuntimeError) as caught:
        torch.ones(2, device="meta") + torch.ones(2)
    hint = explain(caught.value)
    assert hint, "explain() must know the meta/CPU device mismatch"
    errors = [o for o in cells[4].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "RuntimeError", "the traceback must stay and stop Run all"
    assert hint in stdout(4), f"the hint under the traceback is missing:\n{stdout(4)}"
    clicks = [line for line in stdout(5).splitlines() if line.startswith("CLICK")]
    assert len(clicks) == 2 and clicks[0].startswith("CLICK danger ❌") and clicks[1].startswith("CLICK success ✅")
    shown = [o for o in cells[6].outputs if o.output_type in ("display_data", "execute_result")]
    assert shown and "application/vnd.jupyter.widget-view+json" in shown[0].data, "the quiz must show as a widget"
