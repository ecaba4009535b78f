"""Docstrings of the thin ``Dataset`` methods, taken from the op each one builds.

The semantics (shapes, dtypes, errors, the tf.data/Keras anchor) and the runnable example
are written once, on the op's class in ``datapipe/ops`` / ``datapipe/sources`` /
``datapipe/io``; ``attach`` copies that whole text, example included, onto the method, so
``help(ds.map)`` and the method's entry on the API reference page (docs/reference/dataset.md,
generated from ``Dataset``'s docstrings) show it where the method is documented.

The doctests run once, on the op classes: the copies on ``Dataset`` would be collected again
by ``pytest --doctest-modules`` from ``datapipe/dataset_ops.py`` (the methods are defined
there), so ``tests/conftest.py`` leaves out the doctest items named in ``ATTACHED``.

Which object documents which method comes from ``datapipe._op_table`` (computed from the op
classes).
"""

from __future__ import annotations

import importlib
import inspect

from datapipe._op_table import EXTRA_DOCS, documented_by

# Dataset methods whose docstring ``attach`` copied from their op's class, by doctest name
# ("datapipe.dataset_ops.Dataset.map"): their examples run on the op classes instead.
ATTACHED: set[str] = set()

_HEADINGS = ("Example:", "Examples:")


def _doc_of(module: str, name: str) -> str:
    """The docstring of ``module.name``, with a line saying where it comes from put before
    its example (after the text, so the method's one-line summary stays the class's)."""
    obj = getattr(importlib.import_module(module), name)
    lines = inspect.cleandoc(obj.__doc__ or "").splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip() in _HEADINGS), len(lines))
    role = "the node this method builds" if inspect.isclass(obj) else "which this method calls"
    source = f"(The docstring of ``{module}.{name}``, {role}.)"
    head = "\n".join(lines[:at]).rstrip()
    tail = "\n".join(lines[at:])
    return f"{head}\n\n{source}" + (f"\n\n{tail}" if tail else "")


def attach(dataset_cls: type) -> None:
    """Give each thin ``Dataset`` method the docstring of the op it builds."""
    for method, (module, name) in documented_by().items():
        doc = _doc_of(module, name)
        if method in EXTRA_DOCS:
            doc += "\n\nWith a filename:\n\n" + _doc_of(*EXTRA_DOCS[method])
        attr = dataset_cls.__dict__.get(method)
        if attr is None:  # an op module without its method: tests/core/test_op_table.py says so
            continue
        func = attr.__func__ if isinstance(attr, staticmethod) else attr
        if not func.__doc__:
            func.__doc__ = doc
            ATTACHED.add(f"{func.__module__}.{dataset_cls.__qualname__}.{method}")
