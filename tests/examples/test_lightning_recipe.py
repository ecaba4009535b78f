"""docs/guides/lightning.md: a LightningDataModule over a datapipe pipeline, DDP on 2 CPU
processes (gloo, 127.0.0.1), every image exactly once per epoch; a checkpoint from
Lightning's ModelCheckpoint in the middle of an epoch, and Trainer.fit(ckpt_path=...) that
delivers the rest of that epoch exactly once (issue 32)."""

from __future__ import annotations

import pytest
import torch
from _recipes import ROOT, check_exactly_once, commands, run
from harness import load_script

PAGE = ROOT / "docs" / "guides" / "lightning.md"
SCRIPT = ROOT / "examples" / "train_lightning.py"


def test_the_page_shows_the_script_and_runs_it():
    text = PAGE.read_text()
    assert "<!-- include: examples/train_lightning.py -->" in text
    assert "guides/lightning.md" in (ROOT / "mkdocs.yml").read_text()
    assert [c.split()[:2] for c in commands(PAGE)] == [
        [".venv/bin/python", "examples/train_lightning.py"]
    ] * 2
    assert "--stop-after 10" in commands(PAGE)[0] and "--resume" in commands(PAGE)[1]


@pytest.mark.timeout(300)
def test_one_process_checkpoint_mid_epoch_and_resume_exactly(tmp_path, capsys):
    # 192 images, batches of 32: 6 steps an epoch; the checkpoint at step 8 is in epoch 2,
    # the run stops at step 10 (steps 8 and 9 are lost with it), the resume goes on at 8.
    script = load_script(SCRIPT, "train_lightning_example")
    ckpt, rec1, rec2 = (str(tmp_path / d) for d in ("ckpt", "rec1", "rec2"))
    common = ["--devices", "1", "--examples", "192", "--checkpoint", ckpt]
    assert script.main([*common, "--stop-after", "10", "--record", rec1]) == 0
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step=8.ckpt"]
    state = torch.load(tmp_path / "ckpt" / "step=8.ckpt", weights_only=False)
    (loader_state,) = state["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    ranks = loader_state["dataset_state"]["ranks"]
    assert len(ranks) == 1 and ranks[0]["epoch"] == 1 and not ranks[0]["done"]
    assert script.main([*common, "--resume", "--record", rec2]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "epoch 2/2: 128 images, loss " + out[-1].rsplit(" ", 1)[1]
    check_exactly_once(tmp_path / "rec1", tmp_path / "rec2", 192, 1, 8)


@pytest.mark.timeout(600)
def test_the_page_two_ddp_processes_each_image_once_per_epoch_across_a_resume(tmp_path):
    # The page's two commands: 384 images on 2 ranks, 6 steps an epoch on each.
    stop, resume = commands(PAGE)
    out1 = run(stop + " --examples 384 --record rec1", tmp_path, timeout=280)
    assert out1.splitlines()[-1] == "stopped after step 10; the checkpoints are in ckpt"
    out2 = run(resume + " --examples 384 --record rec2", tmp_path, timeout=280)
    lines = out2.splitlines()
    assert lines[0] == "resuming from ckpt/step=8.ckpt"
    assert lines[-1].startswith("epoch 2/2: 256 images, loss ")
    check_exactly_once(tmp_path / "rec1", tmp_path / "rec2", 384, 2, 8)
