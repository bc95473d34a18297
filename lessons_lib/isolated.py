"""Run a code snippet in a fresh Python process with a time limit, and return what it printed."""
# Some errors (a CUDA device-side assert) leave the process's CUDA context unusable for every later cell.

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass

from .display import Printable

_SNIPPET = "snippet.py"
_TIMEOUT_S = 120.0  # a snippet still running after this is stopped
_FRAME = re.compile(r'^\s*File "snippet\.py", line (\d+)', re.M)


@dataclass(frozen=True, repr=False)
class SnippetResult(Printable):
    """One run of a snippet: its code, exit code (None: stopped at the time limit), output and flag."""

    code: str
    returncode: int | None
    output: str
    seconds: float
    launch_blocking: bool = False

    @property
    def error_line(self) -> int | None:
        """The line of ``snippet.py`` where the (last) traceback ends, or None without a traceback."""
        found = _FRAME.findall(self.output)
        return int(found[-1]) if found else None

    def line(self, number: int) -> str:
        """Return line `number` (counting from 1) of the snippet, stripped."""
        return self.code.splitlines()[number - 1].strip()

    def __str__(self) -> str:
        flags = "CUDA_LAUNCH_BLOCKING=1 " if self.launch_blocking else ""
        if self.returncode is None:
            tail = f"⏱️ dừng sau {self.seconds:.0f} s (quá giới hạn thời gian)"
        else:
            tail = f"(mã thoát {self.returncode}, {self.seconds:.1f} s)"
        return "\n".join([f"$ {flags}python {_SNIPPET}", self.output.rstrip("\n"), tail])


def run_snippet(code: str, *, launch_blocking: bool = False) -> SnippetResult:
    """Run `code` (dedented; line 1 = its first non-empty line) as ``snippet.py`` in a fresh Python process."""
    if not isinstance(code, str):
        raise TypeError(f"code phải là mã Python dạng str, không phải {type(code).__name__}")
    if not code.strip():
        raise ValueError("code không được rỗng")
    if not isinstance(launch_blocking, bool):
        raise TypeError(f"launch_blocking phải là True hoặc False, không phải {type(launch_blocking).__name__}")

    source = textwrap.dedent(code).strip("\n") + "\n"
    run_env = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"} | {"PYTHONIOENCODING": "utf-8"}
    if launch_blocking:
        run_env["CUDA_LAUNCH_BLOCKING"] = "1"
    with tempfile.TemporaryDirectory(prefix="lessons-snippet-") as folder:
        path = os.path.join(folder, _SNIPPET)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-u", path], cwd=folder, env=run_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=_TIMEOUT_S, check=False)
            returncode, raw = done.returncode, done.stdout
        except subprocess.TimeoutExpired as stopped:
            returncode, raw = None, stopped.stdout or b""
        seconds = time.perf_counter() - start
    output = raw.decode("utf-8", errors="replace").replace(path, _SNIPPET).replace(folder + os.sep, "")
    return SnippetResult(code=source, returncode=returncode, output=output, seconds=seconds,
                         launch_blocking=launch_blocking)
