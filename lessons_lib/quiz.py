"""Multiple-choice and yes/no questions: buttons with instant feedback, or plain text and ``.answer(...)``."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from .widget_display import show_widget

_LETTERS = "ABCDEFGHIJ"
_YES_NO = ["Có", "Không"]


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


@dataclass
class Question:
    """One question with its options, the index of the right option and a one-line explanation."""

    prompt: str
    options: list[str]
    correct: int
    explanation: str
    why_wrong: dict[int, str] = field(default_factory=dict)

    def _feedback(self, index: int) -> str:
        if index == self.correct:
            return "✅ Đúng! " + self.explanation
        return "❌ Chưa đúng. " + self.why_wrong.get(index, "Thử lại nhé.")

    def answer(self, choice: str) -> bool:
        """Answer in plain text with the option's letter ("A", "B", …): print the feedback."""
        letters = _LETTERS[: len(self.options)]
        if not isinstance(choice, str):
            raise TypeError(f"choice phải là chữ cái của một đáp án ({'/'.join(letters)}), "
                            f"không phải {type(choice).__name__}")
        letter = choice.strip().upper()
        if len(letter) != 1 or letter not in letters:
            raise ValueError(f"choice {choice!r} không phải đáp án nào; dùng chữ cái {'/'.join(letters)}")
        print(self._feedback(letters.index(letter)))
        return letters.index(letter) == self.correct

    def __repr__(self) -> str:
        lines = [f"❓ {self.prompt}", *(f"   {_LETTERS[i]}. {option}" for i, option in enumerate(self.options)),
                 "   (Không thấy nút bấm? Gọi .answer trên biến của câu hỏi, vd q1.answer('A'))"]
        return "\n".join(lines)

    def _html(self) -> str:
        """Return the question as static HTML, the answer hidden in a click-to-open <details>."""
        options = "".join(f"<li><b>{_LETTERS[i]}.</b> {_esc(option)}</li>" for i, option in enumerate(self.options))
        right = f"{_LETTERS[self.correct]}. {_esc(self.options[self.correct])}"
        wrong = "".join(f"<li><b>{_LETTERS[i]}</b>: {_esc(reason)}</li>" for i, reason in sorted(self.why_wrong.items())
                        if 0 <= i < len(self.options) and i != self.correct and reason)
        return (f'<div class="lessons-quiz-static"><p><b>❓ {_esc(self.prompt)}</b></p>'
                f'<ul class="lessons-quiz-options">{options}</ul>'
                f'<details class="lessons-quiz-answer"><summary>Xem đáp án</summary>'
                f"<p>✅ <b>{right}</b>" + (f" — {_esc(self.explanation)}" if self.explanation else "") + "</p>"
                + (f"<p>Vì sao không phải:</p><ul>{wrong}</ul>" if wrong else "") + "</details></div>")

    def _widget(self):
        """Return the question as an ipywidgets box: one button per option and a feedback line."""
        import ipywidgets as widgets

        feedback = widgets.HTML(value="")
        feedback.add_class("lessons-quiz-feedback")
        buttons = [widgets.Button(description=f"{_LETTERS[i]}. {option}", layout=widgets.Layout(width="auto"))
                   for i, option in enumerate(self.options)]

        def on_click(index):
            def handler(_button):
                feedback.value = _esc(self._feedback(index))
                for i, button in enumerate(buttons):
                    button.button_style = ("success" if index == self.correct else "danger") if i == index else ""
            return handler

        for i, button in enumerate(buttons):
            button.on_click(on_click(i))
        title = widgets.HTML(value=f"<b>❓ {_esc(self.prompt)}</b>")
        box = widgets.VBox([title, widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap")), feedback])
        box.add_class("lessons-quiz")
        return box

    def _ipython_display_(self) -> None:
        show_widget(self._widget, repr(self), static_html=self._html())


def choice(prompt: str, options: Sequence[str], answer: int, explanation: str,
           why_wrong: dict[int, str] | None = None) -> Question:
    """Return a question: `options` shown as A, B, C…, `answer` the right index, `why_wrong` {index: reason}."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("prompt phải là str khác rỗng (nội dung câu hỏi)")
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise TypeError(f"options phải là list các str, không phải {type(options).__name__}")
    if len(options) < 2 or not all(isinstance(o, str) and o.strip() for o in options):
        raise ValueError("options phải có ít nhất hai str khác rỗng")
    if not isinstance(answer, int) or isinstance(answer, bool):
        raise TypeError(f"answer phải là chỉ số int của đáp án đúng, không phải {type(answer).__name__}")
    if not 0 <= answer < len(options):
        raise ValueError(f"answer phải từ 0 đến {len(options) - 1}, nhận được {answer}")
    if not isinstance(explanation, str):
        raise TypeError(f"explanation phải là str, không phải {type(explanation).__name__}")
    if why_wrong is not None and not isinstance(why_wrong, dict):
        raise TypeError(f"why_wrong phải là dict {{chỉ số: lý do}} hoặc None, không phải {type(why_wrong).__name__}")
    return Question(prompt, list(options), answer, explanation, dict(why_wrong or {}))


def yes_no(prompt: str, answer: bool, explanation: str, why_wrong: str | None = None) -> Question:
    """Return a yes/no ("Có"/"Không") question; `answer` is True for "Có", `why_wrong` the reason the other is wrong."""
    if not isinstance(answer, bool):
        raise TypeError(f"answer phải là True (Có) hoặc False (Không), không phải {type(answer).__name__}")
    correct = 0 if answer else 1
    return choice(prompt, _YES_NO, correct, explanation, {1 - correct: why_wrong} if why_wrong else None)
