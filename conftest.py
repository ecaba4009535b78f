"""Collection rule for the whole repository (pytest loads this file for any path under it;
the tests' fixtures are in ``tests/conftest.py``).

The thin ``Dataset`` methods carry their op class's docstring, example included
(``datapipe._docs.attach``, at import), so ``--doctest-modules`` finds each of those
examples twice: on the op class (``datapipe.ops.map.MapDataset``) and on the method, from
``datapipe/dataset_ops.py`` (``datapipe.dataset_ops.Dataset.map``). Each runs once, on the
class, where it is written: the copies are deselected here (pytest's summary counts them).
"""

from __future__ import annotations

import sys

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    docs = sys.modules.get("datapipe._docs")  # imported with datapipe, if anything did
    if docs is None:
        return
    copies = [i for i in items if isinstance(i, pytest.DoctestItem) and i.name in docs.ATTACHED]
    if copies:
        dropped = set(copies)
        items[:] = [i for i in items if i not in dropped]
        config.hook.pytest_deselected(items=copies)
