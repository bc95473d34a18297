"""Run a code snippet in a fresh Python process with a time limit, and return what it printed.

Some errors cannot be shown in the notebook's own process: a CUDA device-side assert leaves the
process's CUDA context unusable, so every later GPU cell would fail too. ``run_snippet`` writes the
code to a temporary ``snippet.py``, runs it with the notebook's own Python (unbuffered, so prints and
the traceback keep their order), and returns a ``SnippetResult``: exit code, the combined output with
the temporary folder removed from paths, and the line of ``snippet.py`` where the traceback ends.

    result = run_snippet(code, launch_blocking=True)   # with CUDA_LAUNCH_BLOCKING=1
    print(result)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ._validate import check_number
from .i18n import tr

SNIPPET_NAME = "snippet.py"
_FRAME = re.compile(r'^\s*File "snippet\.py", line (\d+)', re.M)


@dataclass(frozen=True)
class SnippetResult:
    """What one run of a snippet did.

    Attributes:
        code: The snippet as it was written to ``snippet.py`` (line 1 is its first line).
        returncode: The process's exit code (0: no error), or None when it was stopped at the time limit.
        output: Everything it printed (stdout and stderr together, in order).
        seconds: Wall time of the run.
        env: The environment variables set for this run on top of the notebook's.
    """

    code: str
    returncode: int | None
    output: str
    seconds: float
    env: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the snippet finished without an error."""
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        """True when the snippet was stopped at the time limit."""
        return self.returncode is None

    @property
    def error_line(self) -> int | None:
        """The line of ``snippet.py`` where the (last) traceback ends, or None without a traceback."""
        found = _FRAME.findall(self.output)
        return int(found[-1]) if found else None

    def line(self, number: int) -> str:
        """Return line `number` (counting from 1) of the snippet, stripped."""
        if isinstance(number, bool) or not isinstance(number, int):
            raise TypeError(f"number must be an int line number, got {type(number).__name__}")
        lines = self.code.splitlines()
        if not 1 <= number <= len(lines):
            raise ValueError(f"number must be from 1 to {len(lines)}, got {number}")
        return lines[number - 1].strip()

    def __str__(self) -> str:
        flags = " ".join(f"{k}={v}" for k, v in self.env.items())
        head = f"$ {flags + ' ' if flags else ''}python {SNIPPET_NAME}"
        if self.timed_out:
            tail = tr(f"⏱️ dừng sau {self.seconds:.0f} s (quá giới hạn thời gian)",
                      f"⏱️ stopped after {self.seconds:.0f} s (time limit)")
        else:
            tail = tr(f"(mã thoát {self.returncode}, {self.seconds:.1f} s)",
                      f"(exit code {self.returncode}, {self.seconds:.1f} s)")
        return "\n".join([head, self.output.rstrip("\n"), tail])

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def run_snippet(code: str, *, launch_blocking: bool = False, env: Mapping[str, str] | None = None,
                timeout_s: float = 120.0) -> SnippetResult:
    """Run `code` as ``snippet.py`` in a fresh Python process (this kernel's interpreter); return its result.

    Args:
        code: Python source; common indentation is removed, and line 1 is the first non-empty line.
        launch_blocking: Set ``CUDA_LAUNCH_BLOCKING=1`` for the run (every CUDA kernel then finishes before
            Python goes on, so an error is reported at the line that caused it). When False the variable is
            removed, even if the notebook's environment has it.
        env: Extra environment variables for the run (names and values are str).
        timeout_s: Stop the process after this many seconds (the result then has ``returncode`` None).

    Returns:
        A ``SnippetResult``; an error in the snippet is part of its output, never raised here.

    Raises:
        TypeError / ValueError: an argument has the wrong type or value (the message says what to pass).
    """
    if not isinstance(code, str):
        raise TypeError(tr(f"code phải là mã Python dạng str, không phải {type(code).__name__}",
                           f"code must be Python source as a str, not {type(code).__name__}"))
    if not code.strip():
        raise ValueError(tr("code không được rỗng", "code must not be empty"))
    if not isinstance(launch_blocking, bool):
        raise TypeError(f"launch_blocking must be True or False, got {type(launch_blocking).__name__}")
    if env is not None and not isinstance(env, Mapping):
        raise TypeError(f"env must be a dict of str to str, got {type(env).__name__}")
    extra = dict(env or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
        raise TypeError("env must map str names to str values, e.g. {'CUDA_VISIBLE_DEVICES': '0'}")
    check_number("timeout_s", timeout_s, positive=True)

    source = textwrap.dedent(code).strip("\n") + "\n"
    run_env = dict(os.environ)
    run_env.pop("CUDA_LAUNCH_BLOCKING", None)
    shown = {}
    if launch_blocking:
        shown["CUDA_LAUNCH_BLOCKING"] = "1"
    shown.update(extra)
    run_env.update(shown)
    run_env["PYTHONIOENCODING"] = "utf-8"
    with tempfile.TemporaryDirectory(prefix="lessons-snippet-") as folder:
        path = os.path.join(folder, SNIPPET_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-u", path], cwd=folder, env=run_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
            returncode, raw = done.returncode, done.stdout
        except subprocess.TimeoutExpired as stopped:
            returncode, raw = None, stopped.stdout or b""
        seconds = time.perf_counter() - start
    output = raw.decode("utf-8", errors="replace")
    output = output.replace(path, SNIPPET_NAME).replace(folder + os.sep, "")
    return SnippetResult(code=source, returncode=returncode, output=output, seconds=seconds, env=shown)
