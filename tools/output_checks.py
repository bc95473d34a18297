"""Check an executed course notebook against what its lesson promises: expected outputs and no unexplained red lines.

A lesson source states, above a code cell, what the prose depends on (tools/build_course.py stores it in the
cell's ``metadata["course"]``): ``expect`` [[kinds, regex]] must match the cell's text output on those kinds of
machine, ``expect_not`` must not, ``allow_stderr`` [regex] are the stderr lines the prose explains. Every other
line a learner would read as a warning or an error fails: each stderr line, and a ``…Warning:`` or glog-style
``W1201 12:00:00.1 …]`` / ``ERROR`` line printed anywhere. An indented line under another (a warning's source
line) goes with that line. Both passes of a notebook run twice count for stderr (a warning often shows on
the first pass only; tools/run.py keeps it in the cell's ``metadata["first_pass_streams"]``); the
expectations are checked on the last pass, the one that is kept and published. Every cell's text output also fails
when it shows a default object repr (``<… object at 0x…>``) or a comma-grouped number (``2,185``).

Usage: ``python -m tools.output_checks`` prints this interpreter's machine kind.
"""

from __future__ import annotations

import re

KINDS = ("cpu-build", "cuda-no-gpu", "cuda", "mps")
META_KEY = "course"
FIRST_PASS_KEY = "first_pass_streams"
# Read as a warning or an error by a learner even on stdout: a Python warning, a glog/c10 or torch logging line.
_PREFIX = re.compile(r"/\S*/(?:site|dist)-packages/")  # the environment's folder: noise in a report
# What a learner cannot read: a default object repr (a class without a printable form) and a number written the
# English way ("2,185×" reads as 2.185 in Vietnamese; the course groups thousands with a space: bench.format_count).
_UNREADABLE = {
    "default object repr": re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>"),
    "comma-grouped number": re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d+)?"),
}
_ALARM = re.compile(r"\b[A-Z]\w*Warning: |^[IWEF]\d{4} \d\d:\d\d:\d\d[.\d]* +\d+ \S+:\d+\]|^\[?(?:ERROR|WARNING)\b")


def kind_of(cuda_build: bool, cuda_available: bool, mps_available: bool = False) -> str:
    """Return the machine kind for a torch build (CUDA/ROCm or not) and what it can use now."""
    if cuda_available:
        return "cuda"
    if mps_available:
        return "mps"
    return "cuda-no-gpu" if cuda_build else "cpu-build"


def machine_kind(torch=None) -> str:
    """Return the kind of machine the running torch (or the given module) sees: one of KINDS."""
    if torch is None:
        import torch
    mps = getattr(torch.backends, "mps", None)
    return kind_of(bool(torch.version.cuda or getattr(torch.version, "hip", None)), bool(torch.cuda.is_available()),
                   bool(mps is not None and mps.is_available()))


def _text(value) -> str:
    return value if isinstance(value, str) else "".join(value)  # a notebook file may store text as a list of lines


def _streams(outputs: list, name: str) -> str:
    return "".join(_text(o.get("text", "")) for o in outputs
                   if o.get("output_type") == "stream" and o.get("name") == name)


def cell_text(outputs: list) -> str:
    """Return what a cell shows as text: its stdout, then the text/plain of its results and displays."""
    plain = [o.get("data", {}).get("text/plain", "") for o in outputs
             if o.get("output_type") in ("execute_result", "display_data")]
    return _streams(outputs, "stdout") + "".join(_text(p) for p in plain)


def _alarms(text: str, allowed: list[re.Pattern], every_line: bool) -> list[str]:
    found, has_parent = [], False
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0].isspace() and has_parent:
            continue  # a warning's source line: allowed or reported with the line above it
        has_parent = True
        if not any(pattern.search(line) for pattern in allowed) and (every_line or _ALARM.search(line)):
            found.append(line.rstrip())
    return found


def _applies(kinds: list[str], kind: str) -> bool:
    return kind in kinds or "any" in kinds


def check_outputs(nb, kind: str) -> list[str]:
    """Return the problems of an executed notebook on a machine of `kind` (empty when its outputs keep the promises).

    Args:
        nb: The executed notebook (nbformat node or its JSON dict).
        kind: The machine it ran on, one of KINDS (see machine_kind).

    Returns:
        One line per problem: an expectation that did not hold, a learner-visible warning/error line not explained.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    problems = []
    for index, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        source = _text(cell.get("source", ""))
        where = f"cell {index} `{(source.strip().splitlines() or [''])[0][:60]}`"
        meta = cell.get("metadata", {}).get(META_KEY) or {}
        outputs = cell.get("outputs", [])
        text = cell_text(outputs)
        shown = text.strip()[-300:] or "(nothing)"
        for kinds, pattern in meta.get("expect", []):
            if _applies(kinds, kind) and not re.search(pattern, text, re.M):
                problems.append(f"{where}: on {kind} its output must match /{pattern}/, it shows: {shown!r}")
        for kinds, pattern in meta.get("expect_not", []):
            found = re.search(pattern, text, re.M) if _applies(kinds, kind) else None
            if found:
                problems.append(f"{where}: on {kind} its output must not match /{pattern}/, it shows {found.group(0)!r}"
                                f" in: {shown!r}")
        for what, pattern in _UNREADABLE.items():
            if found := pattern.search(text):
                problems.append(f"{where}: a learner sees a {what} {found.group(0)!r} (give it a printable form, or "
                                "format numbers with lessons_lib.bench.format_count)")
        allowed = [re.compile(pattern) for pattern in meta.get("allow_stderr", [])]
        lines = []
        for streams in (cell.get("metadata", {}).get(FIRST_PASS_KEY) or [], outputs):
            lines += _alarms(_streams(streams, "stderr"), allowed, every_line=True)
            lines += _alarms(cell_text(streams), allowed, every_line=False)
        problems += [f"{where}: a learner sees a line the lesson does not explain (explain it in the prose and add "
                     f"<!-- allow-stderr: REGEX -->, or keep it off the screen): {_PREFIX.sub('…/', line)[:300]}"
                     for line in dict.fromkeys(lines)]
    return problems
