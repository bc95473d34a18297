"""Tests of lessons_lib.ddp (launch, checks, diagnosis) and the DDP plots.

The "launch" tests start real torchrun runs (world size 2, gloo, CPU) of the very scripts notebook 08 writes
with ``%%writefile`` (read from course_src/08_multi_gpu_preview.md): a correct run, after the fall-back from
NCCL (which fails on a CPU) to gloo, whose gradients must equal one process's full-batch gradient, and runs
where one rank fails on purpose, which must end in a clear DDPRunError within a bounded time with no process
left behind.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lessons_lib.ddp import (
    DDPRun,
    DDPRunError,
    _compare_ranks,
    _diagnose,
    _launch_argv,
    _parse_torchrun,
    find_processes,
    launch,
)
from lessons_lib.plots import plot_ddp_differences, plot_ddp_shards

NOTEBOOK_SRC = Path(__file__).resolve().parent.parent / "course_src" / "08_multi_gpu_preview.md"
_WRITEFILE = re.compile(r'```python\n%%writefile "\{work\}/([\w.]+)"\n(.*?)```', re.S)


def notebook_files(folder: Path) -> dict[str, Path]:
    """Write into `folder` the files notebook 08 writes with %%writefile (the very text the learner reads)."""
    files = {}
    for name, body in _WRITEFILE.findall(NOTEBOOK_SRC.read_text(encoding="utf-8")):
        files[name] = folder / name
        files[name].write_text(body, encoding="utf-8")
    return files


# --------------------------------------------------------------------------- real launches


@pytest.fixture(scope="module")
def notebook_run(tmp_path_factory):
    """Run the notebook's train_ddp.py as launch() does there on 2 GPUs: NCCL first (it fails on a CPU)."""
    folder = tmp_path_factory.mktemp("nb08")
    notebook_files(folder)
    with pytest.MonkeyPatch.context() as mp:
        if torch.cuda.device_count() < 2:  # launch() sees 2 GPUs; the ranks are told to use NCCL, as on them
            mp.setattr(torch.cuda, "is_available", lambda: True)
            mp.setattr(torch.cuda, "device_count", lambda: 2)
            mp.setenv("DDP_BACKEND", "nccl")
        start = time.monotonic()
        run = launch("torchrun --standalone --nproc_per_node=2 train_ddp.py", cwd=folder, timeout=120)
    return run, folder, time.monotonic() - start


@pytest.mark.slow
def test_launch_falls_back_from_nccl_and_the_notebook_script_matches_one_process(notebook_run):
    run, folder, elapsed = notebook_run
    assert run.ok and run.error is None and elapsed < 240 and find_processes(str(folder)) == []
    if torch.cuda.device_count() < 2:  # NCCL failed on this machine: one note, then gloo
        assert run.backend == "gloo" and len(run.notes) == 1 and "NCCL" in run.notes[0] and "gloo" in run.notes[0]
    assert run.world_size == 2 and [r["rank"] for r in run.ranks] == [0, 1]
    pids = {r["pid"] for r in run.ranks}
    assert len(pids) == 2 and os.getpid() not in pids  # two real processes
    assert run.command == "torchrun --standalone --nproc_per_node=2 train_ddp.py"
    assert run.summary().startswith("(Chưa so với một tiến trình")
    setup = runpy.run_path(str(folder / "ddp_setup.py"))
    c = run.compare_with_single_process(setup["make_data"](), setup["make_model"](seed=0), lr=0.1)
    assert c is run.comparison and c.ok and c.steps == 3 and c.shard_sizes == (32, 32)
    assert c.grad_diff_between_ranks == 0.0 and c.weight_diff_between_ranks == 0.0  # the same bits on every rank
    assert c.init_diff_before_ddp > 0.1 and c.init_diff_after_ddp == 0.0  # DDP broadcast rank 0's weights
    assert c.local_grad_diff_between_ranks > 1e-3  # each rank's own gradient really differs
    assert c.grad_diff_vs_single < 1e-6 and c.mean_local_vs_allreduced < 1e-6
    assert "✅" in run.summary() and "rank 1" in run.rank_table()
    env = run.ranks[1]["env"]
    assert env["RANK"] == "1" and env["LOCAL_RANK"] == "1" and env["WORLD_SIZE"] == "2" and env["MASTER_PORT"]
    assert run.ranks[0]["steps"][0]["batch"] == run.ranks[0]["shard"][:8]


@pytest.mark.slow
def test_launch_names_the_failing_rank_without_raising(tmp_path, capsys):
    notebook_files(tmp_path)
    start = time.monotonic()
    run = launch("torchrun --standalone --nproc_per_node=2 broken_ddp.py raise", cwd=tmp_path, timeout=90)
    assert time.monotonic() - start < 80  # torchrun noticed the death and stopped rank 0: no wait for the timeout
    assert not run.ok and run.ranks == [] and run.notes == []  # a gloo script: nothing to fall back to
    err = run.error
    assert err.kind == "died" and err.rank == 1
    assert "RuntimeError: rank 1 hỏng cố ý" in str(err) and 'raise RuntimeError("rank 1 hỏng cố ý")' in err.log_tail
    out = capsys.readouterr()
    assert out.out.startswith("$ torchrun --standalone --nproc_per_node=2 broken_ddp.py raise\n")
    assert "❌ DDP: Rank 1" in out.err
    assert "không thành công" in run.summary() and "không thành công" in run.rank_table()
    assert run.compare_with_single_process(None, torch.nn.Linear(1, 1), lr=0.1) is None
    assert find_processes(str(tmp_path)) == []


@pytest.mark.slow
def test_launch_names_a_rank_that_exits_without_a_traceback(tmp_path):
    (tmp_path / "exit_ddp.py").write_text(
        "import os\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
        "if dist.get_rank() == 0:\n    print('rank 0 thoát', flush=True)\n    os._exit(17)\ndist.barrier()\n")
    run = launch("torchrun --standalone --nproc_per_node=2 exit_ddp.py", cwd=tmp_path, timeout=90, echo=False)
    err = run.error
    assert not run.ok and err.kind == "died" and err.rank == 0
    assert "exit code 17" in str(err) and "không có traceback" in str(err) and "rank 0 thoát" in str(err)
    assert find_processes(str(tmp_path)) == []


@pytest.mark.slow
def test_launch_stops_a_hanging_script_and_says_it_hung(tmp_path):
    notebook_files(tmp_path)
    start = time.monotonic()
    run = launch("torchrun --standalone --nproc_per_node=2 broken_ddp.py hang", cwd=tmp_path, timeout=20, echo=False)
    assert time.monotonic() - start < 20 + 15
    assert not run.ok and run.error.kind == "timeout" and run.error.rank is None
    assert "20 s" in str(run.error) and "treo" in str(run.error) and "rank 1:" in str(run.error)
    assert find_processes(str(tmp_path)) == []


def _launch(command="torchrun --nproc_per_node=1 x.py", **kwargs):
    return lambda folder: launch(command, **{"cwd": folder, **kwargs})


def _compare(data=None, model=None, lr=0.1):
    data = data or torch.utils.data.TensorDataset(torch.randn(4, 1), torch.tensor([0, 1, 0, 1]))
    return lambda folder: _run().compare_with_single_process(data, model or torch.nn.Linear(1, 2), lr)


@pytest.mark.parametrize("call, error, named", [
    (_launch(cwd=3), TypeError, "cwd"),
    (_launch(cwd="/nonexistent/lessons_ddp"), ValueError, "cwd"),
    (_launch(timeout=0), ValueError, "timeout"),
    (_launch(timeout="60"), TypeError, "timeout"),
    (_launch(["torchrun", "x.py"]), TypeError, "command"),
    (_launch("python -m torch.distributed.run x.py"), ValueError, "'torchrun'"),
    (_launch("torchrun --standalone"), ValueError, "torchrun --standalone"),  # no script
    (_launch("torchrun --nproc_per_node=0 x.py"), ValueError, "--nproc_per_node"),
    (_launch("torchrun --nproc_per_node=1 missing.py"), ValueError, "missing.py"),
    (_compare(model="model"), TypeError, "nn.Module"),
    (_compare(lr=0), ValueError, "lr"),
    (_compare(data=[1, 2]), TypeError, "TensorDataset"),
    (_compare(model=torch.nn.Linear(3, 2)), ValueError, "mô hình"),
])
def test_argument_checks_name_what_to_pass(tmp_path, call, error, named):
    (tmp_path / "x.py").write_text("")
    with pytest.raises(error) as raised:
        call(tmp_path)
    assert named in str(raised.value)


@pytest.mark.parametrize("command, script, args, nproc", [
    ("torchrun --standalone --nproc_per_node=2 train.py", "train.py", (), 2),
    ("torchrun --standalone --nproc-per-node 3 train.py --lr 0.1 -v", "train.py", ("--lr", "0.1", "-v"), 3),
    ("torchrun --nnodes=1 --nproc_per_node=2 train.py --out d", "train.py", ("--out", "d"), 2),
    ("torchrun 'my script.py'", "my script.py", (), 1),
])
def test_parse_torchrun_uses_torchruns_own_parser(command, script, args, nproc):
    parsed = _parse_torchrun(command)
    assert (parsed.script, parsed.script_args, parsed.nproc_per_node) == (script, args, nproc)


def test_launch_argv_adds_logs_and_no_restarts_but_keeps_the_learners_flags(tmp_path):
    parsed = _parse_torchrun("torchrun --standalone --nproc_per_node=2 --max-restarts=1 train.py --epochs 2")
    argv = _launch_argv(parsed, tmp_path / "run", tmp_path, "python")
    assert argv[:3] == ["python", "-m", "torch.distributed.run"]
    assert argv[3:6] == ["--standalone", "--nproc_per_node=2", "--max-restarts=1"]
    assert f"--log-dir={tmp_path / 'run' / 'logs'}" in argv and "--redirects=3" in argv  # not a folder in /tmp
    assert "--max-restarts=0" not in argv and "--monitor-interval=0.2" in argv
    assert argv[-3:] == [str(tmp_path / "train.py"), "--epochs", "2"]


@pytest.mark.parametrize("by_env", [False, True])
def test_find_processes_finds_a_marked_child(tmp_path, by_env):
    marker = str(tmp_path / "marker_for_find")
    argv, env = [sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ)
    if by_env:
        env["LESSONS_DDP_RUN"] = marker  # how launch() marks every process of a run
    else:
        argv.append(marker)
    child = subprocess.Popen(argv, env=env)
    try:
        deadline = time.monotonic() + 10
        while child.pid not in find_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        environ_readable = Path("/proc/self/environ").exists()  # environments are read on Linux only
        assert find_processes(marker) == ([child.pid] if environ_readable or not by_env else [])
    finally:
        child.kill()
        child.wait()
    assert find_processes(marker) == []


# --------------------------------------------------------------------------- comparison (synthetic)


def _rank(rank, grad, local, weights, shard):
    steps = [{"step": 0, "batch": shard[:2], "local_grad": local, "grad": grad, "weights": weights}]
    return {"rank": rank, "local_rank": rank, "world_size": 2, "backend": "gloo", "device": "cpu", "pid": 100 + rank,
            "n_samples": 4, "shard": shard, "init_before_ddp": [float(rank), 0.0], "init_after_ddp": [0.0, 0.0],
            "steps": steps}


def _synthetic(grad1=(1.0, 2.0)):
    ranks = [_rank(0, [1.0, 2.0], [0.5, 1.0], [0.1, 0.2], [0, 2]),
             _rank(1, list(grad1), [1.5, 3.0], [0.1, 0.2], [1, 3])]
    reference = [{"grad": [1.0, 2.0 + 1e-9], "weights": [0.1, 0.2]}]
    return ranks, reference


def _run(grad1=(1.0, 2.0)):
    ranks, reference = _synthetic(grad1)
    return DDPRun("torchrun x.py", ranks=ranks, wall_s=1.25, comparison=_compare_ranks(ranks, reference))


def test_a_mismatch_is_found_and_the_summary_is_built_from_values():
    run, wrong = _run(), _run(grad1=(1.0, 2.5))
    assert not wrong.comparison.ok and not wrong.comparison.grads_allclose
    assert wrong.comparison.grad_diff_between_ranks == pytest.approx(0.5)
    ranks, reference = _synthetic()
    ranks[1]["shard"] = [0, 3]
    assert not _compare_ranks(ranks, reference).shards_disjoint
    text = run.summary()
    assert ("1.2 s" in text or "1.3 s" in text) and "✅" in text and "gloo" in text and "1.0e-09" in text
    assert "pid 101" in run.rank_table() and "❌" in wrong.summary()


# --------------------------------------------------------------------------- diagnosis (synthetic torchrun logs)


def _log(tmp_path, rank, text, name="stderr.log"):
    folder = tmp_path / "logs" / "run_x" / "attempt_0" / str(rank)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_diagnose_death_with_traceback_and_exit_code(tmp_path):
    _log(tmp_path, 0, "waiting\n")
    _log(tmp_path, 1, "started", name="stdout.log")  # a rank's stdout and stderr are both read
    _log(tmp_path, 1, "[rank1]: Traceback (most recent call last):\n"
                      '[rank1]:   File "train.py", line 3, in <module>\n[rank1]: RuntimeError: boom\n')
    summary = "Root Cause (first observed failure):\n[0]:\n  time : x\n  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 9)\n"
    err = _diagnose(tmp_path, 2, summary, timed_out=False, timeout=60, returncode=1)
    assert err.rank == 1 and err.kind == "died" and "RuntimeError: boom" in str(err) and "exit code 1" in str(err)
    assert "started" in err.log_tail and 'File "train.py", line 3' in err.log_tail and "[rank1]" not in err.log_tail


def test_diagnose_blames_the_cause_not_the_peer_that_lost_its_connection(tmp_path):
    _log(tmp_path, 0, "[rank0]: Traceback (most recent call last):\n"
                      "[rank0]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:1\n")
    _log(tmp_path, 1, "Traceback (most recent call last):\nValueError: bad shape\n")
    err = _diagnose(tmp_path, 2, "", timed_out=False, timeout=60, returncode=1)
    assert err.rank == 1 and "ValueError: bad shape" in str(err) and "Rank 0 cũng báo lỗi kết nối" in str(err)


def test_diagnose_reads_a_cpp_abort(tmp_path):
    _log(tmp_path, 0, "done\n")
    _log(tmp_path, 1, "done\nterminate called without an active exception\n")
    summary = "  rank      : 1 (local_rank: 1)\n  exitcode  : -6 (pid: 9)\n"
    err = _diagnose(tmp_path, 2, summary, timed_out=False, timeout=60, returncode=1)
    assert err.rank == 1 and "exit code -6" in str(err) and "terminate called" in str(err)


def test_diagnose_when_no_rank_started(tmp_path):
    err = _diagnose(tmp_path, 2, "line1\nEADDRINUSE boom", timed_out=False, timeout=60, returncode=1)
    assert err.rank is None and "trước khi rank nào chạy" in str(err) and "EADDRINUSE boom" in str(err)


# --------------------------------------------------------------------------- plots


def test_plots_draw_say_when_there_is_nothing_to_draw_and_reject_bad_input():
    import matplotlib.pyplot as plt

    run = _run()
    ax = plot_ddp_shards(run)
    assert ax.get_yticklabels()[1].get_text() == "rank 1" and "mẫu" in ax.get_xlabel() + ax.get_title()
    ax = plot_ddp_differences(run)
    assert ax.get_xscale() == "log" and len(ax.patches) == len(run.comparison.rows())
    with pytest.raises(TypeError, match="DDPRun"):
        plot_ddp_shards({"ranks": []})
    with pytest.raises(TypeError, match="DDPRun"):
        plot_ddp_differences(run.comparison)
    failed = DDPRun("torchrun x.py", ok=False, error=DDPRunError("boom"))
    assert failed.backend is None and failed.world_size == 0 and failed.comparison is None
    assert "không thành công" in plot_ddp_shards(failed).texts[0].get_text()
    assert "Chưa có phép so sánh" in plot_ddp_differences(failed).texts[0].get_text()
    plt.close("all")
