"""Whole-model ``torch.load`` with ``weights_only=True`` (torch's default since 2.6).

``torch.save(model)`` pickles every module by its class. torch's ``weights_only``
unpickler rebuilds only the classes on its allowlist
(``torch.serialization.add_safe_globals``), so a model holding preprocessing layers was
refused ("Unsupported global: GLOBAL preprocessing.flip.RandomFlip"). Importing
``preprocessing`` adds this package's layer classes to that allowlist, with the torch
containers its layers hold (``Pipeline``'s ``ModuleList``, ``RandomColorJitter``'s and
``RandAugment``'s ``ModuleDict``). Nothing else is added: a layer's pickled state is
tensors, Python numbers, strings, lists, tuples and dicts (which the unpickler takes
anyway), and no numpy object (which would need numpy's reconstructors allowed for every
checkpoint of the process). The classes of the user's own model are the user's to add,
as torch asks for any module class (``torch.nn.Sequential`` included).
"""

from __future__ import annotations

from typing import Any

import torch

from .base import Layer

# The torch containers a layer of this package holds as a submodule.
_CONTAINERS: tuple[type, ...] = (torch.nn.ModuleList, torch.nn.ModuleDict)


def _subclasses(cls: type[Layer]) -> list[type[Layer]]:
    out: list[type[Layer]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def safe_globals() -> list[type]:
    """The classes a checkpoint of this package's layers may name: every layer class
    defined in ``preprocessing`` (abstract bases included) and the torch containers the
    layers hold, sorted by qualified name. Importing ``preprocessing`` already adds them
    (``torch.serialization.add_safe_globals``); this list is for a
    ``torch.serialization.safe_globals(...)`` block of one's own.

    A user's own subclass of ``Layer`` is not in it (its module is not this package's):
    add it as any module class of one's model.

    Example:
        >>> import io, torch
        >>> from preprocessing import RandomFlip
        >>> buffer = io.BytesIO()
        >>> torch.save(torch.nn.Sequential(RandomFlip(seed=0)), buffer)
        >>> _ = buffer.seek(0)
        >>> with torch.serialization.safe_globals([torch.nn.Sequential]):
        ...     model = torch.load(buffer)  # weights_only=True, torch's default
        >>> type(model[0]).__name__, RandomFlip in safe_globals()
        ('RandomFlip', True)
    """
    own = {c for c in _subclasses(Layer) if c.__module__.split(".")[0] == "preprocessing"}
    own.add(Layer)
    classes = sorted(own, key=lambda c: f"{c.__module__}.{c.__qualname__}")
    return classes + list(_CONTAINERS)


def register_safe_globals() -> None:
    """Add ``safe_globals()`` to torch's ``weights_only`` allowlist (done on import)."""
    torch.serialization.add_safe_globals(list[Any](safe_globals()))
