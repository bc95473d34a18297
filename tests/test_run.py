"""tools/run.py, the one notebook runner: tiny notebooks really run (two at a time, a failing cell, a `%%gpu` cell
skipped and counted, a cache hit, an output-check failure, a timeout); the cache and README's table with fake runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import nbformat
import pytest

from tools import run

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
NOTEBOOKS = [run.shown(p) for p in run.course_notebooks()]
GPU_DEMO = ("%load_ext lessons_lib.notebook", "%%gpu\nprint('GPU BODY RAN')", "%%gpu 2\nprint('TWO GPU BODY RAN')",
            "counter = globals().get('counter', 0) + 1\nprint('run', counter)")


def write_notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _fake_run(source: Path) -> run.Executed:
    nb = nbformat.read(source, as_version=4)
    probe = 'LESSONS_RUN {"cpu": "fake cpu", "cores": 1, "gpus": [], "peak_bytes": 314572800}\n'
    nb.cells.append(nbformat.v4.new_code_cell("probe", outputs=[nbformat.v4.new_output("stream", text=probe)]))
    return run.Executed(source, nb, None, False, 0.1)


# --------------------------------------------------------------------------- real kernels


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="on a GPU the %%gpu cell runs")
def test_runs_twice_counts_gpu_cells_then_answers_from_the_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)  # the run is "alone", as outside the test command
    source = write_notebook(tmp_path / "nb" / "demo.ipynb", *GPU_DEMO)
    cache = tmp_path / "cache"
    assert run.main([str(source), "--save", str(cache), "--gpus", "0"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith(f"| {source}"))
    assert "| ✅ | 0 / 1 (cần 1 GPU, máy có 0), 1 (cần 2 GPU, máy có 0) | đạt |" in row and row.endswith("MiB |")
    assert "✅ SẴN SÀNG: 1 notebook" in out
    executed = nbformat.read(run.saved_path(source, cache), as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "run 2\n", "the second pass, in the same kernel"
    info = executed.metadata[run.RUN_KEY]
    assert info["repeat"] == 2 and info["cores"] >= 1 and info["peak_bytes"] > 0 and info["conditions"] == "alone"
    assert info["key"] == run.cache_key(source, repeat=2)

    assert run.main([str(source), "--save", str(cache), "--gpus", "1"]) == 1, "one GPU: the %%gpu cell must run"
    out = capsys.readouterr().out
    assert "(đã lưu)" in out, "the second call reads the cached copy"
    assert f"{source}::Cell 1 (cần 1 GPU)" in out and "Cell 2" not in out.split("bỏ qua dù máy có đủ GPU")[1]


def test_two_at_a_time_a_failing_cell_fails_its_notebook_only_and_is_not_cached(tmp_path, capsys):
    good = write_notebook(tmp_path / "good.ipynb", "x = 21 * 2", "print(x)")
    broken = write_notebook(tmp_path / "broken.ipynb", "y = 1", "raise RuntimeError('ô hỏng cố ý')")
    assert run.main([str(good), str(broken), "--save", str(tmp_path / "cache"), "--once", "--jobs", "2"]) == 1
    out = capsys.readouterr().out
    assert f"| {good} | ✅ |" in out and f"| {broken} | ❌ |" in out and "ô hỏng cố ý" in out
    assert "❌ KHÔNG SẴN SÀNG: 1 / 2 notebook" in out
    assert run.saved_path(good, tmp_path / "cache").exists() and not run.saved_path(broken, tmp_path / "cache").exists()


def test_an_unexplained_warning_fails_the_output_checks(tmp_path):
    source = write_notebook(tmp_path / "warns.ipynb", "import sys\nif globals().get('seen') is None:\n"
                            "    print('UserWarning: first pass only', file=sys.stderr)\nseen = True")
    executed = run.execute_cached(source, cache_dir=tmp_path / "cache")
    (cell,) = executed.nb.cells
    assert cell.outputs == [] and cell.metadata["first_pass_streams"][0]["text"] == "UserWarning: first pass only\n"
    result = run.report(executed, machine_gpus=0, kind="cpu-build")
    assert not result.ok and any("first pass only" in problem for problem in result.problems)


def test_a_cell_past_the_time_limit_fails(tmp_path):
    source = write_notebook(tmp_path / "slow.ipynb", "import time\ntime.sleep(60)")
    executed = run.execute_cached(source, cache_dir=tmp_path / "cache", timeout=2, repeat=1)
    assert executed.nb is None and "Timeout" in executed.error and executed.wall_s < 30


def test_memory_limit_applies_to_this_process_and_its_children():
    resource = pytest.importorskip("resource")
    import subprocess
    import sys

    child = "import resource; print(resource.getrlimit(resource.RLIMIT_DATA)[0])"
    code = (f"import subprocess, sys\nfrom tools import run\nassert run.set_limits(256) is None\n"
            f"subprocess.run([sys.executable, '-c', {child!r}])")  # a kernel is such a child
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert int(out) == 256 * 2**20
    assert resource.getrlimit(resource.RLIMIT_DATA)[0] != 256 * 2**20, "the caller stays unlimited"


# --------------------------------------------------------------------------- the cache (fake runs)


def test_course_notebooks_lists_lessons_then_solutions(tmp_path):
    for name in ("02_b.ipynb", "01_a.ipynb", "solutions/01_a_solutions.ipynb", ".ipynb_checkpoints/01_a-checkpoint.ipynb"):
        write_notebook(tmp_path / name, "1")
    found = [p.relative_to(tmp_path).as_posix() for p in run.course_notebooks(tmp_path)]
    assert found == ["01_a.ipynb", "02_b.ipynb", "solutions/01_a_solutions.ipynb"]


def test_saves_under_the_path_relative_to_the_repository(tmp_path):
    inside = ROOT / "notebooks" / "01_device_basics.ipynb"
    assert run.saved_path(inside, tmp_path) == tmp_path / "notebooks" / "01_device_basics.ipynb"
    assert run.saved_path(tmp_path / "x" / "demo.ipynb", tmp_path / "out") == tmp_path / "out" / "demo.ipynb"


def test_environment_digest_follows_every_library_file_but_not_bytecode(tmp_path):
    library = tmp_path / "lib"
    (library / "sub").mkdir(parents=True)
    (library / "a.py").write_text("x = 1\n")
    (library / "sub" / "b.py").write_text("y = 2\n")
    first = run.environment_digest(library)
    (library / "sub" / "b.py").write_text("y = 3\n")
    assert run.environment_digest(library) != first
    (library / "__pycache__").mkdir()
    (library / "__pycache__" / "a.pyc").write_bytes(b"\0")
    second = run.environment_digest(library)
    (library / "__pycache__" / "a.pyc").write_bytes(b"\1")
    assert run.environment_digest(library) == second


def test_a_run_beside_other_processes_or_on_other_gpus_is_not_reused(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    alone = run.environment_digest()
    assert run.run_conditions() == "alone" and run.run_conditions(jobs=3) == "with 3 test processes"
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert run.run_conditions() == "with 2 test processes" and run.environment_digest() != alone
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert run.environment_digest() == alone
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert run.environment_digest() != alone


def test_a_changed_notebook_or_pass_count_runs_again(tmp_path, monkeypatch):
    source = write_notebook(tmp_path / "n.ipynb", "print(1)")
    cache = tmp_path / "cache"
    monkeypatch.setattr(run, "execute_notebook", lambda *a, **k: _fake_run(source))
    assert not run.execute_cached(source, cache_dir=cache).cached
    assert run.execute_cached(source, cache_dir=cache).cached
    assert not run.execute_cached(source, cache_dir=cache, repeat=1).cached, "a single pass is not a double one"
    write_notebook(source, "print(2)")
    changed = run.execute_cached(source, cache_dir=cache)
    assert not changed.cached and changed.nb.cells[0].source == "print(2)"
    assert run.execute_cached(source, cache_dir=cache, force=True).cached is False


def test_a_corrupt_cached_copy_is_run_again(tmp_path, monkeypatch):
    source = write_notebook(tmp_path / "n.ipynb", "print(1)")
    target = run.saved_path(source, tmp_path / "cache")
    target.parent.mkdir(parents=True)
    target.write_text("{ not json")
    monkeypatch.setattr(run, "execute_notebook", lambda *a, **k: _fake_run(source))
    result = run.execute_cached(source, cache_dir=tmp_path / "cache")
    assert result.error is None and not result.cached
    assert nbformat.read(target, as_version=4).metadata[run.RUN_KEY]["cpu"] == "fake cpu"


def _twice_at_once(call) -> list:
    """Return the results of `call()` run in two threads at once."""
    results = []
    threads = [threading.Thread(target=lambda: results.append(call())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_callers_at_once_run_the_notebook_once(tmp_path, monkeypatch):
    source = write_notebook(tmp_path / "n.ipynb", "print(1)")
    ran = []

    def slow_run(*args, **kwargs):
        ran.append(1)
        time.sleep(0.5)  # the other caller arrives while this run is still going
        return _fake_run(source)

    monkeypatch.setattr(run, "execute_notebook", slow_run)
    results = _twice_at_once(lambda: run.execute_cached(source, cache_dir=tmp_path / "c"))
    assert ran == [1], "the second caller must wait for the first run and read its copy"
    assert sorted(r.cached for r in results) == [False, True]


def test_two_walkers_of_the_course_split_it_instead_of_waiting_on_each_other(tmp_path, monkeypatch):
    sources = [write_notebook(tmp_path / f"{name}.ipynb", "print(1)") for name in "ab"]
    runner_of = {}

    def slow_run(path, *args, **kwargs):
        runner_of[Path(path).name] = threading.get_ident()
        time.sleep(0.5)  # the other walker arrives while this one runs its first notebook
        return _fake_run(Path(path))

    monkeypatch.setattr(run, "execute_notebook", slow_run)
    walks = _twice_at_once(lambda: run.execute_all_cached(sources, cache_dir=tmp_path / "c"))
    assert sorted(runner_of) == ["a.ipynb", "b.ipynb"] and len(set(runner_of.values())) == 2, runner_of
    assert [[r.source.name for r in walk if r.error is None] for walk in walks] == [["a.ipynb", "b.ipynb"]] * 2


# --------------------------------------------------------------------------- README's notebook table


def _reports(peak_mib=lambda i: 300 + i) -> list[run.Report]:
    reports = []
    for i, path in enumerate(NOTEBOOKS):
        nb = nbformat.v4.new_notebook()
        nb.metadata[run.RUN_KEY] = {"peak_bytes": peak_mib(i) * 2**20 if peak_mib(i) else None}
        reports.append(run.Report(path, run.Executed(ROOT / path, nb, None, False, 5.0 + i), [], 0, {}, []))
    return reports


def table_rows(readme: str) -> list[str]:
    return [line for line in readme.splitlines() if run._ROW.match(line)]


def test_readme_table_links_every_notebook_of_the_course_once():  # so --readme measures each one
    linked = [path for row in table_rows(README) for path in run._LINK.findall(row)]
    assert sorted(linked) == sorted(NOTEBOOKS)


def test_times_go_into_the_last_column_learner_then_solutions():
    new = run.readme_with_times(README, _reports(), "Thời gian CPU đo bằng X.")
    row = next(r for r in table_rows(new) if "01_device_basics.ipynb" in r)
    learner = NOTEBOOKS.index("notebooks/01_device_basics.ipynb")
    solution = NOTEBOOKS.index("notebooks/solutions/01_device_basics_solutions.ipynb")
    assert row.endswith(f"| {5 + learner} s · {300 + learner} MiB / {5 + solution} s · {300 + solution} MiB |")
    changed = set(new.splitlines()) - set(README.splitlines())
    assert changed <= {*table_rows(new), "Thời gian CPU đo bằng X."} and "Thời gian CPU đo bằng X." in changed
    assert run.readme_with_times(new, _reports(), "Thời gian CPU đo bằng X.") == new
    unknown = run.readme_with_times(README, _reports(lambda i: None), "x")
    assert table_rows(unknown)[0].endswith(" s |") and "MiB" not in table_rows(unknown)[0], "no peak: the time alone"
    with pytest.raises(ValueError, match="no measurement for"):
        run.readme_with_times(README, _reports()[1:], "x")


def test_readme_option_takes_no_notebook_names(capsys):
    with pytest.raises(SystemExit):
        run.main(["--readme", "notebooks/01_device_basics.ipynb"])
    assert "give no notebook names" in capsys.readouterr().err


def test_kernels_start_one_at_a_time_and_the_lock_is_let_go_before_the_first_cell(tmp_path, monkeypatch):
    events = []
    monkeypatch.setenv(run.KERNEL_LOCK_DIR_ENV, str(tmp_path))

    class Recording:
        def __init__(self, path):
            events.append(Path(path).relative_to(tmp_path).as_posix())

        def acquire(self):
            events.append("acquire")

        def release(self):
            events.append("release")

    monkeypatch.setattr(run, "FileLock", Recording)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    run.notebook_client(nb, tmp_path, 60, on_cell_start=lambda **_: events.append("cell")).execute()
    assert events == ["bai14-kernel-start.lock", "acquire", "release", "cell"]

    async def no_kernel(self, **kwargs):
        raise RuntimeError("kernel failed to start")

    events.clear()
    monkeypatch.setattr(run.nbclient.NotebookClient, "async_start_new_kernel", no_kernel)
    with pytest.raises(RuntimeError, match="failed to start"):
        run.notebook_client(nb, tmp_path, 60).execute()
    assert events == ["bai14-kernel-start.lock", "acquire", "release"]  # a failed start lets the others go on
