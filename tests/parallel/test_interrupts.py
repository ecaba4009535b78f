"""An interrupt wherever it lands (issue 35, items 4 and 5): the state taken after it
resumes every element exactly once, ``close()`` returns, and the caller gets its own
exception.

A preemption handler's ``KeyboardInterrupt`` / ``SystemExit`` lands at any point of the
consumer's loop where Python runs a signal handler: after a C call, at a function's start,
at a loop's back edge. Before the fix ``_refill`` dropped a chunk the root had just
returned, ``batch`` and ``map`` dropped the elements they had read, an AUTOTUNE stage
dropped the chunk it had computed inline, a worker's ``SystemExit`` skipped its element,
and an interrupt inside the engine's ``with cond`` left the lock held (the close then
waited for ever) or inside a worker's ``start()`` replaced the caller's exception with
``RuntimeError: cannot join thread before it is started``.
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

import datapipe as dp

pytestmark = pytest.mark.timeout(300)

N = 3000
EXPECTED = [2 * i + 1 for i in range(N)]


def _double(x):
    return x * 2


def _plus_one(b):
    return b + 1


def _keep(x):
    return True


PIPELINES: dict[str, Callable[[], dp.Dataset]] = {
    # the sequential ``map -> batch -> map`` loop
    "map-batch-map": lambda: dp.range(N).map(_double).batch(8).map(_plus_one),
    # a streaming input (filter: no random access below the map)
    "filter-map-batch-map": lambda: dp.range(N).filter(_keep).map(_double).batch(8).map(_plus_one),
    # a map on two worker threads (the consumer takes their chunks)
    "threads": lambda: (
        dp.range(N).filter(_keep).map(_double, num_parallel_calls=2).batch(8).map(_plus_one)
    ),
    # an AUTOTUNE map (starts inline, on the consumer's thread)
    "autotune": lambda: (
        dp.range(N)
        .filter(_keep)
        .map(_double, num_parallel_calls=dp.AUTOTUNE)
        .batch(8)
        .map(_plus_one)
    ),
}


def _flat(elements: list) -> list[int]:
    out: list[int] = []
    for x in elements:
        out.extend(int(v) for v in np.asarray(x).ravel())
    return out


def _close_within(it, seconds: float = 30.0) -> None:
    """``it.close()`` on a thread: a close that waits for ever fails the test (it does not
    hang the run)."""
    errors: list[BaseException] = []

    def close() -> None:
        try:
            it.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=close, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"close() still waits after {seconds} s"
    assert not errors, errors


def _resume(make: Callable[[], dp.Dataset], state: dict) -> list:
    it = iter(make())
    it.load_state_dict(state)
    return list(it)


def _interrupted_run(make, delay: float, exc: type[BaseException]) -> tuple[list, dict, bool]:
    """Iterate a fresh pipeline while a timer raises ``exc`` from a SIGALRM handler after
    ``delay`` s (our own handler: it works where the parent shell ignores SIGINT)."""
    fired: list[bool] = []

    def handler(signum, frame):
        fired.append(True)
        raise exc()

    old = signal.signal(signal.SIGALRM, handler)
    it = iter(make())
    got: list = []
    try:
        signal.setitimer(signal.ITIMER_REAL, delay)
        try:
            for x in it:
                got.append(x)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except (KeyboardInterrupt, SystemExit) as e:
        assert type(e) is exc  # the caller's own exception, never another
    finally:
        signal.signal(signal.SIGALRM, old)
    _close_within(it)
    return got, it.state_dict(), bool(fired)


def _check_random_interrupts(name: str, runs: int, seed: int) -> None:
    make = PIPELINES[name]
    rng = random.Random(seed)
    interrupted = 0
    for r in range(runs):
        delay = rng.uniform(0.0005, 0.03)
        exc = KeyboardInterrupt if r % 2 == 0 else SystemExit
        got, state, fired = _interrupted_run(make, delay, exc)
        interrupted += fired
        delivered, rest = _flat(got), _flat(_resume(make, state))
        assert delivered + rest == EXPECTED, (
            f"{name} run {r} ({exc.__name__} after {delay:.4f} s): {len(delivered)} "
            f"delivered + {len(rest)} resumed != {N}"
        )
    assert interrupted > 0  # the timer landed inside the iteration at least once


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_interrupts_at_random_points_resume_every_element_exactly_once(name):
    _check_random_interrupts(name, runs=20, seed=35)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_interrupts_at_random_points_many_times(name):
    _check_random_interrupts(name, runs=300, seed=3535)


# ---- the windows, one by one (deterministic) ------------------------------------------------


class _ClockInterrupting:
    """``datapipe._iterator``'s ``time``: its ``perf_counter`` raises once, on call
    ``at`` (a signal handler running after that C call: right after the root returned a
    chunk, when ``at`` is even)."""

    def __init__(self, at: int):
        self.at, self.calls = at, 0

    def perf_counter(self) -> float:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return time.perf_counter()

    def __getattr__(self, name: str):
        return getattr(time, name)


@pytest.mark.parametrize("at", [2, 4, 6, 10])
def test_interrupt_right_after_the_root_returned_a_chunk_keeps_it(monkeypatch, at):
    import datapipe._iterator as iterator_module

    make = PIPELINES["map-batch-map"]
    monkeypatch.setattr(iterator_module, "time", _ClockInterrupting(at))
    it = iter(make())
    got: list = []
    with pytest.raises(KeyboardInterrupt):
        for x in it:
            got.append(x)
    monkeypatch.undo()
    assert _flat(got) + _flat(_resume(make, it.state_dict())) == EXPECTED


def test_interrupt_while_batch_stacks_keeps_the_elements_it_read(monkeypatch):
    import datapipe.ops.batch as batch_module

    real, calls = batch_module.stack, []

    def stack(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt  # inside the stacking of the 5th batch
        return real(*args, **kwargs)

    make = PIPELINES["filter-map-batch-map"]
    monkeypatch.setattr(batch_module, "stack", stack)
    it = iter(make())
    got: list = []
    with pytest.raises(KeyboardInterrupt):
        for x in it:
            got.append(x)
    monkeypatch.undo()
    assert _flat(got) + _flat(_resume(make, it.state_dict())) == EXPECTED


class _RaisesOnce:
    def __init__(self, exc: type[BaseException], at: int):
        self.exc, self.at, self.fired = exc, at, False

    def __call__(self, x):
        if int(x) == self.at and not self.fired:
            self.fired = True
            raise self.exc()
        return int(x)


@pytest.mark.parametrize("exc", [SystemExit, GeneratorExit, KeyboardInterrupt])
@pytest.mark.parametrize("calls", [2, dp.AUTOTUNE])
def test_control_flow_exception_of_the_function_in_a_stage_skips_no_element(exc, calls):
    # breaker: an AUTOTUNE (or threaded) map whose function raised SystemExit or
    # GeneratorExit counted that element as consumed: the resume skipped it.
    f = _RaisesOnce(exc, 11)
    ds = dp.range(60).map(f, num_parallel_calls=calls)
    it = iter(ds)
    got: list[int] = []
    with pytest.raises(exc):
        for x in it:
            got.append(int(x))
    rest = [int(x) for x in _resume(lambda: ds, it.state_dict())]
    assert got + rest == list(range(60))


def _interrupt_on_return_of(code_name: str, owner: Callable[[object], bool]):
    """A trace function raising KeyboardInterrupt once, as ``code_name`` returns in a frame
    whose ``self`` passes ``owner`` (a signal handler running just before the return)."""
    done: list[bool] = []

    def trace(frame, event, arg):
        if done or frame.f_code.co_name != code_name:
            return None if done else trace
        me = frame.f_locals.get("self")
        if event == "return" and me is not None and owner(me):
            done.append(True)
            raise KeyboardInterrupt
        return trace

    return trace, done


def _in_thread(target: Callable[[], None], seconds: float = 60.0) -> list[BaseException]:
    caught: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as e:  # noqa: BLE001 - the test reads it
            caught.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s (a close waits for ever)"
    return caught


def test_interrupt_as_the_engine_lock_is_taken_does_not_deadlock_the_close():
    # breaker: _refill -> close() -> iterator_state -> engine.snapshot waited for ever on
    # the engine's lock, left taken by an interrupt inside ``with cond``'s __enter__.
    from datapipe.parallel.engine import Engine

    make = PIPELINES["autotune"]
    engines: list[Engine] = []

    def is_engine_cond(me: object) -> bool:
        return any(me is e.cond for e in engines)

    trace, done = _interrupt_on_return_of("__enter__", is_engine_cond)
    got: list = []
    holder: dict = {}

    def scenario() -> None:
        it = holder["it"] = iter(make())
        got.append(next(it))
        engines.extend(_engines(it.root))
        assert engines
        sys.settrace(trace)
        try:
            for x in it:
                got.append(x)
        finally:
            sys.settrace(None)

    caught = _in_thread(scenario)
    it = holder["it"]
    assert done and [type(e) for e in caught] == [KeyboardInterrupt]
    _close_within(it)
    assert _flat(got) + _flat(_resume(make, it.state_dict())) == EXPECTED


def _engines(root) -> list:
    out, stack = [], [root]
    while stack:
        op = stack.pop()
        stage = getattr(op, "stage", None)
        if stage is not None:
            out.append(stage.engine)
        stack.extend(op.inputs)
    return out


def test_interrupt_inside_a_worker_start_raises_the_callers_own_exception(monkeypatch):
    # breaker: the caller got "RuntimeError: cannot join thread before it is started"
    # instead of its KeyboardInterrupt, when the interrupt landed as a stage started.
    real_start = threading.Thread.start
    fired: list[bool] = []

    def start(self):
        if self.name.startswith("datapipe-map") and not fired:
            fired.append(True)
            raise KeyboardInterrupt  # before the thread began
        return real_start(self)

    ds = dp.range(200).map(_double, num_parallel_calls=2)
    monkeypatch.setattr(threading.Thread, "start", start)
    it = iter(ds)
    got: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        for x in it:
            got.append(int(x))
    monkeypatch.undo()
    assert fired
    _close_within(it)
    rest = [int(x) for x in _resume(lambda: ds, it.state_dict())]
    assert got + rest == [2 * i for i in range(200)]
