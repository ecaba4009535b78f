"""Real 2-process jobs under torchrun (gloo, CPU): sharding and kill-and-resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("_ddp_worker.py")
TORCHRUN = Path(sys.executable).with_name("torchrun")
N, BATCH = 64, 3


def torchrun(out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).parents[2]))
    cmd = [
        str(TORCHRUN),
        "--standalone",  # rendezvous on a free port of localhost
        "--nproc_per_node=2",
        "--max-restarts=0",
        str(WORKER),
        "--out",
        str(out),
        "--elements",
        str(N),
        "--batch",
        str(BATCH),
        *args,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def results(out: Path) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_two_ranks_read_disjoint_shares_with_equal_batch_counts(tmp_path, num_workers):
    proc = torchrun(tmp_path, "--num-workers", str(num_workers))
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = results(tmp_path)
    assert r0["context"] == [0, 2, "torch.distributed"]
    assert r1["context"] == [1, 2, "torch.distributed"]
    a, b = r0["consumed"], r1["consumed"]
    assert not set(a) & set(b)
    assert sorted(a + b) == list(range(N))  # 64 elements, 32 per rank
    expected_batches = -(-N // 2 // BATCH) if num_workers == 0 else 2 * -(-N // 4 // BATCH)
    assert r0["steps"] == r1["steps"] == expected_batches


def test_kill_mid_epoch_and_resume_consumes_each_element_once(tmp_path):
    first = torchrun(tmp_path, "--checkpoint-at", "4", "--die-after", "3")
    assert first.returncode != 0  # rank 0 was killed mid-epoch
    assert not (tmp_path / "rank0.json").exists()
    assert (tmp_path / "ckpt-rank0.pt").exists() and (tmp_path / "ckpt-rank1.pt").exists()
    second = torchrun(tmp_path, "--resume")
    assert second.returncode == 0, second.stderr[-3000:]
    r0, r1 = results(tmp_path)
    a, b = r0["consumed"], r1["consumed"]
    assert len(a) == len(set(a)) and len(b) == len(set(b))  # nothing repeated on a rank
    assert not set(a) & set(b)  # nor across ranks
    assert sorted(a + b) == list(range(N))  # nothing lost
    assert r0["steps"] == r1["steps"] == -(-N // 2 // BATCH)
