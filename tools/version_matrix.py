"""The version matrix's rows, record and table (docs/MAINTAINING.md): which Python + torch + notebook stack rows the course runs on.

`nox -s matrix` (noxfile.py) runs each row and merges its record into docs/version-matrix.json; this module
holds the rows, reads and writes that file and turns it into that page's table (`nox -s table` rewrites it).
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "docs" / "version-matrix.json"
PAGE = ROOT / "docs" / "MAINTAINING.md"  # the maintainers' page: its matrix tables are generated
TABLE_START, TABLE_END = "<!-- version-matrix:start -->", "<!-- version-matrix:end -->"
# Tests that check the repository with the regular environment's tools, not the runtime: left out in each
# row, with the reason recorded in the results (in Vietnamese: the page's table lists them).
UNIT_TEST_LEFT_OUT = {
    "tests/e2e": "JupyterLab + Playwright + Chromium của môi trường thường (marker browser)",
    "tests/test_atlas.py": "công cụ dựng site (myst-parser) của môi trường thường",
    "tests/test_build_site.py": "công cụ dựng site (Sphinx, myst-parser) của môi trường thường",
    "tests/test_plots_a11y.py::test_the_site_finds_each_png_outputs_alt_by_the_hash_myst_nb_names_the_image_file_with":
        "phần mở rộng Sphinx của site (môi trường thường)",
    "tests/test_python310.py::test_ruff_finds_no_syntax_newer_than_python310":
        "ruff của môi trường thường; kiểm tra cú pháp của lessons_lib, không phụ thuộc phiên bản chạy",
    "tests/test_version_matrix.py::test_the_page_table_is_the_committed_results":
        "so docs/MAINTAINING.md với file kết quả mà chính lần chạy đang ghi",
    "tests/test_verified.py::test_the_verified_table_is_current":
        "so docs/MAINTAINING.md với file kết quả mà chính lần chạy (và các hàng chạy trước nó) đang ghi",
}
UNIT_TEST_MARKERS = "not colab_env and not browser"
# What Colab's CPU runtime sets and the course reads (lessons_lib.platforms.detect_platform reads
# COLAB_RELEASE_TAG; COLAB_GPU is 1 on a GPU runtime, empty on a CPU one). The tag says it is a replica.
COLAB_RUNTIME_ENV = {"COLAB_RELEASE_TAG": "replica-by-bai14-version-matrix", "COLAB_BACKEND_VERSION": "replica",
                     "COLAB_JUPYTER_TRANSPORT": "ipc", "COLAB_GPU": ""}
# What Kaggle's notebook runtime sets and the course reads (detect_platform reads KAGGLE_KERNEL_RUN_TYPE; Kaggle's
# runtime sets it, "Interactive" in an editor session, not docker-python's image). No /kaggle/working here.
KAGGLE_RUNTIME_ENV = {"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "KAGGLE_URL_BASE": "https://www.kaggle.com"}
PLATFORM_ENV = {"colab": COLAB_RUNTIME_ENV, "kaggle": KAGGLE_RUNTIME_ENV}
PLATFORM_NAMES = {"colab": "Colab", "kaggle": "Kaggle"}
# The notebook stacks a row can install: envs/<name>-pins.txt, made by tools/colab_pins.py.
STACKS = ("colab", "kaggle")


@dataclass(frozen=True)
class Combo:
    """One row: a Python X.Y, a torch release, who it stands for, the pins it swaps for want of a wheel, and where.

    `stack` names the pins file (envs/<stack>-pins.txt); `platform` ("colab", "kaggle" or None) the environment
    variables its kernels see (and, when set, the colab_env tests run in it); `kind` the machine kind the row
    must turn out to be (tools/output_checks.py), checked when it runs; `find_links` a folder holding the torch
    wheel (a build the public index lacks), for this row only.
    """

    python: str
    torch: str
    who: str
    swaps: dict[str, str] = field(default_factory=dict)  # {name: version} replacing the stack's pin
    platform: str | None = None
    stack: str = "colab"
    kind: str = "cuda-no-gpu"
    find_links: str | None = None

    @property
    def id(self) -> str:
        """Return the row's name, e.g. "py3.13-torch2.11.0", "py3.11-torch2.13.0-cpu", "py3.12-torch2.10.0-kaggle"."""
        return f"py{self.python}-torch{self.torch.replace('+', '-')}" + ("" if self.stack == "colab" else f"-{self.stack}")

    @property
    def environ(self) -> dict[str, str]:
        """Return the environment variables of its platform ({} for none)."""
        return dict(PLATFORM_ENV.get(self.platform, {}))

    @property
    def pins_file(self) -> Path:
        """Return the pins file of its notebook stack."""
        return ROOT / "envs" / f"{self.stack}-pins.txt"


# The rows the matrix table covers, each for the learners it stands for (`who`, the table's label). The newest
# torch is the newest this machine's pip allows (/etc/xdg/pip caps torch at 2.14.1); PyPI's newest at the time of
# writing is 2.15.0. PyPI's Linux torch is a CUDA build: on a machine without a driver, kind `cuda-no-gpu`. Colab's
# CPU runtime installs torch 2.11.0+cpu from download.pytorch.org, which this machine cannot reach; the closest CPU
# build it holds is /opt/wheels' torch 2.13.0+cpu, built for Python 3.11 only. A swap replaces a pin that has no
# wheel for the row's Python (the 3.10 ones: Requires-Python, the newest older).
COMBOS = (
    Combo("3.13", "2.11.0", "ảnh GPU của Colab trên máy không có GPU (Python 3.13, torch 2.11.0 bản CUDA từ PyPI): bộ "
          "gói và torch của Colab; cũng là laptop Linux cài torch mặc định từ PyPI", platform="colab"),
    Combo("3.11", "2.13.0+cpu", "Colab, runtime CPU: bộ gói notebook của Colab với torch bản CPU. Colab cài 2.11.0+cpu "
          "(Python 3.13) từ download.pytorch.org, máy này không tới được; bản CPU gần nhất ở đây là 2.13.0+cpu "
          "(/opt/wheels, chỉ có cho Python 3.11)", platform="colab", kind="cpu-build", find_links="/opt/wheels"),
    Combo("3.12", "2.10.0", "ảnh GPU của Kaggle trên máy không có GPU (Python 3.12, torch 2.10.0 bản CUDA từ PyPI, "
          "ipywidgets 8.1.5): bộ gói notebook của Kaggle (phiên không bật GPU dùng ảnh CPU, torch bản CPU)",
          platform="kaggle", stack="kaggle"),
    Combo("3.11", "2.4.1", "cận dưới `torch>=2.4` của pyproject"),
    Combo("3.13", "2.14.1", "torch mới nhất pip ở đây cho phép (PyPI đã có 2.15.0)"),
    Combo("3.10", "2.14.1", "cận dưới `python>=3.10` của pyproject (vd Ubuntu 22.04)",
          {"contourpy": "1.3.2", "networkx": "3.4.2", "rpds-py": "0.30.0", "scipy": "1.15.3"}),
)


def parse_junit(text: str) -> dict:
    """Return {"passed", "failed", "errors", "skipped", "failures"} from pytest's JUnit XML report."""
    root = ET.fromstring(text)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = {key: sum(int(suite.get(key, 0)) for suite in suites) for key in ("tests", "failures", "errors", "skipped")}
    failures = []
    for case in root.iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            message = " | ".join(line.strip() for line in (bad.get("message") or bad.text or "").strip().splitlines()[:6])
            failures.append(f"{case.get('classname')}::{case.get('name')}: {message[:600]}")
    return {"passed": total["tests"] - total["failures"] - total["errors"] - total["skipped"],
            "failed": total["failures"], "errors": total["errors"], "skipped": total["skipped"], "failures": failures}


def rerun_class(notebook: Path) -> str:
    """Return the name of tests/test_rerun.py's test class for `notebook` (JUnit XML names its tests by it)."""
    return "Test_" + re.sub(r"\W", "_", notebook.relative_to(NOTEBOOKS).with_suffix("").as_posix())


def notebook_rows(text: str) -> list[dict]:
    """Return one row per notebook from tests/test_rerun.py's JUnit XML: did it run twice, keep its promises."""
    notebooks = {rerun_class(p): p.relative_to(ROOT).as_posix() for p in sorted(NOTEBOOKS.rglob("*.ipynb"))
                 if ".ipynb_checkpoints" not in p.parts}
    rows: dict[str, dict] = {}
    for case in ET.fromstring(text).iter("testcase"):
        notebook = notebooks.get(case.get("classname", "").rpartition(".")[2])
        match = re.fullmatch(r"test_(runs_twice_in_one_kernel|outputs_keep_the_lessons_promises)", case.get("name", ""))
        if notebook is None or match is None:
            continue
        row = rows.setdefault(notebook, {"notebook": notebook, "ok": True, "wall_s": 0.0, "error": None,
                                         "problems": []})
        row["wall_s"] = round(row["wall_s"] + float(case.get("time", 0)), 2)
        bad = [*case.findall("failure"), *case.findall("error")]
        if not bad:
            continue
        row["ok"] = False
        message = bad[0].get("message") or bad[0].text or ""
        if match[1] == "runs_twice_in_one_kernel":
            row["error"] = message
        else:
            row["problems"] = re.findall(r"^\s*(?:E\s+)?- (.+)$", message, re.M)
    return list(rows.values())


def git(*args: str, root: Path = ROOT) -> str | None:
    """Return what `git args` prints in `root`, or None without git, outside a repository or on an error."""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def checkout_state(root: Path = ROOT) -> dict:
    """Return the checkout's commit and its uncommitted changes to what the matrix runs (None/[] without git)."""
    head = git("rev-parse", "--short=12", "HEAD", root=root)
    status = git("status", "--porcelain", "--", "notebooks", "course_src", "lessons_lib", "tests", "tools",
                 "envs", "pyproject.toml", root=root) or ""
    return {"commit": head.strip() if head else None,
            "uncommitted": sorted(line[3:].strip() for line in status.splitlines() if line.strip())}


def load_results(path: Path = RESULTS) -> dict:
    """Return the results file's content ({"combos": {id: record}}), empty when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return {"combos": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def save_results(records: list[dict], path: Path = RESULTS) -> dict:
    """Merge `records` into the results file (one record per combination id) and return its content."""
    data = load_results(path)
    for record in records:
        data["combos"][record["id"]] = record
    order = {combo.id: i for i, combo in enumerate(COMBOS)}
    data["combos"] = dict(sorted(data["combos"].items(), key=lambda item: (order.get(item[0], len(order)), item[0])))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def _swaps_text(record: dict) -> str:
    swaps = record.get("swaps") or []
    return ", ".join(f"{s['name']} {s['pinned']} → {s['version']}" for s in swaps) or "—"


def stack_image(stack: str) -> dict:
    """Return the image a notebook stack's pins file was made from ({"stack", ...colab_pins.describe()})."""
    from tools import colab_pins

    return {"stack": stack, **colab_pins.describe(ROOT / "envs" / f"{stack}-pins.txt")}


def image_cell(image: dict | None) -> str:
    """Return the table cell naming a row's notebook stack and the image it came from."""
    if not image:
        return "Colab (ảnh không ghi: chạy trước khi bản ghi có ảnh)"
    colab = f"`{(image.get('colab_commit') or '?')[:7]}` ({image.get('colab_date') or '?'})"
    if image.get("kaggle_commit"):
        return f"Kaggle `{image['kaggle_commit'][:7]}` ({image.get('kaggle_date') or '?'}) trên ảnh Colab {colab}"
    return f"Colab {colab}"


def image_notes() -> list[str]:
    """Return one line per notebook stack: the image its pins file was made from, read from the file's header."""
    lines = []
    for stack in STACKS:
        image = stack_image(stack)
        colab = (f"googlecolab/backend-info commit `{(image['colab_commit'] or '?')[:7]}` ({image['colab_date'] or '?'}): "
                 f"Python {image['python'] or '?'}, torch {image['torch'] or '?'}")
        if image["kaggle_commit"]:
            text = (f"Kaggle/docker-python commit `{image['kaggle_commit'][:7]}` ({image['kaggle_date']}), dựng `FROM` "
                    f"ảnh Colab `{image['kaggle_base']}`, tức {colab}; cộng các ghim riêng của Kaggle (`# Kaggle:`)")
        else:
            text = f"`pip freeze` của runtime Colab, {colab}"
        lines.append(f"- `envs/{stack}-pins.txt`: {text}.")
    return lines


def markdown_table(data: dict) -> str:
    """Return the Markdown table of every row of COMBOS with its record, if any (Vietnamese, for PAGE)."""
    lines = ["| Python | torch (bản build) | hàng này là ai | bộ gói notebook (ảnh gốc) | notebook chạy hết, đầu ra "
             "đúng lời bài | unit test đạt / trượt / bỏ qua | thời gian notebook · unit test | gói đổi so với bộ gói |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    dates, loads, repeats, cpus, commits, uncommitted = set(), [], set(), set(), set(), set()
    for combo in COMBOS:  # a label is not a measurement: the current one, beside the record's numbers
        record = data["combos"].get(combo.id)
        if record is None:
            lines.append(f"| {combo.python} | {combo.torch} | {combo.who} | {image_cell(stack_image(combo.stack))} "
                         f"| chưa chạy (`nox -s \"matrix({combo.id})\"`) | | | |")
            continue
        record = dict(record, who=combo.who)
        dates.add(record.get("date", "?"))
        commits.add((record.get("checkout") or {}).get("commit") or "?")
        uncommitted.update((record.get("checkout") or {}).get("uncommitted") or [])
        loads += record.get("loadavg", [])
        repeats.add(record.get("repeat"))
        cpus.add(record.get("cpus"))
        image = image_cell(record.get("image"))
        if "notebooks" not in record:
            error = (record.get("error") or "?").strip().splitlines()[0][:120]
            lines.append(f"| {record['id']} | | {record['who']} | {image} | **lỗi:** {error} | | | |")
            continue
        notebooks = record["notebooks"]
        passed = sum(row["ok"] for row in notebooks)
        nb_cell = f"{passed}/{len(notebooks)}" + ("" if passed == len(notebooks) else " ❌")
        if not record.get("output_checks"):
            nb_cell += " (chỉ kiểm không lỗi, chưa kiểm đầu ra)"
        elif record.get("platform"):
            nb_cell += f" (như {PLATFORM_NAMES[record['platform']]})"
        tests = record.get("unit_tests")
        if tests:
            bad = tests["failed"] + tests["errors"]
            test_cell = f"{tests['passed']} / {bad} / {tests['skipped']}" + ("" if bad == 0 else " ❌")
            test_time = f"{tests['wall_s']:.0f} s"
        else:
            test_cell, test_time = "không chạy", "—"
        nb_time = sum(row["wall_s"] for row in notebooks)
        install = record.get("lessons_lib_install", {})
        build = record.get("build", "?")
        if build.startswith("CUDA") and not record.get("cuda_available"):
            build += ", không có driver"
        lines.append(f"| {record.get('python', '?')} | {record.get('torch', '?')} ({build}) | {record['who']} "
                     f"| {image} | {nb_cell} | {test_cell} | {nb_time:.0f} s · {test_time} | {_swaps_text(record)}"
                     + ("" if install.get("ok", True) else " · cài `lessons_lib` làm đổi gói khác ❌") + " |")
    repeat = "/".join(str(r) for r in sorted(r for r in repeats if r)) or "?"
    load = f"{min(loads):.0f}–{max(loads):.0f}" if loads else "?"
    core = "/".join(str(c) for c in sorted(c for c in cpus if c)) or "?"
    kinds = sorted({record.get("kind") for record in data["combos"].values() if record.get("kind")})
    kinds_text = f" (ở đây {', '.join(f'`{kind}`' for kind in kinds)})" if kinds else ""
    left_out = "; ".join(f"`{node}` ({why})" for node, why in UNIT_TEST_LEFT_OUT.items())
    checkout = f"commit {', '.join(f'`{c}`' for c in sorted(commits))}" + (
        f" cộng thay đổi chưa commit ở {', '.join(f'`{path}`' for path in sorted(uncommitted))}" if uncommitted else "")
    lines += ["",
              f"Đo bằng `nox -s matrix` ({checkout}) ngày {', '.join(sorted(dates)) or '?'} trên máy {core} lõi không GPU "
              f"(tải trung bình lúc chạy: {load}; thời gian chỉ để so sánh thô). Mỗi notebook (cả bản lời giải) chạy "
              f"{repeat} lần liên tiếp trong cùng một kernel, như khi học viên chạy lại ô. torch lấy từ PyPI: trên Linux "
              "đó là bản CUDA, chạy trên máy không có driver NVIDIA (loại máy `cuda-no-gpu`): đường đi của laptop Linux "
              "cài torch mặc định và của ảnh GPU không được cấp GPU; các ô `%%gpu` được bỏ qua. Runtime CPU của Colab "
              "cài bản torch CPU (loại `cpu-build`): hàng của nó dùng bản CPU mà máy này có (ghi trong nhãn của hàng). "
              "Unit test chạy bằng pytest của chính môi trường đó với `lessons_lib` cài từ wheel "
              f"như ô cài đặt; không chạy ở đây: {left_out}. Bộ gói notebook là của Colab (`envs/colab-pins.txt`) hoặc "
              "của Kaggle (`envs/kaggle-pins.txt`), đúng từng phiên bản; cột cuối ghi gói phải đổi vì không có wheel "
              "cho phiên bản Python đó. Một notebook chỉ đạt khi không ô nào lỗi "
              "và đầu ra giữ đúng lời bài (`tools/output_checks.py`): mỗi dòng `<!-- expect … -->` trong bài khớp với "
              f"loại máy của hàng{kinds_text}, và không có dòng cảnh báo hay lỗi nào học viên thấy mà bài không "
              "giải thích (stderr, `FutureWarning`/`DeprecationWarning`, dòng log `W…`/`E…`/`ERROR`), kể cả ở lần chạy "
              "đầu; hàng \"(như Colab)\" chạy kernel với biến môi trường của Colab (`COLAB_RELEASE_TAG`, `COLAB_GPU` "
              "rỗng…), hàng \"(như Kaggle)\" với biến của Kaggle (`KAGGLE_KERNEL_RUN_TYPE`), nên các thông báo bỏ qua "
              "và gợi ý riêng cho nền tảng đó cũng được chạy.",
              "",
              "Ảnh gốc của từng bộ gói (đọc từ đầu file ghim; bản ghi của một hàng giữ ảnh của lần chạy đó):",
              *image_notes()]
    return "\n".join(lines)


def replace_table(text: str, table: str, start: str = TABLE_START, end: str = TABLE_END) -> str:
    """Return the page's text with the block between the markers `start` and `end` replaced by `table`."""
    at, until = text.find(start), text.find(end)
    if at < 0 or until < at:
        raise ValueError(f"{PAGE.name} phải chứa hai dấu mốc {start} … {end} (theo thứ tự đó) để ghi bảng vào giữa")
    return text[:at + len(start)] + "\n" + table + "\n" + text[until:]
