"""Train an image classifier on your own folder of JPEGs: augmentation, checkpoints and
resume, and several ranks -- the script of docs/guides/your-own-data.md.

    python examples/train_own_data.py photos --epochs 3 --checkpoint ckpt
    python examples/train_own_data.py photos --epochs 3 --checkpoint ckpt --resume
    torchrun --nproc_per_node=2 examples/train_own_data.py photos --epochs 2 --checkpoint ckpt

The folder holds one subfolder per class (``make_photo_folder.py`` writes one). The
pipeline decodes and resizes in parallel, shuffles per epoch and batches
(``image_dataset_from_directory``); the augmentation runs on each batch inside the model
(``preprocessing`` layers, identity in ``eval()``). Every ``--checkpoint-every`` steps each
rank saves the model, the optimizer and its data position; ``--resume`` goes on from there
mid-epoch, on the same number of ranks or another one, each image once per epoch.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import datapipe as dp
import preprocessing as pp


def make_pipelines(folder: str, batch_size: int, seed: int) -> tuple[dp.Dataset, dp.Dataset, list]:
    """80% of the images to train on (reshuffled every epoch), 20% to validate on, and the
    class names (the subfolders, sorted: label ``i`` is ``class_names[i]``)."""
    train, val = dp.image_dataset_from_directory(
        folder,
        image_size=(32, 32),  # every photo resized to 32x32 (bilinear, as Keras)
        batch_size=batch_size,
        validation_split=0.2,
        subset="both",
        seed=seed,
        verbose=False,
    )
    return train.to_torch(), val.to_torch(), train.class_names  # labels: int64 indices


def make_model(num_classes: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    augment = nn.Sequential(  # random per image in train(), the identity in eval()
        pp.RandomRotation(0.05, seed=seed),
        pp.RandomTranslation(0.1, 0.1, seed=seed + 1),
        pp.RandomContrast(0.2, value_range=(0, 1), seed=seed + 2),
    )
    return nn.Sequential(
        pp.Rescaling(1 / 255),
        augment,
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 8 * 8, num_classes),
    )


def accuracy(model: nn.Module, val: dp.Dataset) -> float:
    """Correct over all validation images; with several ranks each scores its share."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for x, y in val:
            counts += torch.tensor([float((model(x).argmax(1) == y).sum()), float(len(y))])
    model.train()
    if dist.is_initialized():
        dist.all_reduce(counts)
    return float(counts[0] / counts[1])


class Stopped(Exception):
    """``--stop-after`` was reached (a checkpoint was saved): as if the job were killed."""


class Run:
    """One rank's training state: what a checkpoint holds and ``--resume`` restores."""

    def __init__(self, args: argparse.Namespace, rank: int, world: int):
        self.args, self.rank, self.world = args, rank, world
        train, self.val, names = make_pipelines(args.folder, args.batch_size, args.seed)
        self.data = train.as_torch_dataset()  # its state_dict() is the data position
        self.net = make_model(len(names), args.seed)
        self.model = nn.parallel.DistributedDataParallel(self.net) if world > 1 else self.net
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=3e-3)
        self.epoch = self.step = self.seen = 0

    def path(self, rank: int) -> str:
        return os.path.join(self.args.checkpoint, f"rank{rank}.pt")

    def save(self) -> None:
        os.makedirs(self.args.checkpoint, exist_ok=True)
        torch.save(
            {
                "epoch": self.epoch,
                "step": self.step,
                "seen": self.seen,
                "world": self.world,
                "model": self.net.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "data": self.data.state_dict(),
            },
            self.path(self.rank),
        )

    def resume(self) -> None:
        old_world = torch.load(self.path(0), weights_only=True)["world"]
        old = [torch.load(self.path(r), weights_only=True) for r in range(old_world)]
        self.net.load_state_dict(old[0]["model"])
        self.optimizer.load_state_dict(old[0]["optimizer"])
        if old_world == self.world:
            self.data.load_state_dict(old[self.rank]["data"])
        else:  # another number of ranks: every rank passes all the old ranks' states
            self.data.load_state_dict([c["data"] for c in old])
        self.epoch, self.step = old[0]["epoch"], old[0]["step"]
        self.seen = sum(c["seen"] for c in old) if self.rank == 0 else 0  # counted once
        if self.rank == 0:
            print(f"resumed at epoch {self.epoch + 1}, step {self.step}", flush=True)

    def train_step(self, batch: tuple | None) -> bool:
        """One step every rank takes together (a rank may have a batch less after a
        resume on another number of ranks); False once no rank has a batch."""
        empty = (torch.zeros(0, 3, 32, 32), torch.zeros(0, dtype=torch.int64))
        x, y = batch if batch is not None else empty
        n = torch.tensor([float(len(y))])
        if self.world > 1:
            dist.all_reduce(n)
        if n.item() == 0:
            return False
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x), y, reduction="sum") * self.world / n.item()
        loss.backward()
        self.optimizer.step()
        self.step += 1
        self.seen += len(y)
        return True

    def train_epoch(self) -> None:
        self.data.set_epoch(self.epoch)  # the epoch's shuffle order (kept by a resume)
        batches = iter(self.data)
        while self.train_step(next(batches, None)):
            if self.step % self.args.checkpoint_every == 0 and self.args.checkpoint:
                self.save()
            if self.step == self.args.stop_after:
                self.save()
                raise Stopped(self.step)
        seen = torch.tensor([float(self.seen)])
        if self.world > 1:
            dist.all_reduce(seen)
        acc = accuracy(self.model, self.val)
        if self.rank == 0:
            print(
                f"epoch {self.epoch + 1}/{self.args.epochs}: {int(seen.item())} images, "
                f"validation accuracy {acc:.3f}",
                flush=True,
            )
        self.epoch, self.seen = self.epoch + 1, 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="one subfolder of images per class")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default="", help="directory for the checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps")
    parser.add_argument("--resume", action="store_true", help="go on from --checkpoint")
    parser.add_argument("--stop-after", type=int, default=-1, help="steps (to try --resume)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:  # torchrun: the pipeline shards itself by the process group's rank
        dist.init_process_group("gloo")
    run = Run(args, dist.get_rank() if world > 1 else 0, world)
    try:
        if args.resume:
            run.resume()
        while run.epoch < args.epochs:
            run.train_epoch()
    except Stopped as stop:
        if run.rank == 0:
            print(f"stopped after step {stop.args[0]}; the checkpoint is in {args.checkpoint}")
    finally:
        if world > 1:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
