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
