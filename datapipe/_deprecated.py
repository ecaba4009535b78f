"""Old import paths of renamed public names, kept for one release with a warning.

A module that was renamed stays importable under its old dotted path without a file of
that name (the point of the rename was that the old name no longer sits beside the new
one's neighbour): ``alias_module`` puts a stand-in into ``sys.modules`` whose attributes
are the new module's, each read emitting a ``DeprecationWarning`` that names the new path.
A renamed class keeps its old name through the package's ``__getattr__`` (``moved``).
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import Any


class _MovedModule(types.ModuleType):
    """``sys.modules[old]``: every attribute read forwards to ``new`` with a warning."""

    def __init__(self, old: str, new: str, renamed: dict[str, str]):
        super().__init__(old, f"Deprecated alias of {new}.")
        self._new, self._renamed = new, renamed

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        now = self._renamed.get(name, name)
        warnings.warn(
            f"{self.__name__} was renamed to {self._new}: import {now} from {self._new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(self._new), now)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self._new))


def alias_module(old: str, new: str, renamed: dict[str, str] | None = None) -> types.ModuleType:
    """Make ``import old`` / ``from old import x`` work (with a ``DeprecationWarning``
    naming ``new`` on each attribute read); ``renamed`` maps the old module's names that
    changed too to their new names. Returns the stand-in."""
    if old not in sys.modules:
        sys.modules[old] = _MovedModule(old, new, renamed or {})
    return sys.modules[old]


def moved(old: str, new: str, value: Any) -> Any:
    """``value`` (the object now called ``new``) read under its old name ``old``, with a
    ``DeprecationWarning``; for a package ``__getattr__``."""
    warnings.warn(f"{old} was renamed to {new}", DeprecationWarning, stacklevel=3)
    return value
