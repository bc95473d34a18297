"""Tests of lessons_lib.ddp_worker, the helpers a DDP script imports (no process group needed here)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import DistributedSampler, TensorDataset

from lessons_lib import ddp_worker
from lessons_lib.ddp_worker import RankRecorder, choose_backend

ROOT = Path(__file__).resolve().parent.parent


def test_choose_backend_follows_the_environment_then_the_gpus(monkeypatch):
    monkeypatch.delenv("DDP_BACKEND", raising=False)
    expected = "nccl" if torch.cuda.device_count() >= 2 and torch.distributed.is_nccl_available() else "gloo"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert choose_backend() == expected
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
    assert choose_backend() == "gloo"  # never 64 GPUs here
    monkeypatch.setenv("DDP_BACKEND", " NCCL ")
    assert choose_backend() == "nccl"  # forced, whatever the machine has
    monkeypatch.setenv("DDP_BACKEND", "mpi")
    with pytest.raises(ValueError, match="DDP_BACKEND phải là một trong"):
        choose_backend()


def _recorder(monkeypatch, rank=1):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    data = TensorDataset(torch.randn(10, 3), torch.randint(0, 2, (10,)))
    sampler = DistributedSampler(data, num_replicas=2, rank=rank, shuffle=False)
    model = torch.nn.Linear(3, 2)
    return RankRecorder(sampler, model, "gloo"), sampler, model


def test_rank_recorder_writes_what_the_notebook_compares(monkeypatch, tmp_path):
    rec, sampler, model = _recorder(monkeypatch)
    rec.after_ddp(model)
    for _ in range(2):
        x = torch.randn(2, 3)
        model.zero_grad()
        model(x).sum().backward()
        local = [p.grad.clone() for p in model.parameters()]
        rec.step(x, local, model)
    path = rec.save(tmp_path)
    data = json.loads(path.read_text())
    assert path.name == "rank1.json" and data["rank"] == 1 and data["world_size"] == 2 and data["backend"] == "gloo"
    assert data["shard"] == [1, 3, 5, 7, 9] and data["n_samples"] == 10 and data["device"] == "cpu"
    assert [s["batch"] for s in data["steps"]] == [[1, 3], [5, 7]]  # the shard, in the order the loader used it
    assert len(data["steps"][0]["grad"]) == len(data["init_after_ddp"]) == 8
    assert data["env"]["RANK"] == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank1.json"]  # written atomically: no .tmp left behind


def test_rank_recorder_rejects_bad_input(monkeypatch, tmp_path):
    rec, sampler, model = _recorder(monkeypatch, rank=0)
    with pytest.raises(ValueError, match="after_ddp"):
        rec.save(tmp_path)
    with pytest.raises(TypeError, match="DistributedSampler"):
        RankRecorder([0, 1], model, "gloo")
    with pytest.raises(TypeError, match="nn.Module"):
        RankRecorder(sampler, "model", "gloo")
    with pytest.raises(ValueError, match="backend phải là một trong"):
        RankRecorder(sampler, model, "auto")


@pytest.mark.slow
def test_exit_rank_flushes_and_skips_interpreter_shutdown(tmp_path):
    code = textwrap.dedent("""
        import atexit, sys
        from lessons_lib.ddp_worker import exit_rank
        atexit.register(lambda: print("atexit ran"))
        print("result written", end="")   # no newline: only a flush gets it out
        sys.stderr.write("err line")
        exit_rank()
        print("never")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0
    assert proc.stdout == "result written" and proc.stderr == "err line"  # flushed; atexit handlers skipped


def test_module_imports_only_torch_and_the_standard_library():
    source = Path(ddp_worker.__file__).read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "json", "os", "sys", "pathlib", "typing", "torch"}
