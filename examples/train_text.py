"""Classify text with TextVectorization and bucketed batches of variable-length sequences.

Data: Python standard library docstrings shipped with datapipe (841 training and 210
held-out paragraphs, 4 topics: files, network, concurrency, numbers; PSF License v2).
A ``TextVectorization`` layer (Keras's standardization and whitespace split, unigrams and
bigrams) is adapted by streaming over the training texts; the pipeline maps each text to
its token ids inside ``Dataset.map`` (strings live in the pipeline, not the model), then
``bucket_by_sequence_length`` batches texts of similar length so little padding is fed to
the model, a mean of token embeddings followed by a linear layer (fastText's model).

Prints one line per epoch (loss, held-out accuracy, padding per real token), then
``final test accuracy: 0.xxxx`` and the most telling tokens of each topic, read back
through a ``StringLookup(invert=True)`` over the learnt vocabulary.

    python examples/train_text.py --epochs 15 --seed 0
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp
from datapipe.datasets import load_stdlib_docs
from datapipe.datasets.stdlib_docs import LABEL_NAMES

BOUNDARIES = [8, 16, 32, 64]


class BagOfEmbeddings(torch.nn.Module):
    """Token ids ``(batch, length)`` int64 (0 pads) -> logits ``(batch, classes)``."""

    def __init__(self, vocab_size: int, classes: int, dim: int = 64):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, dim, padding_idx=0)
        self.out = torch.nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        real = (ids != 0).unsqueeze(-1).float()
        pooled = (self.embed(ids) * real).sum(1) / real.sum(1).clamp_min(1.0)
        return self.out(pooled)


def make_pipelines(vectorize, batch_size: int, seed: int):
    train, test = load_stdlib_docs()

    def to_ids(text, label):
        return vectorize(str(text)), label  # ragged: one int64 array per text

    def bucketed(ds: dp.Dataset) -> dp.Dataset:
        return ds.map(to_ids).bucket_by_sequence_length(
            lambda ids, label: len(ids),
            BOUNDARIES,
            [batch_size] * (len(BOUNDARIES) + 1),
        )

    train_ds = bucketed(train.shuffle(len(train))).prefetch(2).with_options(dp.Options(seed=seed))
    return train_ds, bucketed(test)


def evaluate(model, test: dp.Dataset) -> float:
    model.eval()
    right = total = 0
    with torch.no_grad():
        for ids, labels in test:
            pred = model(torch.as_tensor(ids)).argmax(1)
            right += int((pred == torch.as_tensor(labels)).sum())
            total += len(labels)
    return right / total


def train_epoch(model, train: dp.Dataset, opt) -> tuple[float, float]:
    model.train()
    loss_sum = n = pad = real = 0
    for ids, labels in train:
        ids, labels = torch.as_tensor(ids), torch.as_tensor(labels)
        loss = torch.nn.functional.cross_entropy(model(ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_sum, n = loss_sum + loss.item() * len(labels), n + len(labels)
        pad, real = pad + int((ids == 0).sum()), real + int((ids != 0).sum())
    return loss_sum / n, pad / max(real, 1)


def top_tokens(model, vocabulary: list[str], k: int = 5) -> dict[str, list[str]]:
    """Each class's tokens with the largest logit contribution, read back by StringLookup."""
    invert = pp.StringLookup(vocabulary=vocabulary, mask_token="", invert=True)
    scores = model.out(model.embed.weight).detach()  # (vocab, classes)
    scores[:2] = -np.inf  # padding and [UNK]
    return {
        name: invert(scores[:, c].topk(k).indices.numpy()).tolist()
        for c, name in enumerate(LABEL_NAMES)
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-2)
    parser.add_argument("--max-tokens", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    vectorize = pp.TextVectorization(max_tokens=args.max_tokens, ngrams=2, ragged=True)
    train_texts, _ = load_stdlib_docs()
    vectorize.adapt(train_texts.map(lambda text, label: text).batch(256))
    train, test = make_pipelines(vectorize, args.batch_size, args.seed)
    model = BagOfEmbeddings(vectorize.vocabulary_size(), len(LABEL_NAMES))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        loss, padding = train_epoch(model, train, opt)
        acc = evaluate(model, test)
        print(
            f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, test accuracy {acc:.4f}, "
            f"padding {padding:.3f} per real token"
        )
    print(f"final test accuracy: {acc:.4f}")
    for name, tokens in top_tokens(model, vectorize.get_vocabulary()).items():
        print(f"  {name}: {', '.join(tokens)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
