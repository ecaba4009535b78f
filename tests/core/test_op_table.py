"""One source of truth for op facts (``datapipe._op_table``): every ``Dataset`` method, op
module, node class and trait is accounted for; the docstrings that name ops by trait agree
with the classes; every op has its tests where the layout says; every error class lives in
``datapipe.errors`` and is exported from ``datapipe``."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import datapipe as dp
from datapipe import _op_table as table
from datapipe.dataset_ops import Dataset

ROOT = Path(__file__).resolve().parents[2]

# Ops whose tests live in a concern suite or another folder instead of tests/ops/test_<op>.py.
TESTED_ELSEWHERE = {
    "prefetch": "tests/parallel/test_ordering.py",
    "prefetch_to_device": "tests/device/test_prefetch_to_device.py",
    "with_options": "tests/core/test_options.py",
    "get_single_element": "tests/core/test_tf_differential_sequence_ops.py",
}


def _public_names() -> set[str]:
    return {n for n in vars(Dataset) if not n.startswith("_")}


def test_every_dataset_method_is_an_op_or_declared_not_one():
    ops = set(table.documented_by())
    assert ops | table.NOT_OPS | set(table.traits()) == _public_names()
    assert not ops & table.NOT_OPS
    # and nothing is listed that Dataset does not have
    assert set(table.ELSEWHERE) <= _public_names() and table.NOT_OPS <= _public_names()


def test_every_op_module_builds_the_node_of_the_method_of_its_name():
    classes = table.node_classes()
    modules = table.op_modules()
    assert len(modules) == len(classes) + sum(
        m in {mod for mod, _ in table.ELSEWHERE.values()} for m in modules
    )
    sources = {"tensor_slices": "from_tensor_slices", "tensors": "from_tensors"}
    sources["generator"] = "from_generator"
    for module in modules:
        stem = module.rsplit(".", 1)[1]
        method = sources.get(stem, stem)
        assert method in table.documented_by(), module
        if method in classes:
            assert classes[method].__module__ == module
            assert classes[method]._name == method


def test_every_node_class_of_an_op_module_is_an_op_or_internal():
    for module in table.op_modules():
        mod = importlib.import_module(module)
        for cls in vars(mod).values():
            if inspect.isclass(cls) and issubclass(cls, Dataset) and cls.__module__ == module:
                name = f"{module}.{cls.__name__}"
                assert name in table.INTERNAL_NODES or table.node_classes().get(cls._name) is cls


def test_each_method_shows_the_docstring_of_what_documents_it():
    for method, (module, name) in table.documented_by().items():
        obj = getattr(importlib.import_module(module), name)
        first = inspect.cleandoc(obj.__doc__).splitlines()[0]
        assert first in getattr(Dataset, method).__doc__, method


def test_the_trait_table_is_the_classes_traits():
    rows = table.trait_table().splitlines()
    header = [c.strip(" `") for c in rows[0].strip("|").split("|")]
    assert header == ["op", *table.traits()]
    assert len(rows) == 2 + len(table.node_classes())
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        cls = table.node_classes()[cells[0].strip("`")]
        assert [c == "yes" for c in cells[1:]] == [bool(getattr(cls, t)) for t in table.traits()]
    assert "| `map` | yes | yes |" in table.trait_table()  # elementwise, commutes_with_shard


# ---- docstrings that name ops by trait ------------------------------------------------------
def _nodes_named(name: str) -> list[type]:
    """Node classes whose ``_name`` is ``name`` (the last part of a dotted name), anywhere."""
    importlib.import_module("datapipe.service.op")
    found, stack = [], [Dataset]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__dict__.get("_name") == name.rsplit(".", 1)[-1]:
            found.append(cls)
    assert found, f"no op named {name!r}"
    return found


def _dataset_doc_examples() -> dict[str, list[str]]:
    """Dataset's trait bullets: trait -> the ops in its first parenthesised list."""
    doc = inspect.cleandoc(Dataset.__doc__)
    out = {}
    for trait, text in re.findall(r"^- ``(\w+)``: (.*?)(?=^- |^\S|\Z)", doc, re.M | re.S):
        group = re.search(r"\(([^()]*)\)", text)
        out[trait] = re.findall(r"``([\w.]+)``", group.group(1)) if group else []
    return out


def test_dataset_documents_every_trait_with_true_examples():
    examples = _dataset_doc_examples()
    assert list(examples) == list(table.traits())
    assert sum(map(len, examples.values())) >= 15  # the bullets do name examples
    for trait, names in examples.items():
        for name in names:
            assert all(getattr(c, trait) for c in _nodes_named(name)), (trait, name)
    module_doc = importlib.import_module("datapipe.dataset_ops").__doc__
    assert all(f"``{t}``" in module_doc for t in table.traits())


@pytest.mark.parametrize("module", ["datapipe.distribute.auto_shard", "datapipe._rewrites"])
def test_trait_lists_in_module_docs_match_the_classes(module):
    doc = importlib.import_module(module).__doc__
    lists = re.findall(r"trait ``(\w+)``: ((?:``[\w.]+``,?\s*)+)", doc)
    assert lists, module
    for trait, names in lists:
        assert trait in table.traits()
        for name in re.findall(r"``([\w.]+)``", names):
            assert all(getattr(c, trait) for c in _nodes_named(name)), (module, trait, name)


def test_auto_shard_doc_ops_that_need_the_whole_stream_do_not_commute_with_shard():
    doc = importlib.import_module("datapipe.distribute.auto_shard").__doc__
    text = re.search(r"depends on the whole stream \(([^)]*)\)", doc).group(1)
    names = re.findall(r"``(\w+)``", text)
    assert names == ["take", "skip", "enumerate", "unique", "scan", "window"]
    for name in names:
        assert not table.node_classes()[name].commutes_with_shard, name


# ---- tests mirror the code -----------------------------------------------------------------
def test_every_op_module_has_its_test_file():
    missing = []
    for module in table.op_modules():
        package, stem = module.split(".")[1:]
        path = ROOT / "tests" / package / f"test_{stem}.py"
        if not path.exists() and stem not in TESTED_ELSEWHERE:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []
    for stem, where in TESTED_ELSEWHERE.items():
        assert f"{stem}(" in (ROOT / where).read_text(), (stem, where)


# ---- errors ---------------------------------------------------------------------------------
def _error_classes_outside_errors_py() -> list[str]:
    out = []
    for path in sorted((ROOT / "datapipe").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "datapipe":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith(("Error", "Exception", "Failure")) for b in bases):
                    out.append(f"{path.relative_to(ROOT)}:{node.name}")
    return out


def test_error_classes_live_in_errors_py_and_are_exported():
    assert _error_classes_outside_errors_py() == []
    errors = importlib.import_module("datapipe.errors")
    defined = [
        n
        for n, c in vars(errors).items()
        if inspect.isclass(c) and issubclass(c, BaseException) and c.__module__ == errors.__name__
    ]
    assert len(defined) >= 16
    for name in defined:
        assert getattr(dp, name) is getattr(errors, name), name
        assert name in dp.__all__, name
