"""One owner of sharding (issue 32, items 1-3): on 2 ranks (torchrun, gloo, CPU), every way
of sharding a datapipe pipeline that the distributed guide names delivers each of the 96
elements exactly once per epoch over both ranks, or refuses with the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")

WORKER = Path(__file__).with_name("_owner_worker.py")
TORCHRUN = Path(sys.executable).with_name("torchrun")
ALL = list(range(1000, 1096))


def run(out: Path, num_workers: int) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).parents[2]))
    cmd = [
        str(TORCHRUN),
        "--standalone",
        "--nproc_per_node=2",
        "--max-restarts=0",
        str(WORKER),
        "--out",
        str(out),
        "--num-workers",
        str(num_workers),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_each_owner_of_sharding_delivers_every_element_once(tmp_path, num_workers):
    r0, r1 = run(tmp_path, num_workers)
    # item 3: a live group outranks WORLD_SIZE without RANK (Lightning's ddp launcher)
    assert r0["context"] == [0, 2, "torch.distributed"]
    assert r1["context"] == [1, 2, "torch.distributed"]
    for name in ("datapipe", "sampler", "accelerate_dispatch", "accelerate_shard"):
        a, b = r0[name], r1[name]
        assert isinstance(a, list) and isinstance(b, list), (name, a, b)
        assert len(a) == len(b) == 48, name  # each rank its half: even shares
        assert sorted(a + b) == ALL, name  # every element once over both ranks
    for r in (r0, r1):
        assert r["accelerate_shard_unseeded"].startswith(
            "AutoShardError: accelerate.IterableDatasetShard (Accelerate's prepare with "
            "dispatch_batches=False) has every rank read the whole stream"
        )
        assert "op 'global_shuffle' has no seed" in r["accelerate_shard_unseeded"]
    # Accelerate's prepare over the map-style Dataset: refused on the rank that reads indices
    refused = [r["accelerate_map_style"] for r in (r0, r1)]
    assert any(isinstance(m, str) for m in refused), refused
    for m in refused:
        if isinstance(m, str):
            assert m.startswith("AutoShardError: accelerate.") and "AutoShardPolicy.OFF" in m
