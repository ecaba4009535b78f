"""Issue 35 item 8: a script that checkpoints ``as_torch_dataset()`` and exits with an
iteration still open printed "Exception ignored in: <generator ... _generate> ...
ImportError: sys.meta_path is None" at exit: the collector closed the generator after the
modules were torn down, and its ``finally`` read the iterator's state (a lazy import)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import datapipe as dp

ROOT = str(Path(dp.__file__).resolve().parents[1])  # the datapipe under test

SCRIPTS = {
    "plain": """
        tds = dp.Dataset.range(10).map(lambda x: x * 2).as_torch_dataset()
        it = iter(tds)
        print(int(next(it)))
        checkpoint = {"data": tds.state_dict()}
    """,
    "loader": """
        ds = dp.Dataset.range(100).map(lambda x: x + 1, num_parallel_calls=dp.AUTOTUNE)
        tds = ds.batch(4).prefetch(2).as_torch_dataset()
        it = iter(torch.utils.data.DataLoader(tds, batch_size=None))
        print(next(it).tolist())
        checkpoint = {"data": tds.state_dict()}
        again = iter(tds)
        next(again)
    """,
}


@pytest.mark.parametrize("name, out", [("plain", "0\n"), ("loader", "[1, 2, 3, 4]\n")])
def test_exit_with_an_open_torch_iteration_prints_nothing(name, out):
    script = "import torch\nimport datapipe as dp\n" + textwrap.dedent(SCRIPTS[name])
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, out, "")
