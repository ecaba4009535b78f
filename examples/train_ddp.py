"""Train the digits classifier with DistributedDataParallel on the CPU (gloo backend).

Each rank builds the same datapipe pipeline; ``iter()`` shards it automatically (the rank
comes from the process group torchrun set up), so no ``DistributedSampler`` and no sharding
code. Every ``--checkpoint-every`` steps each rank saves the model, the optimizer and its
pipeline position (``state_dict()`` of the torch dataset) to ``<checkpoint>/rank<r>.pt``;
``--resume`` continues from there mid-epoch, each element consumed exactly once.

    torchrun --nproc_per_node=2 examples/train_ddp.py --epochs 8
    torchrun --nproc_per_node=2 examples/train_ddp.py --checkpoint ckpt --crash-at-step 30
    torchrun --nproc_per_node=2 examples/train_ddp.py --checkpoint ckpt --resume

Rank 0 prints one line per epoch and then ``final test accuracy: 0.9xxx``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

import datapipe as dp
from datapipe.datasets import load_digits


def to_features(image: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Pixel values are counts 0..16 (see load_digits): scale to [0, 1], add the channel dim.
    return image.reshape(1, 8, 8).astype(np.float32) / np.float32(16.0), label


def make_pipelines(batch_size: int, seed: int) -> tuple[dp.Dataset, dp.Dataset]:
    train, test = load_digits()
    # The same graph on every rank; iter() gives each rank its own share (auto-sharding),
    # and uneven="drop" (the default) gives every rank the same number of batches.
    train = (
        train.shuffle(len(train))
        .map(to_features, num_parallel_calls=2)
        .batch(batch_size)
        .with_options(dp.Options(seed=seed))
    )
    # Evaluation is sharded too; "allow" keeps every test image (no per-batch collective).
    allow = dp.Options(distribute=dp.DistributeOptions(uneven="allow"))
    test = test.map(to_features).batch(128).with_options(allow).to_torch()
    return train, test


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 16, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def evaluate(model: nn.Module, test: dp.Dataset) -> float:
    """Accuracy over the whole test set: each rank scores its share, then one all-reduce."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for x, y in test:
            counts += torch.tensor([float((model(x).argmax(dim=1) == y).sum()), len(y)])
    model.train()
    dist.all_reduce(counts)
    return float(counts[0] / counts[1])


def init_process_group() -> None:
    if "WORLD_SIZE" not in os.environ:  # run without torchrun: a group of one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    else:
        dist.init_process_group("gloo")


def save_checkpoint(path: str, **payload) -> None:
    tmp = path + ".tmp"
    torch.save(payload, tmp)
    os.replace(tmp, path)  # a crash mid-save keeps the previous checkpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--loader-workers", type=int, default=0)
    parser.add_argument("--checkpoint", default="", help="directory for per-rank checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--crash-at-step", type=int, default=-1, help="simulate a failure")
    args = parser.parse_args(argv)

    init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    train, test = make_pipelines(args.batch_size, args.seed)
    tds = train.as_torch_dataset()
    loader = DataLoader(tds, batch_size=None, num_workers=args.loader_workers)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()

    ckpt_path = os.path.join(args.checkpoint, f"rank{rank}.pt") if args.checkpoint else ""
    if ckpt_path:
        os.makedirs(args.checkpoint, exist_ok=True)
    epoch, step = 0, 0
    if args.resume:
        ckpt = torch.load(ckpt_path, weights_only=True)  # loading runs no code
        model.module.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        tds.load_state_dict(ckpt["data"])  # the next iter() continues that epoch
        epoch, step = ckpt["epoch"], ckpt["step"]
        if rank == 0:
            print(f"resumed at epoch {epoch + 1}, step {step}", flush=True)

    accuracy = 0.0
    start = time.perf_counter()
    while epoch < args.epochs:
        # A new shuffle order per epoch; a state loaded for this epoch is kept and resumed.
        tds.set_epoch(epoch)
        totals = torch.zeros(2, dtype=torch.float64)
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()  # DDP all-reduces gradients: ranks must agree on batch counts
            optimizer.step()
            totals += torch.tensor([loss.item() * len(y), len(y)])
            step += 1
            if ckpt_path and step % args.checkpoint_every == 0:
                save_checkpoint(
                    ckpt_path,
                    epoch=epoch,
                    step=step,
                    model=model.module.state_dict(),
                    optimizer=optimizer.state_dict(),
                    data=tds.state_dict(),
                )
            if step == args.crash_at_step:
                print(f"rank {rank}: simulated crash at step {step}", flush=True)
                os._exit(1)
        dist.all_reduce(totals)
        accuracy = evaluate(model.module, test)
        epoch += 1
        if rank == 0:
            print(
                f"epoch {epoch}/{args.epochs}: loss {totals[0] / totals[1]:.4f}, "
                f"test accuracy {accuracy:.4f}, {int(totals[1])} images on {world} ranks",
                flush=True,
            )
    if rank == 0:
        print(f"total time: {time.perf_counter() - start:.1f} s")
        print(f"final test accuracy: {accuracy:.4f}")
    dist.barrier()  # no rank tears gloo down while another still talks to it
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
