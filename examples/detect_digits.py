"""Detect handwritten digits pasted on a canvas: boxes through flip, shear, rotation and a
random resized crop, with one draw per image for pixels and boxes alike.

Scenes are made from the packaged UCI digits: one to three digits, each upscaled 2x or 3x,
pasted at random places on a 48x48 canvas, with the tight box around each digit's ink
(``xyxy``) and its class. The input pipeline is datapipe's, with the augmentation inside
it on dict batches (Keras 3's keys)::

    from_tensor_slices(scenes) -> shuffle -> batch(32)
      -> random_map(Pipeline([RandomFlip, RandomShear, RandomRotation, RandomResizedCrop,
                              MaxNumBoundingBoxes]))   # images AND boxes, one draw
      -> prefetch -> to_torch

The detector is a small CNN predicting, on a 12x12 grid, a heatmap of box centres and the
boxes' width and height (CenterNet's idea, Zhou et al., "Objects as points", 2019). Each epoch
prints the loss and the test recall and precision at IoU 0.5; before training, a check
that the augmented boxes still hold their digits' ink.

    python examples/detect_digits.py --epochs 8 --seed 0
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
import torch.nn.functional as F

import datapipe as dp
import preprocessing as pp
from datapipe.datasets.digits import load_digits_arrays

SIZE, STRIDE, MAX_BOXES = 48, 4, 3
CELLS = SIZE // STRIDE


def make_scenes(images: np.ndarray, labels: np.ndarray, n: int, seed: int) -> dict:
    """``n`` canvases (1, 48, 48) float32 in [0, 1] with up to 3 digits each; boxes
    (n, 3, 4) xyxy around each digit's ink, labels (n, 3), -1 where there is no digit."""
    rng = np.random.default_rng(seed)
    canvas = np.zeros((n, 1, SIZE, SIZE), np.float32)
    boxes = np.zeros((n, MAX_BOXES, 4), np.float32)
    classes = np.full((n, MAX_BOXES), -1, np.int64)
    for i in range(n):
        taken = np.zeros((SIZE, SIZE), bool)
        for k in range(rng.integers(1, MAX_BOXES + 1)):
            j = rng.integers(len(images))
            scale = rng.choice([2, 3])
            digit = np.kron(images[j] / 16.0, np.ones((scale, scale)))
            side = digit.shape[0]
            y, x = rng.integers(0, SIZE - side + 1, 2)
            if taken[y : y + side, x : x + side].any():
                continue  # keep digits apart: one box, one digit
            taken[y : y + side, x : x + side] = True
            canvas[i, 0, y : y + side, x : x + side] = digit
            rows, cols = np.nonzero(digit > 0)
            boxes[i, k] = [x + cols.min(), y + rows.min(), x + cols.max() + 1, y + rows.max() + 1]
            classes[i, k] = labels[j]
    return {"images": canvas, "bounding_boxes": {"boxes": boxes, "labels": classes}}


def augmentation(seed: int) -> pp.Pipeline:
    """Geometry for detection: every layer moves the boxes with the pixels."""
    box = {"bounding_box_format": "xyxy"}
    return pp.Pipeline(
        [
            pp.RandomFlip("horizontal", seed=seed, **box),
            pp.RandomShear(0.15, 0.15, fill_mode="constant", seed=seed + 1, **box),
            pp.RandomRotation(0.04, fill_mode="constant", seed=seed + 2, **box),
            pp.RandomResizedCrop(SIZE, SIZE, scale=(0.5, 1.0), seed=seed + 3, **box),
            pp.MaxNumBoundingBoxes(MAX_BOXES),
        ]
    )


def make_pipelines(n_train: int, n_test: int, batch_size: int, seed: int):
    arrays = load_digits_arrays()
    train = make_scenes(arrays["train_images"], arrays["train_labels"], n_train, seed)
    test = make_scenes(arrays["test_images"], arrays["test_labels"], n_test, seed + 1)
    augment = augmentation(seed)
    train_ds = (
        dp.Dataset.from_tensor_slices(train)
        .shuffle(n_train)
        .batch(batch_size)
        # The batch's own RNG draws the augmentation: the same stream for any parallelism.
        .random_map(lambda b, rng: augment(b, generator=rng))
        .prefetch(2)
        .to_torch()
        .with_options(dp.Options(seed=seed))
    )
    test_ds = dp.Dataset.from_tensor_slices(test).batch(n_test).to_torch()
    return train_ds, test_ds


def make_model() -> torch.nn.Module:
    def block(cin: int, cout: int, stride: int = 1) -> list[torch.nn.Module]:
        conv = torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        return [conv, torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]

    return torch.nn.Sequential(
        *block(1, 16),
        *block(16, 32, stride=2),
        *block(32, 48, stride=2),
        *block(48, 48),
        torch.nn.Conv2d(48, 3, 1),  # per cell: centre logit, width, height
    )


def targets(boxes: torch.Tensor, labels: torch.Tensor):
    """(B, 12, 12) centre heatmaps (a Gaussian of one cell around each box centre, as
    CenterNet) and (B, 2, 12, 12) box sizes (fractions of the canvas) at centre cells."""
    b = boxes.shape[0]
    valid = labels >= 0
    centre = (boxes[..., :2] + boxes[..., 2:]) / 2 / STRIDE  # in cells
    grid = torch.arange(CELLS) + 0.5
    dx = grid.view(1, 1, 1, CELLS) - centre[..., 0, None, None]
    dy = grid.view(1, 1, CELLS, 1) - centre[..., 1, None, None]
    heat = torch.exp(-(dx**2 + dy**2) / 2.0) * valid[..., None, None]
    obj = heat.amax(dim=1)  # (B, 12, 12)
    wh = torch.zeros(b, 2, CELLS, CELLS)
    cell = centre.long().clamp(0, CELLS - 1)
    img = torch.arange(b).view(-1, 1).expand_as(labels)
    i, cy, cx = img[valid], cell[..., 1][valid], cell[..., 0][valid]
    wh[i, :, cy, cx] = ((boxes[..., 2:] - boxes[..., :2]) / SIZE)[valid]
    return obj, wh


def loss_fn(out: torch.Tensor, obj: torch.Tensor, wh: torch.Tensor) -> torch.Tensor:
    # Centres are a few cells of 144: weight them up (CenterNet uses a focal loss).
    weight = 1.0 + 4.0 * obj
    heat = F.binary_cross_entropy_with_logits(out[:, 0], obj, weight=weight)
    pos = wh > 0
    size = F.l1_loss(out[:, 1:][pos], wh[pos]) if pos.any() else out.sum() * 0
    return heat + size


def decode(out: torch.Tensor, threshold: float = 0.4) -> list[torch.Tensor]:
    """xyxy boxes per image from cells whose objectness beats its 3x3 neighbours."""
    score = out[:, 0].sigmoid()
    peak = score == F.max_pool2d(score[:, None], 3, 1, 1)[:, 0]
    found = []
    for i in range(out.shape[0]):
        cy, cx = torch.nonzero(peak[i] & (score[i] > threshold), as_tuple=True)
        centre = torch.stack([cx, cy], -1).float() * STRIDE + STRIDE / 2
        half = out[i, 1:, cy, cx].T.clamp_min(0) * SIZE / 2
        found.append(torch.cat([centre - half, centre + half], -1))
    return found


def iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    lo, hi = (
        torch.maximum(a[:, None, :2], b[None, :, :2]),
        torch.minimum(a[:, None, 2:], b[None, :, 2:]),
    )
    inter = (hi - lo).clamp_min(0).prod(-1)
    area = lambda t: (t[:, 2:] - t[:, :2]).prod(-1)  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def evaluate(model: torch.nn.Module, test) -> tuple[float, float]:
    """Recall and precision at IoU 0.5 (each true box matched at most once)."""
    model.eval()
    hits = n_true = n_found = 0
    with torch.no_grad():
        for batch in test:
            found = decode(model(batch["images"]))
            for i, pred in enumerate(found):
                truth = batch["bounding_boxes"]["boxes"][i][
                    batch["bounding_boxes"]["labels"][i] >= 0
                ]
                n_true, n_found = n_true + len(truth), n_found + len(pred)
                if len(pred) and len(truth):
                    overlap = iou(truth, pred)
                    hits += int((overlap.max(dim=1).values >= 0.5).sum())
    model.train()
    return hits / max(n_true, 1), hits / max(n_found, 1)


def ink_inside_boxes(train) -> float:
    """The share of ink (pixels > 0.3) of augmented images that lies inside their boxes."""
    batch = next(iter(train))
    images, boxes = batch["images"][:, 0], batch["bounding_boxes"]["boxes"]
    valid = batch["bounding_boxes"]["labels"] >= 0
    ys = torch.arange(SIZE).view(1, 1, SIZE, 1) + 0.5
    xs = torch.arange(SIZE).view(1, 1, 1, SIZE) + 0.5
    x1, y1, x2, y2 = (boxes[..., k, None, None] for k in range(4))
    inside = ((xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2) & valid[..., None, None]).any(1)
    ink = images > 0.3
    return float((ink & inside).sum()) / max(float(ink.sum()), 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--scenes", type=int, default=1200, help="training scenes")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    n_test = max(args.scenes // 4, 50)
    train, test = make_pipelines(args.scenes, n_test, args.batch_size, args.seed)
    print(f"scenes: {args.scenes} train / {n_test} test, {SIZE}x{SIZE}, 1-{MAX_BOXES} digits each")
    print(f"augmented boxes hold {ink_inside_boxes(train):.1%} of their digits' ink")
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(1, args.epochs + 1):
        total, steps = 0.0, 0
        for batch in train:
            obj, wh = targets(batch["bounding_boxes"]["boxes"], batch["bounding_boxes"]["labels"])
            loss = loss_fn(model(batch["images"]), obj, wh)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + float(loss.detach()), steps + 1
        recall, precision = evaluate(model, test)
        print(
            f"epoch {epoch}/{args.epochs}: loss {total / steps:.3f}, "
            f"test recall@0.5 {recall:.3f}, precision@0.5 {precision:.3f}"
        )
    print(f"final test recall@0.5: {recall:.3f}, precision@0.5: {precision:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
