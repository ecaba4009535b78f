"""Train a small classifier on the UCI handwritten digits with a datapipe input pipeline.

The pipeline is tf.data's usual one, in datapipe: ``shuffle -> map (uint8 [8, 8] ->
float32 [1, 8, 8] in [0, 1]) -> batch -> prefetch -> to_torch``; the model is a small CNN
trained on the CPU.
Prints the loss, the held-out accuracy and the input throughput of each epoch, then a
final line ``final test accuracy: 0.97xx``.

    python examples/train_digits.py --epochs 15 --seed 0
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch
from torch import nn

import datapipe as dp
from datapipe.datasets import load_digits


def to_features(image: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Pixel values are counts 0..16 (see load_digits): scale to [0, 1], add the channel dim.
    return image.reshape(1, 8, 8).astype(np.float32) / np.float32(16.0), label


def make_pipelines(batch_size: int, seed: int) -> tuple[dp.Dataset, dp.Dataset]:
    train, test = load_digits()
    options = dp.Options(seed=seed)
    train = (
        train.shuffle(len(train))  # the whole set fits the buffer: a uniform permutation
        .map(to_features)
        .batch(batch_size)
        .prefetch(2)
        .to_torch()
        .with_options(options)
    )
    test = test.map(to_features).batch(360).to_torch()
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
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in test:
            correct += int((model(x).argmax(dim=1) == y).sum())
            total += len(y)
    model.train()
    return correct / total


def train_epoch(model, optimizer, train: dp.Dataset) -> tuple[float, int, float]:
    loss_fn = nn.CrossEntropyLoss()
    total_loss, seen, input_time = 0.0, 0, 0.0
    it = iter(train)  # a new iteration: a new shuffle order, reproducible from the seed
    while True:
        t0 = time.perf_counter()
        batch = next(it, None)
        input_time += time.perf_counter() - t0
        if batch is None:
            break
        x, y = batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * len(y)
        seen += len(y)
    return total_loss / seen, seen, input_time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train, test = make_pipelines(args.batch_size, args.seed)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        loss, seen, input_time = train_epoch(model, optimizer, train)
        elapsed = time.perf_counter() - t0
        accuracy = evaluate(model, test)
        print(
            f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, test accuracy {accuracy:.4f}, "
            f"{seen / elapsed:,.0f} elements/s trained "
            f"(input pipeline alone {seen / max(input_time, 1e-9):,.0f} elements/s)",
            flush=True,
        )
    print(f"total time: {time.perf_counter() - start:.1f} s")
    print(f"final test accuracy: {accuracy:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
