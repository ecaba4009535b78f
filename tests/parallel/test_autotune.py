"""AUTOTUNE: the tuner's decisions (simulated workloads, deterministic) and its behaviour on
real pure-Python and sleeping functions (generous bounds), and the RAM budget."""

from __future__ import annotations

import time

import numpy as np
import pytest

import datapipe as dp
from datapipe.parallel import autotune

pytestmark = pytest.mark.timeout(120)


class FakeWorkload:
    """Drives a Stage the way workers would, for a workload whose rate at ``p`` threads is
    ``rate(p)`` and whose threads are busy ``busy`` of the time, on a fake clock."""

    def __init__(self, monkeypatch, rate, cpu_fraction=1.0, busy=1.0, cpu_budget=8):
        self.now = 0.0
        monkeypatch.setattr(autotune.time, "monotonic", lambda: self.now)
        self.tuner = autotune.Autotuner(True, cpu_budget, 1 << 30)
        self.stage = self.tuner.add_stage(autotune.Stage("map", "parallelism", 1, True, 64))
        self.rate, self.cpu_fraction, self.busy = rate, cpu_fraction, busy

    def run(self, windows: int) -> None:
        for _ in range(windows):
            p, dt = self.stage.value, autotune.WINDOW_S
            self.now += dt
            self.stage.produced += int(self.rate(p) * dt)
            self.stage.busy_s += p * dt * self.busy
            frac = self.cpu_fraction(p) if callable(self.cpu_fraction) else self.cpu_fraction
            self.stage.cpu_s += p * dt * self.busy * frac
            self.tuner.maybe_step()

    def settled(self) -> int:
        """The value once any trial in progress is judged."""
        for _ in range(10):
            if self.stage._trial is None:
                break
            self.run(1)
        return self.stage.value


def test_gil_bound_function_stays_at_one_thread(monkeypatch):
    # Pure Python: more threads give no more throughput (a little less, from contention).
    w = FakeWorkload(monkeypatch, rate=lambda p: 10_000 / (1 + 0.03 * (p - 1)))
    w.run(400)
    assert w.settled() == 1
    assert max(w.stage.history) <= 2  # it tried 2 threads, measured no gain, went back
    assert w.stage.history.count(2) >= 2  # and retried later (conditions may change)


def test_gil_bound_function_started_high_comes_down(monkeypatch):
    # AUTOTUNE starts at min(16, cores) like tf.data; under the GIL, p threads each get 1/p
    # of a core and the rate does not grow with p: the tuner walks back down.
    w = FakeWorkload(
        monkeypatch, rate=lambda p: 10_000 / (1 + 0.03 * (p - 1)), cpu_fraction=lambda p: 1 / p
    )
    w.stage.set_value(8)
    w.run(200)
    assert w.settled() <= 2, w.stage.trials


def test_gil_releasing_function_uses_the_cores_and_no_more(monkeypatch):
    # numpy releasing the GIL on 2 cores: linear up to 2 threads, flat after.
    w = FakeWorkload(monkeypatch, rate=lambda p: 5_000 * min(p, 2), cpu_budget=2)
    w.run(400)
    assert w.settled() == 2


def test_io_latency_function_grows_past_the_core_count(monkeypatch):
    # 2 ms sleeps: threads cost ~2% CPU each, throughput is linear up to 40 threads.
    w = FakeWorkload(monkeypatch, rate=lambda p: 500 * min(p, 40), cpu_fraction=0.02, cpu_budget=2)
    w.run(400)
    assert 27 <= w.settled() <= 64


def test_cpu_budget_caps_cpu_bound_threads(monkeypatch):
    # Even if more threads helped, CPU-bound work may not exceed the CPU budget.
    w = FakeWorkload(monkeypatch, rate=lambda p: 1_000 * p, cpu_fraction=1.0, cpu_budget=3)
    w.run(400)
    assert w.settled() == 3


def test_idle_workers_are_given_back(monkeypatch):
    # Downstream is the bottleneck: the rate is fixed and workers mostly wait.
    w = FakeWorkload(monkeypatch, rate=lambda p: 1_000, busy=0.2)
    w.stage.set_value(8)
    w.run(200)
    assert w.settled() == 1


def test_buffer_grows_while_consumer_waits(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(autotune.time, "monotonic", lambda: now[0])
    tuner = autotune.Autotuner(True, 2, 1 << 30)
    s = tuner.add_stage(autotune.Stage("prefetch", "buffer", 4, True, 1024))
    for _ in range(4):
        now[0] += autotune.WINDOW_S
        s.produced += 100
        s.consumer_wait_s += 0.05 * autotune.WINDOW_S
        s.full += 1  # the producer hit the buffer's limit
        tuner.maybe_step()
    assert s.value >= 16 and s.history[:3] == [4, 8, 16]
    # A consumer waiting on a producer that never fills the buffer: no growth.
    for _ in range(4):
        now[0] += autotune.WINDOW_S
        s.produced += 100
        s.consumer_wait_s += 0.05 * autotune.WINDOW_S
        tuner.maybe_step()
    assert s.history[-1] == s.value and len(s.history) <= 5


def test_disabled_autotune_keeps_values(monkeypatch):
    ds = dp.range(50).map(lambda x: x, num_parallel_calls=dp.AUTOTUNE)
    ds = ds.with_options(dp.Options(autotune=dp.AutotuneOptions(enabled=False)))
    it = iter(ds)
    assert [int(x) for x in it] == list(range(50))
    assert len(it._root.stage.history) == 1  # never moved from where it started


# ---- real functions (decisions measured on this machine; generous bounds) -------------


def _spin(x):
    s = 0
    for i in range(3000):  # ~100-200 µs of pure Python, holding the GIL
        s += i
    return int(x) + s - s


def _run_auto(fn, n, cpu_budget):
    opts = dp.Options(autotune=dp.AutotuneOptions(cpu_budget=cpu_budget))
    ds = dp.range(n).map(fn, num_parallel_calls=dp.AUTOTUNE).with_options(opts)
    it = iter(ds)
    got = [int(x) for x in it]
    stage = it._root.stage
    it.close()
    assert got == [fn(i) for i in range(n)] if fn is _spin else len(got) == n
    return stage


def test_real_gil_bound_map_settles_small():
    stage = _run_auto(_spin, 20000, cpu_budget=6)  # starts at 6 threads
    assert stage.history[0] == 6 and max(stage.history) == 6  # never grew past its start
    # Below where it started (the most threads it may use here); 1-2 on a quiet machine,
    # but a loaded machine's noise can stop the descent one step early.
    assert stage.value <= 4, stage.trials


def test_real_sleeping_map_grows():
    def io(x):
        time.sleep(0.002)
        return x

    stage = _run_auto(io, 3000, cpu_budget=2)
    assert stage.value >= 4, stage.history


# ---- the RAM budget ---------------------------------------------------------------------

ELEMENT_BYTES = 100_000


def _big(x):
    return np.full(ELEMENT_BYTES // 4, int(x), dtype=np.float32)


def _slow_consume(ds, n):
    it = iter(ds)
    total = 0
    for x in it:
        total += int(x[0])
        time.sleep(0.001)  # a slow consumer: producers run ahead until a bound stops them
    tuner = it._root.tuner
    it.close()
    assert total == sum(range(n))
    return tuner


def test_ram_budget_bounds_buffered_bytes():
    n, budget = 400, 10 * ELEMENT_BYTES
    opts = dp.Options(autotune=dp.AutotuneOptions(ram_budget=budget))
    ds = (
        dp.range(n)
        .map(_big, num_parallel_calls=dp.AUTOTUNE)
        .prefetch(dp.AUTOTUNE)
        .with_options(opts)
    )
    tuner = _slow_consume(ds, n)
    assert 0 < tuner.ram.peak <= budget
    # The same pipeline with the default budget buffers far more: the budget was binding.
    untuned = _slow_consume(dp.range(n).map(_big, num_parallel_calls=4).prefetch(64), n)
    assert untuned.ram.peak > 3 * budget
