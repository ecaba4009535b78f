"""Find and fix an input-pipeline bottleneck on the packaged handwritten digits.

1. Profile a pipeline with a deliberately slow per-element augmentation: the report names
   the ``augment`` map as the bottleneck and suggests running it in parallel; a Chrome
   trace of the run is written (open it in https://ui.perfetto.dev or chrome://tracing).
2. Profile the fixed pipeline (``num_parallel_calls=AUTOTUNE`` and a ``prefetch``).
3. Train a small model for a few epochs on each pipeline with ``InputBoundTimer``, which
   reports per epoch how much of the time the loop waited for data.

    python examples/profile_pipeline.py --out /tmp/digits-profile --epochs 2
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch
from torch import nn

import datapipe as dp
from datapipe.datasets import load_digits
from datapipe.stats import InputBoundTimer

# Stands in for work that releases the GIL (a JPEG decode in Pillow, numpy on large arrays),
# so threads can overlap it.
AUGMENT_COST_S = 0.0005


def augment(image: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Scale counts 0..16 to [0, 1], add a channel, then "work" for a while per element.
    x = image.reshape(1, 8, 8).astype(np.float32) / np.float32(16.0)
    time.sleep(AUGMENT_COST_S)
    return x, label


def pipeline(parallel: bool, batch_size: int, seed: int, max_steps: int | None) -> dp.Dataset:
    train, _ = load_digits()
    if max_steps is not None:
        train = train.take(max_steps * batch_size)
    ds = train.shuffle(len(train))
    if parallel:
        ds = ds.map(augment, num_parallel_calls=dp.AUTOTUNE, name="augment")
        ds = ds.batch(batch_size).prefetch(dp.AUTOTUNE)
    else:
        ds = ds.map(augment, name="augment").batch(batch_size)
    return ds.to_torch().with_options(dp.Options(seed=seed))


def train(ds: dp.Dataset, epochs: int, step_s: float) -> InputBoundTimer:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = InputBoundTimer()
    for _ in range(epochs):
        for x, y in timer.epoch(ds):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(step_s)  # a larger model's step on an accelerator
    return timer


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        default=os.path.join(tempfile.gettempdir(), "datapipe-profile"),
        help="folder for the reports and Chrome traces",
    )
    parser.add_argument("--epochs", type=int, default=2, help="training epochs per pipeline")
    parser.add_argument("--batch-size", type=int, default=64, help="elements per batch")
    parser.add_argument("--seconds", type=float, default=3.0, help="time limit per profile")
    parser.add_argument("--step-ms", type=float, default=5.0, help="simulated step time")
    parser.add_argument("--seed", type=int, default=0, help="pipeline and model seed")
    parser.add_argument("--max-steps", type=int, default=None, help="batches per epoch")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for name, parallel in (("slow", False), ("fixed", True)):
        ds = pipeline(parallel, args.batch_size, args.seed, args.max_steps)
        trace_path = os.path.join(args.out, f"trace-{name}.json")
        report = ds.profile(seconds=args.seconds, trace_path=trace_path)
        report.to_json(os.path.join(args.out, f"report-{name}.json"))
        print(f"=== {name} pipeline ===\n{report}\ntrace: {trace_path}\n")
        timer = train(ds, args.epochs, args.step_ms / 1e3)
        print(f"training on the {name} pipeline:\n{timer.summary()}\n")
        results[name] = {"report": report, "timer": timer}
    return results


if __name__ == "__main__":
    main()
