"""The tabular and text examples run quickly, learn, save/export and print parseable lines."""

from __future__ import annotations

import pathlib
import re
import sys

from harness import load_script

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _load(name: str):
    return load_script(EXAMPLES / f"{name}.py", f"{name}_example")


def _final(out: str, what: str) -> float:
    match = re.search(rf"^{what} test accuracy: ([0-9.]+)$", out, re.M)
    assert match is not None, out
    return float(match.group(1))


def test_tabular_example_learns_saves_and_exports(capsys, tmp_path):
    rc = _load("train_tabular").main(["--epochs", "3", "--seed", "0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    epochs = re.findall(r"^epoch (\d+)/3: loss ([0-9.]+), test accuracy", out, re.M)
    assert [int(e) for e, _ in epochs] == [1, 2, 3]
    assert float(epochs[-1][1]) < float(epochs[0][1])
    final = _final(out, "final")
    assert final >= 0.9  # 114 held-out rows; the majority class is 63%
    # The reloaded (JSON configs + state_dict) model and the exported program agree exactly.
    assert _final(out, "reloaded model") == final == _final(out, "exported program")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["layers.json", "model.pt", "model.pt2"]


def test_text_example_learns(capsys):
    rc = _load("train_text").main(["--epochs", "3", "--seed", "0"])
    out = capsys.readouterr().out
    assert rc == 0
    lines = re.findall(r"^epoch \d+/3: loss ([0-9.]+), test accuracy ([0-9.]+), padding", out, re.M)
    assert len(lines) == 3 and float(lines[-1][0]) < float(lines[0][0])
    assert _final(out, "final") >= 0.7  # 4 topics; the majority class is 39%
    for topic in ("files", "network", "concurrency", "numbers"):
        assert re.search(rf"^  {topic}: \S", out, re.M), topic


if str(EXAMPLES) not in sys.path:  # examples import their siblings as scripts do
    sys.path.insert(0, str(EXAMPLES))
