"""Parallel execution: worker pools, parallel map/batch/prefetch/interleave, AUTOTUNE.

See ``pool.py`` (threads and the chunked hand-off), ``map.py``, ``prefetch.py`` and
``autotune.py`` (the tuner and where its model comes from).
"""
