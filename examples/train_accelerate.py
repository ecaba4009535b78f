"""Train the digits classifier with Hugging Face Accelerate over a datapipe pipeline:
``accelerator.prepare(model, optimizer, loader)`` on several processes, and
``save_state`` / ``load_state`` in the middle of an epoch, resumed exactly.

Accelerate owns the sharding of the loader it prepares (``dispatch_batches=False``: every
process reads the same seeded stream and keeps its own slice of each batch), so datapipe
steps aside. With ``use_stateful_dataloader=True`` the prepared loader's position goes into
``save_state``; ``load_state`` gives it back, and the loop's epoch and step travel in a
small object registered for checkpointing.

    accelerate launch --num_processes 2 examples/train_accelerate.py --checkpoint c --stop-after 10
    accelerate launch --num_processes 2 examples/train_accelerate.py --checkpoint c --resume

(``torchrun --nproc_per_node 2 examples/train_accelerate.py ...`` runs it the same way.)
The first run saves the state every ``--checkpoint-every`` steps and stops after step
``--stop-after``, as a killed job would; ``--resume`` goes on from the last state saved.
``--record DIR`` writes the ids of the images each process trained on, step by step, to
``DIR/rank<r>.jsonl`` (the tests check each id once per epoch with them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from _digits_model import make_model
from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.utils import set_seed
from torch.utils.data import DataLoader

import datapipe as dp
from datapipe.datasets.digits import load_digits_arrays


def to_features(i: np.ndarray, image: np.ndarray, label: np.ndarray):
    # Pixel values are counts 0..16 (see load_digits): scale to [0, 1], add the channel dim.
    return i, image.reshape(1, 8, 8).astype(np.float32) / np.float32(16.0), label


def make_pipeline(examples: int | None, seed: int) -> dp.Dataset:
    """``(id, image, label)`` elements: the image's index in the training set, float32
    ``[1, 8, 8]`` in [0, 1], int64. Seeded: every process must read the same stream."""
    arrays = load_digits_arrays()
    n = examples or len(arrays["train_labels"])
    images, labels = arrays["train_images"][:n], arrays["train_labels"][:n]
    return (
        dp.Dataset.from_tensor_slices((np.arange(n), images, labels))
        .global_shuffle()  # a new permutation every epoch (set_epoch below)
        .map(to_features)
        .with_options(dp.Options(seed=seed))
    )


class Progress:
    """Where the loop is: saved and loaded with the accelerator's state."""

    def __init__(self) -> None:
        self.epoch, self.step = 0, 0

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.step = int(state["epoch"]), int(state["step"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--examples", type=int, default=None, help="the first N images only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None, help="folder of the saved state")
    parser.add_argument("--checkpoint-every", type=int, default=8, help="steps")
    parser.add_argument("--stop-after", type=int, default=None, help="stop after this step")
    parser.add_argument("--resume", action="store_true", help="from the saved state")
    parser.add_argument("--record", default=None, help="folder for the ids trained on")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    set_seed(args.seed)
    config = DataLoaderConfiguration(dispatch_batches=False, use_stateful_dataloader=True)
    accelerator = Accelerator(cpu=True, dataloader_config=config)
    loader = DataLoader(
        make_pipeline(args.examples, args.seed).as_torch_dataset(),
        batch_size=args.batch_size,
        drop_last=True,  # every process takes the same number of steps
    )
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    progress = Progress()
    accelerator.register_for_checkpointing(progress)
    if args.resume:
        accelerator.load_state(args.checkpoint)  # model, optimizer, loader position, progress
        accelerator.print(f"resumed at epoch {progress.epoch + 1}, step {progress.step}")
    record = None
    if args.record:
        os.makedirs(args.record, exist_ok=True)
        record = Path(args.record) / f"rank{accelerator.process_index}.jsonl"

    model.train()
    while progress.epoch < args.epochs:
        loader.set_epoch(progress.epoch)  # the pipeline's shuffle order of this epoch
        seen = torch.zeros((), dtype=torch.int64)
        for ids, x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            if record is not None:  # one line per step: this epoch, this batch's image ids
                line = {"epoch": progress.epoch, "step": progress.step, "ids": ids.tolist()}
                with open(record, "a") as f:
                    f.write(json.dumps(line) + "\n")
            progress.step += 1
            seen += len(ids)
            if args.checkpoint and progress.step % args.checkpoint_every == 0:
                accelerator.save_state(args.checkpoint)
            if progress.step == args.stop_after:
                accelerator.print(
                    f"stopped after step {progress.step}; the state is in {args.checkpoint}"
                )
                accelerator.end_training()
                return 0
        total = int(accelerator.reduce(seen, "sum"))
        accelerator.print(f"epoch {progress.epoch + 1}/{args.epochs}: {total} images, "
                          f"loss {loss.item():.4f}")  # fmt: skip
        progress.epoch += 1
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
