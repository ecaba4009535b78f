"""The detection example runs, its augmented boxes hold their digits, and it learns."""

from __future__ import annotations

import pathlib
import re

import torch
from harness import load_script

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "detect_digits.py"


def _load():
    return load_script(EXAMPLE, "detect_digits_example")


EPOCH = re.compile(
    r"^epoch (\d)/2: loss ([0-9.]+), test recall@0.5 ([0-9.]+), precision@0.5 ([0-9.]+)$"
)


def test_short_run_prints_what_the_readme_shows(capsys):
    assert _load().main(["--scenes", "256", "--epochs", "2", "--seed", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "scenes: 256 train / 64 test, 48x48, 1-3 digits each"
    ink = re.match(r"^augmented boxes hold ([0-9.]+)% of their digits' ink$", out[1])
    assert ink and float(ink.group(1)) >= 99.0
    epochs = [EPOCH.match(line) for line in out[2:4]]
    assert all(epochs) and [int(m.group(1)) for m in epochs] == [1, 2]
    assert float(epochs[1].group(2)) < float(epochs[0].group(2))
    assert re.match(r"^final test recall@0.5: [0-9.]+, precision@0.5: [0-9.]+$", out[4])


def test_scenes_boxes_are_tight_around_the_ink_and_follow_augmentation():
    module = _load()
    arrays = module.load_digits_arrays()
    scenes = module.make_scenes(arrays["train_images"], arrays["train_labels"], 20, seed=1)
    images, boxes = scenes["images"][:, 0], scenes["bounding_boxes"]["boxes"]
    labels = scenes["bounding_boxes"]["labels"]
    for i in range(20):
        for k in range(3):
            if labels[i, k] < 0:
                continue
            x1, y1, x2, y2 = boxes[i, k].astype(int)
            patch = images[i, y1:y2, x1:x2]
            assert patch[0].any() and patch[-1].any() and patch[:, 0].any() and patch[:, -1].any()
    augment = module.augmentation(seed=3)
    out = augment(scenes, generator=torch.Generator().manual_seed(0))
    assert out["images"].shape == (20, 1, 48, 48)
    assert out["bounding_boxes"]["boxes"].shape == (20, 3, 4)
    # A padding slot stays padding; real digits may only be dropped by the crop.
    pad = torch.as_tensor(labels) < 0
    assert (out["bounding_boxes"]["labels"][pad] == -1).all()
