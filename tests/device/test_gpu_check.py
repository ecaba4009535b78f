"""``benchmarks/gpu_check.py`` on a machine without CUDA: it stops at once with a clear
message, and its checks run end to end on the CPU under ``--self-test``."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import torch
from harness import load_script

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
CHECKS = ["overlap", "copy on path", "identical", "memory", "close", "layers", "profiler",
          "profile", "absent index"]  # fmt: skip


def _load():
    return load_script(SCRIPT, "gpu_check")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_cuda_it_fails_fast_and_says_why():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "gpu_check: FAIL: no CUDA device" in proc.stderr
    assert "torch.cuda.is_available() is False" in proc.stderr
    assert proc.stdout == ""  # no check ran


def test_self_test_runs_every_check_on_the_cpu(capsys, tmp_path, threads):
    out_json = tmp_path / "rows.json"
    torch_threads = torch.get_num_threads()
    rc = _load().main(["--self-test", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc in (0, 1)  # on a shared CPU the timing rows may fail; nothing may crash
    assert "ERROR" not in out and out.splitlines()[0].startswith("gpu_check on CPU (self-test)")
    rows = json.loads(out_json.read_text())
    assert [r["check"] for r in rows] == CHECKS
    passed = {r["check"]: r["passed"] for r in rows}
    for name in ("identical", "close", "layers", "profiler", "profile", "absent index"):
        assert passed[name] is True, (name, out)
    assert passed["copy on path"] is None  # information, not a check
    assert "cuda:0: prefetch_to_device: device 'cuda:0' is not available" in out
    assert torch.get_num_threads() == torch_threads and threads.settle() == []
