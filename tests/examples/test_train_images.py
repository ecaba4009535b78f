"""examples/train_images.py: writes the PNG tree once, trains from it, and learns."""

from __future__ import annotations

import os
import pathlib
import re

from harness import load_script

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_images.py"
EPOCH = re.compile(
    r"^epoch (\d+)/(\d+): loss ([0-9.]+), test accuracy ([0-9.]+), ([0-9,]+) images/s"
)


def _load():
    return load_script(EXAMPLE, "train_images_example")


def test_reduced_run_writes_pngs_and_learns(tmp_path, capsys):
    module = _load()
    cache = str(tmp_path / "png")
    assert module.main(["--epochs", "3", "--seed", "0", "--cache-dir", cache]) == 0
    out = capsys.readouterr().out
    epochs = [EPOCH.match(line) for line in out.splitlines() if line.startswith("epoch")]
    assert [int(m.group(1)) for m in epochs] == [1, 2, 3]
    assert float(epochs[-1].group(3)) < float(epochs[0].group(3))
    assert float(epochs[-1].group(4)) >= 0.85
    final = float(out.strip().splitlines()[-1].split(": ")[1])
    assert final == float(epochs[-1].group(4))
    counts = {
        split: sum(len(f) for _, _, f in os.walk(os.path.join(cache, split)))
        for split in ("train", "test")
    }
    assert counts == {"train": 1437, "test": 360}
    assert sorted(os.listdir(os.path.join(cache, "train"))) == [str(i) for i in range(10)]
    # a second run reuses the tree (the marker stays, files are not rewritten)
    stamp = os.path.getmtime(os.path.join(cache, "train", "0"))
    assert module.write_png_tree(cache) == cache
    assert os.path.getmtime(os.path.join(cache, "train", "0")) == stamp
