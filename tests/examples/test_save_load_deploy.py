"""docs/guides/save-load-deploy.md: every Python block on the page runs, in order, and
prints the text block that follows it. The ``deploy.py`` block runs in a fresh
interpreter that cannot import ``datapipe`` or ``preprocessing`` (a ``sys.meta_path``
finder refuses them), as on a machine without this library; the ONNX block needs
onnxruntime, onnx and onnxscript (the ``dev`` extra) and is skipped, saying so, without.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "save-load-deploy.md"
ONNX_PACKAGES = ("onnxruntime", "onnx", "onnxscript")

# Prepended to the deploy block: importing the library fails as if it were not installed.
BLOCKER = """\
import importlib.abc, sys

class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("datapipe", "preprocessing"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)")
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


def steps() -> list[tuple[str, str]]:
    """(code, expected output) of each Python block and the text block after it."""
    text = PAGE.read_text()
    found = re.findall(r"^```(python|text)\n(.*?)^```", text, flags=re.M | re.S)
    pairs = []
    for (kind, code), (next_kind, output) in zip(found, found[1:]):
        if kind == "python":
            assert next_kind == "text", f"a python block without its output:\n{code}"
            pairs.append((code, output))
    return pairs


def run_deploy(code: str, folder: pathlib.Path) -> str:
    # -I: neither PYTHONPATH nor the cwd is on sys.path; the blocker covers the
    # editable install in site-packages.
    check = "\nassert 'preprocessing' not in sys.modules"
    done = subprocess.run(
        [sys.executable, "-I", "-c", BLOCKER + code + check],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_page(folder: pathlib.Path, monkeypatch, upto: int | None = None) -> None:
    monkeypatch.chdir(folder)
    namespace: dict = {"__name__": "__page__"}
    for i, (code, expected) in enumerate(steps()[:upto]):
        if code.startswith("# deploy.py"):
            got = run_deploy(code, folder)
        else:
            if "import onnxruntime" in code:
                missing = [m for m in ONNX_PACKAGES if importlib.util.find_spec(m) is None]
                if missing:
                    pytest.skip(f"the ONNX block needs {missing}: pip install -e '.[dev]'")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{PAGE.name} block {i}", "exec"), namespace)
            got = out.getvalue()
        assert got == expected, f"block {i}:\n{code}"


def test_the_page_is_in_the_nav_and_runs_each_way():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "guides/save-load-deploy.md" in nav
    codes = [code for code, _ in steps()]
    assert len(codes) == 7
    joined = "\n".join(codes)
    for needed in (
        "state_dict",
        "torch.serialization.safe_globals",
        "torch.export.Dim",
        "torch.export.load",
        "dynamo=False",
        "dynamo=True",
        "onnxruntime",
    ):
        assert needed in joined, needed
    assert codes[5].startswith("# deploy.py")


def test_the_blocks_up_to_the_whole_model_print_what_the_page_says(tmp_path, monkeypatch):
    # state_dict and whole-model torch.load(weights_only=True): fast, in the default run.
    run_page(tmp_path, monkeypatch, upto=4)


def test_the_deploy_blocker_refuses_the_library(tmp_path):
    done = subprocess.run(
        [sys.executable, "-I", "-c", BLOCKER + "import preprocessing"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "No module named 'preprocessing' (blocked)" in done.stderr


@pytest.mark.slow  # torch.export, two ONNX exports and a fresh interpreter: ~30 s CPU
@pytest.mark.timeout(900)
def test_every_block_on_the_page_prints_what_it_says(tmp_path, monkeypatch):
    run_page(tmp_path, monkeypatch)
