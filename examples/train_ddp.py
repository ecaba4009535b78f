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

import gc
import os
import socket
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from _digits_model import count_correct, make_model, make_parser, to_features, train_step
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

import datapipe as dp
from datapipe.datasets import load_digits
from datapipe.distribute import TorchIterableDataset


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


def evaluate(model: torch.nn.Module, test: dp.Dataset) -> float:
    """Accuracy over the whole test set: each rank scores its share, then one all-reduce."""
    counts = torch.tensor(count_correct(model, test), dtype=torch.float64)
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


def parse_args(argv: list[str] | None):
    parser = make_parser(__doc__.splitlines()[0], epochs=8, batch_size_help="per rank")
    parser.add_argument(
        "--loader-workers", type=int, default=0, help="torch DataLoader worker processes"
    )
    parser.add_argument("--checkpoint", default="", help="directory for per-rank checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps")
    parser.add_argument(
        "--resume", action="store_true", help="continue from --checkpoint mid-epoch"
    )
    parser.add_argument("--crash-at-step", type=int, default=-1, help="simulate a failure")
    args = parser.parse_args(argv)
    if args.checkpoint and args.loader_workers > 0:
        # The pipeline's position lives in the loader worker processes, out of reach of
        # this process's state_dict(): a resume would repeat the epoch's first elements.
        parser.error("--checkpoint needs --loader-workers 0 (the data position is per process)")
    return args


@dataclass
class Trainer:
    """One rank's training state: what a checkpoint saves and ``--resume`` restores."""

    model: DistributedDataParallel
    optimizer: torch.optim.Optimizer
    tds: TorchIterableDataset
    loader: DataLoader
    ckpt_path: str  # "" for no checkpoints
    rank: int
    epoch: int = 0
    step: int = 0

    def save(self) -> None:
        payload = dict(
            epoch=self.epoch,
            step=self.step,
            model=self.model.module.state_dict(),
            optimizer=self.optimizer.state_dict(),
            data=self.tds.state_dict(),
        )
        tmp = self.ckpt_path + ".tmp"
        torch.save(payload, tmp)
        os.replace(tmp, self.ckpt_path)  # a crash mid-save keeps the previous checkpoint

    def resume(self) -> None:
        ckpt = torch.load(self.ckpt_path, weights_only=True)  # loading runs no code
        self.model.module.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.tds.load_state_dict(ckpt["data"])  # the next iter() continues that epoch
        self.epoch, self.step = ckpt["epoch"], ckpt["step"]
        if self.rank == 0:
            print(f"resumed at epoch {self.epoch + 1}, step {self.step}", flush=True)

    def run_epoch(self, checkpoint_every: int, crash_at_step: int) -> torch.Tensor:
        """Trains one epoch; returns (sum of losses, elements) over all ranks."""
        # A new shuffle order per epoch; a state loaded for this epoch is kept and resumed.
        self.tds.set_epoch(self.epoch)
        totals = torch.zeros(2, dtype=torch.float64)
        for x, y in self.loader:
            # DDP all-reduces gradients in backward: ranks must agree on batch counts.
            loss = train_step(self.model, self.optimizer, x, y)
            totals += torch.tensor([loss * len(y), len(y)])
            self.step += 1
            if self.ckpt_path and self.step % checkpoint_every == 0:
                self.save()
            if self.step == crash_at_step:
                print(f"rank {self.rank}: simulated crash at step {self.step}", flush=True)
                os._exit(1)
        dist.all_reduce(totals)
        return totals


def make_trainer(args, train: dp.Dataset, rank: int) -> Trainer:
    tds = train.as_torch_dataset()
    loader = DataLoader(tds, batch_size=None, num_workers=args.loader_workers)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    ckpt_path = os.path.join(args.checkpoint, f"rank{rank}.pt") if args.checkpoint else ""
    if ckpt_path:
        os.makedirs(args.checkpoint, exist_ok=True)
    return Trainer(model, optimizer, tds, loader, ckpt_path, rank)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    train, test = make_pipelines(args.batch_size, args.seed)
    trainer = make_trainer(args, train, rank)
    if args.resume:
        trainer.resume()

    accuracy = 0.0
    start = time.perf_counter()
    while trainer.epoch < args.epochs:
        totals = trainer.run_epoch(args.checkpoint_every, args.crash_at_step)
        accuracy = evaluate(trainer.model.module, test)
        trainer.epoch += 1
        if rank == 0:
            print(
                f"epoch {trainer.epoch}/{args.epochs}: loss {totals[0] / totals[1]:.4f}, "
                f"test accuracy {accuracy:.4f}, {int(totals[1])} images on {world} ranks",
                flush=True,
            )
    if rank == 0:
        print(f"total time: {time.perf_counter() - start:.1f} s")
        print(f"final test accuracy: {accuracy:.4f}")
    # Release DDP (its reducer holds the process group and gloo work objects) while the
    # interpreter is fully alive: freed at interpreter exit instead, gloo's threads can
    # abort the process with "terminate called without an active exception".
    del trainer
    gc.collect()
    dist.barrier()  # no rank tears gloo down while another still talks to it
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
