"""examples/profile_pipeline.py runs and finds its deliberate bottleneck."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import SimpleNamespace

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "profile_pipeline.py"


def test_profile_pipeline_example(tmp_path, capsys, monkeypatch, stats_clock):
    spec = importlib.util.spec_from_file_location("profile_pipeline_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # The example's augmentation and training step "work" on the fake clock (its time
    # module is this stand-in), so its verdict does not depend on the machine's load.
    monkeypatch.setattr(mod, "time", SimpleNamespace(sleep=stats_clock.sleep))
    args = ["--out", str(tmp_path), "--epochs", "2", "--max-steps", "4", "--step-ms", "1"]
    results = mod.main(args)
    slow = results["slow"]["report"]
    assert slow.verdict.stage == "augment"
    assert slow.verdict.kind == "parallelize"
    assert slow.stage("augment").elements == 4 * 64
    assert [e.steps for e in results["fixed"]["timer"].epochs] == [4, 4]
    assert sorted(os.listdir(tmp_path)) == [
        "report-fixed.json",
        "report-slow.json",
        "trace-fixed.json",
        "trace-slow.json",
    ]
    with open(tmp_path / "trace-slow.json", encoding="utf-8") as f:
        assert any(e["ph"] == "X" for e in json.load(f)["traceEvents"])
    out = capsys.readouterr().out
    assert "=== slow pipeline ===" in out and "Verdict: bottleneck: augment." in out
    assert "training on the fixed pipeline:" in out
