"""The README's commands and example are the ones CI runs and that work."""

from __future__ import annotations

import re
from pathlib import Path

import torch

import preprocessing as pp

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = _bash_blocks(readme)
    assert len(blocks) >= 2, "README must open with the main-job and the test command"
    test_cmd = blocks[1].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    m = re.search(r"^TEST_CMD='(.*)'$", ci, flags=re.M)
    assert m, ".ci/run must define TEST_CMD"
    assert m.group(1) == test_cmd
    assert "-c constraints.txt" in test_cmd and "pytest" in test_cmd


def test_main_job_command_runs_the_digits_example_with_constraints() -> None:
    main_cmd = _bash_blocks((ROOT / "README.md").read_text())[0].strip()
    assert "-c constraints.txt" in main_cmd
    assert main_cmd.endswith("examples/train_digits.py")
    assert (ROOT / "examples" / "train_digits.py").is_file()


def test_constraints_pin_cpu_torch() -> None:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    assert "torch==2.13.0" in [ln.strip() for ln in lines]


def test_readme_python_example_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)\n```", readme, flags=re.S)[0]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    x, y = scope["x"], scope["y"]
    assert isinstance(x, torch.Tensor) and x.dtype == torch.float32
    assert tuple(x.shape) == (64, 28, 28)
    assert y.dtype == torch.int64 and tuple(y.shape) == (64,)
    assert float(x.max()) <= 1.0


def test_readme_preprocessing_example_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, flags=re.S)
    # the first block that builds a model with layers (the README's layer example)
    code = next(b for b in blocks if "import preprocessing" in b and "model" in b)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert tuple(scope["out"].shape) == (16, 10)
    model = scope["model"].eval()
    x = torch.rand(2, 3, 32, 32)
    assert torch.equal(model[1](x), x) and torch.equal(model[2](x), x)  # identity in eval()


def test_readme_boxes_example_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    code = next(
        c for c in re.findall(r"```python\n(.*?)\n```", readme, flags=re.S) if "keypoints" in c
    )
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    out = scope["out"]
    assert tuple(out["images"].shape) == (8, 3, 96, 96)
    assert tuple(out["bounding_boxes"]["boxes"].shape) == (8, 4, 4)
    assert out["bounding_boxes"]["labels"][:, 1:].eq(-1).all()  # padding
    assert tuple(out["segmentation_masks"].shape) == (8, 96, 96)
    assert out["segmentation_masks"].dtype == torch.int64
    assert tuple(out["keypoints"].shape) == (8, 1, 2)


def test_readme_feature_layers_example_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, flags=re.S)
    code = next(b for b in blocks if "pp.TextVectorization" in b)
    scope: dict = {}
    exec(compile(code, "README feature layers example", "exec"), scope)
    # The README's promises, as its example shows them: an adapted layer's JSON config
    # alone rebuilds it (moments and vocabulary in the config), and a size past its bound
    # is a ValueError naming it.
    config = __import__("json").loads(scope["config"])["config"]
    assert config["vocabulary"][0] == "[UNK]" and "cat" in config["vocabulary"]
    mean = pp.serialize_layer(scope["scaler"])["config"]["mean"]
    assert len(mean) == 3 and all(abs(m - 5.0) < 0.5 for m in mean)
    assert scope["refused"].startswith("MelSpectrogram: fft_length must be an int >= 1 and <=")


def test_readme_sequences_example_runs():
    readme = (ROOT / "README.md").read_text()
    code = next(
        b for b in re.findall(r"```python\n(.*?)\n```", readme, flags=re.S) if "first_fit_pack" in b
    )
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["shapes"] == [(2, 4), (2, 12), (1, 2), (1, 8)]
    nested = scope["nested"]
    assert nested.is_nested and nested.layout == torch.jagged
    assert [t.tolist() for t in nested.unbind()] == [[1, 2, 3], list(range(1, 10)), [1, 2, 3, 4]]
    rows = scope["rows"]
    assert {k: v.shape for k, v in rows.items()} == {
        "tokens": (16,),
        "tokens_segment_ids": (16,),
        "tokens_positions": (16,),
    }


def test_readme_mixing_example_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, flags=re.S)
    scope: dict = {}
    exec(compile(next(b for b in blocks if "pp.CutMix" in b), "README mixing", "exec"), scope)
    out, labels = scope["out"], scope["batch"]["labels"]
    assert tuple(out["images"].shape) == (8, 3, 32, 32)
    torch.testing.assert_close(out["labels"].sum(1), torch.ones(8))
    assert not torch.equal(out["labels"], labels)
    assert tuple(scope["erased"].shape) == (8, 3, 32, 32)


def test_readme_layout_rule_example_runs() -> None:
    # The image section's first example states the layout rule (issue 33 item 3).
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, flags=re.S)
    code = next(b for b in blocks if 'data_format="channels_first"' in b and "resize" in b)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["hwc"].shape == (8, 8, 3) and scope["chw"].shape == (3, 8, 8)
