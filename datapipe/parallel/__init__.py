"""Parallel execution: one stage iterator, its engine, executors and policies, and AUTOTUNE.

How the parts fit, and how one element flows through them: docs/architecture.md.

* ``request.py`` — ``StageRequest``: what a parallel-capable op declares (policy,
  parallelism, order, executor, buffer size, whether processes are allowed).
* ``plan.py`` — the one place that decides sequential or parallel, and how, from a request.
* ``stage.py`` — ``Stage`` and ``StageIterator``: the wiring every parallel op shares
  (knob and meter, engine, executor choice, restores, close, statistics), done once.
* ``engine.py`` — the shared state of a stage: lanes (ordered inputs), a bounded buffer
  of chunks, the workers' loop, the consumer's wait; ``policies.py`` — which lane a free
  worker fills and how much it takes (``Map``, ``Buffer``, ``Queue``, ``Slots``).
* ``executors.py`` — where chunks are computed: ``Inline``, ``Threads``, ``Processes``;
  ``processes.py``, ``shm.py`` — worker processes that exchange elements through shared
  memory.
* ``autotune.py`` — the tuner (parallelism, buffers, the executor) and its search state;
  ``pool.py`` — chunks and the hand-off primitives.
* ``replay.py`` — exact checkpoints of a stage's lanes (replayed or stored elements).
* ``batch.py``, ``interleave.py``, ``device_prefetch.py`` — what is their own in parallel
  ``batch``, ``interleave`` and ``prefetch_to_device``; ``transfer.py`` — copies to a
  device (pinned memory, side streams, events).
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
