"""Modules imported on first use, so that ``import datapipe`` stays light.

pyarrow alone adds ~40 MB and ~0.1 s to the import, and torch ~200 MB and ~2 s; a
pipeline over numpy arrays needs neither. A module that uses one only inside its functions
binds the name to ``lazy_module("pyarrow")`` at run time and imports the real module under
``TYPE_CHECKING``, so type checkers see the real one::

    if TYPE_CHECKING:
        import pyarrow as pa
    else:
        pa = lazy_module("pyarrow")

Not ``importlib.util.LazyLoader``: it puts a half-loaded module in ``sys.modules`` (code
that asks whether pyarrow is loaded would be told yes) and, before Python 3.12, two threads
touching it at once could both run the module's code. ``importlib.import_module`` holds
the import lock, so concurrent first uses from pipeline threads load it once.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _LazyModule:
    """Stands for module ``name``; the first attribute read imports it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module {self._name!r} ({state})>"


def lazy_module(name: str) -> Any:
    """A stand-in for ``import name`` that imports the module when an attribute is read.

    Args:
        name: the module's absolute dotted name, e.g. ``"pyarrow.compute"``.

    Returns:
        An object whose attributes are the module's (``pa.array``, ``pa.ArrowInvalid``).

    Raises:
        ModuleNotFoundError: on the first attribute read, when the module is not installed.

    Example:
        >>> json = lazy_module("json")
        >>> json.dumps([1, 2])
        '[1, 2]'
    """
    return _LazyModule(name)
