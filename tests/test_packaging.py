"""The distribution: its name on the package index, one version source, install hints that
name it (issue 32 item 10). `.ci/wheel_smoke` builds the sdist and wheel and runs the
installed wheel in a clean venv; these are the checks that need no build."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

import datapipe

tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_distribution_name_is_ours_and_import_names_stay() -> None:
    # `datapipe` on the package index is an unrelated 2016 project; `preprocessing` is taken.
    assert PROJECT["name"] == "datapipe-torch"
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert packages["packages"]["find"]["include"] == ["datapipe*", "preprocessing*"]


def test_version_comes_from_the_metadata() -> None:
    assert datapipe.__version__ == version("datapipe-torch") == PROJECT["version"]
    assert not re.search(r"__version__\s*=\s*['\"]", (ROOT / "datapipe/__init__.py").read_text())


def test_every_install_hint_names_the_distribution() -> None:
    # `pip install datapipe[remote]` would install the unrelated project.
    wrong = re.compile(r"(?<![\w-])datapipe\[")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("datapipe", "preprocessing", "docs", "benchmarks", "examples", "tests")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".py", ".md")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if wrong.search(line) and path.name != "test_packaging.py"
    ]
    found += [
        f"README.md:{n}"
        for n, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1)
        if wrong.search(line)
    ]
    found += [
        f"pyproject.toml:{n}"
        for n, line in enumerate((ROOT / "pyproject.toml").read_text().splitlines(), 1)
        if wrong.search(line)
    ]
    assert found == []


def test_classifiers_name_the_license_and_the_typed_packages() -> None:
    classifiers = PROJECT["classifiers"]
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    assert "Typing :: Typed" in classifiers
    assert f"Programming Language :: Python :: {PROJECT['requires-python'][2:]}" in classifiers
