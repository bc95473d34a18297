"""The machinery every exercise shares: `Exercise` (check / hint / solution), `Feedback`, and `progress()`.

A checker never raises because of the learner's answer: a missing answer (``None`` or ``...``) gives
"chưa làm", a wrong one a specific message, and an error inside the learner's code is caught, shown
briefly and explained. Only misuse of the API itself (``hint(0)``, building an Exercise wrongly) raises.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import torch

from ..errors import explain, short_message
from ..i18n import tr

PASS, FAIL, MISSING = "pass", "fail", "missing"
_ICONS = {PASS: "✅", FAIL: "❌", MISSING: "⏳"}

#: Every exercise by group ("exercises" for notebook 10, "lesson01"… for a lesson's own tasks), then by key.
GROUPS: dict[str, dict[str, Exercise]] = {}
#: The exercises of notebook 10 by key (``progress()`` lists them in the notebook's order).
REGISTRY: dict[str, Exercise] = GROUPS.setdefault("exercises", {})
#: When this environment variable names a file, every ``check()`` appends its result there as one JSON line
#: (``tools/grade.py`` reads it to grade a class's notebooks); unset, nothing is written.
GRADE_LOG_ENV = "LESSONS_GRADE_LOG"


def is_blank(value: object) -> bool:
    """Return True for an unanswered blank: ``None`` or ``...`` (Ellipsis)."""
    return value is None or value is Ellipsis


class Stop(Exception):
    """Raised inside an evaluation to end it early (the report already says why)."""


@dataclass
class Report:
    """What an evaluation found: problems (wrong), missing parts (not done yet), and notes."""

    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    passed_msg: str = ""

    def problem(self, message: str, _legacy_en: str | None = None, stop: bool = False) -> None:
        """Record something wrong; with `stop`, end the evaluation here."""
        self.problems.append(message)
        if stop:
            raise Stop

    def missing_part(self, message: str, _legacy_en: str | None = None, stop: bool = False) -> None:
        """Record a part the learner has not filled in yet."""
        self.missing.append(message)
        if stop:
            raise Stop

    def require_function(self, value, signature: str) -> None:
        """Stop as "not done yet" when `value` is blank, or as a problem when it is not a function."""
        name = signature.split("(")[0]
        if is_blank(value):
            self.missing_part(f"chưa viết hàm {name}.", f"{name} is not written yet.", stop=True)
        if not callable(value):
            self.problem(f"{name} phải là một hàm {signature}, không phải {type(value).__name__}.",
                         f"{name} must be a function {signature}, not {type(value).__name__}.", stop=True)

    def note(self, message: str, _legacy_en: str | None = None) -> None:
        """Record a remark shown with any result (e.g. what would differ on a GPU)."""
        self.notes.append(message)

    def success(self, message: str, _legacy_en: str | None = None) -> None:
        """Set the sentence shown when everything passed."""
        self.passed_msg = message

    def call(self, what: str, fn: Callable, *args, **kwargs):
        """Call the learner's `fn`; if it raises, record the error (with an explanation) and stop."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
            self.error(what, exc)

    def error(self, what: str, exc: BaseException) -> None:
        """Record that the learner's code (`what`) raised `exc`, with an explanation, and stop."""
        self.problems.append(error_text(what, exc))
        raise Stop from None


def error_text(what: str, exc: BaseException) -> str:
    """Return "<what> raised <error>" with the friendly explanation when one is known."""
    text = tr(f"{what} báo lỗi: ", f"{what} raised: ") + short_message(exc, max_lines=3)
    hint = explain(exc)
    return text + ("\n    " + hint.replace("\n", "\n    ") if hint else "")


@dataclass(frozen=True)
class Feedback:
    """The result of one check: status "pass", "fail" or "missing", and the lines to show."""

    key: str
    title: str
    status: str
    lines: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Return True when the answer is accepted."""
        return self.status == PASS

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = {
            PASS: tr("đạt", "passed"),
            FAIL: tr("chưa đúng", "not yet right"),
            MISSING: tr("chưa làm", "not done yet"),
        }[self.status]
        out = [f"{_ICONS[self.status]} {self.title} — {head}" + (":" if self.lines else ".")]
        out += [f"  • {line}" for line in self.lines]
        out += [f"  ℹ️ {note}" for note in self.notes]
        if self.status != PASS:
            out.append(tr(f"  → Gợi ý: {self.key}.hint() · Lời giải: {self.key}.solution()",
                          f"  → Hint: {self.key}.hint() · Solution: {self.key}.solution()"))
        return "\n".join(out)


class Exercise:
    """One checked exercise: ``check(...)`` prints feedback, ``hint()`` the next hint, ``solution()`` the code.

    Args:
        key: The name the notebook uses for it, e.g. "ex3".
        title: The title, e.g. "Bài 3 · Đưa tensor đi và về".
        evaluate: ``evaluate(report, *answer)``: fills the `Report`; may raise `Stop`.
        hints: The hints, from gentle to explicit.
        gpu: True when the exercise needs a CUDA GPU (it lives in a ``%%gpu`` cell).
        starter: The starting code of a debugging exercise; handing it in unchanged counts as "chưa làm".
        group: Which set it belongs to: "exercises" (notebook 10) or a lesson's own, e.g. "lesson04".

    The solution is the SOLUTION region of the lesson source (``solutions.json``, generated from it by
    ``tools/build_course.py``), so it is written once. While checking, PyTorch runs on one CPU thread (restored
    afterwards): the checks use tiny models, for which one thread is fastest and not slowed down by a busy machine.
    """

    def __init__(self, key: str, title, evaluate: Callable, hints: list, solution: str | None = None, *,
                 gpu: bool = False, starter: str | None = None, group: str = "exercises"):
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"key must be a Python name such as 'ex3', got {key!r}")
        title = title[0] if isinstance(title, tuple) else title  # transitional: (vi, en) pairs keep working
        if not isinstance(title, str) or not title.strip():
            raise TypeError("title must be a non-empty str")
        if not callable(evaluate):
            raise TypeError(f"evaluate must be callable, got {type(evaluate).__name__}")
        hints = [h[0] if isinstance(h, tuple) else h for h in hints or []]
        if not hints or not all(isinstance(h, str) and h.strip() for h in hints):
            raise ValueError("hints must be a non-empty list of str")
        if not isinstance(group, str) or not group.isidentifier():
            raise ValueError(f"group must be a Python name such as 'exercises' or 'lesson04', got {group!r}")
        self.key = key
        self.group = group
        self._title = title
        self._evaluate = evaluate
        self._hints = hints
        self._solution = solution
        self.gpu = gpu
        self.starter_code = textwrap.dedent(starter).strip("\n") if starter else None
        self._hints_shown = 0
        self.last_status: str | None = None
        GROUPS.setdefault(group, {})[key] = self

    @property
    def solution_code(self) -> str:
        """Return the solution's code: the SOLUTION region of the lesson source."""
        code = self._solution or _solutions().get(self.group, {}).get(self.key)  # transitional: solution= first
        if code is None:
            raise LookupError(f"no SOLUTION region for {self.group}.{self.key} in solutions.json: "
                              "run python tools/build_course.py")
        return textwrap.dedent(code).strip("\n")

    @property
    def title(self) -> str:
        """Return the title."""
        return self._title

    def evaluate(self, *args, **kwargs) -> Feedback:
        """Return the feedback for an answer without printing it; never raises because of the answer."""
        report = Report()
        try:
            inspect.signature(self._evaluate).bind(report, *args, **kwargs)
        except TypeError:
            params = list(inspect.signature(self._evaluate).parameters)[1:]
            report.problem(
                f"check() cần đúng các đối số: {self.key}.check({', '.join(params)}).",
                f"check() takes exactly: {self.key}.check({', '.join(params)}).",
            )
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # the checks run tiny models: one thread is fastest and immune to busy CPUs
            try:
                self._evaluate(report, *args, **kwargs)
            except Stop:
                pass
            except Exception as exc:  # noqa: BLE001 - never let a traceback out of a checker
                report.problems.append(error_text(tr("Khi chấm, code của bạn", "While checking, your code"), exc))
            finally:
                torch.set_num_threads(threads)
        if report.problems:
            status, lines = FAIL, report.problems + report.missing
        elif report.missing:
            status, lines = MISSING, report.missing
        else:
            status, lines = PASS, [report.passed_msg] if report.passed_msg else []
        feedback = Feedback(self.key, self.title, status, tuple(lines), tuple(report.notes))
        self.last_status = status
        return feedback

    def check(self, *args, **kwargs) -> None:
        """Check an answer and print the feedback (✅ đạt / ❌ chưa đúng / ⏳ chưa làm)."""
        feedback = self.evaluate(*args, **kwargs)
        print(feedback)
        record_check(self.group, feedback)

    def hint(self, number: int | None = None) -> None:
        """Print the next hint (or hint `number`, counting from 1)."""
        if number is None:
            number = min(self._hints_shown + 1, len(self._hints))
        if isinstance(number, bool) or not isinstance(number, int):
            raise TypeError(f"number must be an int from 1 to {len(self._hints)} or None, got {type(number).__name__}")
        if not 1 <= number <= len(self._hints):
            raise ValueError(f"number must be from 1 to {len(self._hints)}, got {number}")
        self._hints_shown = max(self._hints_shown, number)
        more = (tr(f" (gọi lại {self.key}.hint() để xem gợi ý tiếp)", f" (call {self.key}.hint() again for the next)")
                if number < len(self._hints) else tr(f" (hết gợi ý; xem {self.key}.solution())",
                                                     f" (no more hints; see {self.key}.solution())"))
        print(f"💡 {self.title} — " + tr("gợi ý", "hint") + f" {number}/{len(self._hints)}{more}:")
        print(textwrap.indent(self._hints[number - 1], "   "))

    def solution(self) -> None:
        """Print the reference solution (try the hints first!)."""
        print(f"📖 {self.title} — " + tr("lời giải", "solution") + ":\n")
        print(self.solution_code)

    def __repr__(self) -> str:
        return f"<{self.key}: {self.title} — check(...), hint(), solution()>"


@functools.cache
def _solutions() -> dict[str, dict[str, str]]:
    """Return solutions.json (generated from the lesson sources' SOLUTION regions)."""
    return json.loads(resources.files(__package__).joinpath("solutions.json").read_text(encoding="utf-8"))


def record_check(group: str, feedback: Feedback, environ=os.environ) -> bool:
    """Append `feedback` as one JSON line to the file $LESSONS_GRADE_LOG names; return True when written.

    Without the variable nothing happens. A file that cannot be written never breaks the learner's check.
    """
    if not isinstance(group, str):
        raise TypeError(f"group must be a str such as 'lesson02', got {type(group).__name__}")
    if not isinstance(feedback, Feedback):
        raise TypeError(f"feedback must be the Feedback that evaluate() returns, got {type(feedback).__name__}")
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


# --------------------------------------------------------------------------- progress


def progress(group: str = "exercises") -> None:
    """Print the status of every exercise in `group`: checked and passed, not right yet, not done, or needs a GPU."""
    if not isinstance(group, str):
        raise TypeError(f"group must be a str such as 'exercises' or 'lesson04', got {type(group).__name__}")
    if group not in GROUPS:
        raise ValueError(f"group must be one of {sorted(GROUPS)}, got {group!r}")
    has_cuda = torch.cuda.is_available()
    labels = {
        PASS: "✅ " + tr("đạt", "passed"),
        FAIL: "❌ " + tr("chưa đúng", "not yet right"),
        MISSING: "⏳ " + tr("chưa làm", "not done yet"),
        None: "· " + tr("chưa chấm", "not checked"),
    }
    exercises = sorted(GROUPS[group].values(), key=_order)
    width = max((len(ex.title) for ex in exercises), default=0)
    done = sum(ex.last_status == PASS for ex in exercises)
    print(tr(f"Tiến độ: {done}/{len(exercises)} bài đạt", f"Progress: {done}/{len(exercises)} passed"))
    for ex in exercises:
        label = labels[ex.last_status]
        if ex.gpu and not has_cuda and ex.last_status is None:
            label = "⏭️ " + tr("cần GPU CUDA (máy này không có)", "needs a CUDA GPU (none here)")
        print(f"  {ex.title:<{width}}  {label}")


def _order(exercise: Exercise) -> tuple[int, str]:
    digits = re.search(r"\d+", exercise.key)
    return (int(digits.group()) if digits else 0, exercise.key)


# --------------------------------------------------------------------------- helpers for checkers


def same_code(fn_or_cls: object, code: str | None) -> bool:
    """Return True when `fn_or_cls` is the function or class in `code`, up to comments and formatting.

    A class is compared method by method (``inspect.getsource`` cannot find a class defined in a notebook
    cell, but it finds its functions), so a class with a renamed, added or removed method differs.
    """
    if code is None:
        return False
    try:
        tree = ast.parse(textwrap.dedent(code))
        if isinstance(fn_or_cls, type):
            starter = next(node for node in tree.body if isinstance(node, ast.ClassDef))
            want = {node.name: ast.dump(node) for node in starter.body if isinstance(node, ast.FunctionDef)}
            have = {}
            for name, value in vars(fn_or_cls).items():
                if inspect.isfunction(value):
                    node = ast.parse(textwrap.dedent(inspect.getsource(value))).body[0]
                    have[name] = ast.dump(node)
            return want == have
        source = textwrap.dedent(inspect.getsource(fn_or_cls))
        return ast.dump(ast.parse(source)) == ast.dump(tree)
    except (OSError, TypeError, SyntaxError, StopIteration, IndexError):
        return False


def as_device(value: object) -> torch.device | None:
    """Return `value` as a torch.device, or None when it is not a device or a device name."""
    if isinstance(value, torch.device):
        return value
    if isinstance(value, str):
        try:
            return torch.device(value)
        except (RuntimeError, ValueError):
            return None
    return None


def same_device(a: torch.device, b: torch.device) -> bool:
    """Return True when two devices are the same place ("cuda" and "cuda:0" count as the same here)."""
    if a.type != b.type:
        return False
    if a.type != "cuda" or a.index is None or b.index is None:
        return True
    return a.index == b.index


def on_gpu_note(report: Report, device: torch.device, vi: str, en: str) -> None:
    """Add a note on what would differ on a GPU, when the check ran on a CPU."""
    if device.type == "cpu":
        report.note("Trên GPU: " + vi, "On a GPU: " + en)


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
