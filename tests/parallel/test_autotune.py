"""AUTOTUNE: the tuner's decisions (simulated workloads, deterministic) and its behaviour on
real pure-Python and sleeping functions (generous bounds), the RAM budget, the executor
choice, and restores into its inline executor (from a threaded snapshot, across a switch)."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from harness import FakeClock, FakeExecutors

import datapipe as dp
from datapipe.parallel import autotune
from datapipe.parallel.stage import Knob, Meter

pytestmark = pytest.mark.timeout(120)


class FakeWorkload:
    """Drives a Stage the way workers would, for a workload whose rate at ``p`` threads is
    ``rate(p)`` and whose threads are busy ``busy`` of the time, on a fake clock."""

    def __init__(self, monkeypatch, rate, cpu_fraction=1.0, busy=1.0, cpu_budget=8):
        self.clock = FakeClock(monkeypatch, (autotune.time, "monotonic"))
        self.tuner = autotune.Autotuner(True, cpu_budget, 1 << 30)
        self.knob, self.meter = Knob("map", "parallelism", 1, True, 64), Meter()
        self.tuner.add(self.knob, self.meter)
        self.rate, self.cpu_fraction, self.busy = rate, cpu_fraction, busy

    def run(self, windows: int) -> None:
        for _ in range(windows):
            p, dt = self.knob.value, autotune.WINDOW_S
            self.clock.sleep(dt)
            self.meter.produced += int(self.rate(p) * dt)
            self.meter.busy_s += p * dt * self.busy
            frac = self.cpu_fraction(p) if callable(self.cpu_fraction) else self.cpu_fraction
            self.meter.cpu_s += p * dt * self.busy * frac
            self.tuner.maybe_step()

    def trials(self) -> list:
        return self.tuner.trials(self.knob)

    def settled(self) -> int:
        """The value once any trial in progress is judged."""
        for _ in range(10):
            if not self.tuner.in_trial(self.knob):
                break
            self.run(1)
        return self.knob.value


def _half_ms(x):
    time.sleep(0.0005)
    return int(x) * 2


def test_gil_bound_function_stays_at_one_thread(monkeypatch):
    # Pure Python: more threads give no more throughput (a little less, from contention).
    w = FakeWorkload(monkeypatch, rate=lambda p: 10_000 / (1 + 0.03 * (p - 1)))
    w.run(400)
    assert w.settled() == 1
    assert max(w.knob.history) <= 2  # it tried 2 threads, measured no gain, went back
    assert w.knob.history.count(2) >= 2  # and retried later (conditions may change)


def test_gil_bound_function_started_high_comes_down(monkeypatch):
    # AUTOTUNE starts at min(16, cores) like tf.data; under the GIL, p threads each get 1/p
    # of a core and the rate does not grow with p: the tuner walks back down.
    w = FakeWorkload(
        monkeypatch, rate=lambda p: 10_000 / (1 + 0.03 * (p - 1)), cpu_fraction=lambda p: 1 / p
    )
    w.knob.set_value(8)
    w.run(200)
    assert w.settled() <= 2, w.trials()


def test_gil_releasing_function_uses_the_cores_and_no_more(monkeypatch):
    # numpy releasing the GIL on 2 cores: linear up to 2 threads, flat after.
    w = FakeWorkload(monkeypatch, rate=lambda p: 5_000 * min(p, 2), cpu_budget=2)
    w.run(400)
    assert w.settled() == 2


def test_io_latency_that_saturates_settles_between_a_rejected_step_and_its_start(monkeypatch):
    # Remote reads that saturate at 24 threads: 16 -> 64 gains 1.5x, under the 1.75x that
    # four times the threads must show, so 64 was refused, and 64 was proposed again at
    # every retry: AUTOTUNE stayed at 16 (57% of the best fixed setting in W4's I/O run).
    # After a refused step the next one aims half way to it.
    w = FakeWorkload(monkeypatch, rate=lambda p: 500 * min(p, 24), cpu_fraction=0.02)
    w.knob.set_value(2)  # where the executor choice hands threads over
    w.run(600)
    assert w.rate(w.settled()) >= 0.95 * 500 * 24, w.trials()


def test_io_latency_function_grows_past_the_core_count(monkeypatch):
    # 2 ms sleeps: threads cost ~2% CPU each, throughput is linear up to 40 threads.
    w = FakeWorkload(monkeypatch, rate=lambda p: 500 * min(p, 40), cpu_fraction=0.02, cpu_budget=2)
    w.run(400)
    assert 27 <= w.settled() <= 64


def test_a_lucky_window_before_a_trial_does_not_refuse_a_real_gain(monkeypatch):
    # Windows of one setting swing (another process on the cores: single 50-ms windows of
    # W4's sleeping threads varied 3x). A trial is judged against the median of the last
    # windows, not the last one: a 1.5x spike just before the trial refused a true 1.3x
    # gain from 4 to 6 threads before.
    window = iter(range(1, 1000))

    def rate(p):
        return 10_000 * (p / 4) ** 0.65 * (1.5 if next(window) == 3 else 1.0)

    w = FakeWorkload(monkeypatch, rate, cpu_budget=64)
    w.knob.set_value(4)
    w.run(12)
    first = w.trials()[0]
    assert first[:3] == ("up", 4, 6) and first[3] == 10_000 and first[5] is True
    assert w.knob.value >= 6


def test_cpu_budget_caps_cpu_bound_threads(monkeypatch):
    # Even if more threads helped, CPU-bound work may not exceed the CPU budget.
    w = FakeWorkload(monkeypatch, rate=lambda p: 1_000 * p, cpu_fraction=1.0, cpu_budget=3)
    w.run(400)
    assert w.settled() == 3


def test_idle_workers_are_given_back(monkeypatch):
    # Downstream is the bottleneck: the rate is fixed and workers mostly wait.
    w = FakeWorkload(monkeypatch, rate=lambda p: 1_000, busy=0.2)
    w.knob.set_value(8)
    w.run(200)
    assert w.settled() == 1


def test_buffer_grows_while_consumer_waits(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(autotune.time, "monotonic", lambda: now[0])
    tuner = autotune.Autotuner(True, 2, 1 << 30)
    s, m = Knob("prefetch", "buffer", 4, True, 1024), Meter()
    tuner.add(s, m)
    for _ in range(4):
        now[0] += autotune.WINDOW_S
        m.produced += 100
        m.consumer_wait_s += 0.05 * autotune.WINDOW_S
        m.full += 1  # the producer hit the buffer's limit
        tuner.maybe_step()
    assert s.value >= 16 and s.history[:3] == [4, 8, 16]
    # A consumer waiting on a producer that never fills the buffer: no growth.
    for _ in range(4):
        now[0] += autotune.WINDOW_S
        m.produced += 100
        m.consumer_wait_s += 0.05 * autotune.WINDOW_S
        tuner.maybe_step()
    assert s.history[-1] == s.value and len(s.history) <= 5


def test_disabled_autotune_keeps_values(monkeypatch):
    ds = dp.range(50).map(lambda x: x, num_parallel_calls=dp.AUTOTUNE)
    ds = ds.with_options(dp.Options(autotune=dp.AutotuneOptions(enabled=False)))
    it = iter(ds)
    assert [int(x) for x in it] == list(range(50))
    assert len(it.root.knob.history) == 1  # never moved from where it started


# ---- real functions (decisions measured on this machine; generous bounds) -------------
# Slow-marked: their decisions come from wall and CPU times, which a loaded machine (CI
# with other jobs, load 8 on 2 cores) blurs until the tuner cannot tell 2 threads from 6.
# The same decisions from given measurements are the tests above, in the default run.


def _spin(x):
    s = 0
    for i in range(3000):  # ~100-200 µs of pure Python, holding the GIL
        s += i
    return int(x) + s - s


def _run_auto(fn, n, cpu_budget):
    # Threads only: how the tuner moves a thread count (the executor choice is tested below)
    opts = dp.Options(autotune=dp.AutotuneOptions(cpu_budget=cpu_budget))
    opts.threading.executor = "thread"
    ds = dp.range(n).map(fn, num_parallel_calls=dp.AUTOTUNE).with_options(opts)
    it = iter(ds)
    got = [int(x) for x in it]
    knob, trials = it.root.knob, it.root.tuner.trials(it.root.knob)
    it.close()
    assert got == [fn(i) for i in range(n)] if fn is _spin else len(got) == n
    return knob, trials


@pytest.mark.slow
def test_real_gil_bound_map_settles_small():
    stage, trials = _run_auto(_spin, 20000, cpu_budget=6)  # starts at 6 threads
    assert stage.history[0] == 6 and max(stage.history) == 6  # never grew past its start
    # Below where it started (the most threads it may use here); 1-2 on a quiet machine,
    # but a loaded machine's noise can stop the descent one step early.
    assert stage.value <= 4, trials


@pytest.mark.slow
def test_real_sleeping_map_grows():
    def io(x):
        time.sleep(0.002)
        return x

    stage, _ = _run_auto(io, 3000, cpu_budget=2)
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
    tuner = it.root.tuner
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


def test_ram_budget_counts_elements_whose_size_was_unknown_when_admitted():
    # Until a first result shows the element size, each worker takes one element without
    # a reservation. Element 0 came back first, and the other worker's later chunks were
    # sized to fill the whole budget while element 1 (sized only when done) was still being
    # computed: the peak went one element over (CI, once in ~200 runs of the test above).
    # Element 1 is slow here, which made it happen every run.
    def f(x):
        if x == 1:
            time.sleep(0.3)
        return _big(x)

    budget = 3 * ELEMENT_BYTES
    opts = dp.Options(autotune=dp.AutotuneOptions(ram_budget=budget))
    it = iter(dp.range(40).map(f, num_parallel_calls=2).with_options(opts))
    got = [int(x[0]) for x in it]
    ram = it.root.tuner.ram
    it.close()
    assert got == list(range(40))
    assert ram.peak == budget  # filled, and never above
    assert ram.used == 0


def test_ram_budget_is_filled_exactly_and_a_budget_below_one_element_still_runs():
    # With the consumer away, a map under a prefetch fills the budget to the byte and
    # stops (the map keeps one finished element: the prefetch may not take it over).
    budget = 3 * ELEMENT_BYTES
    opts = dp.Options(autotune=dp.AutotuneOptions(ram_budget=budget))
    it = iter(dp.range(40).map(_big, num_parallel_calls=2).prefetch(10).with_options(opts))
    first = next(it)
    ram = it.root.tuner.ram
    deadline = time.monotonic() + 10
    while ram.used < budget and time.monotonic() < deadline:  # the consumer is away
        time.sleep(0.01)
    time.sleep(0.1)  # and stays away: nothing more is taken
    assert ram.used == ram.peak == budget
    got = [int(first[0])] + [int(x[0]) for x in it]
    it.close()
    assert got == list(range(40))
    assert ram.peak == budget
    # A budget below one element still runs, one element at a time.
    small = dp.Options(autotune=dp.AutotuneOptions(ram_budget=ELEMENT_BYTES // 2))
    ds = dp.range(10).map(_big, num_parallel_calls=2).prefetch(4).with_options(small)
    assert [int(x[0]) for x in ds] == list(range(10))


def test_a_stage_goes_over_a_full_ram_budget_only_for_a_waiting_consumer():
    # Under a competing load, a map under a prefetch that had just taken the map's last
    # finished element (the map then held nothing) took one more element over the full
    # budget, though nobody waited for it: peak 4 of 3 elements, in 3 runs of 15 of the
    # test above. A waiting consumer still gets one, so a small budget cannot stall.
    import threading

    from datapipe.parallel import policies
    from datapipe.parallel.engine import Engine

    tuner = autotune.Autotuner(True, 2, 3 * ELEMENT_BYTES)
    eng = Engine("map", policies.MAP, tuner, Knob("map", "parallelism", 2, False, 2), Meter())
    eng.bytes_per_elem = float(ELEMENT_BYTES)
    assert tuner.ram.try_reserve(3 * ELEMENT_BYTES)  # held by the stages above
    assert eng.fit(8, busy=False) == 0  # nobody waits: the budget holds
    ready: list = []
    consumer = threading.Thread(
        target=lambda: ready.append(eng.wait(lambda: ready[0] if ready else None))
    )
    consumer.start()
    end = time.monotonic() + 10
    while eng.waiting == 0:
        assert time.monotonic() < end, "the consumer never waited"
        time.sleep(0.001)
    with eng.cond:
        assert eng.fit(8, busy=False) == 1  # one element over, for the waiting consumer
        assert eng.fit(8, busy=True) == 0  # not while one is on its way to it
        ready.append(["x"])
        eng.cond.notify_all()
    consumer.join(10)
    assert ready == [["x"], ["x"]] and eng.waiting == 0
    assert eng.fit(8, busy=False) == 0


def test_ram_budget_holds_across_the_hand_over_between_stages(monkeypatch):
    # A prefetch worker reads elements the map below reserved. They were released there and
    # reserved again when the prefetch chunk was done; in between, the map's workers filled
    # the freed bytes and the peak went a chunk over the budget (seen once under load; the
    # window is widened here by a slow size measurement, which made it happen every run).
    real = autotune.chunk_nbytes

    def slow_size(items):
        time.sleep(0.01)
        return real(items)

    monkeypatch.setattr(autotune, "chunk_nbytes", slow_size)
    n, budget = 200, 10 * ELEMENT_BYTES
    opts = dp.Options(autotune=dp.AutotuneOptions(ram_budget=budget))
    ds = dp.range(n).map(_big, num_parallel_calls=2).prefetch(dp.AUTOTUNE).with_options(opts)
    it = iter(ds)
    total = 0
    for x in it:
        total += int(x[0])
        time.sleep(0.001)
    ram = it.root.tuner.ram
    it.close()
    assert total == sum(range(n))
    assert 0 < ram.peak <= budget
    assert ram.used == 0  # every reservation, carried ones included, came back


@pytest.mark.parametrize("where", ["waiting for the input", "computing"])
def test_restore_of_a_running_stage_gives_back_each_reservation_once(where):
    # set_state on a running iterator while workers held reservations. A worker that had
    # reserved its chunk's bytes and waited for the input lock saw the restore's generation
    # and returned without releasing them (ram.used stayed above 0 after close: the budget
    # shrank for good). A worker computing a chunk released its bytes when it was done,
    # and ``reset`` released them again (ram.used went below 0: the budget grew).
    import threading

    gate = threading.Event()
    gate.set()

    def read(x):  # the input, read by one worker at a time (under the lane's input lock)
        if where == "waiting for the input" and x == 1:
            gate.wait(10)
        return x

    def f(x):
        if where == "computing" and x == 2:  # admitted once element 0 gave the size
            gate.wait(10)
        return _big(x)

    ds = dp.range(40).map(read).map(f, num_parallel_calls=2)
    it0 = iter(ds)  # the stage's own state (the public one would rebuild the chain)
    assert int(it0.root.next_chunk(1)[0][0]) == 0
    state = it0.root.get_state()
    it0.close()
    gate.clear()
    it = iter(ds)
    eng, lane = it.root.stage.engine, it.root._lane
    assert int(it.root.next_chunk(1)[0][0]) == 0  # element 0 is a chunk of its own
    end = time.monotonic() + 10
    while True:  # until the workers stand where the case puts them
        with eng.cond:
            held = sum(c.reserved for c in lane.chunks)
            if where == "computing":  # element 2's chunk taken and reserved, not done
                ready = any(c.start <= 2 < c.start + c.size and c.reserved and not c.done
                            for c in lane.chunks)  # fmt: skip
            else:  # one worker reads element 1, the other reserved its chunk and waits
                # (a chunk the consumer took whole stays in the lane until the next take)
                live = [c for c in lane.chunks if not (c.done and c.consumed >= len(c.items))]
                ready = lane.pending - len(live) >= 2 and eng.ram.used > held
        if ready:
            break
        assert time.monotonic() < end, "the workers never got there"
        time.sleep(0.005)
    opener = threading.Timer(0.2, gate.set)  # while the restore joins the workers
    opener.start()
    it.root.set_state(state)
    opener.join()
    assert [int(x[0]) for x in it] == list(range(1, 40))
    ram = it.root.tuner.ram
    it.close()
    assert ram.used == 0


# ---- the executor choice (simulated workloads, deterministic) ---------------------------
def test_cheap_map_stays_inline(monkeypatch):
    # W1's x*2+1: ~0.2 µs of work per element; no hand-off could pay for itself.
    w = FakeExecutors(monkeypatch, 2e-7, {"inline": lambda p: 4e6, "thread": lambda p: 2.5e6})
    w.run(300)
    assert w.knob.executor == "inline" and w.path() == []


def test_gil_bound_map_goes_to_processes(monkeypatch):
    # ~210 µs of pure Python: threads give nothing (the GIL), two processes nearly 2x.
    rates = {"inline": lambda p: 4700, "thread": lambda p: 4300, "process": lambda p: 4600 * p}
    w = FakeExecutors(monkeypatch, 2.1e-4, rates)
    w.run(300)
    assert w.path() == [("inline", "thread"), ("thread", "process")]
    assert w.knob.executor == "process" and w.knob.value == 2
    assert w.knob.max_value == 2  # one process per core of the budget, never more


def _window_of(w, move) -> int:
    """The window at whose step the stage made executor ``move`` (old, new)."""
    for k in range(1, 40):
        w.clock.sleep(1e-9)  # sums of 0.05 drift below a window's length on the fake clock
        w.run(1)
        if move in w.path():
            return k
    raise AssertionError(w.path())


def test_threads_that_gain_nothing_are_judged_after_one_window(monkeypatch):
    # W6's search took ~0.5 s of a 3-s run, at half speed until processes: a thread trial
    # of a GIL-bound function needs no second window to show that it gained nothing.
    # Window 1 marks, 2 leaves inline (costly), 3 marks the threads' first window.
    gil = {"inline": lambda p: 4700, "thread": lambda p: 4300, "process": lambda p: 4600 * p}
    assert _window_of(FakeExecutors(monkeypatch, 2.1e-4, gil), ("thread", "process")) == 4
    # Threads that gain a little (1.3x for 2) are judged on their best of two windows.
    some = dict(gil, thread=lambda p: 6100)
    assert _window_of(FakeExecutors(monkeypatch, 2.1e-4, some), ("thread", "process")) == 5


def test_the_first_window_starts_with_the_first_request(monkeypatch):
    # The tuner stepped a window after the pipeline started and only marked then: every
    # stage spent a window more inline than it had to.
    w = FakeExecutors(monkeypatch, 1e-3, {"inline": lambda p: 1000, "thread": lambda p: 1900})
    w.tuner.begin(w.knob)
    assert _window_of(w, ("inline", "thread")) == 1


def test_gil_releasing_map_keeps_threads(monkeypatch):
    # numpy releasing the GIL: two threads nearly double the rate; processes not tried.
    rates = {"inline": lambda p: 1000, "thread": lambda p: 950 * min(p, 2)}
    w = FakeExecutors(monkeypatch, 1e-3, rates)
    w.run(300)
    assert w.path() == [("inline", "thread")] and w.knob.executor == "thread"


def test_cpu_bound_map_with_small_results_tries_processes_before_threads(monkeypatch):
    # W4's JPEG function (a pixel out): threads scale (1.9x), yet processes, which pay no
    # GIL hand-offs and send back a few bytes, do 8% better. Processes are tried first
    # (issue 27: a thread trial of such a function that holds the GIL ran at half inline's
    # rate) and kept at 80% of linear scaling over inline, without a thread trial.
    rates = {"inline": lambda p: 1000, "thread": lambda p: 950 * p, "process": lambda p: 1030 * p}
    w = FakeExecutors(monkeypatch, 1e-3, rates)
    w.meter.out_bytes = 3.0
    w.run(300)
    assert w.path() == [("inline", "process")]
    assert w.knob.executor == "process" and w.knob.value == 2
    # Processes short of that (70% of linear: inputs that cost to send) try threads next,
    # and the better of the two stays.
    rates = {"inline": lambda p: 1000, "thread": lambda p: 950 * p, "process": lambda p: 700 * p}
    w = FakeExecutors(monkeypatch, 1e-3, rates)
    w.meter.out_bytes = 8.0
    w.run(300)
    assert w.path() == [("inline", "process"), ("process", "thread")]
    assert w.knob.executor == "thread"
    # Large results (W2's 150-KB images) or threads that wait (I/O): processes not tried.
    for out_bytes, cpu_fraction in ((150_528.0, 1.0), (8.0, 0.1)):
        w = FakeExecutors(monkeypatch, 1e-3, rates, cpu_fraction=cpu_fraction)
        w.meter.out_bytes = out_bytes
        w.run(300)
        assert w.path() == [("inline", "thread")], (out_bytes, cpu_fraction)


def test_the_walkthroughs_augmentation_goes_to_processes_without_a_thread_trial(monkeypatch):
    # Issue 27, item 7: a 3x32x32 float32 image and a label out (12 KB), ~1.6 ms of CPU
    # each. Its thread trial ran at ~300 el/s (600 inline, 1,200 on two processes) for
    # 0.15-0.25 s of a ~1.5-s first epoch; processes now come straight after inline's window.
    rates = {"inline": lambda p: 600, "thread": lambda p: 300, "process": lambda p: 600 * p}
    w = FakeExecutors(monkeypatch, 1.6e-3, rates)
    w.meter.out_bytes = 3 * 32 * 32 * 4 + 8
    assert _window_of(w, ("inline", "process")) == 2  # window 1 marks, 2 measures inline
    w.run(300)
    assert w.path() == [("inline", "process")] and w.knob.executor == "process"


def test_threads_short_of_the_cores_try_processes_though_they_beat_inline(monkeypatch):
    # The walkthrough's augmentation in map (issue 27, item 7): torch layers on 32x32
    # images, ~1.6 ms of CPU per image, mostly under the GIL. Inline's one window included
    # the pipeline's start (225 el/s; 625 after it), so two threads at 610 el/s looked like
    # 1.35x linear scaling, while each used half a core: one core together. Processes (one
    # intra-op thread each) reach 1,150 el/s; today's tuner kept the threads.
    rates = {"inline": lambda p: 225, "thread": lambda p: 610, "process": lambda p: 575 * p}
    w = FakeExecutors(monkeypatch, 1.6e-3, rates, cpu_fraction=0.5)
    w.run(300)
    assert w.path() == [("inline", "thread"), ("thread", "process")]
    assert w.knob.executor == "process" and w.knob.value == 2
    # The same rates from threads that each kept a core busy: they scale; no process trial.
    w = FakeExecutors(monkeypatch, 1.6e-3, rates, cpu_fraction=0.95)
    w.run(300)
    assert w.path() == [("inline", "thread")] and w.knob.executor == "thread"
    # Threads that mostly wait (I/O) are not short of cores: processes not tried either.
    w = FakeExecutors(monkeypatch, 1.6e-3, rates, cpu_fraction=0.1)
    w.run(300)
    assert w.path() == [("inline", "thread")] and w.knob.executor == "thread"
    # And processes that do not beat such threads by PROCESS_MIN_GAIN are given back.
    w = FakeExecutors(monkeypatch, 1.6e-3, dict(rates, process=lambda p: 320 * p),
                      cpu_fraction=0.5)  # fmt: skip
    w.run(300)
    assert w.path() == [("inline", "thread"), ("thread", "process"), ("process", "thread")]


def test_a_process_trial_lasts_while_the_workers_warm_up(monkeypatch):
    # The same stage, measured: two new processes ran 198, 271, 597 el/s in their first
    # three windows (each worker unpickles the function and makes torch's first calls),
    # then ~1,000. Judged on those three, they lost to threads' 610 el/s.
    warm = iter([200, 320, 600, 1000])

    def process(p):
        return next(warm, 1150)

    rates = {"inline": lambda p: 225, "thread": lambda p: 610, "process": process}
    w = FakeExecutors(monkeypatch, 1.6e-3, rates, cpu_fraction=0.5)
    w.run(300)
    assert w.path() == [("inline", "thread"), ("thread", "process")]
    assert w.knob.executor == "process"
    # A rise that never ends is judged after PROCESS_MAX_WINDOWS windows all the same.
    doubling = (400 * 2**k for k in itertools.count())
    rates["process"] = lambda p: next(doubling)
    w = FakeExecutors(monkeypatch, 1.6e-3, rates, cpu_fraction=0.5)
    w.run(40)
    (search,) = w.tuner._searches.values()
    assert search.phase == "done" and len(search.phase_rates) == autotune.PROCESS_MAX_WINDOWS
    assert w.path() == [("inline", "thread"), ("thread", "process")]


def test_engine_reports_the_result_size_to_its_stage():
    it = iter(dp.range(64).map(_big, num_parallel_calls=2))
    assert sum(1 for _ in it) == 64
    meter = it.root.meter
    it.close()
    assert meter.out_bytes == ELEMENT_BYTES


def test_io_wait_map_grows_threads_past_the_cores(monkeypatch):
    rates = {"inline": lambda p: 480, "thread": lambda p: 490 * min(p, 40)}
    w = FakeExecutors(monkeypatch, 2e-3, rates, cpu_fraction=0.02)  # threads mostly sleep
    w.run(400)
    assert w.knob.executor == "thread" and w.knob.value >= 16


def test_processes_that_do_not_pay_are_given_up(monkeypatch):
    # Large elements: the copies to and from the processes eat the gain.
    rates = {"inline": lambda p: 1000, "thread": lambda p: 1050, "process": lambda p: 1080}
    w = FakeExecutors(monkeypatch, 1e-3, rates)
    w.run(300)
    assert w.path() == [("inline", "thread"), ("thread", "process"), ("process", "thread")]
    assert w.knob.executor == "thread"


def test_threads_slower_than_inline_go_back_inline(monkeypatch):
    # 20 µs of pure Python: too cheap for processes, and threads only add contention.
    rates = {"inline": lambda p: 40_000, "thread": lambda p: 30_000}
    w = FakeExecutors(monkeypatch, 2e-5, rates)
    w.run(300)
    assert w.path() == [("inline", "thread"), ("thread", "inline")]


def test_prefetch_starts_a_thread_only_when_it_can_hide_work(monkeypatch):
    # A prefetch thread overlaps its input's work with the consumer's: it can hide at most
    # the smaller of the two, and a hand-off costs ~0.1 ms.
    def fake(input_cost, consumer_cost):
        rate = 1 / (input_cost + consumer_cost)
        rates = {"inline": lambda p: rate, "thread": lambda p: rate}
        w = FakeExecutors(monkeypatch, input_cost, rates, kind="buffer", value=4)
        for _ in range(40):
            w.meter.outside_s += consumer_cost * rate * autotune.WINDOW_S
            w.run(1)
        return w

    assert fake(4e-5, 1e-1).knob.executor == "inline"  # cheap input (W1's batches)
    assert fake(2e-3, 5e-6).knob.executor == "inline"  # costly input, nothing to overlap
    costly = fake(2e-3, 2e-2)  # a slow input and a training step: prefetch
    assert costly.path() == [("inline", "thread")] and costly.knob.value == 4


def test_prefetch_of_costly_elements_leaves_inline_after_one_window(monkeypatch):
    # W2's batches: one element (64 JPEGs) costs ~70 ms and the consumer ~5 ms, so a window
    # holds one element; waiting for two windows of 16 kept the stage inline for 0.5 s.
    w = FakeExecutors(monkeypatch, 0.07, {"inline": lambda p: 0, "thread": lambda p: 0},
                      kind="buffer", value=4)  # fmt: skip
    s, moved_at = w.meter, None
    for k in range(1, 9):
        w.clock.sleep(0.075)  # one element per step: 70 ms of input, 5 ms of the consumer
        s.produced += 1
        s.busy_s += 0.07
        s.cpu_s += 0.07
        s.outside_s += 0.005
        s.outside_cpu_s += 0.005
        w.tuner.maybe_step()
        if moved_at is None and w.knob.executor == "thread":
            moved_at = k
    # step 1 marks the first window, step 2 judges it (before: 200-ms windows, two of them)
    assert moved_at == 2 and w.path() == [("inline", "thread")]


def test_costly_map_leaves_inline_after_one_window(monkeypatch):
    rates = {"inline": lambda p: 1000, "thread": lambda p: 1900 * min(p, 2)}
    w = FakeExecutors(monkeypatch, 1e-3, rates)  # ~1 ms per element: 200x the limit
    w.run(1)
    assert w.knob.executor == "inline"  # the first step only marks the window's start
    w.run(1)
    assert w.path() == [("inline", "thread")]


def test_cheap_map_needs_two_windows_to_leave_inline(monkeypatch):
    rates = {"inline": lambda p: 1e5, "thread": lambda p: 1.9e5 * min(p, 2)}
    w = FakeExecutors(monkeypatch, 1e-5, rates)  # 10 µs: over the limit, not 10x over it
    w.run(2)
    assert w.knob.executor == "inline"
    w.run(1)
    assert w.path() == [("inline", "thread")]


def test_real_cheap_map_and_prefetch_run_inline(threads):
    # W1's shape with AUTOTUNE everywhere: no thread is ever started.
    ds = dp.range(300_000).map(lambda x: x * 2 + 1, num_parallel_calls=dp.AUTOTUNE).batch(256)
    it = iter(ds.prefetch(dp.AUTOTUNE))
    total, executors = 0, {}
    for b in it:
        total += int(b.sum())
        assert threads.names() == []
        # (read while the stages run: the end of the data closes them)
        executors = {s.name: s.executor for s in it.root.tuner.knobs}
    assert total == sum(2 * i + 1 for i in range(300_000))
    assert executors == {"map": "inline", "prefetch": "inline"}


# ---- the ramp of a latency-bound stage (issue 25: 90% of the final rate in <= 1 s) -------
class LatencyStage:
    """A stage whose elements each wait ``latency`` seconds (a remote read) and whose threads
    use ``cpu_fraction`` of a core while busy, on a fake clock stepped every ``tick``
    seconds (the consumer asks that often). Inline, one element at a time; on ``p``
    threads ``rate(p)`` elements/s. ``stamps`` are the elements' completion times, for
    the benchmark's measure (``bench_s3_scale.ramp_time``)."""

    def __init__(self, monkeypatch, rate, search=True, cpu_fraction=0.02, latency=0.02,
                 cpu_budget=2, cap=64):  # fmt: skip
        self.clock = FakeClock(monkeypatch, (autotune.time, "monotonic"))
        self.tuner = autotune.Autotuner(True, cpu_budget, 1 << 40)
        self.knob, self.meter = Knob("map", "parallelism", 2, True, cap), Meter()
        if search:  # AUTOTUNE's own executor choice, from inline, as map(f, AUTOTUNE) runs
            self.knob.executor = "inline"
            self.knob.on_executor = lambda executor, v: True
            self.tuner.add(self.knob, self.meter, ["inline", "thread", "process"])
        else:  # threads named: the stage starts at plan.py's initial value
            self.tuner.add(self.knob, self.meter)
        self.rate, self.cpu_fraction, self.latency = rate, cpu_fraction, latency
        self.stamps: list[float] = []
        self.tuner.begin(self.knob)

    def run(self, seconds: float, tick: float = 0.005) -> None:
        k, m, due = self.knob, self.meter, 0.0
        for _ in range(round(seconds / tick)):
            self.clock.sleep(tick)
            inline = k.executor == "inline"
            due += tick * (1 / self.latency if inline else self.rate(k.value))
            n, due = int(due), due - int(due)
            busy = n * self.latency if inline else k.value * tick
            m.record(n, busy, busy * self.cpu_fraction)
            self.stamps += [self.clock.now] * n
            self.tuner.maybe_step()

    def final_rate(self) -> float:
        """The rate over the second half of the run (the benchmark's steady rate)."""
        half = [t for t in self.stamps if t >= self.clock.now / 2]
        return (len(half) - 1) / (half[-1] - half[0])

    def ramp_s(self, window: float = 0.25) -> float:
        """Seconds until the rate over ``window`` first reached 90% of the final rate."""
        final, first = self.final_rate(), 0
        for i, t in enumerate(self.stamps):
            while self.stamps[first] < t - window:
                first += 1
            if t >= window and (i - first) / window >= 0.9 * final:
                return t
        raise AssertionError(f"never reached 90% of {final:.0f}/s: {self.knob.history}")


@pytest.mark.parametrize("search", [True, False], ids=["from inline", "threads named"])
@pytest.mark.parametrize("n", [4, 8, 24, 48])
def test_latency_bound_stage_reaches_90_percent_of_its_rate_within_a_second(monkeypatch, n,
                                                                            search):  # fmt: skip
    # 20 ms per element, linear in the threads up to n (a server that takes n at once). The
    # stage stayed at 2 threads for a second: 16-element windows of 0.16-0.2 s, two to
    # judge the threads, three more before the first step up, then after a refused step a
    # cooldown of 8 windows (AUTOTUNE reached 90% after 2.1-2.2 s in bench_s3_scale.py).
    w = LatencyStage(monkeypatch, rate=lambda p: 50 * min(p, n), search=search)
    w.run(4.0)
    assert w.final_rate() >= 0.9 * 50 * n, w.tuner.trials(w.knob)
    assert w.ramp_s() <= 1.0, (w.knob.history, w.tuner.trials(w.knob))
    assert w.knob.executor == "thread" and max(w.knob.history) <= 64


def test_latency_bound_ramp_stays_within_the_cpu_budget_and_the_thread_cap(monkeypatch):
    # Reads whose client costs 15% of a core each (s3fs's signing and parsing): the CPU
    # budget of 2 cores holds ~15 of them, whatever the server could take.
    w = LatencyStage(monkeypatch, rate=lambda p: 50 * min(p, 48), cpu_fraction=0.15)
    w.run(4.0)
    most = max(w.knob.history)
    assert 8 <= most and most * 0.15 <= 2 + 0.25, w.knob.history
    assert w.ramp_s() <= 1.0
    # A thread cap (threading.private_threadpool_size) below what the server takes.
    w = LatencyStage(monkeypatch, rate=lambda p: 50 * min(p, 48), cap=12)
    w.run(4.0)
    assert max(w.knob.history) == 12 and w.knob.value == 12, w.knob.history
    assert w.final_rate() >= 0.95 * 50 * 12 and w.ramp_s() <= 1.0


def test_latency_bound_stage_that_saturates_early_backs_off_to_half_way_at_once(monkeypatch):
    # Threads named, a server that takes 4 at once: 2 -> 16 doubles the rate, less than the
    # 2.75x an 8x step must show. Half way (9) is tried at once against the same base; it
    # used to go back to 2 threads and wait out a cooldown of 8 windows (1.4 s).
    w = LatencyStage(monkeypatch, rate=lambda p: 50 * min(p, 4), search=False)
    w.run(1.0)
    assert w.tuner.trials(w.knob)[:2] == [
        ("up", 2, 16, pytest.approx(100, rel=0.05), 200.0, False),
        ("up", 2, 9, pytest.approx(100, rel=0.05), 200.0, True),
    ]
    assert w.knob.history[:3] == [2, 16, 9]


def test_threads_are_not_judged_before_each_finished_an_element(monkeypatch):
    # Under load (9 on 2 cores) 16 threads of remote reads delivered nothing for 0.4 s after
    # they started (connections opening): the trial was judged on those windows, found no
    # gain, and the stage went to 2 processes (29 obj/s where threads read 90).
    clock = []

    def rate(p):
        return 0 if clock[0].now < 0.5 else 50 * min(p, 24)

    w = LatencyStage(monkeypatch, rate)
    clock.append(w.clock)
    w.run(2.0)
    moves = [(old, new) for _, kind, old, new in w.knob.events if kind == "executor"]
    assert moves == [("inline", "thread")] and w.knob.value >= 24, w.knob.history


def test_real_sleeping_map_starts_its_threads_high():
    # A function that sleeps 20 ms (a remote read): its inline window shows a thread that
    # waited (CPU << wall), so threads start where the first step of waiting threads goes
    # (8x the CPU budget), not at the budget; processes are never tried. A decision from
    # CPU and wall times, which a loaded machine cannot blur (a sleeping thread uses ~0 CPU).
    def read(x):
        time.sleep(0.02)
        return x

    opts = dp.Options(autotune=dp.AutotuneOptions(cpu_budget=2))
    it = iter(dp.range(400).map(read, num_parallel_calls=dp.AUTOTUNE).with_options(opts))
    t0 = time.monotonic()
    assert [int(x) for x in it] == list(range(400))
    elapsed = time.monotonic() - t0
    knob, trials = it.root.knob, it.root.tuner.trials(it.root.knob)
    it.close()
    # the switch itself set 16 (no trial from 2 threads: that took a second before)
    assert [e[1:] for e in knob.events[:2]] == [("executor", "inline", "thread"),
                                                ("parallelism", 2, 16)]  # fmt: skip
    assert all(t[1] >= 16 for t in trials), trials
    assert knob.value >= 16
    assert elapsed < 20  # 8 s sequential; ~0.6 s here (10x that: a loaded machine)


# ---- AUTOTUNE's inline executor and restores ------------------------------------------------
@pytest.mark.parametrize("resume_on", ["fresh", "same"])
def test_inline_stage_restored_from_a_threaded_snapshot(resume_on, clean):
    # AUTOTUNE starts every stage inline. A snapshot taken while the stage ran on threads
    # with a chunk partly consumed queues that chunk for recomputation; inline, no worker
    # ever computed it and the consumer waited for ever.
    ds = dp.range(400).map(_half_ms, num_parallel_calls=dp.AUTOTUNE)
    it = iter(ds)
    stage = it.root.knob
    it.root.tuner.end_search(stage)  # the test's switches, not the tuner's
    assert stage.set_executor("thread", 2)
    got = []
    while not it.root.get_state()["replay"]:  # until the cut falls inside a chunk
        assert len(got) < 300, "the workers' chunks never grew past one element"
        got += it.root.next_chunk(1)  # one at a time: the workers' chunks are left partly read
    state = it.get_state()
    if resume_on == "fresh":
        it.close()
        it = iter(ds)  # a new stage starts inline
    else:
        assert stage.set_executor("inline", 0)
    assert it.root.executor == "inline"
    it.set_state(state)
    assert [int(x) for x in it] == [2 * i for i in range(len(got), 400)]
    it.close()


def test_thread_that_took_a_chunk_before_a_switch_to_fewer_processes(clean):
    # AUTOTUNE moved a stage from 2 threads to 1 process while thread 1 was reading its
    # chunk's input: it then computed "in process 1", which does not exist (IndexError:
    # WorkerDiedError for the whole pipeline).
    import threading

    gate = threading.Event()

    def gated(x):
        gate.wait(10)
        return x

    it = iter(dp.range(40).map(gated).map(_half_ms, num_parallel_calls=dp.AUTOTUNE))
    stage = it.root.knob
    it.root.tuner.end_search(stage)  # the test's switches, not the tuner's
    assert stage.set_executor("thread", 2)
    it.root.stage.start()
    end = time.monotonic() + 10
    while it.root._lane.pending < 2:
        assert time.monotonic() < end, "the two threads never took their chunks"
        time.sleep(0.005)
    assert stage.set_executor("process", 1)  # while both threads wait inside their chunks
    gate.set()
    assert [int(x) for x in it] == [2 * i for i in range(40)]
    it.close()
