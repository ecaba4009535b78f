"""Docstrings of the thin ``Dataset`` methods, taken from the op each one builds.

The semantics (shapes, dtypes, errors, the tf.data/Keras anchor) are documented once, on the
op's class in ``datapipe/ops`` / ``datapipe/sources`` / ``datapipe/io``; ``help(ds.map)``
shows that text. Runnable examples stay on the op classes (doctests run there once).

Which object documents which method comes from ``datapipe._op_table`` (computed from the op
classes).
"""

from __future__ import annotations

import importlib
import inspect

from datapipe._op_table import EXTRA_DOCS, documented_by


def _without_examples(doc: str) -> str:
    lines = inspect.cleandoc(doc).splitlines()
    for i, line in enumerate(lines):
        if line.strip() in ("Example:", "Examples:"):
            return "\n".join(lines[:i]).rstrip()
    return "\n".join(lines)


def _doc_of(module: str, name: str) -> str:
    obj = getattr(importlib.import_module(module), name)
    text = _without_examples(obj.__doc__ or "")
    return f"{text}\n\n(Documented on ``{module}.{name}``, which has a runnable example.)"


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
