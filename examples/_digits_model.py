"""The parts the digits examples share: features, model, training step and epoch loop.

Imported as a sibling module by ``train_digits.py``, ``train_images.py`` and
``train_ddp.py`` (a script's own directory is ``sys.path[0]``, so
``from _digits_model import ...`` works for ``python examples/x.py`` and for ``torchrun``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

import datapipe as dp

LOSS_FN = nn.CrossEntropyLoss()


def to_features(image: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Pixel values are counts 0..16 (see load_digits): scale to [0, 1], add the channel dim.
    return image.reshape(1, 8, 8).astype(np.float32) / np.float32(16.0), label


def make_parser(description: str, epochs: int, batch_size_help: str | None = None):
    """The options every digits example takes: ``--epochs``, ``--seed``, ``--batch-size``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--epochs", type=int, default=epochs, help="passes over the training set")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pipeline and the model")
    parser.add_argument("--batch-size", type=int, default=32, help=batch_size_help)
    return parser


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


def _scaled(x: torch.Tensor, scale: float | None) -> torch.Tensor:
    # Pipelines that keep uint8 pixels (0..255) are divided here, on the torch side.
    return x if scale is None else x / scale


def count_correct(model: nn.Module, test: dp.Dataset, scale: float | None = None):
    """``(correct, total)`` over ``test``, with the model in eval mode and no gradients."""
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in test:
            correct += int((model(_scaled(x, scale)).argmax(dim=1) == y).sum())
            total += len(y)
    model.train()
    return correct, total


def train_step(model: nn.Module, optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    """One optimizer step on a batch; returns the batch's mean loss."""
    optimizer.zero_grad()
    loss = LOSS_FN(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def train_epoch(model, optimizer, train: dp.Dataset, scale: float | None = None):
    """One pass over ``train``: ``(mean loss, elements seen, seconds spent waiting on input)``."""
    total_loss, seen, input_time = 0.0, 0, 0.0
    it = iter(train)  # a new iteration: a new shuffle order, reproducible from the seed
    while True:
        t0 = time.perf_counter()
        batch = next(it, None)
        input_time += time.perf_counter() - t0
        if batch is None:
            break
        x, y = batch
        total_loss += train_step(model, optimizer, _scaled(x, scale), y) * len(y)
        seen += len(y)
    return total_loss / seen, seen, input_time


def fit(
    model: nn.Module,
    train: dp.Dataset,
    test: dp.Dataset,
    epochs: int,
    rate: Callable[[int, float, float], str],
    scale: float | None = None,
) -> None:
    """Train with Adam for ``epochs``, printing one line per epoch and the final accuracy.

    ``rate(seen, elapsed_s, input_s)`` words the throughput at the end of each epoch line.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    accuracy = 0.0
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        loss, seen, input_time = train_epoch(model, optimizer, train, scale)
        elapsed = time.perf_counter() - t0
        correct, total = count_correct(model, test, scale)
        accuracy = correct / total
        print(
            f"epoch {epoch}/{epochs}: loss {loss:.4f}, test accuracy {accuracy:.4f}, "
            f"{rate(seen, elapsed, input_time)}",
            flush=True,
        )
    print(f"total time: {time.perf_counter() - start:.1f} s")
    print(f"final test accuracy: {accuracy:.4f}")
