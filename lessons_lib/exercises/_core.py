"""What every exercise shares: `Exercise`, `Report`, `Feedback`, `progress()`; a checker never raises.

A checker is best declared as tables, as Kaggle learntools' ``_test_cases``: `Case` rows (a call and its right
answer) run by the one loop `run_cases`, and `Wrong` rows (a misconception: its name, how an answer shows it, its
message) that `Report.diagnose` reads. The tests find a wrong answer for each row of ``Exercise.wrongs``.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import linecache
import operator
import os
import re
import textwrap
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from importlib import resources

import torch

from ..errors import explain, short_message

PASS, FAIL, MISSING = "pass", "fail", "missing"
_HEADS = {PASS: "✅ đạt", FAIL: "❌ chưa đúng", MISSING: "⏳ chưa làm"}

#: Every exercise by group (its lesson module's name, "lesson01"…), then by key.
GROUPS: dict[str, dict[str, Exercise]] = {}
#: A file named here gets every ``check()`` result as one JSON line (read by ``tools/grade.py``).
GRADE_LOG_ENV = "LESSONS_GRADE_LOG"


def first_true(rules: Iterable[tuple[object, str]]) -> str | None:
    """Return the text of the first ``(holds, text)`` rule that holds, or None."""
    return next((text for holds, text in rules if holds), None)


def is_blank(value: object) -> bool:
    """Return True for an unanswered blank: ``None`` or ``...`` (Ellipsis)."""
    return value is None or value is Ellipsis


class Stop(Exception):
    """Raised inside an evaluation to end it early (the report already says why)."""


@dataclass(frozen=True)
class Case:
    """A row of a checker's table: the call (`label`), its arguments, the right answer, and where it runs."""

    label: str
    args: tuple = ()
    want: object = None
    setup: Callable[[], AbstractContextManager] = nullcontext  # e.g. a simulated machine; what it yields is `seen`


@dataclass(frozen=True)
class Attempt:
    """What the learner's function `fn` returned (`got`) on `case`, and what the case's setup yielded (`seen`)."""

    case: Case
    got: object
    fn: Callable
    seen: object


@dataclass(frozen=True)
class Wrong:
    """A misconception: its `name`, the test an answer `shows` it by, and its message (text, or text of the answer)."""

    name: str
    shows: Callable[[object], bool]
    message: str | Callable[[object], str]

    def text(self, answer: object) -> str:
        """Return the message for `answer`."""
        return self.message(answer) if callable(self.message) else self.message


def raised(kind: type, pattern: str = "") -> Callable[[object], bool]:
    """Return the test "an exception of type `kind` whose text matches `pattern`" (for `Wrong` rows of `call`)."""
    return lambda exc: isinstance(exc, kind) and re.search(pattern, str(exc)) is not None


@dataclass
class Report:
    """What an evaluation found: problems (wrong), missing parts (not done yet), and notes."""

    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)  # the names of the `Wrong` rows found
    passed_msg: str = ""

    def _add(self, into: list[str], message: str, stop: bool) -> None:
        into.append(message)
        if stop:
            raise Stop from None

    def problem(self, message: str, stop: bool = False) -> None:
        """Record something wrong; with `stop`, end the evaluation here."""
        self._add(self.problems, message, stop)

    def missing_part(self, message: str, stop: bool = False) -> None:
        """Record a part the learner has not filled in yet; with `stop`, end the evaluation here."""
        self._add(self.missing, message, stop)

    def note(self, message: str) -> None:
        """Record a remark shown with any result (e.g. what would differ on a GPU)."""
        self.notes.append(message)

    def success(self, message: str) -> None:
        """Set the sentence shown when everything passed."""
        self.passed_msg = message

    def require_function(self, value, signature: str) -> None:
        """Stop as "not done yet" when `value` is blank, or as a problem when it is not a function."""
        name = signature.split("(")[0]
        if is_blank(value):
            self.missing_part(f"chưa viết hàm {name}.", stop=True)
        if not callable(value):
            self.problem(f"{name} phải là một hàm {signature}, không phải {type(value).__name__}.", stop=True)

    def require_return(self, value, name: str, returns: str = "") -> None:
        """Stop as "not done yet" when the learner's function `name` returned None (`returns`: what it should)."""
        if value is None:
            wanted = f"return {returns}" if returns else "return"
            self.missing_part(f"{name} chưa trả về gì (thiếu {wanted}).", stop=True)

    def call(self, what: str, fn: Callable, *args, mistakes: Iterable[Wrong] = (), **kwargs):
        """Call the learner's `fn`; if it raises, record the first of `mistakes` it shows (else the error) and stop."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
            self.diagnose(mistakes, exc)
            self.error(what, exc)

    def diagnose(self, wrongs: Iterable[Wrong], answer: object, stop: bool = True) -> bool:
        """Record the message of the first `Wrong` row that `answer` shows; return True when one did."""
        row = next((row for row in wrongs if row.shows(answer)), None)
        if row is not None:
            self.causes.append(row.name)
            self.problem(row.text(answer), stop=stop)
        return row is not None

    def error(self, what: str, exc: BaseException, stop: bool = True) -> None:
        """Record that the learner's code (`what`) raised `exc`, with an explanation; with `stop`, end here."""
        hint = explain(exc)
        text = f"{what} báo lỗi: " + short_message(exc, max_lines=3)
        self._add(self.problems, text + ("\n    " + hint.replace("\n", "\n    ") if hint else ""), stop)


@dataclass(frozen=True)
class Feedback:
    """The result of one check: status "pass", "fail" or "missing", and the lines to show."""

    key: str
    title: str
    status: str
    lines: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()  # the names of the misconceptions found (what the tests look for)

    @property
    def passed(self) -> bool:
        """Return True when the answer is accepted."""
        return self.status == PASS

    def __str__(self) -> str:
        icon, head = _HEADS[self.status].split(" ", 1)
        out = [f"{icon} {self.title} — {head}" + (":" if self.lines else ".")]
        out += [f"  • {line}" for line in self.lines]
        out += [f"  ℹ️ {note}" for note in self.notes]
        if self.status != PASS:
            out.append(f"  → Gợi ý: {self.key}.hint() · Lời giải: {self.key}.solution()")
        return "\n".join(out)


def run_cases(report: Report, fn, signature: str, cases: Iterable[Case], wrongs: Iterable[Wrong] = (), *,
              returns: tuple[type, ...] = (), read: Callable | None = None,
              same: Callable[[object, object], bool] = operator.eq, mistakes: Iterable[Wrong] = ()) -> None:
    """Run `fn` on every case; stop at the first answer not `same` as the case's, with the first row it shows.

    The loop writes the generic messages: blank `fn` ("chưa làm"), None or another type than `returns`, an error
    (after `mistakes`), an answer no row explains. `read(report, got)` may first turn the answer into a value.
    """
    report.require_function(fn, signature)
    name = signature.split("(")[0]
    for case in cases:
        with case.setup() as seen:
            got = report.call(case.label, fn, *case.args, mistakes=mistakes)
        if returns:
            report.require_return(got, name)
            if not isinstance(got, returns):
                kinds = " hoặc ".join(t.__name__ for t in returns)
                report.problem(f"{name} phải trả về {kinds}, không phải {type(got).__name__}.", stop=True)
        got = read(report, got) if read else got
        if not same(got, case.want):
            report.diagnose([*wrongs, Wrong("", bool, lambda a: f"{a.case.label}: cần {a.case.want!r}, nhận được "
                                                             f"{a.got!r}.")], Attempt(case, got, fn, seen))


class Exercise:
    """One checked exercise: ``check(...)`` prints feedback, ``hint()`` the next hint, ``solution()`` the code.

    ``evaluate(report, *answer)`` fills the `Report`, running its tables (`wrongs`: every row); the group is the
    module's name unless given. The solution is the task's SOLUTION region of the lesson source; a debugging task's
    (`starter`) buggy code is its LEARNER region, "chưa làm" if handed in unchanged (both from ``solutions.json``).
    """

    def __init__(self, key: str, title: str, evaluate: Callable, hints: list[str], *, starter: bool = False,
                 group: str | None = None, wrongs: Iterable[Wrong] = ()):
        group = group or evaluate.__module__.rsplit(".", 1)[-1]
        self.key, self.group, self.title = key, group, title
        self.wrongs = tuple(wrongs)
        self._evaluate, self._hints, self._starter = evaluate, list(hints), starter
        self._hints_shown, self.last_status = 0, None
        GROUPS.setdefault(group, {})[key] = self

    def _region(self, variant: str) -> str:
        code = _solutions()[variant].get(self.group, {}).get(self.key)
        if code is None:
            raise LookupError(f"solutions.json chưa có vùng {variant.upper()} của {self.group}.{self.key}: "
                              "chạy python -m tools.build_course")
        return textwrap.dedent(code).strip("\n")

    @property
    def solution_code(self) -> str:
        """Return the solution's code: the SOLUTION region of the lesson source."""
        return self._region("solution")

    @property
    def starter_code(self) -> str | None:
        """Return a debugging task's buggy starter (the LEARNER region of the lesson source), else None."""
        return self._region("learner") if self._starter else None

    def solution_function(self, name: str) -> Callable:
        """Return function `name` of the solution (run with ``torch`` and ``F``), its source findable by inspect."""
        filename = f"<lessons_lib.exercises.{self.group}:{name}>"
        source = self.solution_code + "\n"
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        scope = {"torch": torch, "F": torch.nn.functional}
        exec(compile(source, filename, "exec"), scope)  # noqa: S102 - the lesson's own solution
        return scope[name]

    def _unchanged(self, answers: tuple) -> bool:
        """Return True when the answers (functions) are the starter's functions, up to comments and formatting."""
        parts = self.starter_code.split("\ndef ")
        starters = [parts[0], *("def " + part for part in parts[1:])]
        return len(answers) == len(starters) and all(map(same_code, answers, starters))

    def evaluate(self, *args, **kwargs) -> Feedback:
        """Return the feedback for an answer without printing it; never raises because of the answer."""
        report, signature = Report(), inspect.signature(self._evaluate)
        try:
            answers = signature.bind(report, *args, **kwargs).args[1:]
        except TypeError:
            params = list(signature.parameters)[1:]
            report.problem(f"check() cần đúng các đối số: {self.key}.check({', '.join(params)}).")
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # tiny models: one thread is fastest and not slowed by a busy machine
            try:
                if self._starter and self._unchanged(answers):
                    report.missing_part("code vẫn y như bản có sẵn trong bài: sửa nó rồi chạy lại ô này.", stop=True)
                self._evaluate(report, *args, **kwargs)
            except Stop:
                pass
            except Exception as exc:  # noqa: BLE001 - never let a traceback out of a checker
                report.error("Khi chấm, code của bạn", exc, stop=False)
            finally:
                torch.set_num_threads(threads)
        if report.problems:
            status, lines = FAIL, report.problems + report.missing
        elif report.missing:
            status, lines = MISSING, report.missing
        else:
            status, lines = PASS, [report.passed_msg] if report.passed_msg else []
        self.last_status = status
        return Feedback(self.key, self.title, status, tuple(lines), tuple(report.notes), tuple(report.causes))

    def check(self, *args, **kwargs) -> None:
        """Check an answer and print the feedback (✅ đạt / ❌ chưa đúng / ⏳ chưa làm)."""
        feedback = self.evaluate(*args, **kwargs)
        print(feedback)
        record_check(self.group, feedback)

    def hint(self) -> None:
        """Print the next hint (the last one again once all were shown)."""
        count = len(self._hints)
        number = self._hints_shown = min(self._hints_shown + 1, count)
        more = (f" (gọi lại {self.key}.hint() để xem gợi ý tiếp)" if number < count
                else f" (hết gợi ý; xem {self.key}.solution())")
        print(f"💡 {self.title} — gợi ý {number}/{count}{more}:")
        print(textwrap.indent(self._hints[number - 1], "   "))

    def solution(self) -> None:
        """Print the reference solution (try the hints first!)."""
        print(f"📖 {self.title} — lời giải:\n")
        print(self.solution_code)

    def __repr__(self) -> str:
        return f"<{self.key}: {self.title} — check(...), hint(), solution()>"


@functools.cache
def _solutions() -> dict[str, dict[str, str]]:
    """Return solutions.json (generated from the lesson sources' SOLUTION and LEARNER regions)."""
    return json.loads(resources.files(__package__).joinpath("solutions.json").read_text(encoding="utf-8"))


def record_check(group: str, feedback: Feedback, environ=os.environ) -> bool:
    """Append `feedback` as one JSON line to the file $LESSONS_GRADE_LOG names; return True when written."""
    if not isinstance(group, str):
        raise TypeError(f"group phải là tên bài dạng chuỗi, vd 'lesson02'; nhận {type(group).__name__}")
    if not isinstance(feedback, Feedback):
        raise TypeError(f"feedback phải là Feedback mà evaluate() trả về; nhận {type(feedback).__name__}")
    path = environ.get(GRADE_LOG_ENV)
    if not path:
        return False
    line = json.dumps({"group": group, "key": feedback.key, "title": feedback.title, "status": feedback.status,
                       "lines": list(feedback.lines), "notes": list(feedback.notes)}, ensure_ascii=False)
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
    except OSError:
        return False
    return True


def progress(group: str) -> None:
    """Print the status of every task of lesson `group` ("lesson04"): passed, not right yet, or not done."""
    if not isinstance(group, str):
        raise TypeError(f"group phải là tên bài dạng chuỗi, vd 'lesson04'; nhận {type(group).__name__}")
    if re.fullmatch(r"lesson\d\d", group) and group not in GROUPS:
        try:  # a lesson's tasks register when its module loads, even if the learner skipped them all
            importlib.import_module(f"{__package__}.{group}")
        except ModuleNotFoundError:
            pass
    if group not in GROUPS:
        raise ValueError(f"group phải là một trong {sorted(GROUPS)}; nhận {group!r}")
    exercises = list(GROUPS[group].values())  # in the order the lesson module defines them
    core = set(_solutions().get("core", {}).get(group, []))
    width = max((len(ex.title) for ex in exercises), default=0)
    done = sum(ex.last_status == PASS for ex in exercises)
    core_done = sum(ex.last_status == PASS for ex in exercises if ex.key in core)
    print(f"Tiến độ: {done}/{len(exercises)} nhiệm vụ đạt"
          + (f" (⭐ cốt lõi: {core_done}/{len(core)})" if core else ""))
    for ex in exercises:
        label = _HEADS.get(ex.last_status, "· chưa chấm")
        print(f"  {'⭐' if ex.key in core else '  '} {ex.title:<{width}}  {label}")


def same_code(fn: object, code: str) -> bool:
    """Return True when `fn` is the function in `code`, up to comments and formatting."""
    try:
        return ast.dump(ast.parse(textwrap.dedent(inspect.getsource(fn)))) == ast.dump(ast.parse(code))
    except (OSError, TypeError, SyntaxError):
        return False


def source_has(fn: object, pattern: str) -> bool:
    """Return True when the source of `fn` matches the regex `pattern` (False when it has no source)."""
    try:
        return re.search(pattern, inspect.getsource(fn)) is not None
    except (OSError, TypeError):
        return False


def on_gpu_note(report: Report, device: torch.device, message: str) -> None:
    """Add a note on what would differ on a GPU, when the check ran on a CPU."""
    if device.type == "cpu":
        report.note("Trên GPU: " + message)


def same_weights(a: Iterable[torch.Tensor], b: Iterable[torch.Tensor]) -> bool:
    """Return True when two models' weights (equally many tensors, in order) match up to float rounding."""
    return all(torch.allclose(p, q, rtol=1e-4, atol=1e-6) for p, q in zip(a, b, strict=True))


def number(value: object) -> float | None:
    """Return `value` as a float when it is a real number or a 1-element tensor, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        try:
            return float(value.detach().cpu())
        except (RuntimeError, NotImplementedError):  # a meta tensor has no value
            return None
    return None
