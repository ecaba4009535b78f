"""The README's datapipe.image example runs as written (issue 33 item 1)."""

from __future__ import annotations

import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_image_example_runs():
    blocks = re.findall(r"```python\n(.*?)\n```", README.read_text(), flags=re.S)
    code = next(b for b in blocks if "from datapipe import image" in b)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["y"].shape == (50, 40, 3) and scope["y"].dtype == np.uint8
    assert int(scope["y"].max()) <= 51  # zeros brightened by at most 0.2 of 255
