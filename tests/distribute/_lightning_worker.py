"""Run as a script: Lightning ``Trainer(strategy="ddp", accelerator="cpu", devices=2)``
over a datapipe pipeline (issue 32, items 2-5). Lightning's ddp launcher starts the second
rank by running this script again; each rank writes what it trained and validated on, per
epoch, and the number of training batches Lightning computed, to ``<out>/rank<r>.json``."""

from __future__ import annotations

import argparse
import json
import os

import lightning
import torch
from torch.utils.data import DataLoader

import datapipe as dp

N, BATCH = 96, 4


class Recorder(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.train_seen: dict[int, list[int]] = {}
        self.val_seen: dict[int, list[int]] = {}

    def training_step(self, batch, batch_idx):
        self.train_seen.setdefault(self.current_epoch, []).extend(batch.tolist())
        return self.layer(batch.float().reshape(-1, 1)).sum() * 0.0

    def validation_step(self, batch, batch_idx):
        self.val_seen.setdefault(self.current_epoch, []).extend(batch.tolist())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-workers", type=int, default=0)
    args = ap.parse_args()
    train = dp.range(N).shuffle(N, seed=5).map(lambda x: x + 1000)
    val = dp.range(N).map(lambda x: x + 2000)  # map-style: Lightning injects its sampler
    kw = {"batch_size": BATCH, "num_workers": args.num_workers}
    trainer = lightning.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    model = Recorder()
    trainer.fit(model, DataLoader(train.as_torch_dataset(), **kw), DataLoader(val, **kw))
    result = {
        "rank": trainer.global_rank,
        "num_training_batches": trainer.num_training_batches,
        "train": {str(k): v for k, v in model.train_seen.items()},
        "val": {str(k): v for k, v in model.val_seen.items()},
        "env_rank": os.environ.get("RANK"),
    }
    with open(os.path.join(args.out, f"rank{trainer.global_rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
