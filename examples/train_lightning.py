"""Train the digits classifier with PyTorch Lightning over a datapipe pipeline: DDP on the
CPU, a checkpoint in the middle of an epoch, and a resume that finishes that epoch exactly.

The ``LightningDataModule`` builds the pipeline and hands Lightning a torchdata
``StatefulDataLoader`` over ``as_torch_dataset()``. Each rank reads its own share (datapipe
shards by itself; Lightning adds no ``DistributedSampler`` to an ``IterableDataset``), and
Lightning's checkpoints hold the loader's ``state_dict()``: the position in the epoch, which
``Trainer.fit(ckpt_path=...)`` gives back to the loader.

    python examples/train_lightning.py --devices 2 --checkpoint ckpt --stop-after 10
    python examples/train_lightning.py --devices 2 --checkpoint ckpt --resume

The first run saves a checkpoint every ``--checkpoint-every`` steps and stops after step
``--stop-after``, as a killed job would; ``--resume`` goes on from the newest checkpoint.
``--record DIR`` writes the ids of the images each rank trained on, step by step, to
``DIR/rank<r>.jsonl`` (the tests check each id once per epoch with them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from _digits_model import make_model
from torchdata.stateful_dataloader import StatefulDataLoader

import datapipe as dp
from datapipe.datasets.digits import load_digits_arrays
from datapipe.distribute import AllRanksState


def to_features(i: np.ndarray, image: np.ndarray, label: np.ndarray):
    # Pixel values are counts 0..16 (see load_digits): scale to [0, 1], add the channel dim.
    return i, image.reshape(1, 8, 8).astype(np.float32) / np.float32(16.0), label


class DigitsData(L.LightningDataModule):
    """The training images as ``(id, image, label)`` batches: ``id`` int64 ``[B]`` (the
    image's index in the training set), ``image`` float32 ``[B, 1, 8, 8]`` in [0, 1],
    ``label`` int64 ``[B]``."""

    def __init__(self, batch_size: int = 32, examples: int | None = None, seed: int = 0):
        super().__init__()
        self.batch_size, self.examples, self.seed = batch_size, examples, seed

    def setup(self, stage: str) -> None:
        arrays = load_digits_arrays()
        n = self.examples or len(arrays["train_labels"])
        images, labels = arrays["train_images"][:n], arrays["train_labels"][:n]
        # The same graph on every rank: iter() gives each rank its own share. The seeded
        # global_shuffle is a new permutation every epoch (the loader's state carries the
        # epoch), and its checkpoint is a few integers.
        self.train = (
            dp.Dataset.from_tensor_slices((np.arange(n), images, labels))
            .global_shuffle()
            .map(to_features)
            .batch(self.batch_size, drop_remainder=True)
            .with_options(dp.Options(seed=self.seed))
        )

    def train_dataloader(self) -> StatefulDataLoader:
        # A StatefulDataLoader has state_dict() and load_state_dict(), so Lightning puts
        # its state into every checkpoint. Rank 0 writes the checkpoint: AllRanksState
        # makes the loader's state hold the positions of all ranks. batch_size=None: the
        # pipeline batches; num_workers=0: the pipeline runs its own parallel stages.
        return StatefulDataLoader(AllRanksState(self.train), batch_size=None)


class DigitsClassifier(L.LightningModule):
    def __init__(self, record: str | None = None):
        super().__init__()
        self.model = make_model()
        self.record = record
        self.seen = 0  # images this rank trained on in this epoch (of this run)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        ids, x, y = batch
        loss = F.cross_entropy(self.model(x), y)
        self.log("loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        self.seen += len(ids)
        if self.record:  # one line per step: this rank, this epoch, this batch's image ids
            line = {"epoch": self.current_epoch, "step": self.global_step, "ids": ids.tolist()}
            with open(Path(self.record) / f"rank{self.global_rank}.jsonl", "a") as f:
                f.write(json.dumps(line) + "\n")
        return loss

    def on_train_epoch_end(self) -> None:
        # Also called when --stop-after ends a run mid-epoch: the count says how far it got.
        seen = int(self.trainer.strategy.reduce(torch.tensor(self.seen), reduce_op="sum"))
        loss = float(self.trainer.callback_metrics["loss"])
        self.seen = 0
        if self.global_rank == 0:
            epoch = f"{self.current_epoch + 1}/{self.trainer.max_epochs}"
            print(f"epoch {epoch}: {seen} images, loss {loss:.4f}", flush=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=3e-3)


def newest_checkpoint(folder: str) -> str:
    """The checkpoint of the highest step in ``folder`` (named ``step=<n>.ckpt`` below)."""
    steps = {int(m.group(1)): p for p in Path(folder).glob("*.ckpt") if (m := STEP.match(p.name))}
    if not steps:
        raise SystemExit(f"no checkpoint in {folder}")
    return str(steps[max(steps)])


STEP = re.compile(r"^step=(\d+)\.ckpt$")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, help="CPU processes (DDP over gloo)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--examples", type=int, default=None, help="the first N images only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None, help="folder of the checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=8, help="steps")
    parser.add_argument("--stop-after", type=int, default=None, help="stop after this step")
    parser.add_argument("--resume", action="store_true", help="from the newest checkpoint")
    parser.add_argument("--record", default=None, help="folder for the ids trained on")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    L.seed_everything(args.seed, verbose=False)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")  # the pipeline's own
    if args.record:
        os.makedirs(args.record, exist_ok=True)
    callbacks = []
    if args.checkpoint:  # every N steps, mid-epoch included; the file names the step
        every = args.checkpoint_every
        callbacks.append(
            L.pytorch.callbacks.ModelCheckpoint(
                args.checkpoint, "{step}", every_n_train_steps=every, save_top_k=-1
            )
        )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        max_epochs=args.epochs,
        max_steps=args.stop_after or -1,
        callbacks=callbacks,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    ckpt_path = newest_checkpoint(args.checkpoint) if args.resume else None
    if ckpt_path and trainer.global_rank == 0:
        print(f"resuming from {ckpt_path}", flush=True)
    data = DigitsData(args.batch_size, args.examples, args.seed)
    trainer.fit(DigitsClassifier(args.record), datamodule=data, ckpt_path=ckpt_path)
    if args.stop_after and trainer.global_rank == 0:
        print(f"stopped after step {trainer.global_step}; the checkpoints are in {args.checkpoint}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
