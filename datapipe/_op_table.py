"""The ops' facts in one place, read from the op classes themselves.

One op, one module (docs/architecture.md): every public module of ``datapipe/ops`` and
``datapipe/sources`` defines the node class of one ``Dataset`` method, and that class's
``_name`` *is* the method's name (``MapDataset._name == "map"``). So the list of ops, the
class that documents each ``Dataset`` method (``datapipe._docs``) and the table of traits are
computed from the classes; what is kept by hand here is only what the classes cannot say:

- ``ELSEWHERE``: methods documented by an object that is not a node class of those
  packages (functions that run a pipeline, ops that live in ``datapipe.io`` or
  ``datapipe.distribute``);
- ``INTERNAL_NODES``: node classes no method builds (a building block of another op);
- ``NOT_OPS``: ``Dataset``'s public names that build no node (properties, traits, runners,
  ``as_torch_dataset``).

``tests/core/test_op_table.py`` fails when a new op module, ``Dataset`` method, node class
or trait is in none of these, and checks the docstrings that name ops by trait (``Dataset``,
``datapipe.distribute.auto_shard``, ``datapipe._rewrites``) against the classes' traits.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

from datapipe.dataset_ops import Dataset

OP_PACKAGES = ("datapipe.ops", "datapipe.sources")

# method -> (module, object) whose docstring documents it, for methods no node class of
# OP_PACKAGES builds.
ELSEWHERE: dict[str, tuple[str, str]] = {
    "reduce": ("datapipe.ops.reduce", "reduce_dataset"),
    "get_single_element": ("datapipe.ops.get_single_element", "get_single_element"),
    "save": ("datapipe.io.save", "save_dataset"),
    "load": ("datapipe.io.save", "load_dataset"),
    "list_files": ("datapipe.io.files", "list_files"),
}

# cache(filename) builds another node than cache(): both texts document the method.
EXTRA_DOCS: dict[str, tuple[str, str]] = {"cache": ("datapipe.io.file_cache", "FileCacheDataset")}

# Node classes of OP_PACKAGES that no Dataset method builds: "module.Class".
INTERNAL_NODES = frozenset(
    {"datapipe.ops.window.WindowComponentDataset", "datapipe.ops.snapshot.SnapshotShardDataset"}
)

# Dataset's public names that build no node.
NOT_OPS = frozenset(
    {"element_spec", "cardinality", "op_seed", "options", "as_numpy_iterator", "take_all"}
    | {"apply", "profile", "as_torch_dataset", "stage_request"}
)


def traits() -> tuple[str, ...]:
    """The trait names: ``Dataset``'s public boolean attributes (``ClassVar[bool]``, or
    ``bool`` for a trait an op may set per instance), in declaration order."""
    annotations = Dataset.__annotations__.items()
    return tuple(n for n, a in annotations if a in ("ClassVar[bool]", "bool") and n[0] != "_")


def op_modules() -> list[str]:
    """The public modules of ``OP_PACKAGES`` (one op each), e.g. ``datapipe.ops.map``."""
    out = []
    for package in OP_PACKAGES:
        path = importlib.import_module(package).__path__
        out += [f"{package}.{m.name}" for m in pkgutil.iter_modules(path) if m.name[0] != "_"]
    return out


def _defined_nodes(module: str) -> list[type[Dataset]]:
    mod = importlib.import_module(module)
    return [
        c
        for c in vars(mod).values()
        if inspect.isclass(c) and issubclass(c, Dataset) and c.__module__ == module
    ]


@functools.cache
def node_classes() -> dict[str, type[Dataset]]:
    """``Dataset`` method -> the node class it builds, for every op module with one."""
    out: dict[str, type[Dataset]] = {}
    for module in op_modules():
        for cls in _defined_nodes(module):
            if f"{module}.{cls.__name__}" not in INTERNAL_NODES and "_name" in cls.__dict__:
                out[cls._name] = cls
    return out


def documented_by() -> dict[str, tuple[str, str]]:
    """``Dataset`` method -> (module, object) whose docstring documents it."""
    out = {m: (c.__module__, c.__name__) for m, c in node_classes().items()}
    out.update(ELSEWHERE)
    return out


def trait_table() -> str:
    """A Markdown table: one row per op (node class of ``OP_PACKAGES``), one column per
    trait, ``yes`` where the class sets it (an op whose trait depends on its arguments sets
    it on the instance; the class value is shown)."""
    names = traits()
    rows = ["| op | " + " | ".join(f"`{t}`" for t in names) + " |"]
    rows.append("|---" * (len(names) + 1) + "|")
    for method, cls in sorted(node_classes().items()):
        cells = ["yes" if getattr(cls, t) else "" for t in names]
        rows.append(f"| `{method}` | " + " | ".join(cells) + " |")
    return "\n".join(rows)
