"""datapipe.parallel.remembered: what AUTOTUNE settled on in a stage, kept by the op's
stage request for the next ``iter()`` of the same Dataset: the tuner's outcome and its
verification of a remembered choice (simulated workloads, deterministic), and real
pipelines whose second ``iter()`` starts on the remembered executor, computing the same
elements as any other executor, before and after a restore."""

from __future__ import annotations

import time

import pytest
from harness import FakeExecutors

import datapipe as dp
from datapipe import _draws
from datapipe.parallel import autotune
from datapipe.parallel.remembered import Remembered, TunedChoice

pytestmark = pytest.mark.timeout(120)

# The walkthrough's augmentation in map (issue 27, item 7; test_autotune.py's
# test_threads_short_of_the_cores_try_processes_though_they_beat_inline): two threads each
# using half a core, two processes at 575 el/s each.
WALKTHROUGH = {"inline": lambda p: 225, "thread": lambda p: 610, "process": lambda p: 575 * p}


def fake_stage(monkeypatch, rates, cost=1.6e-3, cpu_fraction=0.5, **kwargs) -> FakeExecutors:
    """The walkthrough's stage by default: ~1.6 ms per element, threads using half a core."""
    return FakeExecutors(monkeypatch, cost, rates, cpu_fraction=cpu_fraction, **kwargs)


def _choice(monkeypatch, rates, **kwargs) -> TunedChoice:
    """The choice a full search of ``rates`` leaves (as ``Stage.close`` records it)."""
    w = fake_stage(monkeypatch, rates, **kwargs)
    w.run(300)
    executor, value, rate = w.tuner.outcome(w.knob)
    return TunedChoice(executor, value, rate, w.tuner.cpu_budget)


def test_a_finished_search_leaves_its_executor_value_and_rate(monkeypatch):
    w = fake_stage(monkeypatch, WALKTHROUGH)
    w.tuner.begin(w.knob)
    w.run(3)
    assert w.tuner.outcome(w.knob) is None  # still searching: nothing to remember
    w.run(300)
    assert w.path() == [("inline", "thread"), ("thread", "process")]
    executor, value, rate = w.tuner.outcome(w.knob)
    assert (executor, value) == ("process", 2)
    assert rate == pytest.approx(1140.0)  # the median of its last windows (57 per 50 ms)


def test_a_remembered_choice_is_verified_without_a_search(monkeypatch):
    # Each iter() searched from inline: the walkthrough's epochs spent 0.4-0.6 s of ~2 s
    # inline and on threads before processes (bench_own_data.py). Started on the choice,
    # the stage makes no executor move and is judged within RESUME_WINDOWS windows.
    choice = _choice(monkeypatch, WALKTHROUGH)
    w = fake_stage(monkeypatch, WALKTHROUGH, resumed=choice, start="process")
    w.tuner.begin(w.knob)
    w.run(autotune.RESUME_WINDOWS)
    assert w.phase() == "done" and w.path() == []
    w.run(300)
    assert w.path() == [] and w.knob.executor == "process" and w.knob.value == 2
    assert w.tuner.outcome(w.knob)[:2] == ("process", 2)


def test_processes_still_warming_up_are_not_judged_yet(monkeypatch):
    # New worker processes ran 198, 271, 597 el/s in their first windows (each unpickles
    # the function, torch's first calls): judged then, a remembered 1,150 el/s looked lost.
    warm = iter([0, 0, 200, 320, 600])
    rates = dict(WALKTHROUGH, process=lambda p: next(warm, 1150))
    choice = TunedChoice("process", 2, 1150.0, 2)
    w = fake_stage(monkeypatch, rates, resumed=choice, start="process")
    w.run(300)
    assert w.path() == [] and w.knob.executor == "process"


def test_a_remembered_choice_that_fell_clearly_short_searches_again(monkeypatch):
    # The remembered processes now reach a third of their rate: the search starts over,
    # from inline, and ends where this iteration's measurements say.
    rates = dict(WALKTHROUGH, process=lambda p: 190 * p)
    choice = TunedChoice("process", 2, 1150.0, 2)
    w = fake_stage(monkeypatch, rates, resumed=choice, start="process")
    w.run(300)
    assert w.path() == [("process", "inline"), ("inline", "thread"), ("thread", "process"),
                        ("process", "thread")]  # fmt: skip
    assert w.knob.executor == "thread"
    # Half the rate is within the margin (a loaded machine): no search.
    rates = dict(WALKTHROUGH, process=lambda p: 300 * p)
    w = fake_stage(monkeypatch, rates, resumed=choice, start="process")
    w.run(300)
    assert w.path() == [] and w.knob.executor == "process"


def test_remembered_threads_short_of_their_cores_give_processes_a_trial(monkeypatch):
    # A process trial that lost to threads by a noisy margin on a loaded machine must not
    # keep every later epoch on threads that use one core between them: processes get
    # their trial again (not the whole search), judged as in the first iteration.
    choice = TunedChoice("thread", 2, 610.0, 2)
    w = fake_stage(monkeypatch, WALKTHROUGH, resumed=choice, start="thread")
    w.run(300)
    assert w.path() == [("thread", "process")] and w.knob.executor == "process"
    # Threads that fill their cores are kept as they are.
    w = fake_stage(monkeypatch, WALKTHROUGH, resumed=choice, start="thread", cpu_fraction=0.95)
    w.run(300)
    assert w.path() == [] and w.knob.executor == "thread"


def test_remembered_is_thread_safe_and_forgets_on_none():
    import threading

    r = Remembered()
    choices = [TunedChoice("thread", n, float(n), 2) for n in range(1, 9)]
    threads = [threading.Thread(target=lambda c=c: [r.put(c) for _ in range(200)]) for c in choices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.get() in choices  # one whole choice, never a mix
    r.put(None)
    assert r.get() is None


def test_a_pickled_or_copied_dataset_starts_without_the_memory():
    # The service sends a pipeline to its workers with cloudpickle; a lock does not pickle.
    import copy
    import pickle

    import cloudpickle

    ds = dp.range(6).map(_read, num_parallel_calls=dp.AUTOTUNE)
    ds.stage_request.tuned.put(TunedChoice("process", 2, 100.0, 2))
    for clone in (pickle.loads(cloudpickle.dumps(ds)), copy.deepcopy(ds)):
        assert clone.stage_request.tuned.get() is None
        assert [int(x) for x in clone] == [0, 2, 4, 6, 8, 10]
    assert ds.stage_request.tuned.get() == TunedChoice("process", 2, 100.0, 2)


# ---- real pipelines ----------------------------------------------------------------------
def _read(x):
    time.sleep(0.002)  # a remote read: threads, whatever the machine's load
    return int(x) * 2


def _options(seed=None):
    opts = dp.Options(autotune=dp.AutotuneOptions(cpu_budget=2))
    opts.seed = seed
    return opts


@pytest.mark.parametrize("skip", [0, 5])
def test_a_second_iter_starts_on_the_executor_the_first_settled_on(skip, clean):
    # skip(5) is pushed below the map at iter(): the stage runs a copy of the map's node,
    # which shares its stage request, so the choice is the Dataset's all the same.
    mapped = dp.range(3000).with_options(_options()).map(_read, num_parallel_calls=dp.AUTOTUNE)
    ds = mapped.skip(skip) if skip else mapped
    want = [2 * i for i in range(skip, 3000)]
    it = iter(ds)
    assert it.root.executor == "inline"  # the first iteration searches
    assert [int(x) for x in it] == want
    first = it.root.knob.events
    it.close()
    assert ("executor", "inline", "thread") in [e[1:] for e in first]
    choice = mapped.stage_request.tuned.get()
    assert choice is not None and choice.executor == "thread" and choice.value >= 2
    it = iter(ds)
    assert it.root.executor == "thread" and it.root.knob.value == choice.value  # no inline
    assert [int(x) for x in it] == want
    assert all(e[1] != "executor" for e in it.root.knob.events)  # verified, not searched
    it.close()


def _two_draws(x):
    """Two draws of a layer with seed 11 and the position: a function of the element's
    position and the stage's key (docs/architecture.md, "Draws in a stage")."""
    return [_draws.element_draw(11), _draws.element_draw(11), _draws.position()]


def test_remembered_processes_compute_what_threads_compute_and_restore_exactly(clean):
    def make(**kwargs):
        return dp.range(64).with_options(_options(seed=4)).map(_two_draws, **kwargs)

    ref = make(num_parallel_calls=2, executor="thread")
    want = [list(ref), list(ref)]  # its epochs 0 and 1
    assert want[0] != want[1]  # each epoch has its own key
    ds = make(num_parallel_calls=dp.AUTOTUNE)
    ds.stage_request.tuned.put(TunedChoice("process", 2, 1.0, 2))
    for epoch in (0, 1):
        it = iter(ds)
        assert it.root.executor == "process"
        got = [next(it) for _ in range(20)]
        assert it.root.worker_pids()  # worker processes computed them
        state = it.get_state()
        assert got + list(it) == want[epoch]
        it.close()
        # The choice is no part of the state: a fresh Dataset, which searches from inline,
        # and this one, which starts on processes, resume the same elements.
        for resumed_on, again in (("inline", iter(make(num_parallel_calls=dp.AUTOTUNE))),
                                  ("process", iter(ds))):  # fmt: skip
            assert again.root.executor == resumed_on
            again.set_state(state)
            assert list(again) == want[epoch][20:]
            again.close()


def test_a_choice_from_another_cpu_budget_or_a_step_back_is_not_taken(clean):
    ds = dp.range(8).with_options(_options()).map(_read, num_parallel_calls=dp.AUTOTUNE)
    ds.stage_request.tuned.put(TunedChoice("thread", 4, 100.0, cpu_budget=3))
    it = iter(ds)
    assert it.root.executor == "inline"  # measured with 3 cores: searched anew
    it.close()
    ds.stage_request.tuned.put(TunedChoice("thread", 2, 100.0, 2, stepped_back=True))
    it = iter(ds)
    # an element could not cross to a worker process: threads, and processes never tried
    assert it.root.executor == "thread" and it.root.stage.processes_allowed is False
    assert [int(x) for x in it] == [2 * i for i in range(8)]
    it.close()
