"""The state taken after a pipeline stopped (``close()``, Ctrl-C, a dead worker) resumes
exactly: the usual "save a checkpoint in the except block" handler must not skip data.

Each case failed before the fix: ``close()`` then ``state_dict()`` resumed 5 elements
late (the stage had dropped what it read ahead), a dead worker's state resumed at the end
of the epoch (the broken stage closed before the state was taken), and an interrupt inside
the function of an inline AUTOTUNE stage lost the chunk being computed.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from harness import settle_processes

import datapipe as dp

pytestmark = pytest.mark.timeout(120)


def _rest(ds, state) -> list[int]:
    it = iter(ds)
    it.load_state_dict(state)
    return [int(x) for x in it]


@pytest.mark.parametrize("calls", [None, 2, dp.AUTOTUNE])
def test_state_after_close_resumes_after_the_last_element_delivered(calls):
    ds = dp.range(100).map(lambda x: x * 3, num_parallel_calls=calls).prefetch(4)
    it = iter(ds)
    got = [int(next(it)) for _ in range(10)]
    it.close()
    state = it.state_dict()
    assert state == it.state_dict()  # the same state each time
    assert got + _rest(ds, state) == [3 * i for i in range(100)]


def test_state_after_close_of_an_iterator_that_never_started_is_the_start():
    ds = dp.range(20).map(lambda x: x + 1, num_parallel_calls=2)
    it = iter(ds)
    it.close()
    assert _rest(ds, it.state_dict()) == list(range(1, 21))


def test_state_after_close_that_could_not_be_taken_raises_naming_why(monkeypatch):
    import datapipe._checkpoint as checkpoint

    def refuse(it):
        raise TypeError("this source has no state")

    it = iter(dp.range(20).map(lambda x: x, num_parallel_calls=2))
    next(it)
    monkeypatch.setattr(checkpoint, "iterator_state", refuse)
    it.close()  # close itself does not fail
    with pytest.raises(ValueError, match=r"closed.*TypeError: this source has no state"):
        it.state_dict()


_KILL_AT = 30


def _dies_once(x):
    # The first run's worker kills itself at element 30 (a marker file says so: a resumed
    # run's new workers find it gone).
    marker = os.environ["DATAPIPE_TEST_DIE_MARKER"]
    if int(x) == _KILL_AT and os.path.exists(marker):
        os.kill(os.getpid(), signal.SIGKILL)
    return int(x)


def test_state_after_a_dead_worker_resumes_exactly(tmp_path, monkeypatch):
    marker = tmp_path / "die"
    marker.write_text("")
    monkeypatch.setenv("DATAPIPE_TEST_DIE_MARKER", str(marker))
    ds = dp.range(100).map(_dies_once, 2, executor="process")
    it = iter(ds)
    got: list[int] = []
    with pytest.raises(dp.WorkerDiedError):
        for x in it:
            got.append(int(x))
    assert len(got) <= _KILL_AT
    state = it.state_dict()
    assert settle_processes() == []  # the broken stage's processes are gone already
    marker.unlink()
    assert got + _rest(ds, state) == list(range(100))


class _InterruptOnce:
    """A function that raises KeyboardInterrupt at element ``at`` the first time (Ctrl-C
    arriving inside the user's function, on the consumer's thread)."""

    def __init__(self, at: int):
        self.at, self.fired = at, False

    def __call__(self, x):
        if int(x) == self.at and not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return int(x) * 2


@pytest.mark.parametrize("calls", [None, dp.AUTOTUNE])
def test_state_after_an_interrupt_inside_the_function_resumes_at_that_element(calls):
    # AUTOTUNE starts inline: the chunk being computed was taken from the input and lost.
    f = _InterruptOnce(37)
    ds = dp.range(200).map(f, num_parallel_calls=calls)
    it = iter(ds)
    got: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        for x in it:
            got.append(int(x))
    # the elements of the interrupted chunk computed before element 37 are not delivered
    # (they are computed again after the resume); none after it is
    assert got == [2 * i for i in range(len(got))] and len(got) <= 37
    assert got + _rest(ds, it.state_dict()) == [2 * i for i in range(200)]


class _ExitOnce:
    """True for every element, but ``sys.exit(3)`` at element ``at`` the first time."""

    def __init__(self, at: int):
        self.at, self.fired = at, False

    def __call__(self, x) -> bool:
        if int(x) == self.at and not self.fired:
            self.fired = True
            raise SystemExit(3)
        return True


@pytest.mark.parametrize("op", ["map", "filter"])
def test_state_after_a_system_exit_inside_the_function_resumes_at_that_element(op):
    # breaker: SystemExit (sys.exit in the function) in a sequential map or filter lost
    # the chunk being computed: the resume went on at element 38, 22 elements late.
    f = _ExitOnce(37)
    ds = dp.range(200)
    ds = ds.map(lambda x: f(x) and x) if op == "map" else ds.filter(f)
    it = iter(ds)
    got: list[int] = []
    with pytest.raises(SystemExit) as info:
        for x in it:
            got.append(int(x))
    assert info.value.code == 3 and got == list(range(len(got))) and len(got) <= 37
    assert got + _rest(ds, it.state_dict()) == list(range(200))


def _slow_20ms(x):
    time.sleep(0.02)  # a JPEG decode or a remote read feeding the parallel stage
    return int(x)


def test_state_after_close_over_a_slow_input_is_taken_once_the_workers_stopped():
    # A worker reads a whole chunk of the slow input under the lane's input lock: the
    # state taken as close() began waited 0.1 s for it and raised "blocked", though the
    # worker was only slow. It is now taken once the workers stopped. (A parallel batch
    # over such an input is not covered: its chunks grow to seconds of reading, past the
    # close deadline; see the CHANGELOG.)
    ds = dp.range(60).map(_slow_20ms).map(lambda x: x * 2, num_parallel_calls=2)
    it = iter(ds)
    got = [int(next(it)) for _ in range(5)]
    time.sleep(0.2)  # the workers are inside their chunks' reads
    it.close()
    rest = [int(x) for x in _resume(ds, it.state_dict())]
    assert got + rest == [2 * i for i in range(60)]


def _resume(ds, state):
    it = iter(ds)
    it.load_state_dict(state)
    return it


def test_state_after_close_with_a_worker_blocked_for_good_raises_naming_the_stage():
    gate = threading.Event()

    def blocked(x):
        if int(x) == 3:
            gate.wait(30)  # released at the end of the test
        return int(x)

    it = iter(dp.range(50).map(blocked).map(lambda x: x, num_parallel_calls=2))
    next(it)
    time.sleep(0.2)
    t0 = time.monotonic()
    it.close()
    assert time.monotonic() - t0 < 10  # the close deadline (~1 s), 10x
    try:
        with pytest.raises(ValueError, match="closed.*map"):
            it.state_dict()
    finally:
        gate.set()
