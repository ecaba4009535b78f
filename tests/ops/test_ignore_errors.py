"""``ignore_errors``: drops failing elements, counts them (``ignored_count``), logs each path
once, round-trips its state, and never ignores a broken pipeline (a dead worker process)."""

from __future__ import annotations

import logging
import os
import signal

import pytest
from harness import fail_at

import datapipe as dp
from datapipe.errors import PipelineError


def _kill_self_at(x):
    if int(x) == 5:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker process dies mid-chunk
    return int(x)


pytestmark = pytest.mark.timeout(30)


def test_dead_worker_process_is_not_ignored():
    ds = dp.range(40).map(_kill_self_at, num_parallel_calls=2, executor="process")
    it = iter(ds.ignore_errors())
    with pytest.raises(dp.WorkerDiedError):
        list(it)
    assert dp.ignored_count(it) == 0
    it.close()


@pytest.mark.parametrize("calls", [None, 3])
def test_ignore_errors_drops_and_counts(calls):
    bad = {0, 5, 6, 41, 99}
    ds = dp.range(100).map(fail_at(bad), num_parallel_calls=calls).prefetch(2).ignore_errors()
    it = iter(ds)
    assert [int(x) for x in it] == [i for i in range(100) if i not in bad]
    assert dp.ignored_count(it) == 5
    assert it.root.num_ignored == 5


def test_ignore_errors_logs_each_path_once(caplog):
    def read(x):
        raise PipelineError("read_file", int(x), OSError("truncated"), path=f"/d/{int(x) % 2}.jpg")

    ds = dp.range(6).map(read).ignore_errors(log_warning=True)
    with caplog.at_level(logging.WARNING, logger="datapipe"):
        it = iter(ds)
        assert list(it) == []
    assert dp.ignored_count(it) == 6
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert "/d/0.jpg" in msgs[0] and "/d/1.jpg" in msgs[1]


def test_ignore_errors_state_round_trip():
    ds = dp.range(20).map(fail_at({3, 15}), num_parallel_calls=2).ignore_errors()
    it = iter(ds)
    first = [int(next(it)) for _ in range(5)]
    state = it.get_state()
    rest = [int(x) for x in it]
    it2 = iter(ds)
    it2.set_state(state)
    assert [int(x) for x in it2] == rest
    assert first + rest == [i for i in range(20) if i not in (3, 15)]
    assert dp.ignored_count(it2) == 2
