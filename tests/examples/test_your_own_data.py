"""docs/guides/your-own-data.md: every command on the page runs, as written, and prints
what the page says (the slow test); the scripts it runs, in process on a small folder (the
default run)."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
import torch
from harness import load_script

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "your-own-data.md"
EPOCH = re.compile(r"^epoch (\d+)/(\d+): (\d+) images, validation accuracy ([0-9.]+)$")


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", PAGE.read_text(), flags=re.M | re.S)


def commands() -> list[str]:
    return [line for block in blocks("bash") for line in block.splitlines() if line.strip()]


def as_run_here(command: str) -> list[str]:
    """The page's command with this interpreter for ``.venv/bin/python`` (and the torchrun
    beside it) and the repository's scripts by absolute path."""
    words = shlex.split(command)
    if words[0] == ".venv/bin/python":
        words[:1] = [sys.executable]
    elif words[0] == ".venv/bin/torchrun":  # (on a free port: other jobs may hold 29500)
        words[:1] = [str(pathlib.Path(sys.executable).with_name("torchrun")), "--standalone"]
    else:
        raise AssertionError(f"the page runs {words[0]!r}: teach this test about it")
    return [str(ROOT / w) if w.startswith("examples/") else w for w in words]


def test_the_page_runs_the_scripts_it_shows():
    # The commands run what the page includes, and the page is in the site's nav.
    assert "<!-- include: examples/train_own_data.py -->" in PAGE.read_text()
    scripts = {w for c in commands() for w in shlex.split(c) if w.startswith("examples/")}
    assert scripts == {"examples/make_photo_folder.py", "examples/train_own_data.py"}
    assert "guides/your-own-data.md" in (ROOT / "mkdocs.yml").read_text()
    assert len(commands()) == 5 and len(blocks("python")) == 1
    # The README's example commands are the page's (so the slow test runs them too).
    readme = (ROOT / "README.md").read_text().splitlines()
    shown = [line for line in readme if line.startswith(".venv/bin/python examples/")]
    ours = [line for line in shown if "own_data" in line or "photo_folder" in line]
    assert len(ours) == 3 and set(ours) <= set(commands())


@pytest.mark.slow  # five training runs, two of them torchrun jobs: ~60 s
@pytest.mark.timeout(900)
def test_every_command_on_the_page_runs_and_prints_what_it_says(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    outputs = []
    for i, command in enumerate(commands()):
        done = subprocess.run(
            as_run_here(command), cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
        if i == 0:  # the page's Python block, on the folder the first command made
            code = blocks("python")[0]
            got = subprocess.run(
                [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                text=True, timeout=300, check=True,
            ).stdout.splitlines()  # fmt: skip
            names = ["eight", "five", "four", "nine", "one", "seven", "six", "three", "two"]
            assert got[0] == str([*names, "zero"])
            assert got[1] == "torch.Size([32, 3, 32, 32]) torch.float32 torch.int64"
    assert outputs[0].strip() == "wrote 1797 JPEGs in 10 class folders under photos"
    for stop, resume, step in ((outputs[1], outputs[2], 60), (outputs[3], outputs[4], 30)):
        assert stop.splitlines()[-1].startswith(f"stopped after step {step}; the checkpoint")
        lines = resume.splitlines()
        assert lines[0] == f"resumed at epoch 2, step {step}"
        (last,) = [EPOCH.match(line) for line in lines[1:]]
        assert last is not None and last.group(1) == "2" and int(last.group(3)) == 1438
        assert float(last.group(4)) > 0.5  # ten classes: chance is 0.1
    epoch1 = [EPOCH.match(line) for line in outputs[1].splitlines() if line.startswith("epoch")]
    assert [int(m.group(3)) for m in epoch1] == [1438]


def test_the_scripts_in_process_on_a_small_folder(tmp_path, capsys):
    maker = load_script(ROOT / "examples" / "make_photo_folder.py", "make_photo_folder_example")
    folder = str(tmp_path / "photos")
    assert maker.main([folder, "--count", "120"]) == 0
    assert sorted(os.listdir(folder)) == sorted(maker.NAMES)
    assert sum(len(os.listdir(os.path.join(folder, n))) for n in maker.NAMES) == 120
    script = load_script(ROOT / "examples" / "train_own_data.py", "train_own_data_example")
    train, val, names = script.make_pipelines(folder, 16, 0)
    x, y = next(iter(train))
    assert x.shape == (16, 3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    ckpt = str(tmp_path / "ckpt")
    argv = [folder, "--epochs", "2", "--batch-size", "16", "--checkpoint", ckpt]
    assert script.main([*argv, "--stop-after", "8"]) == 0  # epoch 2, step 2 of 6
    assert script.main([*argv, "--resume"]) == 0
    out = capsys.readouterr().out.splitlines()[1:]  # after the maker's line
    assert out[0] == "epoch 1/2: 96 images, validation accuracy " + out[0].rsplit(" ", 1)[1]
    assert out[1] == f"stopped after step 8; the checkpoint is in {ckpt}"
    assert out[2] == "resumed at epoch 2, step 8"
    last = EPOCH.match(out[3])
    assert last is not None and last.group(1) == "2" and last.group(3) == "96"
    assert len(names) == 10 and len(out) == 4
