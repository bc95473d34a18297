"""Tests of lessons_lib.ddp (launchers, checks, diagnosis), lessons_lib.ddp_demo and the DDP plots.

The tests named "launch" start real torchrun runs (world size 2, gloo, CPU): a correct run whose
gradients must equal the single-process full-batch gradient, and runs where one rank fails on
purpose, which must end in a clear DDPRunError within a bounded time with no process left behind.
The ``launch()`` tests run the very scripts notebook 08 writes with ``%%writefile`` (read from
course_src/08_multi_gpu_preview.md), including the fall-back from NCCL (which fails on a CPU) to gloo.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from lessons_lib import ddp_demo  # noqa: E402
from lessons_lib.ddp import (  # noqa: E402
    DDPComparison,
    DDPRun,
    DDPRunError,
    _diagnose,
    _launch_argv,
    compare_ranks,
    find_processes,
    free_port,
    launch,
    load_ddp_results,
    parse_torchrun,
    rank_log,
    run_ddp_demo,
    single_process_steps,
    torchrun_command,
)
from lessons_lib.plots import plot_ddp_differences, plot_ddp_shards  # noqa: E402


def _no_leftovers(marker: Path) -> None:
    assert find_processes(str(marker)) == [], "processes of the DDP run are still alive"


# --------------------------------------------------------------------------- real launches


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp_good")
    start = time.monotonic()
    run = run_ddp_demo(nproc_per_node=2, steps=3, backend="gloo", timeout=180, out_dir=out)
    return run, out, time.monotonic() - start


def test_launch_gradients_equal_single_process(good_run):
    run, out, _ = good_run
    c = run.comparison
    assert run.world_size == 2 and run.backend == "gloo"
    assert c.shards_disjoint and c.shards_cover_data and c.shard_sizes == (32, 32)
    assert c.grad_diff_between_ranks == 0.0  # all-reduce leaves the same bits on every rank
    assert c.weight_diff_between_ranks == 0.0
    assert c.init_diff_before_ddp > 0.1 and c.init_diff_after_ddp == 0.0  # DDP broadcast rank 0's weights
    assert c.local_grad_diff_between_ranks > 1e-3  # each rank's own gradient really differs
    assert c.grads_allclose and c.weights_allclose and c.ok
    assert c.grad_diff_vs_single < 1e-6 and c.mean_local_vs_allreduced < 1e-6


def test_launch_matches_gradient_recomputed_here(good_run):
    """Recompute the single-process full-batch gradient in this process, independent of rank 0."""
    run, _, _ = good_run
    data = ddp_demo.make_data(0)
    model = ddp_demo.make_model(0)
    torch.nn.utils.vector_to_parameters(torch.tensor(run.ranks[0]["init_after_ddp"]), model.parameters())
    batch = run.ranks[0]["steps"][0]["batch"] + run.ranks[1]["steps"][0]["batch"]
    loss = torch.nn.functional.cross_entropy(model(data.tensors[0][batch]), data.tensors[1][batch])
    grad = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(model.parameters()))])
    for r in run.ranks:
        torch.testing.assert_close(torch.tensor(r["steps"][0]["grad"]), grad, atol=1e-6, rtol=1e-5)


def test_launch_is_clean(good_run):
    run, out, elapsed = good_run
    assert elapsed < 180
    pids = {r["pid"] for r in run.ranks}
    assert len(pids) == 2 and os.getpid() not in pids  # two real processes
    for rank in (0, 1):
        log = (out / f"rank{rank}.log").read_text()
        assert "barrier before teardown" in log and "destroy_process_group" in log and log.rstrip().endswith("done")
        assert "terminate called" not in log and "Traceback" not in log
    assert "--nproc_per_node=2" in run.command and "lessons_lib.ddp_demo" in run.command
    assert run.shell_command.startswith("torchrun --nnodes=1 --nproc_per_node=2 ")
    env = run.ranks[1]["env"]
    assert env["RANK"] == "1" and env["LOCAL_RANK"] == "1" and env["WORLD_SIZE"] == "2" and env["MASTER_PORT"]
    _no_leftovers(out)
    ranks, reference = load_ddp_results(out)
    assert len(ranks) == 2 and len(reference) == 3


@pytest.mark.parametrize("rank, mode", [(1, "raise"), (0, "exit")])
def test_launch_failing_rank_gives_clear_error(tmp_path, rank, mode):
    start = time.monotonic()
    with pytest.raises(DDPRunError) as info:
        run_ddp_demo(nproc_per_node=2, steps=2, backend="gloo", timeout=120, fail_rank=rank, fail_mode=mode,
                     out_dir=tmp_path)
    elapsed = time.monotonic() - start
    err = info.value
    assert err.rank == rank and err.kind == "died"
    assert f"Rank {rank}" in str(err) and "on purpose" in err.log_tail
    if mode == "raise":
        assert "injected failure on rank 1 at step 0" in str(err)
    else:
        assert f"exit code {ddp_demo.FAIL_EXIT_CODE}" in str(err)
    assert elapsed < 100  # torchrun noticed the death and stopped the other rank: no wait for the timeout
    _no_leftovers(tmp_path)


def test_launch_hanging_rank_times_out_and_names_it(tmp_path):
    start = time.monotonic()
    with pytest.raises(DDPRunError) as info:
        run_ddp_demo(nproc_per_node=2, steps=1, backend="gloo", timeout=30, fail_rank=1, fail_mode="hang",
                     fail_step=-1, out_dir=tmp_path)
    elapsed = time.monotonic() - start
    err = info.value
    assert err.kind == "timeout" and err.rank == 1
    assert "30 s" in str(err) and "hanging on purpose" in str(err) and "rank 0: 'init_process_group" in str(err)
    assert elapsed < 30 + 15
    _no_leftovers(tmp_path)


# --------------------------------------------------------------------------- processes and command


def test_free_port_is_bindable():
    import socket

    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    with pytest.raises(TypeError, match="address string"):
        free_port(127)


def test_find_processes_finds_a_marked_child(tmp_path):
    marker = str(tmp_path / "marker_for_find")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        deadline = time.monotonic() + 10
        while child.pid not in find_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert find_processes(marker) == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert find_processes(marker) == []
    with pytest.raises(ValueError, match="8\\+ characters"):
        find_processes("py")
    with pytest.raises(TypeError, match="marker must be a str"):
        find_processes(None)


def test_torchrun_command_flags(tmp_path):
    cmd = torchrun_command(tmp_path, nproc_per_node=2, master_port=12345, steps=2, backend="gloo", python="python")
    assert cmd[:3] == ["python", "-m", "torch.distributed.run"]
    assert "--nproc_per_node=2" in cmd and "--master_port=12345" in cmd and "--master_addr=127.0.0.1" in cmd
    assert f"--log_dir={tmp_path / 'torchrun-logs'}" in cmd  # torchrun's files stay in the run folder, not /tmp
    assert cmd[cmd.index("-m", 3) + 1] == "lessons_lib.ddp_demo" and str(tmp_path) in cmd
    assert not any(a.startswith("--master_port") for a in torchrun_command(tmp_path))
    with pytest.raises(TypeError, match="nproc_per_node must be an int"):
        torchrun_command(tmp_path, nproc_per_node="2")
    with pytest.raises(ValueError, match="nproc_per_node must be >= 1"):
        torchrun_command(tmp_path, nproc_per_node=0)
    with pytest.raises(ValueError, match="backend must be one of"):
        torchrun_command(tmp_path, backend="mpi")
    with pytest.raises(TypeError, match="folder path"):
        torchrun_command(3)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"steps": 5}, ValueError, "between 1 and 4"),
    ({"steps": 1.5}, TypeError, "steps must be an int"),
    ({"nproc_per_node": 0}, ValueError, ">= 1"),
    ({"backend": "nccl2"}, ValueError, "backend must be one of"),
    ({"timeout": 0}, ValueError, "positive number of seconds"),
    ({"timeout": "60"}, ValueError, "positive number of seconds"),
    ({"fail_rank": 2}, ValueError, "between 0 and 1"),
    ({"fail_rank": "1"}, TypeError, "fail_rank must be an int"),
    ({"fail_mode": "crash"}, ValueError, "fail_mode must be one of"),
    ({"fail_step": -2}, ValueError, "fail_step must be >= -1"),
    ({"fail_step": 3, "steps": 3}, ValueError, "between 0 and 2"),
    ({"out_dir": 5}, TypeError, "folder path"),
    ({"out_dir": "/nonexistent/lessons_ddp"}, ValueError, "existing folder"),
    ({"python_exit": "yes"}, TypeError, "python_exit must be True or False"),
])
def test_run_ddp_demo_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        run_ddp_demo(**kwargs)


def test_run_ddp_demo_rejects_non_empty_out_dir(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(ValueError, match="empty folder"):
        run_ddp_demo(out_dir=tmp_path)


def test_load_ddp_results_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no finished DDP run"):
        load_ddp_results(tmp_path)
    with pytest.raises(TypeError, match="folder path"):
        load_ddp_results(None)


# --------------------------------------------------------------------------- comparison (synthetic)


def _rank(rank, grad, local, weights, shard, before=None):
    steps = [{"step": 0, "batch": shard[:2], "loss": 1.0, "local_grad": local, "grad": grad, "weights": weights}]
    return {"rank": rank, "local_rank": rank, "world_size": 2, "backend": "gloo", "device": "cpu", "pid": 100 + rank,
            "n_samples": 4, "shard": shard, "init_before_ddp": before or [float(rank), 0.0],
            "init_after_ddp": [0.0, 0.0], "steps": steps}


def _synthetic(grad1=(1.0, 2.0)):
    ranks = [_rank(0, [1.0, 2.0], [0.5, 1.0], [0.1, 0.2], [0, 2]),
             _rank(1, list(grad1), [1.5, 3.0], [0.1, 0.2], [1, 3])]
    reference = [{"step": 0, "batch": [0, 2, 1, 3], "loss": 1.0, "grad": [1.0, 2.0 + 1e-9], "weights": [0.1, 0.2]}]
    return ranks, reference


def test_compare_ranks_on_matching_data():
    c = compare_ranks(*_synthetic())
    assert c.ok and c.grads_allclose and c.shards_disjoint and c.shards_cover_data
    assert c.grad_diff_between_ranks == 0.0 and c.mean_local_vs_allreduced == 0.0
    assert c.local_grad_diff_between_ranks == pytest.approx(2.0)
    assert c.init_diff_before_ddp == 1.0 and c.init_diff_after_ddp == 0.0
    assert c.grad_diff_vs_single == pytest.approx(1e-9)
    assert len(c.rows()) == 8


def test_compare_ranks_detects_mismatch():
    c = compare_ranks(*_synthetic(grad1=(1.0, 2.5)))
    assert not c.ok and not c.grads_allclose
    assert c.grad_diff_between_ranks == pytest.approx(0.5)
    ranks, reference = _synthetic()
    ranks[1]["shard"] = [0, 3]
    assert not compare_ranks(ranks, reference).shards_disjoint


def test_compare_ranks_bad_input():
    ranks, reference = _synthetic()
    with pytest.raises(TypeError, match="non-empty list of per-rank dicts"):
        compare_ranks([], reference)
    with pytest.raises(TypeError, match="reference must be"):
        compare_ranks(ranks, "ref")
    with pytest.raises(ValueError, match="same number"):
        compare_ranks(ranks, reference * 2)
    with pytest.raises(ValueError, match="atol must be a finite number"):
        compare_ranks(ranks, reference, atol=-1)
    ranks[1]["steps"][0]["grad"] = [1.0]
    with pytest.raises(ValueError, match="lengths"):
        compare_ranks(ranks, reference)


def test_ddp_run_summary_is_built_from_values():
    ranks, reference = _synthetic()
    run = DDPRun(ranks=ranks, reference=reference, wall_s=1.25, command=["torchrun"])
    text = run.summary()
    assert "1.2 s" in text or "1.3 s" in text
    assert "✅" in text and "gloo" in text and "1.0e-09" in text
    assert "rank 1" in run.rank_table() and "pid 101" in run.rank_table()
    bad = DDPRun(ranks=_synthetic(grad1=(1.0, 2.5))[0], reference=reference, wall_s=1.0, command=[])
    assert "❌" in bad.summary()


# --------------------------------------------------------------------------- diagnosis (synthetic logs)


def _log(tmp_path, rank, lines):
    text = "\n".join(f"[rank {rank} | #{i + 1} | +0.{i}s | t=100.{i}] {line}" for i, line in enumerate(lines))
    (tmp_path / f"rank{rank}.log").write_text(text + "\n")


def test_diagnose_timeout_names_the_rank_that_is_not_waiting(tmp_path):
    _log(tmp_path, 0, ["started", "init (collective: x)"])
    _log(tmp_path, 1, ["started", "at start: hanging on purpose"])
    err = _diagnose(tmp_path, 2, "", timed_out=True, timeout=7, returncode=None)
    assert err.rank == 1 and err.kind == "timeout" and "7 s" in str(err) and "hanging on purpose" in str(err)
    # When every rank waits in a collective, the one that made the least progress is named.
    _log(tmp_path, 0, ["started", "init (collective: x)", "DDP (collective: y)", "step 0: backward (collective: z)"])
    _log(tmp_path, 1, ["started", "init (collective: x)", "DDP (collective: y)"])
    assert _diagnose(tmp_path, 2, "", timed_out=True, timeout=7, returncode=None).rank == 1


def test_diagnose_death_with_traceback_and_exit_code(tmp_path):
    _log(tmp_path, 0, ["started", "step 0: backward"])
    _log(tmp_path, 1, ["started", "step 0: forward done", "ERROR"])
    with open(tmp_path / "rank1.log", "a") as f:
        f.write("Traceback (most recent call last):\n  File x\nRuntimeError: boom\n")
    summary = "Root Cause (first observed failure):\n[0]:\n  time : x\n  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 9)\n"
    err = _diagnose(tmp_path, 2, summary, timed_out=False, timeout=60, returncode=1)
    assert err.rank == 1 and err.kind == "died" and "RuntimeError: boom" in str(err) and "exit code 1" in str(err)


def test_diagnose_death_without_traceback_uses_torchrun_summary(tmp_path):
    _log(tmp_path, 0, ["started", "step 0: exiting on purpose"])
    _log(tmp_path, 1, ["started", "step 0: backward"])
    summary = "  rank      : 0 (local_rank: 0)\n  exitcode  : 17 (pid: 9)\n  rank      : 1 (local_rank: 1)\n  exitcode  : -15 (pid: 10)"
    err = _diagnose(tmp_path, 2, summary, timed_out=False, timeout=60, returncode=1)
    assert err.rank == 0 and "exit code 17" in str(err)


def test_diagnose_blames_the_cause_not_the_peer_that_lost_its_connection(tmp_path):
    _log(tmp_path, 0, ["started", "step 0: backward", "ERROR"])
    with open(tmp_path / "rank0.log", "a") as f:  # rank 0 only lost its peer
        f.write("Traceback (most recent call last):\nRuntimeError: Connection closed by peer [127.0.0.1]:5531\n"
                "[rank0]: RuntimeError: Connection closed by peer\n")
    _log(tmp_path, 1, ["started", "step 0: failing on purpose", "ERROR"])
    with open(tmp_path / "rank1.log", "a") as f:
        f.write("Traceback (most recent call last):\nRuntimeError: injected failure\n")
    err = _diagnose(tmp_path, 2, "", timed_out=False, timeout=60, returncode=1)
    assert err.rank == 1 and "injected failure" in str(err) and "Rank 0" in str(err)  # rank 0 named as an echo
    # A rank that vanished without a traceback (os._exit, kill -9) is the cause; the peer error is the echo.
    (tmp_path / "rank1.log").unlink()
    _log(tmp_path, 1, ["started", "step 0: exiting on purpose"])
    summary = "  rank      : 1 (local_rank: 1)\n  exitcode  : 17 (pid: 9)\n"
    err = _diagnose(tmp_path, 2, summary, timed_out=False, timeout=60, returncode=1)
    assert err.rank == 1 and "exit code 17" in str(err) and "traceback" in str(err)


def test_diagnose_when_no_rank_started(tmp_path):
    err = _diagnose(tmp_path, 2, "line1\nEADDRINUSE boom", timed_out=False, timeout=60, returncode=1)
    assert err.rank is None and "EADDRINUSE boom" in str(err)


# --------------------------------------------------------------------------- the demo script itself


def test_demo_refuses_to_run_without_torchrun(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(SystemExit, match="torchrun"):
        ddp_demo.main(["--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="existing directory"):
        ddp_demo.main(["--out", str(tmp_path / "missing")])


def test_demo_data_and_model_are_deterministic():
    a, b = ddp_demo.make_data(0), ddp_demo.make_data(0)
    assert torch.equal(a.tensors[0], b.tensors[0]) and len(a) == ddp_demo.N_SAMPLES
    m1, m2 = ddp_demo.make_model(3), ddp_demo.make_model(3)
    assert all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters(), strict=True))
    assert ddp_demo.choose_backend("gloo", 2) == "gloo"
    assert ddp_demo.choose_backend("auto", 2) == ("nccl" if torch.cuda.device_count() >= 2 else "gloo")
    parser = ddp_demo.build_parser()
    assert parser.parse_args(["--out", "x"]).exit == "os"  # finished ranks end with exit_rank() (issue 15)
    assert parser.parse_args(["--out", "x", "--exit", "python"]).exit == "python"


# --------------------------------------------------------------------------- plots


def test_plots_draw_and_reject_bad_input():
    ranks, reference = _synthetic()
    run = DDPRun(ranks=ranks, reference=reference, wall_s=1.0, command=[])
    ax = plot_ddp_shards(run)
    assert ax.get_yticklabels()[1].get_text() == "rank 1" and "mẫu" in ax.get_xlabel() + ax.get_title()
    ax = plot_ddp_differences(run)
    assert ax.get_xscale() == "log" and len(ax.patches) == 8
    assert isinstance(run.comparison, DDPComparison) and plot_ddp_differences(run.comparison) is not None
    with pytest.raises(TypeError, match="DDPRun"):
        plot_ddp_shards({"ranks": []})
    with pytest.raises(TypeError, match="DDPComparison"):
        plot_ddp_differences([1, 2])
    import matplotlib.pyplot as plt

    plt.close("all")


# --------------------------------------------------------------------------- launch(): a learner's torchrun command

NOTEBOOK_SRC = Path(__file__).resolve().parent.parent / "course_src" / "08_multi_gpu_preview.md"
_WRITEFILE = re.compile(r'```python\n%%writefile "\{work\}/([\w.]+)"\n(.*?)```', re.S)


def notebook_files(folder: Path) -> dict[str, Path]:
    """Write into `folder` the files notebook 08 writes with %%writefile (the very text the learner reads)."""
    files = {}
    for name, body in _WRITEFILE.findall(NOTEBOOK_SRC.read_text(encoding="utf-8")):
        files[name] = folder / name
        files[name].write_text(body, encoding="utf-8")
    return files


def test_notebook_writes_the_ddp_scripts(tmp_path):
    files = notebook_files(tmp_path)
    assert {"ddp_setup.py", "train_ddp.py", "broken_ddp.py"} <= set(files)
    script = files["train_ddp.py"].read_text()
    for needed in ("choose_backend()", "torch.cuda.set_device(device)", "dist.init_process_group(backend)",
                   "DistributedSampler(data, shuffle=True, seed=0, drop_last=True)", "DistributedDataParallel(",
                   "rec.save()", "dist.barrier()", "dist.destroy_process_group()", "exit_rank()"):
        assert needed in script, needed
    assert script.index("rec.save()") < script.index("dist.barrier()") < script.index("exit_rank()")


@pytest.fixture(scope="module")
def notebook_run(tmp_path_factory):
    """Run the notebook's train_ddp.py as launch() does there, but asking for NCCL first (it fails on a CPU)."""
    folder = tmp_path_factory.mktemp("nb08")
    notebook_files(folder)
    start = time.monotonic()
    run = launch("torchrun --standalone --nproc_per_node=2 train_ddp.py", cwd=folder, timeout=120, backend="nccl")
    return run, folder, time.monotonic() - start


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="with 2 GPUs NCCL works and there is no fallback")
def test_launch_falls_back_to_gloo_when_nccl_fails(notebook_run):
    run, folder, elapsed = notebook_run
    assert run.ok and run.error is None and run.backend == "gloo"
    assert len(run.notes) == 1 and "NCCL" in run.notes[0] and "gloo" in run.notes[0]
    assert elapsed < 240
    assert find_processes(str(folder)) == []


def test_launch_of_the_notebook_script_matches_one_process(notebook_run):
    run, folder, _ = notebook_run
    assert run.world_size == 2 and [r["rank"] for r in run.ranks] == [0, 1]
    assert run.shell_command == "torchrun --standalone --nproc_per_node=2 train_ddp.py"
    assert run.summary().startswith("(Chưa so với một tiến trình")
    setup = runpy.run_path(str(folder / "ddp_setup.py"))
    c = run.compare_with_single_process(setup["make_data"](), setup["make_model"](seed=0), lr=0.1)
    assert c is run.comparison and c.ok and c.steps == 3 and c.shard_sizes == (32, 32)
    assert c.grad_diff_between_ranks == 0.0 and c.init_diff_before_ddp > 0.1 and c.local_grad_diff_between_ranks > 1e-3
    assert "✅" in run.summary() and "rank 1" in run.rank_table()
    assert run.ranks[1]["env"]["RANK"] == "1" and run.ranks[0]["steps"][0]["batch"] == run.ranks[0]["shard"][:8]


def test_launch_names_the_failing_rank_without_raising(tmp_path, capsys):
    notebook_files(tmp_path)
    run = launch("torchrun --standalone --nproc_per_node=2 broken_ddp.py raise", cwd=tmp_path, timeout=90)
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


def test_launch_stops_a_hanging_script_and_says_it_hung(tmp_path):
    notebook_files(tmp_path)
    start = time.monotonic()
    run = launch("torchrun --standalone --nproc_per_node=2 broken_ddp.py hang", cwd=tmp_path, timeout=20, echo=False)
    assert time.monotonic() - start < 20 + 15
    assert not run.ok and run.error.kind == "timeout" and run.error.rank is None
    assert "20 s" in str(run.error) and "treo" in str(run.error) and "rank 1:" in str(run.error)
    assert find_processes(str(tmp_path)) == []


def test_launch_check_true_raises_the_error(monkeypatch, tmp_path):
    from lessons_lib import ddp as ddp_module

    (tmp_path / "x.py").write_text("")
    failed = DDPRun(ranks=[], reference=[], wall_s=1.0, command="torchrun x.py", ok=False,
                    error=DDPRunError("Rank 0 chết", rank=0))
    monkeypatch.setattr(ddp_module, "_launch_once", lambda *a: failed)
    with pytest.raises(DDPRunError, match="Rank 0 chết"):
        launch("torchrun --nproc_per_node=1 x.py", cwd=tmp_path, check=True, echo=False)
    assert launch("torchrun --nproc_per_node=1 x.py", cwd=tmp_path, echo=False) is failed


@pytest.mark.parametrize("command, script, args, nproc, module", [
    ("torchrun --standalone --nproc_per_node=2 train.py", "train.py", (), 2, False),
    ("torchrun --standalone --nproc-per-node 3 train.py --lr 0.1 -v", "train.py", ("--lr", "0.1", "-v"), 3, False),
    ("python -m torch.distributed.run --nnodes=1 --nproc_per_node=2 -m pkg.mod --out d", "pkg.mod", ("--out", "d"), 2,
     True),
    ("torchrun 'my script.py'", "my script.py", (), 1, False),
])
def test_parse_torchrun_uses_torchruns_own_parser(command, script, args, nproc, module):
    parsed = parse_torchrun(command)
    assert (parsed.script, parsed.script_args, parsed.nproc_per_node, parsed.module) == (script, args, nproc, module)
    assert parsed.text == command


def test_parse_torchrun_rejects_what_is_not_a_torchrun_command():
    with pytest.raises(TypeError, match="command must be a str"):
        parse_torchrun(["torchrun", "x.py"])
    with pytest.raises(ValueError, match="must start with 'torchrun'"):
        parse_torchrun("python train.py")
    with pytest.raises(ValueError, match="torchrun cannot parse"):
        parse_torchrun("torchrun --standalone")  # no script
    with pytest.raises(ValueError, match="at least one process"):
        parse_torchrun("torchrun --nproc_per_node=0 x.py")


def test_launch_argv_adds_logs_and_no_restarts_but_keeps_the_learners_flags(tmp_path):
    parsed = parse_torchrun("torchrun --standalone --nproc_per_node=2 --max-restarts=1 train.py --epochs 2")
    argv = _launch_argv(parsed, tmp_path / "run", tmp_path, "python")
    assert argv[:3] == ["python", "-m", "torch.distributed.run"]
    assert argv[3:6] == ["--standalone", "--nproc_per_node=2", "--max-restarts=1"]
    assert f"--log-dir={tmp_path / 'run' / 'logs'}" in argv and "--redirects=3" in argv
    assert "--max-restarts=0" not in argv and "--monitor-interval=0.2" in argv
    assert argv[-3:] == [str(tmp_path / "train.py"), "--epochs", "2"]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"cwd": 3}, TypeError, "folder path"),
    ({"cwd": "/nonexistent/lessons_ddp"}, ValueError, "existing folder"),
    ({"timeout": 0}, ValueError, "positive number of seconds"),
    ({"backend": "mpi"}, ValueError, "backend must be one of"),
])
def test_launch_rejects_bad_input(tmp_path, kwargs, error, match):
    (tmp_path / "x.py").write_text("")
    kwargs.setdefault("cwd", tmp_path)
    with pytest.raises(error, match=match):
        launch("torchrun --nproc_per_node=1 x.py", **kwargs)
    with pytest.raises(ValueError, match="no script 'missing.py'"):
        launch("torchrun --nproc_per_node=1 missing.py", cwd=tmp_path)


def test_find_processes_finds_a_child_by_its_environment(tmp_path):
    marker = str(tmp_path / "env_marker_run")
    env = dict(os.environ, LESSONS_DDP_RUN=marker)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while child.pid not in find_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        expected = [child.pid] if Path("/proc/self/environ").exists() else []  # environments are read on Linux
        assert find_processes(marker) == expected
    finally:
        child.kill()
        child.wait()


def test_rank_log_prefers_the_ranks_own_file_then_torchruns(tmp_path):
    attempt = tmp_path / "logs" / "run_x" / "attempt_0" / "1"
    attempt.mkdir(parents=True)
    (attempt / "stdout.log").write_text("hello")
    (attempt / "stderr.log").write_text("[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: x\n")
    assert rank_log(tmp_path, 1) == "hello\n[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: x\n"
    assert rank_log(tmp_path, 0) == ""
    (tmp_path / "rank1.log").write_text("own")
    assert rank_log(tmp_path, 1) == "own"
    with pytest.raises(TypeError, match="folder path"):
        rank_log(None, 0)
    with pytest.raises(ValueError, match="rank phải ≥ 0"):
        rank_log(tmp_path, -1)


def test_diagnose_reads_a_plain_scripts_prefixed_traceback(tmp_path):
    for rank, err in ((0, "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:1"),
                      (1, "ValueError: bad shape")):
        folder = tmp_path / "logs" / "r" / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        (folder / "stderr.log").write_text(f"[rank{rank}]: Traceback (most recent call last):\n"
                                           f'[rank{rank}]:   File "train.py", line 3, in <module>\n[rank{rank}]: {err}\n')
    err = _diagnose(tmp_path, 2, "", timed_out=False, timeout=60, returncode=1)
    assert err.rank == 1 and "ValueError: bad shape" in str(err) and "Rank 0" in str(err)
    assert 'File "train.py", line 3' in err.log_tail and "[rank1]" not in err.log_tail


def test_diagnose_timeout_without_progress_lines_names_no_rank(tmp_path):
    err = _diagnose(tmp_path, 2, "", timed_out=True, timeout=9, returncode=None)
    assert err.kind == "timeout" and err.rank is None and "9 s" in str(err) and "(log trống)" in str(err)


def test_single_process_steps_rejects_bad_input():
    ranks, _ = _synthetic()
    data = torch.utils.data.TensorDataset(torch.randn(4, 1), torch.tensor([0, 1, 0, 1]))
    with pytest.raises(TypeError, match="fresh nn.Module"):
        single_process_steps(data, "model", ranks, 0.1)
    with pytest.raises(TypeError, match="non-empty list"):
        single_process_steps(data, torch.nn.Linear(1, 2), [], 0.1)
    with pytest.raises(ValueError, match="learning rate"):
        single_process_steps(data, torch.nn.Linear(1, 2), ranks, 0)
    with pytest.raises(TypeError, match="TensorDataset"):
        single_process_steps([1, 2], torch.nn.Linear(1, 2), ranks, 0.1)
    with pytest.raises(ValueError, match="same model"):
        single_process_steps(data, torch.nn.Linear(3, 2), ranks, 0.1)


def test_failed_run_plots_say_there_is_nothing_to_draw():
    import matplotlib.pyplot as plt

    failed = DDPRun(ranks=[], reference=[], wall_s=1.0, command="torchrun x.py", ok=False, error=DDPRunError("boom"))
    assert failed.backend is None and failed.world_size == 0 and failed.comparison is None
    ax = plot_ddp_shards(failed)
    assert "không thành công" in ax.texts[0].get_text()
    ax = plot_ddp_differences(failed)
    assert "Chưa có phép so sánh" in ax.texts[0].get_text()
    plt.close("all")
