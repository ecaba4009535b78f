"""Fixtures shared by the test folders (one conftest: pytest imports every conftest.py
under the name ``conftest``, so several of them in package-less folders collide).

The test helpers (values, checkpoint/resume, errors, processes, scripts) are in
``tests/harness.py``; the folders mirror the code (``tests/ops/test_<op>.py``,
``tests/sources/``, ``tests/io/test_<format>.py``), beside the concern suites (checkpoint,
ordering, shutdown, errors, properties, correctness). Test file basenames must be unique
across folders (pytest's default import mode imports them by basename)."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

import differential
import pytest
from harness import FakeClock, own_shm_segments, settle_processes
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


@pytest.fixture
def clean(threads):
    """No datapipe thread, worker process or shared-memory segment before the test; none may
    be left after it (``executor="process"`` tests)."""
    assert settle_processes() == []
    yield threads
    gc.collect()
    assert threads.settle(2.0) == []
    assert settle_processes() == []
    assert own_shm_segments() == []


# ---- distribution: no launcher variables from the shell running the tests -----------------
LAUNCHER_ENV_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "NODE_RANK",
    "GROUP_RANK",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MV2_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_SIZE",
)


@pytest.fixture
def clean_env(monkeypatch):
    """No torchrun/SLURM variables (a test sets the ones it means); returns ``monkeypatch``.
    The distribute tests use it for every test (``pytest.mark.usefixtures("clean_env")``)."""
    for name in LAUNCHER_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# ---- files -----------------------------------------------------------------------------
@pytest.fixture
def small_bomb_limit(monkeypatch):
    """Pillow's decompression-bomb limit lowered so that a 64x64 image is over twice it."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)


# ---- statistics: a fake clock for timing-derived verdicts ----------------------------------
@pytest.fixture
def stats_clock(monkeypatch) -> FakeClock:
    """A ``FakeClock`` read by every clock of ``datapipe.stats`` (the stage recorder, the
    profile's wall time and step time, ``InputBoundTimer``): stage times, input-bound
    fractions and verdicts are then exact functions of the ``stats_clock.sleep(dt)`` calls
    the test makes in place of real work (threads' own timings are not covered: a parallel
    stage's workers report theirs from the engine's clocks)."""
    import datapipe.stats  # noqa: F401 - the modules patched below

    modules = ("recorder", "profile", "training")
    targets = [(sys.modules[f"datapipe.stats.{m}"], "perf_counter") for m in modules]
    return FakeClock(monkeypatch, *targets)


# ---- differential tests: the anchors' results from golden files, or live ---------------------
@pytest.fixture(params=differential.REFERENCE_PARAMS)
def ref(request, monkeypatch) -> differential.Reference:
    """``ref(fn, *args)``: the reference library's result, read from the test module's golden
    file (``[golden]``, the default run) or computed by the installed library (``[live]``,
    ``pytest -m differential``); see tests/differential.py. While the test runs, its own
    code cannot compare floats bit for bit (``differential.forbid_exact_float_comparisons``)."""
    differential.forbid_exact_float_comparisons(monkeypatch)
    return differential.Reference(request, live=request.param == "live")


def pytest_sessionfinish(session, exitstatus):
    if differential.WRITE:
        for path in differential.write_goldens():
            print(f"\nwrote {path.relative_to(differential.GOLDENS.parent.parent)}")
