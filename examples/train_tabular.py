"""Train a classifier on a real table through preprocessing layers that travel with the model.

Data: the UCI breast cancer Wisconsin (diagnostic) table shipped with datapipe (455 training
and 114 held-out rows, 30 real-valued features, benign vs malignant). Input pipeline:
``shuffle -> batch -> prefetch -> to_torch``. The model starts with Keras-style feature
layers: ``Normalization`` of every feature, and ``Discretization`` (8 learnt quantile bins)
of four features followed by ``CategoryEncoding`` (one-hot), then a small MLP. The layers
are adapted by streaming over the training pipeline, saved with the model (``state_dict``
plus their JSON configs, reloaded and checked) and exported with ``torch.export``; the
exported program is loaded back and scored on the held-out rows.

Prints one line per epoch, then ``final test accuracy: 0.9xxx``, ``reloaded model test
accuracy: ...`` and ``exported program test accuracy: ...`` (all three equal).

    python examples/train_tabular.py --epochs 20 --seed 0 --out /tmp/tabular_model
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import torch

import datapipe as dp
import preprocessing as pp
from datapipe.datasets import load_breast_cancer
from datapipe.datasets.breast_cancer import load_breast_cancer_arrays

BINNED = ("worst radius", "worst texture", "worst concave points", "worst smoothness")
NUM_BINS = 8


class TabularModel(torch.nn.Module):
    """Raw features ``(batch, 30)`` float32 -> class logits ``(batch, 2)``."""

    def __init__(self, norm, bins, encode, columns: list[int], hidden: int = 32):
        super().__init__()
        self.norm, self.bins, self.encode = norm, bins, encode
        self.register_buffer("columns", torch.tensor(columns, dtype=torch.int64))
        width = 30 + len(columns) * encode.num_tokens
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        scaled = self.norm(features)
        onehot = self.encode(self.bins(features[:, self.columns]))  # (batch, 4, bins)
        return self.mlp(torch.cat([scaled, onehot.flatten(1)], dim=1))

    def layer_configs(self) -> dict:
        return {
            name: pp.serialize_layer(getattr(self, name)) for name in ("norm", "bins", "encode")
        }


def make_layers(train: dp.Dataset, columns: list[int]):
    """Adapt the feature layers on the training rows, streaming over the pipeline."""
    norm = pp.Normalization()
    norm.adapt(train.batch(128))
    bins = pp.Discretization(num_bins=NUM_BINS)
    bins.adapt(train.map(lambda x, y: x[columns]).batch(128))
    return norm, bins, pp.CategoryEncoding(num_tokens=NUM_BINS, output_mode="one_hot")


def accuracy(predict, features: torch.Tensor, labels: torch.Tensor) -> float:
    with torch.no_grad():
        return float((predict(features).argmax(1) == labels).float().mean())


def train_model(model, train: dp.Dataset, test, epochs: int, lr: float) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    acc = 0.0
    for epoch in range(1, epochs + 1):
        model.train()
        total, n = 0.0, 0
        for x, y in train:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + loss.item() * len(y), n + len(y)
        model.eval()
        acc = accuracy(model, *test)
        print(f"epoch {epoch}/{epochs}: loss {total / n:.4f}, test accuracy {acc:.4f}")
    return acc


def save_and_reload(model: TabularModel, out: pathlib.Path, columns: list[int]) -> TabularModel:
    """The model as a user ships it: JSON configs + state_dict; rebuilt from them."""
    (out / "layers.json").write_text(json.dumps(model.layer_configs(), indent=1))
    torch.save(model.state_dict(), out / "model.pt")
    configs = json.loads((out / "layers.json").read_text())
    layers = {name: pp.layer_from_config(c) for name, c in configs.items()}
    again = TabularModel(layers["norm"], layers["bins"], layers["encode"], columns)
    again.load_state_dict(torch.load(out / "model.pt"))
    return again.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=pathlib.Path, default=None, help="where to save")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    names = load_breast_cancer_arrays()["feature_names"].tolist()
    columns = [names.index(n) for n in BINNED]
    train, test = load_breast_cancer()
    norm, bins, encode = make_layers(train, columns)
    model = TabularModel(norm, bins, encode, columns)
    pipeline = (
        train.shuffle(len(train))
        .batch(args.batch_size)
        .prefetch(2)
        .to_torch()
        .with_options(dp.Options(seed=args.seed))
    )
    test_x, test_y = next(iter(test.batch(len(test)).to_torch()))
    acc = train_model(model, pipeline, (test_x, test_y), args.epochs, args.lr)
    print(f"final test accuracy: {acc:.4f}")

    out = args.out or pathlib.Path(tempfile.mkdtemp(prefix="train_tabular-"))
    out.mkdir(parents=True, exist_ok=True)
    reloaded = save_and_reload(model.eval(), out, columns)
    print(f"reloaded model test accuracy: {accuracy(reloaded, test_x, test_y):.4f}")
    batch = torch.export.Dim("batch")
    program = torch.export.export(
        model.eval(), (test_x[:2],), dynamic_shapes={"features": {0: batch}}
    )
    torch.export.save(program, str(out / "model.pt2"))
    exported = torch.export.load(str(out / "model.pt2")).module()
    print(f"exported program test accuracy: {accuracy(exported, test_x, test_y):.4f}")
    print(f"saved to {out} (layers.json, model.pt, model.pt2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
