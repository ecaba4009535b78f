"""Fixtures shared by the test folders (one conftest: pytest imports every conftest.py
under the name ``conftest``, so several of them in package-less folders collide)."""

from __future__ import annotations

import gc
import os
import threading
import time

import pytest
from hypothesis import settings
from PIL import Image

# The README's test command draws the same examples on every run (a property test that finds
# a new counterexample on one CI run in ten reads as flaky). HYPOTHESIS_PROFILE=explore draws
# fresh ones, for hunting bugs on purpose.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# ---- parallel execution: counting the pipeline's own threads --------------------------
class Threads:
    """Counts live threads named ``datapipe-*`` (every thread a pipeline starts)."""

    @staticmethod
    def names() -> list[str]:
        return sorted(t.name for t in threading.enumerate() if t.name.startswith("datapipe-"))

    def settle(self, deadline_s: float = 1.0) -> list[str]:
        """The datapipe threads still alive after at most ``deadline_s`` (polling)."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if not self.names():
                return []
            time.sleep(0.01)
        return self.names()


@pytest.fixture
def threads() -> Threads:
    t = Threads()
    # Pipelines of earlier tests must be gone before this one measures. One that an earlier
    # test left in a reference cycle (an iterator held by a pytest.raises traceback's
    # frame) stops only when the cyclic GC runs: collect, as the interpreter would later.
    if t.settle(0.2):
        gc.collect()
    assert t.settle(2.0) == []
    assert threading.active_count() >= 1
    return t


# ---- files -----------------------------------------------------------------------------
@pytest.fixture
def small_bomb_limit(monkeypatch):
    """Pillow's decompression-bomb limit lowered so that a 64x64 image is over twice it."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
