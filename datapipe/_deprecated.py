"""Old import paths of renamed public names, kept for one release with a warning.

A module that was renamed stays importable under its old dotted path without a file of
that name (the point of the rename was that the old name no longer sits beside the new
one's neighbour): a stand-in module whose attributes are the new module's, each read
emitting a ``DeprecationWarning`` that names the new path. ``alias_module`` makes the
stand-in on import through a finder, so ``import old`` itself warns; where the parent
package's attribute of that name is something else (``datapipe.service.distribute``, the
op), the import system would overwrite it, and the stand-in goes into ``sys.modules`` up
front instead (``keep_attribute=True``: only attribute reads warn). A renamed class keeps
its old name through the package's ``__getattr__`` (``moved``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
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
        if name == "__all__":  # `from old import *`: the new module's names (each warns)
            return _public_names(importlib.import_module(self._new))
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


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths ``alias_module`` registered; loading one warns at the import."""

    def __init__(self) -> None:
        self.moved: dict[str, tuple[str, dict[str, str]]] = {}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        new, renamed = self.moved[spec.name]
        return _MovedModule(spec.name, new, renamed)

    def exec_module(self, module: types.ModuleType) -> None:
        assert isinstance(module, _MovedModule)
        warnings.warn(
            f"{module.__name__} was renamed to {module._new}: import from {module._new}",
            DeprecationWarning,
            # warn() skips the import machinery's frames: 2 is the import statement, so
            # the warning names the user's line and the default filter (shown when the
            # import is in __main__) applies.
            stacklevel=2,
        )


_FINDER = _MovedFinder()


def _public_names(module: types.ModuleType) -> list[str]:
    """``module.__all__``, or else its public names defined there (not what it imports)."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        n
        for n, v in vars(module).items()
        if n[0] != "_"
        and n != "TYPE_CHECKING"
        and not isinstance(v, types.ModuleType)
        and getattr(v, "__module__", module.__name__) == module.__name__
    ]


def alias_module(
    old: str, new: str, renamed: dict[str, str] | None = None, keep_attribute: bool = False
) -> None:
    """Make ``import old`` / ``from old import x`` work, with a ``DeprecationWarning``
    naming ``new`` at the import and on each attribute read; ``renamed`` maps the old
    module's names that changed too to their new names. ``keep_attribute``: the parent
    package's attribute named like the old module is something else and must stay (the
    stand-in is made now, and the import itself does not warn)."""
    if keep_attribute:
        sys.modules.setdefault(old, _MovedModule(old, new, renamed or {}))
        return
    _FINDER.moved[old] = (new, renamed or {})
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def moved(old: str, new: str, value: Any) -> Any:
    """``value`` (the object now called ``new``) read under its old name ``old``, with a
    ``DeprecationWarning``; for a package ``__getattr__``."""
    warnings.warn(f"{old} was renamed to {new}", DeprecationWarning, stacklevel=3)
    return value
