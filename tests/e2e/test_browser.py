"""End to end in a real browser: JupyterLab + headless Chromium run the notebooks as a learner does.

Executing notebooks (nbval, nbclient) proves the Python side only; here the widgets must render and answer
clicks. Notebook 01: Run All, no cell shows an error, a quiz answered wrongly and another rightly shows the
feedback lessons_lib computes for those answers. Screenshots go to a kept temp folder whose path pytest prints at
the end. Skip with ``pytest -m "not browser"``.
"""

from __future__ import annotations

import ast
import json
import re
import time
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NB01 = "01_device_basics.ipynb"
BUDGET_S = 180  # the issue: the whole browser test finishes within 3 minutes
RUN_ALL_TIMEOUT_MS = 120_000
LETTERS = "ABCDEFGHIJ"
QUIZ_CELL = re.compile(r"\b(yes_no|choice)\(")
# What an error looks like in a rendered output: JupyterLab shows an `error` output as stderr text holding the
# traceback (no "Traceback" line for SyntaxError, hence the second pattern); ipywidgets' manager shows
# "Error displaying widget" when a widget cannot render.
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*\w*(Error|Exception|Interrupt)\b[^\n]*:", re.M)
WIDGET_ERROR = re.compile(r"Error (displaying|rendering) widget", re.I)

try:
    from playwright.sync_api import expect
except ImportError:  # the browser tests are then skipped (conftest); the checks below still run
    expect = None


# ----------------------------------------------------------------------------------------------- helpers

def quiz_questions(notebook: Path) -> list:
    """Build the notebook's quiz questions here, in cell order, by running its quiz cells (pure constructors)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    namespace: dict = {}
    questions = []
    for cell in cells:
        source = "".join(cell["source"])  # a list of lines or one string
        if cell["cell_type"] != "code" or not QUIZ_CELL.search(source):
            continue
        tree = ast.parse(source)
        exec(compile(tree, str(notebook), "exec"), namespace)  # noqa: S102 - the course's own quiz cells
        last = tree.body[-1]
        assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Name), (
            f"a quiz cell must end with the question's name so that it displays; got:\n{source}")
        questions.append(namespace[last.value.id])
    return questions


def open_notebook(page, name: str):
    """Open `name` from the file browser (double click, as a learner does); return its panel once the kernel is idle."""
    item = page.locator(".jp-DirListing-item").filter(has=page.get_by_text(name, exact=True))
    item.dblclick()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current")).to_have_text(name)
    current = page.locator("#jp-main-dock-panel .jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(current).to_have_count(1)
    panel = page.locator(f"[id='{current.get_attribute('id')}']")
    # Before its kernel exists the panel already says "idle"; wait for a named kernel, connected and idle.
    page.wait_for_function(
        """(panel) => {
            const kernel = panel.querySelector('.jp-Toolbar-kernelName')?.textContent.trim();
            const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
            return kernel && kernel !== 'No Kernel' && status === 'idle';
        }""",
        arg=panel.element_handle(),
        timeout=90_000,
    )
    assert_no_dialog(page)
    return panel


def assert_no_dialog(page) -> None:
    dialogs = page.locator(".jp-Dialog")
    assert dialogs.count() == 0, f"JupyterLab shows a dialog: {dialogs.first.inner_text()!r}"


def run_all(page, panel) -> None:
    """Run > Run All Cells from the menu bar; wait until no cell is queued or running and the kernel is idle."""
    page.locator(".lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_function(
        """(panel) => {
            const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
            const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
            if (document.querySelector('.jp-Dialog')) return true;  // reported below
            return prompts.length > 0 && /^\\[\\d+\\]:$/.test(prompts[0]) && !prompts.some(t => t.includes('*'))
                && status === 'idle';
        }""",
        arg=panel.element_handle(),
        timeout=RUN_ALL_TIMEOUT_MS,
    )
    assert_no_dialog(page)


def rendered_cells(panel) -> list[dict]:
    """Return, for every code cell in the DOM, its prompt and its outputs' MIME types and visible text."""
    return panel.evaluate(
        """(panel) => [...panel.querySelectorAll('.jp-CodeCell')].map((cell, index) => ({
            index,
            prompt: (cell.querySelector('.jp-InputPrompt')?.textContent || '').trim(),
            source: (cell.querySelector('.jp-InputArea-editor')?.innerText || '').slice(0, 80),
            outputs: [...cell.querySelectorAll('.jp-OutputArea-output')].map(out => ({
                mime: out.dataset.mimeType || '', text: out.innerText || ''})),
        }))"""
    )


ERROR_MIMES = ("application/vnd.jupyter.stderr", "application/vnd.jupyter.error")


def classify_outputs(cells: list[dict]) -> tuple[list[str], list[str], list[str]]:
    """Sort rendered cells (as `rendered_cells` returns them) into errors shown, cells not run, and warnings.

    JupyterLab 4 renders an `error` output as stderr text holding the traceback, so stderr with a traceback
    is an error and stderr without one (a warning) is only reported.
    """
    errors, not_run, stderr_only = [], [], []
    for cell in cells:
        if not re.fullmatch(r"\[\d+\]:", cell["prompt"]):
            not_run.append(f"cell {cell['index']} {cell['prompt']} {cell['source']!r}")
        for out in cell["outputs"]:
            is_stderr = out["mime"] in ERROR_MIMES
            if (is_stderr and TRACEBACK.search(out["text"])) or WIDGET_ERROR.search(out["text"]):
                errors.append(f"cell {cell['index']} {cell['source']!r}:\n{out['text'][:1500]}")
            elif is_stderr:
                stderr_only.append(f"cell {cell['index']}: {out['text'][:300]}")
    return errors, not_run, stderr_only


def assert_no_error_shown(panel, notebook: Path) -> None:
    """Every code cell ran (Run All stops at the first error) and no output shows a traceback or widget error."""
    # View > Expand All Code: a quiz cell's code is collapsed (it holds the answer), and with it its prompt.
    panel.page.locator(".lm-MenuBar-itemLabel").get_by_text("View", exact=True).click()
    panel.page.locator(".lm-Menu-itemLabel").get_by_text("Expand All Code", exact=True).click()
    cells = rendered_cells(panel)
    saved = [c for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    assert len(cells) == len(saved), f"{len(cells)} code cells in the page, {len(saved)} in {notebook.name}"
    errors, not_run, stderr_only = classify_outputs(cells)
    assert not errors, "cells show an error:\n" + "\n\n".join(errors)
    assert not not_run, "cells did not run (Run All stopped early?):\n" + "\n".join(not_run)
    for text in stderr_only:  # stderr without a traceback (a warning): visible to learners, so report it
        warnings.warn(f"{notebook.name} shows stderr output: {text}", stacklevel=2)


def shoot(page, folder: Path, name: str, element=None) -> None:
    """Save a full-page screenshot, with `element` scrolled into view first."""
    if element is not None:
        element.scroll_into_view_if_needed()
    page.screenshot(path=str(folder / name), full_page=True)


# ------------------------------------------------------------------------------------------------- tests

@pytest.mark.browser
@pytest.mark.slow
def test_notebook01_runs_and_quiz_answers_clicks(lab, page, screenshots):
    notebook = lab.root / NB01
    questions = quiz_questions(notebook)
    assert len(questions) >= 2, f"{NB01} needs at least two quiz questions for this test, found {len(questions)}"

    panel = open_notebook(page, NB01)
    lab.mark(f"{NB01} opened, kernel idle")
    run_all(page, panel)
    lab.mark(f"{NB01} Run All done")
    quizzes = panel.locator(".lessons-quiz")
    expect(quizzes).to_have_count(len(questions))  # every question rendered as a widget, not as plain text
    assert_no_error_shown(panel, notebook)
    shoot(page, screenshots, "01_after_run_all.png", panel.locator(".jp-Cell").first)

    # A wrong answer on the first question: the "❌ Chưa đúng. ..." line for that option, the button turns red.
    first, quiz = questions[0], quizzes.nth(0)
    wrong = next(i for i in range(len(first.options)) if i != first.correct)
    feedback = quiz.locator(".lessons-quiz-feedback")
    expect(feedback).to_have_text("")
    button = quiz.get_by_role("button", name=f"{LETTERS[wrong]}. {first.options[wrong]}", exact=True)
    button.click()
    expect(feedback).to_have_text(first._feedback(wrong))
    assert first._feedback(wrong).startswith("❌ Chưa đúng.")
    expect(button).to_have_class(re.compile(r"\bmod-danger\b"))
    shoot(page, screenshots, "01_quiz_wrong_answer.png", quiz)

    # The right answer on another question (a multiple-choice one when there is one).
    k = next((j for j, q in enumerate(questions) if j > 0 and len(q.options) > 2), 1)
    other, quiz = questions[k], quizzes.nth(k)
    button = quiz.get_by_role("button", name=f"{LETTERS[other.correct]}. {other.options[other.correct]}", exact=True)
    button.click()
    expect(quiz.locator(".lessons-quiz-feedback")).to_have_text(other._feedback(other.correct))
    assert other._feedback(other.correct).startswith("✅ Đúng!")
    expect(button).to_have_class(re.compile(r"\bmod-success\b"))
    shoot(page, screenshots, "01_quiz_right_answer.png", quiz)
    lab.mark(f"{NB01} checked, quiz answered")
    elapsed = time.monotonic() - lab.started
    assert elapsed <= BUDGET_S, f"the browser test took {elapsed:.0f} s since JupyterLab started (budget {BUDGET_S} s)"


# ------------------------------------------------------------------ the error check itself, without a browser

def _cell(prompt="[1]:", *outputs):
    return {"index": 0, "prompt": prompt, "source": "x", "outputs": [{"mime": m, "text": t} for m, t in outputs]}


STDERR = "application/vnd.jupyter.stderr"


def test_classify_outputs_finds_tracebacks_syntax_errors_and_widget_errors():
    # The texts are what JupyterLab 4.6 renders (innerText) for `1/0` and `x = (` and a failed widget view.
    zero = ("---------------------------------------------------------------------------\n"
            "ZeroDivisionError                         Traceback (most recent call last)\n"
            "Cell In[2], line 1\n----> 1 1/0\n\nZeroDivisionError: division by zero")
    syntax = "  Cell In[2], line 1\n    x = (\n         ^\nSyntaxError: incomplete input\n"
    widget = "Error displaying widget: model not found"
    cells = [_cell("[1]:", (STDERR, zero)), _cell("[2]:", (STDERR, syntax)),
             _cell("[3]:", ("application/vnd.jupyter.widget-view+json", widget))]
    errors, not_run, stderr_only = classify_outputs(cells)
    assert len(errors) == 3 and "ZeroDivisionError" in errors[0] and "SyntaxError" in errors[1]
    assert not not_run and not stderr_only


def test_classify_outputs_reports_cells_not_run_and_keeps_warnings_apart():
    warning = "/tmp/x.py:1: UserWarning: careful\n  warnings.warn('careful')\n"
    stdout_error_text = "⚠️ Lỗi (cố ý) — RuntimeError: Expected all tensors to be on the same device"
    cells = [_cell("[1]:", (STDERR, warning)), _cell("[2]:", ("application/vnd.jupyter.stdout", stdout_error_text)),
             _cell("[ ]:"), _cell("[*]:")]
    errors, not_run, stderr_only = classify_outputs(cells)
    assert errors == []  # an intentional error printed by expect_error (stdout) is not an error
    assert len(not_run) == 2 and "[ ]:" in not_run[0] and "[*]:" in not_run[1]
    assert len(stderr_only) == 1 and "UserWarning" in stderr_only[0]
