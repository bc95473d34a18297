"""Run notebooks top to bottom with plain nbclient (as "Run all" does) and report time and memory.

For each notebook it prints the wall time and the kernel's peak resident memory, and exits 1 if any
cell raised. Nothing is written back to the notebooks; ``--save DIR`` writes the executed copies (with their
outputs, last pass) to ``DIR/<notebook path relative to the repository>`` (or ``DIR/<file name>`` for a notebook
outside it), e.g. for an instructor to look at the curves.

Usage:
    python -m tools.run_notebooks                       # every notebook under notebooks/
    python -m tools.run_notebooks notebooks/01_device_basics.ipynb --markdown
    python -m tools.run_notebooks --repeat 2            # run every cell twice in one kernel (re-run safety)
    python -m tools.run_notebooks --save out/executed   # keep the executed notebooks, outputs included
    python -m tools.run_notebooks --readme              # write the measured times into README's notebook table
"""

from __future__ import annotations

import argparse
import copy
import datetime
import os
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbclient
import nbformat

from tools.output_checks import FIRST_PASS_KEY

ROOT = Path(__file__).resolve().parent.parent
_PEAK_CELL = (  # no `resource` module on Windows: the peak is then unknown ("?"), not an error
    "try:\n"
    "    import resource as _r, sys as _s\n"
    "    _k = 1 if _s.platform == 'darwin' else 1024\n"
    "    print('PEAK_RSS_BYTES', max(_r.getrusage(_r.RUSAGE_SELF).ru_maxrss, _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss) * _k)\n"
    "except ImportError:\n"
    "    pass"
)


@dataclass
class Execution:
    """One notebook run: the executed notebook, its wall time, the error (None if every cell ran), and the
    text the appended probe cell printed."""

    nb: nbformat.NotebookNode
    wall_s: float
    error: str | None
    probe_text: str


def execute_notebook(path: Path, probe_source: str, timeout: int = 600, repeat: int = 1) -> Execution:
    """Execute `path` top to bottom with nbclient, then a probe cell; the file itself is not modified.

    Args:
        path: The .ipynb file; cells run with its folder as the working directory.
        probe_source: Code of a cell appended at the end to report on the kernel (its printed text is returned).
        timeout: Seconds allowed per cell.
        repeat: How many times to run all the cells in the same kernel (2 checks that every cell is safe to
            re-run, as learners do); the executed notebook holds the last pass.

    Returns:
        The ``Execution``; the probe cell stays appended to ``.nb``. A kernel death or a timeout is an error too.
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be an int >= 1 (2 runs every cell twice), got {repeat!r}")
    nb = nbformat.read(path, as_version=4)
    last_pass = nb.cells
    nb.cells = [copy.deepcopy(cell) for _ in range(repeat - 1) for cell in last_pass] + last_pass
    nb.cells.append(nbformat.v4.new_code_cell(probe_source))
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", shutdown_kernel="immediate",
                                     resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        error = "\n".join(str(exc).strip().splitlines()[-40:]) or repr(exc)
    except Exception as exc:  # noqa: BLE001 - a kernel death or a timeout is a failure of the notebook too
        error = f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - start
    # print() may reach the notebook as several stream outputs: join them before parsing
    probe_text = "".join(output.get("text", "") for output in nb.cells[-1].get("outputs", []))
    keep_first_pass_streams(nb.cells[:len(last_pass)], last_pass)
    nb.cells = nb.cells[len(nb.cells) - len(last_pass) - 1:]  # keep the last pass (+ probe) only
    return Execution(nb=nb, wall_s=wall, error=error, probe_text=probe_text)


def keep_first_pass_streams(first: list, last: list) -> None:
    """Copy into each cell of `last` the printed text (stream outputs) of the same cell in `first` where it differs.

    A warning is often shown on the first pass only: the output checks (tools/output_checks.py) read it from the
    cell's ``metadata["first_pass_streams"]``. A notebook run once has the same cells in both (nothing to do).
    """
    for before, after in zip(first, last, strict=True):
        if before is after:
            continue
        streams = [o for o in before.get("outputs", []) if o.get("output_type") == "stream"]
        if streams and streams != [o for o in after.get("outputs", []) if o.get("output_type") == "stream"]:
            after.metadata[FIRST_PASS_KEY] = streams


def course_notebooks(root: Path = ROOT / "notebooks") -> list[Path]:
    """Return every course notebook under `root`: lessons first, then sub-folders (solutions), each sorted."""
    paths = [p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(paths, key=lambda p: (len(p.relative_to(root).parts), p.relative_to(root).as_posix()))


def saved_path(path: Path, save_dir: Path) -> Path:
    """Return where ``--save`` writes the executed copy of `path`: its path relative to the repository, or its name."""
    path = Path(path).resolve()
    return Path(save_dir) / (path.relative_to(ROOT) if path.is_relative_to(ROOT) else Path(path.name))


def run_notebook(path: Path, timeout: int = 600, repeat: int = 1, save_dir: Path | None = None) -> dict:
    """Execute one notebook (`repeat` times in one kernel); return wall time, peak memory and the last error line.

    With `save_dir`, the executed notebook (last pass, outputs included, probe cell removed) is written to
    ``saved_path(path, save_dir)`` and its path returned under "saved".
    """
    run = execute_notebook(path, _PEAK_CELL, timeout=timeout, repeat=repeat)
    found = re.search(r"PEAK_RSS_BYTES\s+(\d+)", run.probe_text)
    result = {"notebook": path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path),
              "wall_s": run.wall_s, "peak_bytes": int(found.group(1)) if found else None,
              "error": run.error.splitlines()[-1] if run.error else None}
    if save_dir is not None:
        run.nb.cells = run.nb.cells[:-1]  # the probe cell is ours, not the notebook's
        target = saved_path(path, save_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(run.nb, target)
        result["saved"] = target
    return result


README = ROOT / "README.md"
TABLE_START, TABLE_END = "<!-- notebook-table:start -->", "<!-- notebook-table:end -->"
_FOOTNOTE = "Thời gian CPU đo bằng"
_LINK = re.compile(r"\]\((notebooks/[^)]+\.ipynb)\)")


def _time_and_peak(result: dict) -> str:
    peak = f" · {result['peak_bytes'] / 2**20:.0f} MiB" if result["peak_bytes"] else ""
    return f"{result['wall_s']:.0f} s{peak}"


def readme_with_times(readme: str, results: list[dict], footnote: str) -> str:
    """Return `readme` whose notebook table shows the measured times in its last column, and `footnote` under it.

    Args:
        readme: README text with the table between the notebook-table markers; each row links its notebooks.
        results: ``run_notebook`` results; every notebook the table links must be among them, without error.
        footnote: The line saying how, where and when the times were measured.

    Returns:
        The new README text.
    """
    if TABLE_START not in readme or TABLE_END not in readme:
        raise ValueError(f"README has no notebook table between {TABLE_START} and {TABLE_END}")
    by_path = {r["notebook"]: r for r in results}
    failed = [r["notebook"] for r in results if r["error"]]
    if failed:
        raise ValueError(f"these notebooks failed, so their times are not written: {failed}")
    head, rest = readme.split(TABLE_START, 1)
    table, tail = rest.split(TABLE_END, 1)
    lines, linked = [], set()
    for line in table.strip("\n").splitlines():
        paths = _LINK.findall(line)
        if line.startswith("|") and paths:
            missing = [p for p in paths if p not in by_path]
            if missing:
                raise ValueError(f"no measurement for {missing}: run every notebook (no arguments) with --readme")
            linked.update(paths)
            cells = line.rstrip().rstrip("|").split(" | ")
            line = " | ".join([*cells[:-1], " / ".join(_time_and_peak(by_path[p]) for p in paths)]) + " |"
        elif line.startswith(_FOOTNOTE):
            line = footnote
        lines.append(line)
    unlisted = sorted(set(by_path) - linked)
    if unlisted:
        raise ValueError(f"README's notebook table has no row linking {unlisted}: add one")
    return head + TABLE_START + "\n" + "\n".join(lines) + "\n" + TABLE_END + tail


def _footnote() -> str:
    load = f", tải trung bình lúc bắt đầu {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (f"{_FOOTNOTE} `python -m tools.run_notebooks --readme` (chạy như \"Run all\", từng notebook một) trên "
            f"{platform.system()} {platform.machine()}, {os.cpu_count()} lõi, không dùng GPU{load}, "
            f"{datetime.date.today().isoformat()} (cột cuối: thời gian · bộ nhớ đỉnh của kernel; bản học viên / bản lời giải).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: all)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table too")
    parser.add_argument("--repeat", type=int, default=1, help="run all cells this many times in one kernel")
    parser.add_argument("--save", type=Path, metavar="DIR", help="write the executed notebooks (with outputs) here")
    parser.add_argument("--readme", action="store_true", help="write the times into README.md's notebook table")
    args = parser.parse_args(argv)
    if args.readme and args.notebooks:
        parser.error("--readme measures every notebook: give no notebook names")
    footnote = _footnote()  # the load before the runs add their own
    paths = [p.resolve() for p in args.notebooks or course_notebooks()]
    results, failed = [], False
    total_start = time.perf_counter()
    for path in paths:
        result = run_notebook(path, repeat=args.repeat, save_dir=args.save)
        results.append(result)
        peak = f"{result['peak_bytes'] / 2**20:7.0f} MiB" if result["peak_bytes"] else "      ?"
        status = "ok" if result["error"] is None else f"ERROR: {result['error']}"
        print(f"{result['notebook']:<55} {result['wall_s']:6.1f} s  peak {peak}  {status}", flush=True)
        failed |= result["error"] is not None
    print(f"total {time.perf_counter() - total_start:.1f} s for {len(results)} notebooks")
    if args.markdown:
        print("\n| notebook | CPU wall time | kernel peak memory |\n| --- | --- | --- |")
        for r in results:
            peak = f"{r['peak_bytes'] / 2**20:.0f} MiB" if r["peak_bytes"] else "?"
            print(f"| `{r['notebook']}` | {r['wall_s']:.0f} s | {peak} |")
    if args.readme and not failed:
        README.write_text(readme_with_times(README.read_text(encoding="utf-8"), results, footnote), encoding="utf-8")
        print(f"wrote the times into {README.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
