"""Run under ``torchrun --nproc_per_node=2``: one rank of the "one owner of sharding" tests
(issue 32). Each scenario reads one epoch of 96 elements through one way of sharding, and
this rank writes what it received (or the error it got) to ``<out>/rank<r>.json``."""

from __future__ import annotations

import argparse
import json
import os

import torch.distributed as dist
from accelerate import Accelerator, DataLoaderConfiguration
from torch.utils.data import DataLoader, DistributedSampler

import datapipe as dp
from datapipe.distribute.context import resolve_worker_context

N, BATCH = 96, 4


def pipeline(seed: int | None = 7) -> dp.Dataset:
    return dp.range(N).global_shuffle(seed=seed).map(lambda x: x + 1000)


def ints(loader) -> list[int]:
    batches = [b.reshape(-1).tolist() for b in loader]
    LENGTHS.append([len(loader), len(batches)])  # what len() promised, what came
    return [int(v) for b in batches for v in b]


LENGTHS: list[list[int]] = []


def attempt(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reported to the test, which asserts it
        return f"{type(e).__name__}: {e}"


def scenarios(workers: int) -> dict:
    out: dict = {}
    ds = pipeline()
    # datapipe shards (its own path): a plain DataLoader over as_torch_dataset()
    out["datapipe"] = ints(DataLoader(ds.as_torch_dataset(), batch_size=BATCH, num_workers=workers))
    # a DistributedSampler over the map-style Dataset (as Lightning injects it)
    sampler = DistributedSampler(ds, shuffle=True, seed=3)
    out["sampler"] = ints(DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=workers))
    dispatch = Accelerator(cpu=True)  # an IterableDataset: DataLoaderDispatcher by default
    out["accelerate_dispatch"] = attempt(
        lambda: ints(
            dispatch.prepare(
                DataLoader(pipeline().as_torch_dataset(), batch_size=BATCH, num_workers=workers)
            )
        )
    )
    shard = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(dispatch_batches=False))
    out["accelerate_shard"] = attempt(
        lambda: ints(
            shard.prepare(
                DataLoader(pipeline().as_torch_dataset(), batch_size=BATCH, num_workers=workers)
            )
        )
    )
    out["accelerate_shard_unseeded"] = attempt(
        lambda: ints(
            shard.prepare(
                DataLoader(pipeline(None).as_torch_dataset(), batch_size=BATCH, num_workers=workers)
            )
        )
    )
    out["accelerate_map_style"] = attempt(
        lambda: ints(
            dispatch.prepare(
                DataLoader(pipeline(), batch_size=BATCH, shuffle=True, num_workers=workers)
            )
        )
    )
    off = dp.Options(distribute=dp.DistributeOptions(auto_shard_policy=dp.AutoShardPolicy.OFF))
    out["accelerate_map_style_off"] = attempt(
        lambda: ints(
            dispatch.prepare(
                DataLoader(
                    pipeline().with_options(off),
                    batch_size=BATCH,
                    shuffle=True,
                    num_workers=workers,
                )
            )
        )
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-workers", type=int, default=0)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    # Lightning's ddp launcher leaves WORLD_SIZE without RANK beside its live group
    os.environ.pop("RANK")
    os.environ["NODE_RANK"] = "0"
    ctx = resolve_worker_context()
    result = {"context": [ctx.process_index, ctx.process_count, ctx.source]}
    result.update(scenarios(args.num_workers))
    result["lengths"] = LENGTHS
    with open(os.path.join(args.out, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
