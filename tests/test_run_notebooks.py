"""tools/run_notebooks.py writes measured times into README's notebook table, and that table lists the whole course."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import run_notebooks

ROOT = Path(__file__).resolve().parent.parent

README = (ROOT / "README.md").read_text(encoding="utf-8")
NOTEBOOKS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)


def result(path: str, wall_s: float = 7.4, peak_mib: int | None = 350, error: str | None = None) -> dict:
    return {"notebook": path, "wall_s": wall_s, "peak_bytes": peak_mib * 2**20 if peak_mib else None, "error": error}


def table_rows(readme: str) -> list[str]:
    table = readme.split(run_notebooks.TABLE_START, 1)[1].split(run_notebooks.TABLE_END, 1)[0]
    return [line for line in table.splitlines() if line.startswith("|") and "](notebooks/" in line]


def test_readme_table_links_every_notebook_of_the_course_once():
    linked = [path for row in table_rows(README) for path in run_notebooks._LINK.findall(row)]
    assert sorted(linked) == NOTEBOOKS


def test_readme_study_time_is_the_one_the_notebook_states():
    for row in table_rows(README):
        stem = run_notebooks._LINK.findall(row)[0].removeprefix("notebooks/").removesuffix(".ipynb")
        stated = re.search(r"⏱️ ~([\d–]+) phút", (ROOT / "course_src" / f"{stem}.md").read_text(encoding="utf-8"))
        assert stated and f"~{stated.group(1)} phút" in row, f"README's study time for {stem} differs from its lesson"


def test_times_go_into_the_last_column_learner_then_solutions():
    results = [result(p, wall_s=5.0 + i, peak_mib=300 + i) for i, p in enumerate(NOTEBOOKS)]
    new = run_notebooks.readme_with_times(README, results, "Thời gian CPU đo bằng X.")
    row = next(r for r in table_rows(new) if "01_device_basics.ipynb" in r)
    learner = NOTEBOOKS.index("notebooks/01_device_basics.ipynb")
    solution = NOTEBOOKS.index("notebooks/solutions/01_device_basics_solutions.ipynb")
    assert row.endswith(f"| {5 + learner} s · {300 + learner} MiB / {5 + solution} s · {300 + solution} MiB |")
    assert "\nThời gian CPU đo bằng X.\n" in new
    assert new.split(run_notebooks.TABLE_START)[0] == README.split(run_notebooks.TABLE_START)[0]
    assert new.split(run_notebooks.TABLE_END)[1] == README.split(run_notebooks.TABLE_END)[1]
    assert run_notebooks.readme_with_times(new, results, "Thời gian CPU đo bằng X.") == new


def test_unknown_peak_memory_shows_the_time_alone():
    results = [result(p, wall_s=9.0, peak_mib=None) for p in NOTEBOOKS]
    row = table_rows(run_notebooks.readme_with_times(README, results, "Thời gian CPU đo bằng X."))[0]
    assert row.endswith("| 9 s / 9 s |")


def test_refuses_a_partial_or_failed_measurement_and_an_unlisted_notebook():
    results = [result(p) for p in NOTEBOOKS]
    with pytest.raises(ValueError, match="no measurement for"):
        run_notebooks.readme_with_times(README, results[1:], "x")
    with pytest.raises(ValueError, match="failed"):
        run_notebooks.readme_with_times(README, [*results[:-1], result(NOTEBOOKS[-1], error="boom")], "x")
    with pytest.raises(ValueError, match="no row linking"):
        run_notebooks.readme_with_times(README, [*results, result("notebooks/12_new.ipynb")], "x")
    with pytest.raises(ValueError, match="no notebook table"):
        run_notebooks.readme_with_times("# README\n", results, "x")


def test_readme_option_takes_no_notebook_names(capsys):
    with pytest.raises(SystemExit):
        run_notebooks.main(["--readme", "notebooks/01_device_basics.ipynb"])
    assert "give no notebook names" in capsys.readouterr().err
