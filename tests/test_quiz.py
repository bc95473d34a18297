from html.parser import HTMLParser

import pytest

from lessons_lib import quiz


def make_choice():
    return quiz.choice("Q?", ["red", "green", "blue"], answer=1, explanation="because",
                       why_wrong={0: "red is wrong"})


def shown_forms(monkeypatch, question) -> tuple[str, str]:
    """Return the (plain text, static HTML) a notebook gets when it displays `question` in a kernel."""
    shown = []
    monkeypatch.setattr(quiz, "show_widget", lambda make_box, text, static_html=None: shown.append((text, static_html)))
    question._ipython_display_()
    ((text, page),) = shown
    return text, page


def test_choice_feedback_right_and_wrong(capsys):
    q = make_choice()
    assert q.answer("B") is True
    assert capsys.readouterr().out.strip() == "✅ Đúng! because"
    assert q.answer("a") is False
    assert capsys.readouterr().out.strip() == "❌ Chưa đúng. red is wrong"
    assert q.answer(" c ") is False
    assert "Thử lại" in capsys.readouterr().out


def test_yes_no_is_answered_by_letter(capsys):
    q = quiz.yes_no("Cần GPU?", answer=False, explanation="không", why_wrong="sai")
    assert q.options == ["Có", "Không"]
    assert q.answer("B") and not q.answer("A")
    assert capsys.readouterr().out.splitlines()[-1] == "❌ Chưa đúng. sai"


def test_plain_text_lists_lettered_options_and_how_to_answer(monkeypatch):
    text, _ = shown_forms(monkeypatch, make_choice())
    assert "A. red" in text and "C. blue" in text and "q1.answer('A')" in text
    assert repr(make_choice()) == text


def test_widget_click_updates_feedback():
    box = make_choice()._widget()
    assert "lessons-quiz" in box._dom_classes
    title, row, feedback = box.children
    assert "lessons-quiz-feedback" in feedback._dom_classes
    buttons = row.children
    buttons[0].click()
    assert "red is wrong" in feedback.value and buttons[0].button_style == "danger"
    buttons[1].click()
    assert "✅" in feedback.value and buttons[1].button_style == "success" and buttons[0].button_style == ""


def test_static_html_hides_the_answer_behind_a_click(monkeypatch):
    q = quiz.choice("Which <tag> & why?", ["red", "green <b>", "blue"], answer=1, explanation="because <i>",
                    why_wrong={0: "red is wrong", 2: ""})
    _, page = shown_forms(monkeypatch, q)
    before, _, hidden = page.partition("<details")
    assert "lessons-quiz-static" in before and "Which &lt;tag&gt; &amp; why?" in before
    assert "<b>A.</b> red" in before and "<b>B.</b> green &lt;b&gt;" in before and "<b>C.</b> blue" in before
    assert "because" not in before and "red is wrong" not in before  # nothing of the answer shows before the click
    summary, _, answer = hidden.partition("</summary>")
    assert summary.endswith("<summary>Xem đáp án")
    assert "✅ <b>B. green &lt;b&gt;</b> — because &lt;i&gt;" in answer and "<b>A</b>: red is wrong" in answer
    assert "<b>C</b>" not in answer  # an empty reason is left out

    class Balance(HTMLParser):
        def __init__(self):
            super().__init__()
            self.open = []

        def handle_starttag(self, tag, attrs):
            self.open.append(tag)

        def handle_endtag(self, tag):
            assert self.open.pop() == tag

    checker = Balance()
    checker.feed(page)
    assert checker.open == []
    _, plain = shown_forms(monkeypatch, quiz.yes_no("GPU?", answer=True, explanation="yes"))
    assert "Vì sao không phải" not in plain and "✅ <b>A. Có</b> — yes" in plain


def _choice(**changes):
    kwargs = {"prompt": "q", "options": ["a", "b"], "answer": 0, "explanation": "e", **changes}
    return lambda: quiz.choice(**kwargs)


@pytest.mark.parametrize("call, error, named", [
    (_choice(prompt=""), ValueError, "prompt"),
    (_choice(options="ab"), TypeError, "options"),
    (_choice(options=["a"]), ValueError, "options"),
    (_choice(answer=2), ValueError, "answer"),
    (_choice(answer="A"), TypeError, "answer"),
    (_choice(options=["a", ""]), ValueError, "options"),
    (_choice(why_wrong=["x"]), TypeError, "why_wrong"),
    (lambda: quiz.yes_no("q", answer="Có", explanation="e"), TypeError, "True"),
    *[(lambda bad=bad: make_choice().answer(bad), error, "choice")
      for bad, error in [("Z", ValueError), ("", ValueError), (1, TypeError), (True, TypeError), ("purple", ValueError)]],
])
def test_argument_checks_name_what_to_pass(call, error, named):
    with pytest.raises(error) as raised:
        call()
    assert named in str(raised.value)
