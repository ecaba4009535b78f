"""docs/guides/accelerate.md: accelerator.prepare(model, optimizer, loader) over a datapipe
pipeline on 2 CPU processes (gloo, 127.0.0.1), every image exactly once per epoch, and
save_state / load_state in the middle of an epoch, resumed exactly (issue 32)."""

from __future__ import annotations

import pytest
from _recipes import ROOT, check_exactly_once, commands, run
from harness import load_script

PAGE = ROOT / "docs" / "guides" / "accelerate.md"
SCRIPT = ROOT / "examples" / "train_accelerate.py"


def test_the_page_shows_the_script_and_runs_it():
    text = PAGE.read_text()
    assert "<!-- include: examples/train_accelerate.py -->" in text
    assert "guides/accelerate.md" in (ROOT / "mkdocs.yml").read_text()
    assert [c.split()[:3] for c in commands(PAGE)] == [
        [".venv/bin/torchrun", "--nproc_per_node=2", "examples/train_accelerate.py"]
    ] * 2
    assert "--stop-after 10" in commands(PAGE)[0] and "--resume" in commands(PAGE)[1]


@pytest.mark.timeout(300)
def test_one_process_save_state_mid_epoch_and_load_state_exactly(tmp_path, capsys):
    # 192 images, batches of 32: 6 steps an epoch; the save at step 8 is in epoch 2, the
    # run stops at step 10 (steps 8 and 9 are lost with it), the resume goes on at 8.
    script = load_script(SCRIPT, "train_accelerate_example")
    ckpt, rec1, rec2 = (str(tmp_path / d) for d in ("ckpt", "rec1", "rec2"))
    common = ["--examples", "192", "--checkpoint", ckpt]
    assert script.main([*common, "--stop-after", "10", "--record", rec1]) == 0
    assert (tmp_path / "ckpt" / "dl_state_dict.bin").exists()
    assert script.main([*common, "--resume", "--record", rec2]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("epoch 1/2: 192 images, loss ")
    assert out[1] == f"stopped after step 10; the state is in {ckpt}"
    assert out[2] == "resumed at epoch 2, step 8"
    assert out[3].startswith("epoch 2/2: 128 images, loss ") and len(out) == 4
    check_exactly_once(tmp_path / "rec1", tmp_path / "rec2", 192, 1, 8)


@pytest.mark.slow  # two 2-process jobs that import Accelerate: ~60 s on 2 cores
@pytest.mark.timeout(600)
def test_the_page_two_processes_each_image_once_per_epoch_across_a_resume(tmp_path):
    # The page's two commands: 384 images on 2 processes, 6 steps an epoch on each.
    stop, resume = commands(PAGE)
    out1 = run(stop + " --examples 384 --record rec1", tmp_path, timeout=280)
    assert out1.splitlines()[-1] == "stopped after step 10; the state is in ckpt"
    out2 = run(resume + " --examples 384 --record rec2", tmp_path, timeout=280)
    lines = out2.splitlines()
    assert lines[0] == "resumed at epoch 2, step 8"
    assert lines[-1].startswith("epoch 2/2: 256 images, loss ")
    check_exactly_once(tmp_path / "rec1", tmp_path / "rec2", 384, 2, 8)
