"""The digits training example runs, learns, and prints lines a user can parse."""

from __future__ import annotations

import pathlib
import re

import pytest
from harness import load_script

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"


def _load():
    return load_script(EXAMPLE, "train_digits_example")


def _run(capsys, argv):
    rc = _load().main(argv)
    out = capsys.readouterr().out
    return rc, out


EPOCH_LINE = re.compile(
    r"^epoch (\d+)/(\d+): loss ([0-9.]+), test accuracy ([0-9.]+), ([0-9,]+) elements/s trained"
)


def test_short_run_learns(capsys):
    rc, out = _run(capsys, ["--epochs", "3", "--seed", "0"])
    assert rc == 0
    epochs = [EPOCH_LINE.match(line) for line in out.splitlines() if line.startswith("epoch")]
    assert [int(m.group(1)) for m in epochs] == [1, 2, 3]
    assert all(int(m.group(2)) == 3 for m in epochs)
    losses = [float(m.group(3)) for m in epochs]
    assert losses[-1] < losses[0]
    final = re.search(r"^final test accuracy: ([0-9.]+)$", out, re.M)
    assert final is not None
    assert float(final.group(1)) >= 0.9
    assert float(final.group(1)) == float(epochs[-1].group(4))


def test_same_seed_same_result(capsys):
    _, a = _run(capsys, ["--epochs", "1", "--seed", "3"])
    _, b = _run(capsys, ["--epochs", "1", "--seed", "3"])

    def losses(out):
        return [m.group(3) for m in map(EPOCH_LINE.match, out.splitlines()) if m]

    assert losses(a) == losses(b) and len(losses(a)) == 1


@pytest.mark.slow
def test_full_run_reaches_95_percent(capsys):
    # (how long it takes is the README's figure, not a unit test's: no wall-clock bound)
    rc, out = _run(capsys, [])
    assert rc == 0
    final = re.search(r"^final test accuracy: ([0-9.]+)$", out, re.M)
    assert float(final.group(1)) >= 0.95
