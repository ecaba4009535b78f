"""Parallel execution: one stage engine, its executors, and AUTOTUNE.

* ``engine.py`` — the stage engine every parallel stage is built from: lanes (ordered
  inputs), a bounded buffer of chunks, worker threads, the consumer's wait.
* ``map.py``, ``batch.py``, ``prefetch.py``, ``interleave.py``, ``device_prefetch.py`` —
  the stages, as engine configurations; ``transfer.py`` — copies to a device (pinned
  memory, side streams, events) for ``prefetch_to_device``.
* ``processes.py``, ``shm.py`` — the process executor: worker processes that exchange
  elements through shared memory.
* ``replay.py`` — exact checkpoints of a stage (replayed or stored elements).
* ``plan.py`` — the one place that decides sequential or parallel, and how.
* ``autotune.py`` — the tuner (parallelism, buffers, the executor) and where its model
  comes from; ``pool.py`` — threads, chunks and the hand-off primitives.
"""

from __future__ import annotations

import os
import sys
import threading


def native_threads() -> set[int] | None:
    """Ids of this process's threads that Python does not know about (started by C
    libraries: OpenBLAS, OpenMP, torch's intra-op pool), or None where ``/proc`` is
    missing. ``processes.choose_start_method`` compares them with the ones at import."""
    try:
        tids = {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return None
    return tids - {t.native_id for t in threading.enumerate() if t.native_id is not None}


# The native threads that existed when datapipe was imported (numpy's OpenBLAS pool, which
# survives a fork), and whether torch was imported before (its pool may be among them).
IMPORT_THREADS = native_threads()
TORCH_BEFORE_IMPORT = "torch" in sys.modules
