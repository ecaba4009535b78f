"""The suite itself: every test names its upstream test, and ``SKIPPED`` is one table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from . import SKIPPED

HERE = Path(__file__).parent
UPSTREAM = re.compile(r"((?:experimental/)?kernel_tests/\w+_test\.py)::(\w+)\.(\w+)((?:, \w+)*)")


def _tests():
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == "test_suite.py":
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield path.name, node.name, ast.get_docstring(node) or ""


def _translated() -> set[str]:
    out = set()
    for _, _, doc in _tests():
        for m in UPSTREAM.finditer(" ".join(doc.split())):
            file, cls = m.group(1), m.group(2)
            for method in [m.group(3), *filter(None, m.group(4).split(", "))]:
                out.add(f"{file}::{cls}.{method}")
    return out


def test_every_test_names_its_upstream_test():
    """Each test's docstring starts with ``kernel_tests/<file>_test.py::<Class>.<method>``."""
    missing = [f"{f}::{name}" for f, name, doc in _tests() if not UPSTREAM.match(doc)]
    assert missing == []


def test_skipped_is_one_table_of_one_line_reasons():
    """A skipped upstream test has a one-line reason and is not also translated."""
    assert all(UPSTREAM.fullmatch(key) for key in SKIPPED), [
        k for k in SKIPPED if not UPSTREAM.fullmatch(k)
    ]
    assert all(reason and "\n" not in reason for reason in SKIPPED.values())
    assert sorted(set(SKIPPED) & _translated()) == []


def test_narrowed_tests_cite_a_row_of_the_differences_table():
    """Every ``D-TF-n`` a test cites is a row of docs/guides/differences.md."""
    table = (HERE.parents[2] / "docs" / "guides" / "differences.md").read_text()
    rows = set(re.findall(r"^\| (D-TF-\d+) \|", table, re.M))
    cited = set()
    for path in HERE.glob("test_*.py"):
        cited |= set(re.findall(r"D-TF-\d+", path.read_text()))
    cited -= {"D-TF-n"}
    assert sorted(cited - rows) == []
