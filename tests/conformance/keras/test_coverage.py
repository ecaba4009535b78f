"""The suite covers Keras's: every upstream test method (``_upstream.METHODS``) is named by
a test docstring here or listed in ``SKIPPED`` (with a reason), never both; every
docstring reference names a real upstream method; every difference cited (``D-K-n``)
is a row of ``docs/guides/differences.md``."""

import ast
import functools
import re
from pathlib import Path

import pytest

from . import NOT_SHIPPED, SKIPPED
from ._upstream import METHODS

HERE = Path(__file__).parent
DIFFERENCES = HERE.parents[2] / "docs" / "guides" / "differences.md"
# "file_test.py::method" and, after one, "::other_method" (the same file).
REF = re.compile(r"(?:([\w/]+_test\.py))?::(test\w*)")


def _docstrings() -> dict[str, str]:
    """{test module name: every function docstring in it, joined}."""
    out = {}
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        tree = ast.parse(path.read_text())
        docs = [
            ast.get_docstring(node) or ""
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef)
        ]
        out[path.name] = "\n".join(docs)
    return out


def _references(text: str) -> set[tuple[str, str]]:
    refs, current = set(), None
    for match in REF.finditer(text):
        current = match.group(1) or current
        if current is not None:
            refs.add((current, match.group(2)))
    return refs


def _by_basename() -> dict[str, str]:
    return {path.rsplit("/", 1)[-1]: path for path in METHODS}


@functools.lru_cache(maxsize=1)
def translated() -> frozenset[tuple[str, str]]:
    """(upstream path, method) pairs named by this folder's test docstrings."""
    names = _by_basename()
    refs = set()
    for text in _docstrings().values():
        refs |= {(names.get(f, f), m) for f, m in _references(text)}
    return frozenset(refs)


def test_every_upstream_method_is_translated_or_skipped():
    done = translated()
    skipped = {tuple(key.split("::")) for key in SKIPPED}
    missing = [
        f"{path}::{method}"
        for path, methods in METHODS.items()
        if path not in NOT_SHIPPED
        for method in methods
        if (path, method) not in done and (path, method) not in skipped
    ]
    assert missing == []


def test_no_method_is_both_translated_and_skipped():
    both = sorted(key for key in SKIPPED if tuple(key.split("::")) in translated())
    assert both == []


def test_references_name_real_upstream_methods():
    known = {(path, m) for path, methods in METHODS.items() for m in methods}
    unknown = sorted(
        f"{p}::{m}"
        for p, m in translated() | {tuple(k.split("::")) for k in SKIPPED}
        if (p, m) not in known
    )
    assert unknown == []


@pytest.mark.parametrize("key", sorted(SKIPPED))
def test_skip_reasons_are_one_line(key):
    reason = SKIPPED[key]
    assert reason and "\n" not in reason and len(reason) <= 160, key


def test_cited_differences_are_rows_of_the_table():
    rows = set(re.findall(r"^\| (D-K-\d+) \|", DIFFERENCES.read_text(), flags=re.M))
    cited = set()
    for path in HERE.glob("*.py"):
        cited |= set(re.findall(r"D-K-\d+", path.read_text()))
    assert sorted(cited - rows) == []
