"""tools/colab_pins.py: regenerating envs/colab-pins.txt (and envs/kaggle-pins.txt) from the published lists, offline.

The inputs are saved copies of googlecolab/backend-info (tests/fixtures/colab-backend-info/, two real commits) and
of Kaggle/docker-python (tests/fixtures/kaggle-docker-python/, one commit, trimmed); the git tests build a
two-commit repository from the first, dated as the real commits, in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tools import colab_pins

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = ROOT / "tests" / "fixtures" / "colab-backend-info"
KAGGLE = ROOT / "tests" / "fixtures" / "kaggle-docker-python" / "78aaa43f"
OLD, NEW = FIXTURES / "03a89033", FIXTURES / "a7240792"
PINS_TEXT = (FIXTURES / "colab-pins.txt").read_text(encoding="utf-8")
# The Colab template with a `# Kaggle image:` paragraph for --kaggle to rewrite, as envs/kaggle-pins.txt has
KAGGLE_TEXT = PINS_TEXT.replace("\n#\n# Every package", "\n#\n# Kaggle image: to be written\n#\n# Every package", 1)


def requirement_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def backend_info(tmp_path_factory) -> Path:
    """A git clone-like repository whose HEAD~1 is the 03a89033 copy and HEAD the a7240792 copy."""
    repo = tmp_path_factory.mktemp("backend-info")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL=os.devnull)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    for copy, subject, date in ((OLD, "Update transformers to 5.9.0", "2026-06-03T12:00:00"),
                                (NEW, "Upgrade to Python 3.13", "2026-08-19T12:00:00")):
        for file in copy.iterdir():
            shutil.copy(file, repo / file.name)
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", subject], check=True,
                       env=dict(env, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date))
    return repo


def test_parse_freeze_reads_pins_and_wheel_urls_and_skips_the_rest():
    freeze = colab_pins.parse_freeze((NEW / "pip-freeze.txt").read_text(encoding="utf-8"))
    assert freeze["jupyter-client"] == "7.4.9"  # names in PEP 503 form
    assert freeze["torch"] == "2.11.0+cpu"  # `torch @ .../torch-2.11.0%2Bcpu-cp313-...whl`
    assert freeze["google-colab"] is None  # a URL that is not a wheel's names no version
    assert not any(name.startswith("#") for name in freeze)


def test_read_source_from_a_folder_outside_git_has_no_commit():
    snap = colab_pins.read_source(NEW.parent / "a7240792", runtime="cpu")
    assert (snap.python, snap.freeze["torch"], snap.runtime) == ("3.13.15", "2.11.0+cpu", "cpu")
    # the fixtures lie inside this project's checkout, whose commits are not backend-info's
    assert (snap.commit, snap.date) == (None, None)
    paragraph = " ".join(line[2:] for line in colab_pins.source_paragraph(snap, "2026-12-02"))
    assert "file pip-freeze.txt at a copy outside git (commit unknown)" in paragraph


def test_read_source_from_git_reads_head_and_history(backend_info):
    head, older = colab_pins.read_source(backend_info), colab_pins.read_source(backend_info, rev="HEAD~1")
    assert (head.python, older.python) == ("3.13.15", "3.12.13")
    assert len(head.commit) == 40 and head.commit != older.commit and head.date
    assert head.freeze["numpy"] == "2.1.3" and older.freeze["numpy"] == "2.0.2"


def test_regenerate_from_the_pinned_commit_changes_no_pin(backend_info):
    text, rows = colab_pins.regenerate(PINS_TEXT, colab_pins.read_source(backend_info, rev="HEAD~1"), "2026-12-02")
    assert requirement_lines(text) == requirement_lines(PINS_TEXT)
    assert [row[1] for row in rows if row[2] != row[3]] == ["commit"]  # the test repository's own commit id


def test_regenerate_follows_colab_keeps_departures_and_comments(backend_info):
    snap = colab_pins.read_source(backend_info)
    text, rows = colab_pins.regenerate(PINS_TEXT, snap, "2026-12-02")
    path = backend_info.parent / "regenerated.txt"
    path.write_text(text, encoding="utf-8")
    pins, old = colab_pins.read_pins(path), colab_pins.read_pins(FIXTURES / "colab-pins.txt")
    assert set(pins) == set(old)  # nothing added or dropped
    assert (pins["numpy"], pins["jupyter-server"], pins["ipykernel"]) == ("2.1.3", "2.20.0", "6.17.1")
    assert pins["torch"] == old["torch"] and pins["setuptools"] == old["setuptools"]  # `# Colab:` departures
    assert pins["jedi"] == old["jedi"]  # not in Colab's freeze: kept
    assert "torch==2.13.0  # Colab: 2.11.0+cu128. No local label" in text
    comments = [line for line in text.splitlines() if line.startswith("# ---")]
    assert comments == [line for line in PINS_TEXT.splitlines() if line.startswith("# ---")]
    source = " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    assert f"commit {snap.commit} (dated {snap.date})" in source and "Python 3.13.15 with torch 2.11.0+cu128" in source
    assert ("", "python", "3.12.13", "3.13.15", "header") in rows
    assert ("the notebook stack (the pins the course cares about)", "numpy", "2.0.2", "2.1.3", "") in rows


def test_regenerate_for_the_cpu_runtime_updates_the_departure_comment(backend_info):
    text, rows = colab_pins.regenerate(PINS_TEXT, colab_pins.read_source(backend_info, runtime="cpu"), "2026-12-02")
    assert "torch==2.13.0  # Colab: 2.11.0+cpu. No local label" in text
    assert "the Colab CPU runtime's `pip freeze`" in text and "file pip-freeze.txt at" in text


def test_report_names_python_torch_the_stack_and_the_changes(backend_info):
    _, rows = colab_pins.regenerate(PINS_TEXT, colab_pins.read_source(backend_info), "2026-12-02")
    text = colab_pins.report(rows)
    assert text.startswith("Python: 3.12.13 → 3.13.15")
    assert "ipykernel: 6.17.1 (unchanged)" in text and "numpy: 2.0.2 → 2.1.3" in text
    assert "torch: Colab 2.11.0+cu128 (unchanged); the pin departs from Colab on purpose" in text
    assert "tornado: 6.5.1 → 6.5.7" in text and "pyzmq" not in text  # others only when they change
    assert "jedi: 0.19.2 kept: no version in Colab's freeze" in text


def test_main_prints_without_writing_then_writes(tmp_path, backend_info, capsys):
    pins, older = tmp_path / "colab-pins.txt", colab_pins.read_source(backend_info, rev="HEAD~1").commit
    pins.write_text(PINS_TEXT.replace("03a89033b7dd106f98e45f7c6090d467134330e8", older), encoding="utf-8")
    before = pins.read_text(encoding="utf-8")
    assert colab_pins.main(["--from", str(backend_info), "--pins", str(pins)]) == 0
    out = capsys.readouterr().out
    assert "numpy: 2.0.2 → 2.1.3" in out and "add --write" in out and "Upgrade to Python 3.13" in out
    assert pins.read_text(encoding="utf-8") == before
    assert out.count("Upgrade to Python 3.13") == 1  # the test repository's history since the pinned commit
    assert colab_pins.main(["--from", str(backend_info), "--pins", str(pins), "--write"]) == 0
    assert colab_pins.read_pins(pins)["numpy"] == "2.1.3"


# --------------------------------------------------------------------------- Kaggle's image


def kaggle_copy(tmp_path: Path, tag_date: str = "20260514") -> Path:
    """A folder holding the saved docker-python files, its Colab image tag dated `tag_date`."""
    folder = tmp_path / "docker-python"
    folder.mkdir()
    for file in KAGGLE.iterdir():
        shutil.copy(file, folder / file.name)
    dockerfile = folder / "Dockerfile.tmpl"
    dockerfile.write_text(dockerfile.read_text(encoding="utf-8").replace("20260514-", f"{tag_date}-"), encoding="utf-8")
    return folder


def test_parse_kaggle_reads_the_colab_image_python_and_exact_pins():
    image = colab_pins.read_kaggle(KAGGLE)
    assert image.base == "release-colab-external-images_20260514-060047_RC00" and image.base_date == "2026-05-14"
    assert image.python == "3.12" and (image.commit, image.date) == (None, None)  # a copy outside git
    assert image.pins == {"ipywidgets": "8.1.5", "jupyter-server": "2.12.5", "nbconvert": "6.4.5",
                          "torchcodec": "0.10.0"}, "only `name==version` lines: not comm, fastcore<2, kagglehub>=..."


def test_colab_commit_on_takes_the_last_commit_of_that_day_or_before(backend_info):
    older = colab_pins.read_source(backend_info, rev="HEAD~1").commit
    assert colab_pins.colab_commit_on(backend_info, "2026-07-01") == older
    assert colab_pins.colab_commit_on(backend_info, "2026-06-03") == older  # the same day counts
    assert colab_pins.colab_commit_on(backend_info, "2026-08-19") == colab_pins.read_source(backend_info).commit


def test_regenerate_for_kaggle_applies_its_pins_and_names_the_image(backend_info, tmp_path):
    snap, image = colab_pins.read_source(backend_info, rev="HEAD~1"), colab_pins.read_kaggle(KAGGLE)
    text, rows = colab_pins.regenerate(KAGGLE_TEXT, snap, "2026-12-07", image)
    assert "ipywidgets==8.1.5  # Kaggle: Kaggle/docker-python kaggle_requirements.txt at a copy pins it " \
           "(Colab: 7.7.1)" in text
    assert ("the notebook stack (the pins the course cares about)", "ipywidgets", "7.7.1", "8.1.5", "kaggle") in rows
    path = tmp_path / "kaggle-pins.txt"
    path.write_text(text, encoding="utf-8")
    pins = colab_pins.read_pins(path)
    assert (pins["jupyter-server"], pins["nbconvert"], pins["numpy"]) == ("2.12.5", "6.4.5", "2.0.2")
    assert "torchcodec" not in pins, "Kaggle's pins of packages the file does not list are not added"
    assert "FROM Colab's image release-colab-external-images_20260514-060047_RC00" in " ".join(line[2:] for line in text.splitlines())
    seen = colab_pins.describe(path)
    assert seen["kaggle_base"] == "release-colab-external-images_20260514-060047_RC00"
    assert (seen["colab_commit"], seen["python"], seen["torch"]) == (snap.commit, "3.12.13", "2.11.0+cu128")
    again, rows = colab_pins.regenerate(text, snap, "2026-12-08")  # without --kaggle: Kaggle's pins stay
    assert "ipywidgets==8.1.5  # Kaggle:" in again and ("the notebook stack (the pins the course cares about)",
                                                         "ipywidgets", "8.1.5", "8.1.5", "departure") in rows
    unpinned = colab_pins.KaggleImage(image.base, image.base_date, image.python, {"nbconvert": "6.4.5"})
    back, _ = colab_pins.regenerate(text, snap, "2026-12-08", unpinned)
    assert "\nipywidgets==7.7.1\n" in back, "a pin Kaggle dropped follows Colab again, its comment gone"
    assert back.count("# Kaggle image:") == 1 and "(Colab: 7.17.1)" in back


def test_main_kaggle_reads_the_colab_image_it_starts_from(tmp_path, backend_info, capsys):
    pins = tmp_path / "kaggle-pins.txt"
    pins.write_text(KAGGLE_TEXT, encoding="utf-8")
    args = ["--from", str(backend_info), "--pins", str(pins), "--write", "--kaggle"]
    assert colab_pins.main([*args, str(kaggle_copy(tmp_path, "20260701"))]) == 0
    printed = capsys.readouterr().out
    assert "FROM Colab's release-colab-external-images_20260701-060047_RC00" in printed
    assert "ipywidgets: 7.7.1 → 8.1.5, Kaggle's pin" in printed and f"Wrote {pins}" in printed
    older = colab_pins.read_source(backend_info, rev="HEAD~1").commit
    assert colab_pins.describe(pins)["colab_commit"] == older, "the last Colab commit on or before 2026-07-01"
    assert colab_pins.read_pins(pins)["ipywidgets"] == "8.1.5"


def _in_tmp(tmp: Path, name: str, text: str) -> Path:
    (tmp / name).write_text(text, encoding="utf-8")
    return tmp


@pytest.mark.parametrize("call, message", [
    (lambda tmp, repo: colab_pins.parse_freeze("numpy==2.0.2\n"), "pip-freeze"),
    (lambda tmp, repo: colab_pins.parse_freeze(""), "pip-freeze"),
    (lambda tmp, repo: colab_pins.parse_python("Ubuntu 22.04.5 LTS\nR version 4.6.1\n"), "Python X.Y.Z"),
    (lambda tmp, repo: colab_pins.parse_kaggle("FROM python:3.12\nARG PACKAGE_PATH=/usr/local/lib/python3.12/x\n",
                                               ""), "one Colab image tag"),
    (lambda tmp, repo: colab_pins.parse_kaggle("FROM x/colab-images/public/runtime:release_20260514-1_RC00\nFROM "
                                               "x/colab-images/public/cpu-runtime:release_20260416-1_RC00\n", ""),
     "found 2"),
    (lambda tmp, repo: colab_pins.parse_kaggle("FROM x/colab-images/public/runtime:release_20260514-1_RC00\n", ""),
     "PACKAGE_PATH"),
    (lambda tmp, repo: colab_pins.regenerate("numpy==2.0.2\n", colab_pins.read_source(repo), "2026-12-02"), "Source:"),
    (lambda tmp, repo: colab_pins.regenerate(PINS_TEXT, colab_pins.read_source(repo), "2026-12-02",
                                             colab_pins.read_kaggle(KAGGLE)), "Kaggle image:"),
    (lambda tmp, repo: colab_pins.describe(_in_tmp(tmp, "bad.txt", "# no header\nnumpy==2.1.3\n") / "bad.txt"),
     "Source:"),
    (lambda tmp, repo: colab_pins.read_source(tmp / "absent"), "no such folder.*git clone"),
    (lambda tmp, repo: colab_pins.read_source(tmp), "has no pip-freeze.gpu.txt"),
    (lambda tmp, repo: colab_pins.read_source(_in_tmp(tmp, "pip-freeze.gpu.txt", "torch==2.11.0\n")),
     "no os-info-gpu.txt"),
    (lambda tmp, repo: colab_pins.read_source(repo, rev="nosuchcommit"), "at nosuchcommit"),
    (lambda tmp, repo: colab_pins.colab_commit_on(repo, "2026-05-14"), "on or before 2026-05-14"),
])
def test_bad_input_says_what_is_wrong(call, message, tmp_path, backend_info):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        call(tmp_path, backend_info)


def test_main_says_what_failed_and_writes_nothing(tmp_path, backend_info, capsys):
    pins = tmp_path / "kaggle-pins.txt"
    pins.write_text(KAGGLE_TEXT, encoding="utf-8")
    # the real tag's date (2026-05-14) predates both test commits
    for args in (["--kaggle", str(KAGGLE)], ["--pins", str(tmp_path / "absent.txt")]):
        assert colab_pins.main(["--from", str(backend_info), "--pins", str(pins), "--write", *args]) == 2
    err = capsys.readouterr().err
    assert "on or before 2026-05-14" in err and "absent.txt" in err and pins.read_text(encoding="utf-8") == KAGGLE_TEXT
    with pytest.raises(SystemExit):
        colab_pins.main([])  # --from is required
