"""Run under ``torchrun --nproc_per_node=N``: one rank of the distributed tests.

Each step consumes one batch of an auto-sharded pipeline and all-reduces a tensor (as
DistributedDataParallel does, so unequal batch counts would hang). ``--checkpoint-at S``
saves the model-free training checkpoint (consumed ids + pipeline state + world size)
after step S; ``--die-after D`` kills rank 0 with SIGKILL D steps after that checkpoint;
``--resume`` restarts from the checkpoint: on the same number of ranks each rank loads its
own state; on another, every rank loads all old ranks' states (elastic resume) and steps
while any rank has a batch (Join-style: a rank that has none all-reduces a zero). At the
end each rank writes what it consumed to JSON (after an elastic resume: since the resume).
"""

from __future__ import annotations

import argparse
import json
import os
import signal

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

import datapipe as dp
from datapipe.distribute.context import resolve_worker_context


def build(n: int, batch: int) -> dp.Dataset:
    return (
        dp.range(n)
        .shuffle(16)  # no seed: every rank and every restart draws its own entropy
        .map(lambda x: x * 1, num_parallel_calls=2)
        .batch(batch)
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--elements", type=int, default=64)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--checkpoint-at", type=int, default=-1)
    ap.add_argument("--die-after", type=int, default=-1)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ctx = resolve_worker_context()
    tds = build(args.elements, args.batch).as_torch_dataset()
    ckpt_path = os.path.join(args.out, f"ckpt-rank{rank}.pt")
    consumed: list[int] = []
    step = 0
    if args.resume:
        old_world = int(torch.load(os.path.join(args.out, "ckpt-rank0.pt"))["world"])
        old = [
            torch.load(os.path.join(args.out, f"ckpt-rank{r}.pt"), weights_only=True)
            for r in range(old_world)
        ]
        step = int(old[0]["step"])
        if old_world == world:
            consumed = list(old[rank]["consumed"])
            tds.load_state_dict(old[rank]["data"])
        else:  # elastic: every rank gets every old rank's state
            tds.load_state_dict([ckpt["data"] for ckpt in old])
    loader = DataLoader(
        tds, batch_size=None, num_workers=args.num_workers, persistent_workers=False
    )
    batches = iter(loader)
    while True:
        batch = next(batches, None)
        total = torch.tensor([0.0 if batch is None else 1.0])
        dist.all_reduce(total)  # hangs if ranks disagree on the number of steps
        if batch is None:
            if total.item() == 0:
                break
            continue
        consumed.extend(int(v) for v in batch)
        step += 1
        if step == args.checkpoint_at:
            tmp = ckpt_path + ".tmp"
            payload = {"step": step, "world": world, "consumed": consumed}
            torch.save({**payload, "data": tds.state_dict()}, tmp)
            os.replace(tmp, ckpt_path)
            dist.barrier()
        if args.die_after >= 0 and step == args.checkpoint_at + args.die_after and rank == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "rank": rank,
                "world": world,
                "context": [ctx.index, ctx.count, ctx.source],
                "consumed": consumed,
                "steps": step,
            },
            f,
        )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
