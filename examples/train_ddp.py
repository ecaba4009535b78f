"""Train the digits classifier with DistributedDataParallel on the CPU (gloo backend).

Each rank builds the same datapipe pipeline; ``iter()`` shards it automatically (the rank
comes from the process group torchrun set up), so no ``DistributedSampler`` and no sharding
code. Every ``--checkpoint-every`` steps each rank saves the model, the optimizer and its
pipeline position (``state_dict()`` of the torch dataset) to ``<checkpoint>/rank<r>.pt``;
``--resume`` continues from there mid-epoch, each element consumed exactly once -- on the
same number of ranks, or on another one (elastic resume: every new rank loads the data
states of all old ranks).

    torchrun --nproc_per_node=2 examples/train_ddp.py --epochs 8
    torchrun --nproc_per_node=2 examples/train_ddp.py --checkpoint ckpt --crash-at-step 30
    torchrun --nproc_per_node=3 examples/train_ddp.py --checkpoint ckpt --resume

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
import torch.nn.functional as F
from _digits_model import count_correct, make_model, make_parser, to_features
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

import datapipe as dp
from datapipe.datasets import load_digits
from datapipe.distribute import TorchIterableDataset


def make_pipelines(batch_size: int, seed: int) -> tuple[dp.Dataset, dp.Dataset]:
    train, test = load_digits()
    # The same graph on every rank; iter() gives each rank its own share (auto-sharding),
    # and uneven="drop" (the default) gives every rank the same number of batches. The
    # seeded global_shuffle is one permutation of the indices split among the ranks: a
    # checkpoint is a few integers and resumes on any number of ranks, element by element.
    train = (
        train.global_shuffle()
        .map(to_features, num_parallel_calls=2)
        .batch(batch_size)
        .with_options(dp.Options(seed=seed))
    )
    # Evaluation is sharded too; "allow" keeps every test image (no per-batch collective).
    allow = dp.Options(distribute=dp.DistributeOptions(uneven="allow"))
    test = test.map(to_features).batch(128).with_options(allow).to_torch()
    return train, test


def lockstep_step(model, optimizer, batch, world: int) -> tuple[float, int] | None:
    """One DDP step that every rank takes, with a batch or without one (a rank that resumed
    an epoch on another number of ranks may hold a batch more or less than the others):
    the gradient is of the loss summed over the step's samples on all ranks, divided by
    their number. Returns this rank's ``(loss sum, samples)``; None once no rank has any."""
    empty = (torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.int64))  # int64 class indices
    x, y = batch if batch is not None else empty
    n = torch.tensor([float(len(y))])
    dist.all_reduce(n)
    if n.item() == 0:
        return None
    optimizer.zero_grad()
    loss_sum = F.cross_entropy(model(x), y, reduction="sum")
    (loss_sum * world / n.item()).backward()  # DDP averages the gradients over the ranks
    optimizer.step()
    return loss_sum.item(), len(y)


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
        "--resume",
        action="store_true",
        help="continue from --checkpoint mid-epoch (on any number of ranks)",
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
    ckpt_dir: str  # "" for no checkpoints
    rank: int
    world: int
    epoch: int = 0
    step: int = 0
    totals: torch.Tensor = None  # this rank's (loss sum, samples) in the current epoch

    def __post_init__(self) -> None:
        self.totals = torch.zeros(2, dtype=torch.float64)

    def path(self, rank: int) -> str:
        return os.path.join(self.ckpt_dir, f"rank{rank}.pt")

    def save(self) -> None:
        payload = dict(
            epoch=self.epoch,
            step=self.step,
            world=self.world,
            totals=self.totals.clone(),
            model=self.model.module.state_dict(),
            optimizer=self.optimizer.state_dict(),
            data=self.tds.state_dict(),
        )
        tmp = self.path(self.rank) + ".tmp"
        torch.save(payload, tmp)
        os.replace(tmp, self.path(self.rank))  # a crash mid-save keeps the previous checkpoint

    def resume(self) -> None:
        # The run that saved may have had another number of ranks: rank 0's file says how
        # many, and every rank reads all their files (loading runs no code).
        old_world = int(torch.load(self.path(0), weights_only=True)["world"])
        old = [torch.load(self.path(r), weights_only=True) for r in range(old_world)]
        if len({(c["epoch"], c["step"]) for c in old}) != 1:
            raise SystemExit(f"{self.ckpt_dir}: the ranks' checkpoints are of different steps")
        self.model.module.load_state_dict(old[0]["model"])  # the same on every rank (DDP)
        self.optimizer.load_state_dict(old[0]["optimizer"])
        if old_world == self.world:
            self.tds.load_state_dict(old[self.rank]["data"])
            self.totals = old[self.rank]["totals"]
        else:  # elastic: the rest of the epoch, exactly once across this run's ranks
            self.tds.load_state_dict([c["data"] for c in old])
            if self.rank == 0:  # the epoch's loss so far, counted once
                self.totals = sum(c["totals"] for c in old)
        self.epoch, self.step = old[0]["epoch"], old[0]["step"]
        if self.rank == 0:
            print(
                f"resumed at epoch {self.epoch + 1}, step {self.step}"
                + ("" if old_world == self.world else f" (saved by {old_world} ranks)"),
                flush=True,
            )

    def run_epoch(self, checkpoint_every: int, crash_at_step: int) -> torch.Tensor:
        """Trains one epoch; returns (sum of losses, elements) over all ranks."""
        # A new shuffle order per epoch; a state loaded for this epoch is kept and resumed.
        self.tds.set_epoch(self.epoch)
        batches = iter(self.loader)
        while True:
            # Every rank steps together (DDP all-reduces gradients in backward), so every
            # checkpoint holds all ranks at the same step.
            done = lockstep_step(self.model, self.optimizer, next(batches, None), self.world)
            if done is None:
                break
            self.totals += torch.tensor(done, dtype=torch.float64)
            self.step += 1
            if self.ckpt_dir and self.step % checkpoint_every == 0:
                self.save()
            if self.step == crash_at_step:
                print(f"rank {self.rank}: simulated crash at step {self.step}", flush=True)
                os._exit(1)
        totals, self.totals = self.totals, torch.zeros(2, dtype=torch.float64)
        dist.all_reduce(totals)
        return totals


def make_trainer(args, train: dp.Dataset, rank: int, world: int) -> Trainer:
    tds = train.as_torch_dataset()
    loader = DataLoader(tds, batch_size=None, num_workers=args.loader_workers)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    if args.checkpoint:
        os.makedirs(args.checkpoint, exist_ok=True)
    return Trainer(model, optimizer, tds, loader, args.checkpoint, rank, world)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    train, test = make_pipelines(args.batch_size, args.seed)
    trainer = make_trainer(args, train, rank, world)
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
