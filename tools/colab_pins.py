"""Keep up with Colab and Kaggle: regenerate envs/colab-pins.txt (or envs/kaggle-pins.txt) and print what changed.

Reads the runtime's `pip freeze` and OS info from a clone of googlecolab/backend-info (HEAD, or any commit with
--rev) and sets each pin to Colab's version, keeping the file's sections and comments. A pin commented `# Colab:`
departs from Colab on purpose (torch, setuptools): it is kept, only the Colab version in its comment changes.
Pins missing from Colab's freeze are kept and reported; packages Colab added are not pinned (the Colab-pinned
session, `nox -s colab`, and the version matrix show what then breaks). read_pins() is the file's parser.

Kaggle's image (github.com/Kaggle/docker-python) is built FROM one of Colab's images, then installs
kaggle_requirements.txt. With `--kaggle CLONE` the tool reads the Colab image tag of its Dockerfile.tmpl, takes
backend-info's last commit on or before that tag's date (unless --rev says which), and applies Kaggle's own
`name==version` pins to the packages the file lists (a `# Kaggle:` comment names repository, file and commit).

    git clone https://github.com/googlecolab/backend-info ../backend-info
    python -m tools.colab_pins --from ../backend-info [--rev COMMIT] [--runtime cpu] [--write]
    git clone https://github.com/Kaggle/docker-python ../docker-python
    python -m tools.colab_pins --from ../backend-info --kaggle ../docker-python --pins envs/kaggle-pins.txt --write
Only the clones need the internet; the tests read saved copies (tests/fixtures/colab-backend-info/).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import re
import subprocess
import sys
import textwrap
import urllib.parse
from pathlib import Path

PINS = Path(__file__).resolve().parent.parent / "envs" / "colab-pins.txt"
REPO_URL = "https://github.com/googlecolab/backend-info"
KAGGLE_URL = "https://github.com/Kaggle/docker-python"
KAGGLE_FILES = ("Dockerfile.tmpl", "kaggle_requirements.txt")
# Colab's runtimes: (freeze file, OS info file) as named in backend-info.
RUNTIMES = {"gpu": ("pip-freeze.gpu.txt", "os-info-gpu.txt"), "cpu": ("pip-freeze.txt", "os-info.txt")}
_REQUIREMENT = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<eq>\s*==\s*)(?P<version>[^\s#]+)"
                          r"(?P<rest>\s*(?:#\s*(?P<comment>.*))?)")


def normalize(name: str) -> str:
    """Return a distribution name in PEP 503 normal form (``Jinja2`` -> ``jinja2``, ``a_b.c`` -> ``a-b-c``)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


#: Run by a Python (``python -c``) to print what it has installed; `read_installed` reads the line it prints.
LIST_INSTALLED = ("import importlib.metadata as m, json; "
                  "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")


def read_installed(printed: str) -> dict[str, str]:
    """Return {normalized name: version} from the last line `LIST_INSTALLED` printed."""
    return {normalize(name): version for name, version in json.loads(printed.splitlines()[-1]).items()}


def read_pins(path: Path = PINS, text: str | None = None) -> dict[str, str]:
    """Return {normalized name: version} of a pins file (or of its `text`); each line must be `name==version`."""
    pins: dict[str, str] = {}
    text = Path(path).read_text(encoding="utf-8") if text is None else text
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)", line)
        if match is None:
            raise ValueError(f"{path}:{number}: every line must pin one package as name==version, got {raw!r}")
        name = normalize(match.group(1))
        if name in pins:
            raise ValueError(f"{path}:{number}: {match.group(1)} is pinned twice")
        pins[name] = match.group(2)
    return pins


@dataclasses.dataclass
class Snapshot:
    """One published Colab image: its freeze (parse_freeze), Python, runtime, commit id and date (None: no git)."""

    freeze: dict[str, str | None]
    python: str
    runtime: str = "gpu"
    commit: str | None = None
    date: str | None = None


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)


def parse_freeze(text: str) -> dict[str, str | None]:
    """Return {normalized name: version} of a `pip freeze` listing (None for a URL that is not a wheel's)."""
    found: dict[str, str | None] = {}
    for raw in text.splitlines():
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*(\S+)|@\s*(\S+))", raw.strip())
        if match:  # a wheel's URL names its version: .../torch-2.11.0%2Bcpu-cp313-cp313-manylinux_2_28_x86_64.whl
            wheel = re.search(r"/[^/-]+-([^/-]+)-[^/]*\.whl$", urllib.parse.unquote(match[3] or ""))
            found[normalize(match[1])] = match[2] or (wheel[1] if wheel else None)
    if "torch" not in found:
        raise ValueError("this pip freeze lists no torch: is it Colab's pip-freeze file?")
    return found


def parse_python(text: str) -> str:
    """Return the Python version an os-info file reports (its `Python 3.12.13` line)."""
    match = re.search(r"^Python (\d+\.\d+\.\d+\S*)\s*$", text, re.MULTILINE)
    if match is None:
        raise ValueError("this os-info file has no `Python X.Y.Z` line")
    return match.group(1)


def _read_files(source: Path | str, names: tuple[str, ...], rev: str | None, url: str
                ) -> tuple[list[str], str | None, str | None]:
    """Return (texts of `names`, commit, date) from a folder (a clone's work tree) or a git repository (bare too)."""
    source = Path(source)
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: no such folder; clone it first: git clone {url}")
    probe = _git(source, "rev-parse", "--is-bare-repository", "--show-prefix")  # a subfolder is not the clone
    is_git = probe.returncode == 0 and probe.stdout.split() in (["true"], ["false"])
    from_files = rev is None and (source / names[0]).is_file()
    if not (from_files or is_git):
        raise FileNotFoundError(f"{source} has no {names[0]}: pass a clone of {url}")
    rev, texts = None if from_files else rev or "HEAD", []
    for name in names:
        shown = None if from_files else _git(source, "show", f"{rev}:{name}")
        if (source / name).is_file() if from_files else shown.returncode == 0:
            texts.append((source / name).read_text(encoding="utf-8") if from_files else shown.stdout)
        else:
            raise FileNotFoundError(f"{source}: no {name}" + (f" at {rev}" if rev else ""))
    if from_files and is_git and not _git(source, "status", "--porcelain", "--", *names).stdout.strip():
        rev = "HEAD"  # the files of a clean work tree are HEAD's; other files have no commit
    commit, date = _git(source, "log", "-1", "--format=%H %cs", rev).stdout.split() if rev else (None, None)
    return texts, commit, date


def read_source(source: Path | str, rev: str | None = None, runtime: str = "gpu") -> Snapshot:
    """Read Colab's freeze and OS info from a folder (a clone's work tree) or a git repository (bare too).

    `rev` is a commit of its history (default: the folder's files, else HEAD); `runtime` a key of RUNTIMES.
    """
    texts, commit, date = _read_files(source, RUNTIMES[runtime], rev, REPO_URL)
    return Snapshot(parse_freeze(texts[0]), parse_python(texts[1]), runtime, commit, date)


@dataclasses.dataclass
class KaggleImage:
    """Kaggle's image as docker-python builds it: the Colab image it starts FROM, its Python, its own pins."""

    base: str  # the Colab image's tag, e.g. release-colab-external-images_20260514-060047_RC00
    base_date: str  # the tag's date, YYYY-MM-DD
    python: str  # X.Y, from the Dockerfile's PACKAGE_PATH
    pins: dict[str, str]  # kaggle_requirements.txt's `name==version` lines, names normalized
    commit: str | None = None
    date: str | None = None


def parse_kaggle(dockerfile: str, requirements: str) -> tuple[str, str, str, dict[str, str]]:
    """Return (Colab image tag, its date, Python X.Y, {name: version}) of docker-python's two files."""
    tags = set(re.findall(r"^FROM \S*colab-images/\S*:(\S*?(\d{4})(\d\d)(\d\d)-\d+\S*)\s*$", dockerfile, re.M))
    if len(tags) != 1:
        raise ValueError(f"Dockerfile.tmpl must build FROM one Colab image tag (colab-images/...), found {len(tags)}")
    tag, year, month, day = tags.pop()
    python = re.search(r"^ARG PACKAGE_PATH=\S*/python(\d+\.\d+)/", dockerfile, re.M)
    if python is None:
        raise ValueError("Dockerfile.tmpl has no `ARG PACKAGE_PATH=.../pythonX.Y/...` line")
    pins = {}
    for raw in requirements.splitlines():
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", raw.split("#", 1)[0].strip())
        if match:
            pins[normalize(match[1])] = match[2]
    return tag, f"{year}-{month}-{day}", python[1], pins


def read_kaggle(source: Path | str, rev: str | None = None) -> KaggleImage:
    """Read Kaggle's Dockerfile.tmpl and kaggle_requirements.txt from a clone of Kaggle/docker-python."""
    texts, commit, date = _read_files(source, KAGGLE_FILES, rev, KAGGLE_URL)
    return KaggleImage(*parse_kaggle(*texts), commit=commit, date=date)


def colab_commit_on(source: Path | str, day: str) -> str:
    """Return backend-info's last commit dated on or before `day` (the Colab image a Kaggle image starts FROM)."""
    found = _git(Path(source), "log", "-1", "--format=%H", f"--until={day} 23:59:59", "HEAD").stdout.strip()
    if not found:
        raise FileNotFoundError(f"{source}: no git commit of {REPO_URL} on or before {day}")
    return found


def source_paragraph(snap: Snapshot, today: str) -> list[str]:
    """Return the pins file's `# Source:` paragraph (comment lines) describing `snap`."""
    freeze, os_info = RUNTIMES[snap.runtime]
    where = f"commit {snap.commit} (dated {snap.date})" if snap.commit else "a copy outside git (commit unknown)"
    text = (f"Source: the Colab {snap.runtime.upper()} runtime's `pip freeze`, googlecolab/backend-info on GitHub, "
            f"file {freeze} at {where}; retrieved {today} by tools/colab_pins.py (its README: the runtimes may take "
            f"a day or two to match). That runtime is Python {snap.python} with torch {snap.freeze['torch']} ({os_info} "
            "and the freeze in the same repository).")
    return ["# " + line for line in textwrap.wrap(text, 110, break_on_hyphens=False)]


def kaggle_paragraph(image: KaggleImage, colab_commit: str | None, today: str) -> list[str]:
    """Return the pins file's `# Kaggle image:` paragraph (comment lines) describing `image`."""
    where = f"commit {image.commit} (dated {image.date})" if image.commit else "a copy outside git (commit unknown)"
    text = (f"Kaggle image: Kaggle/docker-python on GitHub at {where}, retrieved {today} by tools/colab_pins.py "
            f"--kaggle. Its Dockerfile.tmpl builds FROM Colab's image {image.base} (`runtime` for the GPU image, "
            f"`cpu-runtime` for the CPU one), Python {image.python} (its PACKAGE_PATH); the Source above is "
            f"backend-info's last commit on or before {image.base_date}"
            + (f" ({colab_commit[:7]})" if colab_commit else "") + ". Then it installs kaggle_requirements.txt "
            "(same commit): its `name==version` pins of packages listed here are applied (`# Kaggle:`); the rest "
            "of its list (learntools, jupyterlab, ...) is not pinned here.")
    return ["# " + line for line in textwrap.wrap(text, 110, break_on_hyphens=False)]


def _paragraph(lines: list[str], head: str) -> tuple[int, int] | None:
    """Return (start, end) of the comment paragraph whose first line starts with `head`, or None."""
    start = next((i for i, line in enumerate(lines) if line.startswith(head)), None)
    if start is None:
        return None
    return start, next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("# ")), len(lines))


def regenerate(pins_text: str, snap: Snapshot, today: str, kaggle: KaggleImage | None = None
               ) -> tuple[str, list[tuple[str, str, str, str, str]]]:
    """Return the new pins text and its changes: (section, name, old, new, note) for every pinned package.

    `note` is "" (follows Colab), "departure" (a `# Colab:` pin: old/new are Colab's versions; a `# Kaggle:` pin
    without `kaggle`), "kaggle" (pinned by `kaggle`'s requirements: old/new are this file's versions) or
    "absent" (no version in Colab's freeze: kept). The first two rows are the Python and the source commit.
    """
    lines, out, rows = pins_text.splitlines(), [], []
    source = _paragraph(lines, "# Source:")
    if source is None:
        raise ValueError("the pins file has no `# Source:` paragraph to rewrite")
    old_source = " ".join(lines[source[0]:source[1]])
    kaggle_at = _paragraph(lines, "# Kaggle image:")
    if kaggle and kaggle_at is None:
        raise ValueError("--kaggle rewrites a file with a `# Kaggle image:` paragraph: envs/kaggle-pins.txt")
    skip = set(range(*source)) | (set(range(*kaggle_at)) if kaggle else set())
    tag = f"Kaggle: Kaggle/docker-python kaggle_requirements.txt at {(kaggle.commit or 'a copy')[:7]}" if kaggle else ""
    section = ""
    for i, line in enumerate(lines):
        if i == source[0]:
            out += source_paragraph(snap, today)
        if kaggle and i == kaggle_at[0]:
            out += kaggle_paragraph(kaggle, snap.commit, today)
        if i in skip:
            continue
        section = line[len("# --- "):] if line.startswith("# --- ") else section
        match = _REQUIREMENT.fullmatch(line)
        if match is None:
            out.append(line)
            continue
        name, pinned, comment = normalize(match["name"]), match["version"], match["comment"] or ""
        colab = snap.freeze.get(name, "")
        head = line[:match.start("version")]
        if kaggle and name in kaggle.pins:
            rows.append((section, name, pinned, kaggle.pins[name], "kaggle"))
            line = f"{head}{kaggle.pins[name]}  # {tag} pins it (Colab: {colab or 'not in its freeze'})"
        elif comment.startswith("Kaggle:") and not kaggle:
            rows.append((section, name, pinned, pinned, "departure"))
        elif comment.startswith("Colab:"):
            old = (comment[len("Colab:"):].split() or [""])[0].rstrip(".,;")
            rows.append((section, name, old, colab or old, "departure"))
            if colab and old:
                line = line[:match.start("comment")] + comment.replace(old, colab, 1)
        else:  # a `# Kaggle:` pin that Kaggle no longer pins follows Colab again
            rows.append((section, name, pinned, colab or pinned, "" if colab else "absent"))
            if colab:
                line = head + colab + ("" if comment.startswith("Kaggle:") else match["rest"])
        out.append(line)
    old_python = re.search(r"Python (\d+\.\d+\.\d+)", old_source)
    old_commit = re.search(r"commit ([0-9a-f]{7,40})", old_source)
    rows.insert(0, ("", "python", old_python[1] if old_python else "?", snap.python, "header"))
    rows.insert(1, ("", "commit", old_commit[1] if old_commit else "?", snap.commit or "?", "header"))
    return "\n".join(out) + "\n", rows


def describe(path: Path = PINS) -> dict[str, str | None]:
    """Return the image a pins file was made from, read from its header (what the matrix table's notes show).

    Keys: "colab_commit", "colab_date", "python", "torch" (of the Source paragraph); "kaggle_commit",
    "kaggle_date", "kaggle_base" (of the `# Kaggle image:` paragraph; None without one).
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    texts = []  # the Source paragraph, then the Kaggle one ("" without one)
    for head in ("# Source:", "# Kaggle image:"):
        at = _paragraph(lines, head) or (0, 0)
        texts.append(" ".join(line[2:] for line in lines[at[0]:at[1]]))
    where, date = r"commit ([0-9a-f]{7,40}) \(dated", r"commit [0-9a-f]{7,40} \(dated (\d{4}-\d\d-\d\d)\)"
    patterns = {"colab_commit": where, "colab_date": date, "python": r"Python (\S+) with torch",
                "torch": r"Python \S+ with torch (\S+)", "kaggle_commit": where, "kaggle_date": date,
                "kaggle_base": r"FROM Colab's image (\S+)"}
    found = {}
    for key, pattern in patterns.items():
        match = re.search(pattern, texts[key.startswith("kaggle")])
        found[key] = match[1] if match else None
    if found["colab_commit"] is None and found["python"] is None:
        raise ValueError(f"{path}: no `# Source:` paragraph naming a commit and a Python")
    return found


def report(rows: list[tuple[str, str, str, str, str]], stack: str = "the notebook stack") -> str:
    """Return the summary of `regenerate`'s rows: Python, torch and the notebook stack always, other pins if changed."""
    arrow = lambda old, new: f"{old} → {new}" if old != new else f"{new} (unchanged)"  # noqa: E731
    text = [f"Python: {arrow(rows[0][2], rows[0][3])} (each matrix row that reads this file names its own Python: "
            "tools/version_matrix.py COMBOS)",
            f"source commit: {arrow(rows[1][2][:12], rows[1][3][:12])}"]
    heading = None
    for section, name, old, new, note in rows[2:]:
        if note == "departure" and (name == "torch" or old != new):
            line = f"{name}: Colab {arrow(old, new)}; the pin departs from Colab on purpose (`# Colab:`), kept"
        elif note == "kaggle":
            line = f"{name}: {arrow(old, new)}, Kaggle's pin (`# Kaggle:`)"
        elif note == "absent":
            line = f"{name}: {old} kept: no version in Colab's freeze (read its comment; drop it if nothing needs it)"
        elif note == "" and (section.startswith(stack) or old != new):
            line = f"{name}: {arrow(old, new)}"
        else:
            continue
        if section != heading:
            text.append(f"--- {section}")
            heading = section
        text.append(f"  {line}")
    changed = sum(old != new for _, _, old, new, note in rows[2:] if note == "")
    return "\n".join(text + [f"{changed} pin(s) change. Packages Colab added are not pinned here: the "
                             "Colab-pinned environment's build and its freeze check show what is missing."])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, required=True,
                        help="a clone (work tree or bare git repository) of googlecolab/backend-info")
    parser.add_argument("--rev", help="read this commit of its history instead of the folder's files / HEAD")
    parser.add_argument("--runtime", choices=sorted(RUNTIMES), default="gpu", help="Colab's runtime (default gpu)")
    parser.add_argument("--kaggle", type=Path, help="a clone of Kaggle/docker-python: Kaggle's image instead of "
                        "Colab's (backend-info's commit of the Colab image it starts FROM, then Kaggle's pins)")
    parser.add_argument("--pins", type=Path, default=PINS, help="the pins file (default %(default)s)")
    parser.add_argument("--write", action="store_true", help="rewrite the pins file (default: only print)")
    args = parser.parse_args(argv)
    try:
        kaggle = read_kaggle(args.kaggle) if args.kaggle else None
        rev = args.rev or (colab_commit_on(args.source, kaggle.base_date) if kaggle else None)
        snap = read_source(args.source, rev, args.runtime)
        old_text = args.pins.read_text(encoding="utf-8")
        text, rows = regenerate(old_text, snap, datetime.date.today().isoformat(), kaggle)
        read_pins(args.pins, text)  # the format the Colab session and the version matrix read
    except (OSError, ValueError) as error:
        print(f"colab_pins: {error}", file=sys.stderr)
        return 2
    if kaggle:
        print(f"Kaggle image ({kaggle.commit or 'folder'}, {kaggle.date or 'date unknown'}): Python {kaggle.python}, "
              f"FROM Colab's {kaggle.base}; backend-info's last commit on or before {kaggle.base_date}:")
    print(f"Colab {args.runtime} image ({snap.commit or 'folder'}, {snap.date or 'date unknown'}) vs {args.pins}:")
    print(report(rows))
    old = rows[1][2]  # the pinned commit: Colab's commits since then that changed the runtime's files
    if snap.commit and _git(args.source, "cat-file", "-e", f"{old}^{{commit}}").returncode == 0:
        log = _git(args.source, "log", "--format=%h %cs %s", f"{old}..{snap.commit}", "--", *RUNTIMES[args.runtime])
        lines = [line.strip()[:110] for line in log.stdout.splitlines()]
        if lines:
            print(f"Colab's commits since {old[:12]} that changed these files:", *lines, sep="\n  ")
    if text != old_text and args.write:
        args.pins.write_text(text, encoding="utf-8")
    if text != old_text:
        print(f"Wrote {args.pins}. Next: the matrix rows that read it (`nox -s \"matrix(ID)\"`), then `nox -s table`."
              if args.write else "Nothing written: add --write to rewrite the pins file.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
