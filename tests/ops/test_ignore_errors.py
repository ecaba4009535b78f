"""``ignore_errors`` drops bad elements, never a broken pipeline (a dead worker process)."""

from __future__ import annotations

import os
import signal

import pytest

import datapipe as dp


def _kill_self_at(x):
    if int(x) == 5:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker process dies mid-chunk
    return int(x)


def test_dead_worker_process_is_not_ignored():
    ds = dp.range(40).map(_kill_self_at, num_parallel_calls=2, executor="process")
    it = iter(ds.ignore_errors())
    with pytest.raises(dp.WorkerDiedError):
        list(it)
    assert dp.ignored_count(it) == 0
    it.close()


def test_stuck_input_is_raised_through_an_outer_ignore_errors():
    from test_stuck_inputs import _StuckSource

    src = _StuckSource(2)
    it = iter(src.ignore_errors().map(lambda x: x + 1).ignore_errors())
    assert [int(next(it)) for _ in range(2)] == [1, 2]
    with pytest.raises(dp.InputStuckError, match="device not ready"):
        next(it)
    assert src.calls == 2  # the outer ignore_errors did not retry the inner one's verdict
