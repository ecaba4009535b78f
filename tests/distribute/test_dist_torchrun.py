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


def torchrun(
    out: Path, *args: str, nproc: int = 2, timeout: float = 120
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).parents[2]))
    cmd = [
        str(TORCHRUN),
        "--standalone",  # rendezvous on a free port of localhost
        f"--nproc_per_node={nproc}",
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


def results(out: Path, nproc: int = 2) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]


# DataLoader workers under torchrun: slow (7 s; the in-process DataLoader-worker sharding is
# in test_dist_torch_dataset.py, the 2-rank job without workers stays in the default run)
@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=pytest.mark.slow)])
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


@pytest.mark.slow  # two torchrun jobs, ~13 s
def test_kill_on_two_ranks_and_resume_on_three(tmp_path):
    import torch

    first = torchrun(tmp_path, "--checkpoint-at", "4", "--die-after", "3")
    assert first.returncode != 0  # rank 0 was killed mid-epoch
    before = [
        int(v)
        for r in range(2)
        for v in torch.load(tmp_path / f"ckpt-rank{r}.pt", weights_only=True)["consumed"]
    ]
    assert len(before) == 2 * 4 * BATCH
    second = torchrun(tmp_path, "--resume", nproc=3)
    assert second.returncode == 0, second.stderr[-3000:]
    after = [v for res in results(tmp_path, 3) for v in res["consumed"]]
    assert all(res["world"] == 3 for res in results(tmp_path, 3))
    # Every element of the epoch exactly once: before the checkpoint on 2 ranks (the steps
    # after it were lost with the crash), after it on 3. uneven="drop" of the 40 left over
    # 3 ranks skips at most 2.
    assert len(set(before + after)) == len(before + after)
    assert N - 2 <= len(before + after) <= N
    assert set(before + after) <= set(range(N))
