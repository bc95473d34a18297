"""Multiple-choice and yes/no questions: buttons with instant feedback, or plain text without widgets.

In a notebook, end a cell with ``yes_no(...)`` or ``choice(...)``: the question shows as buttons
(ipywidgets 7.7.1 and 8.x). Where no widget frontend exists, a plain-text version is shown and
``question.answer(...)`` gives the same feedback.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from .i18n import tr
from .widget_display import show_widget

QUIZ_CLASS = "lessons-quiz"
FEEDBACK_CLASS = "lessons-quiz-feedback"
STATIC_CLASS = "lessons-quiz-static"  # the HTML of a static page (course website): answer behind a click


@dataclass
class Question:
    """One question with its options, the index of the right option and a one-line explanation."""

    prompt: str
    options: list[str]
    correct: int
    explanation: str
    why_wrong: dict[int, str] = field(default_factory=dict)
    attempts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError("prompt must be a non-empty str (the question text)")
        if isinstance(self.options, str) or not isinstance(self.options, Sequence):
            raise TypeError(f"options must be a list of str, got {type(self.options).__name__}")
        self.options = list(self.options)
        if len(self.options) < 2 or not all(isinstance(o, str) and o.strip() for o in self.options):
            raise ValueError("options must hold at least two non-empty strings")
        if not isinstance(self.correct, int) or isinstance(self.correct, bool):
            raise TypeError(f"correct must be the int index of the right option, got {type(self.correct).__name__}")
        if not 0 <= self.correct < len(self.options):
            raise ValueError(f"correct must be between 0 and {len(self.options) - 1}, got {self.correct}")
        if not isinstance(self.explanation, str):
            raise TypeError(f"explanation must be a str, got {type(self.explanation).__name__}")

    def _index(self, choice: int | str | bool) -> int:
        if isinstance(choice, bool) and self.options == _YES_NO:
            return 0 if choice else 1
        if isinstance(choice, int) and not isinstance(choice, bool):
            if 0 <= choice < len(self.options):
                return choice
            raise ValueError(f"choice must be between 0 and {len(self.options) - 1}, got {choice}")
        if isinstance(choice, str):
            text = choice.strip()
            if len(text) == 1 and text.upper() in _LETTERS[: len(self.options)]:
                return _LETTERS.index(text.upper())
            for i, option in enumerate(self.options):
                if option.lower() == text.lower():
                    return i
            raise ValueError(
                f"choice {choice!r} is none of the options; pass a letter "
                f"{'/'.join(_LETTERS[: len(self.options)])}, an option's text or its index"
            )
        raise TypeError(f"choice must be a letter, an option's text or an int index, got {type(choice).__name__}")

    def feedback(self, choice: int | str | bool) -> str:
        """Return the one-line feedback for answering `choice` (letter, option text, index, or bool)."""
        index = self._index(choice)
        if index == self.correct:
            return tr("✅ Đúng! ", "✅ Correct! ") + self.explanation
        why = self.why_wrong.get(index, tr("Thử lại nhé.", "Try again."))
        return tr("❌ Chưa đúng. ", "❌ Not quite. ") + why

    def answer(self, choice: int | str | bool) -> bool:
        """Answer the question in plain text: print the feedback and return whether it was right."""
        index = self._index(choice)
        self.attempts.append(index)
        print(self.feedback(index))
        return index == self.correct

    def as_text(self) -> str:
        """Return the question as plain text with lettered options."""
        lines = [f"❓ {self.prompt}"]
        lines += [f"   {_LETTERS[i]}. {option}" for i, option in enumerate(self.options)]
        lines.append(tr("   (Không thấy nút bấm? Gọi .answer trên biến của câu hỏi, vd q1.answer('A'))",
                        "   (No buttons? Call .answer on the question's variable, e.g. q1.answer('A'))"))
        return "\n".join(lines)

    def as_html(self) -> str:
        """Return the question as static HTML: prompt and options, the answer hidden in a click-to-open <details>."""
        def esc(text: str) -> str:
            return html.escape(text, quote=False)

        options = "".join(f"<li><b>{_LETTERS[i]}.</b> {esc(option)}</li>" for i, option in enumerate(self.options))
        right = f"{_LETTERS[self.correct]}. {esc(self.options[self.correct])}"
        wrong = "".join(
            f"<li><b>{_LETTERS[i]}</b>: {esc(reason)}</li>" for i, reason in sorted(self.why_wrong.items())
            if isinstance(i, int) and 0 <= i < len(self.options) and i != self.correct and reason
        )
        return (
            f'<div class="{STATIC_CLASS}">'
            f"<p><b>❓ {esc(self.prompt)}</b></p>"
            f'<ul class="lessons-quiz-options">{options}</ul>'
            f'<details class="lessons-quiz-answer"><summary>{tr("Xem đáp án", "Show the answer")}</summary>'
            f"<p>✅ <b>{right}</b>" + (f" — {esc(self.explanation)}" if self.explanation else "") + "</p>"
            + (f'<p>{tr("Vì sao không phải:", "Why not:")}</p><ul>{wrong}</ul>' if wrong else "")
            + "</details></div>"
        )

    def __repr__(self) -> str:
        return self.as_text()

    def widget(self):
        """Return the question as an ipywidgets box: one button per option and a feedback line."""
        import ipywidgets as widgets

        feedback = widgets.HTML(value="")
        feedback.add_class(FEEDBACK_CLASS)
        buttons = []
        for i, option in enumerate(self.options):
            button = widgets.Button(description=f"{_LETTERS[i]}. {option}", layout=widgets.Layout(width="auto"))
            button.on_click(self._on_click(i, feedback, buttons))
            buttons.append(button)
        title = widgets.HTML(value=f"<b>❓ {html.escape(self.prompt, quote=False)}</b>")
        box = widgets.VBox([title, widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap")), feedback])
        box.add_class(QUIZ_CLASS)
        return box

    def _on_click(self, index, feedback, buttons):
        def handler(_button):
            self.attempts.append(index)
            feedback.value = html.escape(self.feedback(index), quote=False)
            for i, button in enumerate(buttons):
                button.button_style = "success" if (i == index and index == self.correct) else (
                    "danger" if i == index else "")

        return handler

    def _ipython_display_(self) -> None:
        show_widget(self.widget, self.as_text(), static_html=self.as_html())


_LETTERS = "ABCDEFGHIJ"
_YES_NO = ["Có", "Không"]


def yes_no(prompt: str, answer: bool, explanation: str, why_wrong: str | None = None) -> Question:
    """Return a yes/no ("Có"/"Không") question; `answer` is True for "Có"."""
    if not isinstance(answer, bool):
        raise TypeError(f"answer must be True (Có) or False (Không), got {type(answer).__name__}")
    correct = 0 if answer else 1
    wrong = {1 - correct: why_wrong} if why_wrong else {}
    return Question(prompt, list(_YES_NO), correct, explanation, wrong)


def choice(prompt: str, options: Sequence[str], answer: int, explanation: str,
           why_wrong: dict[int, str] | None = None) -> Question:
    """Return a multiple-choice question.

    Args:
        prompt: The question.
        options: The options, shown as A, B, C, ...
        answer: Index of the right option (0 for A).
        explanation: One line shown with the right answer.
        why_wrong: Optional one-line reason for some wrong options, by index.

    Returns:
        The question; a notebook cell ending with it shows the buttons.
    """
    if why_wrong is not None and not isinstance(why_wrong, dict):
        raise TypeError(f"why_wrong must be a dict {{index: reason}} or None, got {type(why_wrong).__name__}")
    return Question(prompt, list(options) if not isinstance(options, str) else options, answer, explanation,
                    dict(why_wrong or {}))
