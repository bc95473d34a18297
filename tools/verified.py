"""Where each lesson last ran, read from the records the project keeps: never typed by hand.

The site's "Đã chạy trên" block (one per notebook page) lists the CPU run that built the page, each row of the
version matrix (docs/version-matrix.json) and the GPU run used, if any; docs/MAINTAINING.md's compact table (between
VERIFIED_START/END, rewritten by `nox -s table`) lists the matrix's rows per lesson. A record older than the
last commit that changed the lesson's source (course_src/NN_*.md) says so; without git history, nothing is said.
"""

from __future__ import annotations

import functools
import html
from pathlib import Path

from tools import version_matrix as vm

ROOT = vm.ROOT
VERIFIED_START, VERIFIED_END = "<!-- verified-on:start -->", "<!-- verified-on:end -->"
CELL_ID = "lessons-site-verified"


def source_of(notebook: str) -> str:
    """Return the lesson source of a notebook path, e.g. course_src/02_moving_tensors.md."""
    return f"course_src/{Path(notebook).stem.removesuffix('_solutions')}.md"


@functools.cache
def changed_after(commit: str | None, source: str) -> str | None:
    """Return "<hash>, <date>" of the last commit that changed `source` when `commit` predates it, else None."""
    last = (vm.git("log", "-1", "--format=%h, %cs", "--", source) or "").strip()
    if not commit or not last or vm.git("cat-file", "-e", f"{commit}^{{commit}}") is None:
        return None  # no history, or a record from a commit this clone does not have: say nothing
    return None if vm.git("merge-base", "--is-ancestor", last.split(",")[0], commit) is not None else last


def block_html(notebook: str, run: dict, data: dict, gpu_run=None, gpu_ok: bool | None = None) -> str:
    """Return the page's "Đã chạy trên" block: the CPU run that built it, each matrix row, the GPU run."""
    items = [f"✅ CPU, bản dựng trang này: {run.get('cpu', '?')}, {run.get('cores', '?')} lõi · torch "
             f"{run.get('torch', '?')} · Python {run.get('python', '?')} · {run.get('date', '?')}"]
    for record in data["combos"].values():
        for row in [row for row in record.get("notebooks", []) if row["notebook"] == notebook][:1]:
            commit = (record.get("checkout") or {}).get("commit")
            changed = changed_after(commit, source_of(notebook))
            kind = f" ({record['kind']})" if record.get("kind") else ""  # rows that checked outputs name it
            items.append(f"{'✅' if row['ok'] else '❌'} ma trận phiên bản{kind}, Python "
                         f"{record['python']} · torch {record['torch']} ({record.get('who', '').replace('`', '')}) · "
                         f"{record.get('date', '?')} · commit {commit or '?'}"
                         + (f" · ⚠️ bài đã đổi sau lần chạy này (commit {changed})" if changed else ""))
    items.append("GPU: chưa có lần chạy GPU nào được đưa vào trang." if gpu_run is None else
                 f"GPU ({gpu_run.label}): lần chạy này không có notebook này." if gpu_ok is None else
                 f"{'✅' if gpu_ok else '❌'} GPU: {gpu_run.label}")
    lis = "".join(f"<li>{html.escape(item)}</li>" for item in items)
    passed, runs = (sum(item.startswith(marks) for item in items) for marks in ("✅", ("✅", "❌")))
    stale = " · ⚠️ bài đã đổi sau một số lần chạy" if any("⚠️" in item for item in items) else ""
    summary = f"Đã chạy trên (lần gần nhất): ✅ {passed}/{runs} môi trường{stale}"  # folded: short on phones
    return f'<div class="lessons-verified"><details><summary>{summary}</summary><ul>{lis}</ul></details></div>'


def insert_block(nb, notebook: str, run: dict, gpu_run=None, gpu_nb=None) -> None:
    """Put the "Đã chạy trên" block of `notebook` under the page's Colab/Kaggle buttons (or first)."""
    gpu_ok = None if gpu_nb is None else not any(o.get("output_type") == "error" for c in gpu_nb.cells
                                                 for o in c.get("outputs", []))
    import nbformat  # here, not on top: noxfile.py imports this module where only nox is installed

    cell = nbformat.v4.new_markdown_cell(block_html(notebook, run, vm.load_results(), gpu_run, gpu_ok))
    cell.id = CELL_ID  # fixed, so an unchanged page stays byte-identical
    nb.cells.insert(next((i + 1 for i, c in enumerate(nb.cells) if c.get("id") == "lessons-site-launch"), 0), cell)


def lessons_table(data: dict) -> str:
    """Return the compact table of vm.PAGE: per lesson, each matrix row's result (both notebooks of the lesson)."""
    combos = [(combo, data["combos"].get(combo.id)) for combo in vm.COMBOS]  # every row, run or not yet
    head = [(f"{vm.PLATFORM_NAMES[c.platform]} · " if c.platform else "") + f"Python {c.python} · torch {c.torch}"
            for c, _ in combos]
    lines = ["| bài | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(combos)]
    stale = False
    for source in sorted(ROOT.glob("course_src/[0-9][0-9]_*.md")):
        cells = []
        for _, record in combos:
            if record is None:
                cells.append("chưa chạy")
                continue
            rows = [r for r in record.get("notebooks", []) if source_of(r["notebook"]) == f"course_src/{source.name}"]
            changed = changed_after((record.get("checkout") or {}).get("commit"), f"course_src/{source.name}")
            stale |= bool(rows and changed)
            cells.append("—" if not rows else ("✅" if all(r["ok"] for r in rows) else "❌")
                         + f" {record.get('date', '?')}" + (" ⚠️" if changed else ""))
        lines.append(f"| {source.stem} | " + " | ".join(cells) + " |")
    lines += ["", "Sinh từ `docs/version-matrix.json` và các hàng của `tools/version_matrix.py` (`nox -s table`): ✅ cả "
              "bản học viên lẫn bản lời giải chạy hết, đầu ra đúng lời bài, kèm ngày chạy; \"chưa chạy\": hàng chưa có "
              "bản ghi" + ("; ⚠️ bài đã đổi (commit sửa `course_src/`) sau commit của lần chạy đó" if stale else "")
              + ". Lần chạy GPU không nằm trong "
              "repo (`gpu-validation-*/` bị git bỏ qua): trang web của khoá học ghi nó ở đầu mỗi bài khi có."]
    return "\n".join(lines)
