"""``prefetch_to_device``: the CPU path, the clear error without a device, and the stream
protocol with a CPU stand-in for torch's device API (``_cpu_stream``). The CUDA calls
themselves are checked only by ``benchmarks/gpu_check.py`` on a CUDA machine."""

from __future__ import annotations

import gc
import time
import weakref

import numpy as np
import pytest
import torch
from _cpu_stream import CpuStreamTransfer

import datapipe as dp
from datapipe.parallel import policies
from datapipe.parallel import transfer as transfer_mod
from datapipe.parallel.plan import read_ahead_allowed
from datapipe.stats import InputBoundTimer

N_IMAGES = 40


def images_dataset(n: int = N_IMAGES) -> dp.Dataset:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 3, 4, 4), dtype=np.uint8)
    labels = np.arange(n, dtype=np.int64)
    names = np.array([f"img{i}" for i in range(n)], dtype=object)
    return dp.from_tensor_slices({"image": images, "label": labels, "name": names})


@pytest.fixture
def stand_in(monkeypatch):
    """Make ``iter()`` of a ``prefetch_to_device`` use a ``CpuStreamTransfer``; returns a
    function taking its options and returning the list of the transfers made."""
    made: list[CpuStreamTransfer] = []

    def install(**kwargs) -> list[CpuStreamTransfer]:
        def for_device(device):
            t = CpuStreamTransfer(**kwargs)
            made.append(t)
            return t

        monkeypatch.setattr(transfer_mod, "for_device", for_device)
        return made

    return install


def wait_until(cond, timeout_s: float = 10.0) -> bool:
    """Poll ``cond`` until it holds (True) or ``timeout_s`` passes (False)."""
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    return bool(np.all(a == b))


# ---- device="cpu": a plain prefetch ------------------------------------------------------
def test_cpu_gives_to_torch_elements_in_order(threads):
    ds = images_dataset().batch(8)
    want = list(ds.to_torch())
    got = list(ds.prefetch_to_device("cpu", buffer_size=2))
    assert len(got) == 5 and all(same(a, b) for a, b in zip(want, got))
    b = got[0]
    assert b["image"].dtype == torch.uint8 and tuple(b["image"].shape) == (8, 3, 4, 4)
    assert b["label"].tolist() == list(range(8))
    assert list(b["name"]) == [f"img{i}" for i in range(8)]  # text stays numpy
    assert list(ds.to_torch(device="cpu"))[4]["label"].tolist() == list(range(32, 40))
    assert threads.settle() == []


def test_cpu_element_spec_and_traits():
    ds = images_dataset().batch(8, drop_remainder=True).prefetch_to_device("cpu")
    spec = ds.element_spec
    assert spec["image"].dtype == torch.uint8 and spec["image"].shape == (8, 3, 4, 4)
    assert spec["label"].dtype == torch.int64
    assert spec["name"].dtype == np.dtype(object)
    assert ds.cardinality() == 5 and len(ds) == 5
    assert ds.elementwise and ds.commutes_with_shard and ds.device == torch.device("cpu")
    gen = dp.from_generator(lambda: iter(range(3)), dp.TensorSpec((), "int64"))
    assert not read_ahead_allowed(gen)
    assert read_ahead_allowed(gen.prefetch_to_device("cpu"))  # a buffer the user asked for


def test_cpu_state_restores_exactly():
    ds = dp.range(50).map(lambda x: x * 3).batch(4).prefetch_to_device("cpu", buffer_size=3)
    want = [b.tolist() for b in ds]
    for k in (0, 1, 5, 12, 13):
        it = iter(ds)
        head = [next(it).tolist() for _ in range(k)]
        state = it.get_state()
        it.close()
        it2 = iter(ds)
        it2.set_state(state)
        assert head + [b.tolist() for b in it2] == want, k


def test_cpu_random_access_and_auto_shard():
    ds = dp.range(20).prefetch_to_device("cpu").global_shuffle(seed=1)
    got = [int(x) for x in ds]
    assert sorted(got) == list(range(20)) and got != list(range(20))
    opts = dp.Options(distribute=dp.DistributeOptions(num_workers=2, worker_index=1))
    base = dp.range(21).map(lambda x: x + 100).batch(2)
    want = [b.tolist() for b in base.prefetch(2).with_options(opts)]
    got2 = [b.tolist() for b in base.prefetch_to_device("cpu").with_options(opts)]
    assert got2 == want and len(want) == 5  # this worker's share, the same as prefetch's


def test_bad_arguments_raise_at_construction():
    with pytest.raises(ValueError, match="prefetch_to_device: 'gpu0' is not a device"):
        dp.range(3).prefetch_to_device("gpu0")
    for bad in (0, -5):
        with pytest.raises(ValueError, match="buffer_size must be >= 1 or AUTOTUNE"):
            dp.range(3).prefetch_to_device("cpu", buffer_size=bad)
    for bad in ("2", 2.0, True, None):
        with pytest.raises(TypeError, match="^prefetch_to_device: buffer_size must be an int"):
            dp.range(3).prefetch_to_device("cpu", buffer_size=bad)
    assert dp.range(3).prefetch_to_device("cpu", np.int64(2))._buffer_size == 2


# ---- no such device -----------------------------------------------------------------------
def test_missing_device_raises_at_iter_before_reading(threads):
    reads = []

    def gen():
        for i in range(5):
            reads.append(i)
            yield np.float32(i)

    ds = dp.from_generator(gen, dp.TensorSpec((), "float32")).batch(2)
    for make in (lambda: ds.prefetch_to_device("cuda"), lambda: ds.to_torch(device="cuda:0")):
        node = make()  # building the pipeline is fine on any machine
        with pytest.raises(dp.DeviceUnavailableError) as e:
            iter(node)
        assert "prefetch_to_device: device 'cuda" in str(e.value)
        assert "sees no accelerator" in str(e.value) and "device='cpu'" in str(e.value)
    assert reads == [] and threads.names() == []


def test_device_index_past_the_count_is_named(monkeypatch):
    acc = torch.accelerator
    monkeypatch.setattr(acc, "is_available", lambda: True)
    monkeypatch.setattr(acc, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(acc, "device_count", lambda: 1)
    with pytest.raises(dp.DeviceUnavailableError, match=r"has 1 cuda device\(s\) \(indices 0"):
        iter(dp.range(3).prefetch_to_device("cuda:3"))
    monkeypatch.setattr(acc, "current_accelerator", lambda *a: torch.device("xpu"))
    with pytest.raises(dp.DeviceUnavailableError, match="sees the accelerator 'xpu'"):
        iter(dp.range(3).prefetch_to_device("cuda"))


# ---- the stream protocol, with the CPU stand-in -------------------------------------------
def test_stream_path_gives_the_cpu_path_values(stand_in, threads):
    made = stand_in()
    ds = images_dataset().batch(6)
    want = list(ds.to_torch())
    got = list(ds.prefetch_to_device("cuda", buffer_size=3))
    assert len(got) == 7 and all(same(a, b) for a, b in zip(want, got))
    t = made[0]
    assert all(t.owns(b["image"]) and t.owns(b["label"]) for b in got)
    assert t.transforms == 7
    assert threads.settle() == []


def test_each_copy_starts_on_the_side_stream_and_is_waited_for_at_hand_over(stand_in):
    made = stand_in()
    it = iter(images_dataset().batch(5).prefetch_to_device("cuda", buffer_size=2))
    t = made[0]
    seen = []
    for i, batch in enumerate(it):
        seen.append((i, len(t.log), batch))
    log = t.log
    recorded = [e[2] for e in log if e[0] == "record_event"]
    assert len(recorded) == 8 and all(stream == "side" for _, stream in t.copies)
    assert len(t.copies) == 16  # image and label of 8 batches; the names are not copied
    for i, at_return, batch in seen:
        before = log[:at_return]
        # the consumer's stream waits for this element's event before it is returned ...
        assert ("wait_event", "consumer", recorded[i], "MainThread") in before
        # ... and for the next element's only when the consumer takes that one
        later = recorded[i + 1 :]
        assert not [e for e in before if e[0] == "wait_event" and e[2] in later]
        ptrs = {batch[k].untyped_storage().data_ptr() for k in ("image", "label")}
        marks = {e[2] for e in before if e[0] == "record_stream" and e[1] == "consumer"}
        assert ptrs <= marks  # both tensors recorded on the consumer's stream
    assert not any(e[0] == "wait_event" and e[1] != "consumer" for e in log)


def test_sequential_batch_is_stacked_in_pinned_memory(stand_in):
    made = stand_in()
    ds = images_dataset().batch(8)
    got = list(ds.prefetch_to_device("cuda"))
    t = made[0]
    assert t.copied_into_pinned == 0  # every copy's source is the batch itself
    assert t.pinned_made == 10  # image and label of 5 batches (names are text)
    assert all(t.is_pinned_ptr(ptr) for ptr, _ in t.copies)
    assert all(same(a, b) for a, b in zip(ds.to_torch(), got))


def test_torch_batches_over_pinned_memory_are_not_copied_again(stand_in):
    # to_torch after batch: tensors sharing the pinned batch's memory (numpy owns it);
    # they are copied from directly and held until their copy is done.
    made = stand_in(instant=False)
    ds = images_dataset().batch(8).to_torch()
    it = iter(ds.prefetch_to_device("cuda", buffer_size=2))
    first = next(it)
    t = made[0]
    assert t.copied_into_pinned == 0 and t.pinned_made >= 2
    sources = [src for _, srcs in t.holding for src in srcs]
    assert any(s.data_ptr() == t.copies[0][0] for s in sources)  # still held: not done
    rest = list(it)
    assert all(same(a, b) for a, b in zip(ds, [first, *rest]))
    assert t.copied_into_pinned == 0


def test_ragged_components_arrive_as_nested_tensors_like_to_torch(stand_in):
    made = stand_in()
    rows = [np.arange(n, dtype=np.int64) for n in (1, 3, 2, 4, 1)]
    ds = dp.from_generator(lambda: iter(rows), dp.TensorSpec((None,), "int64")).ragged_batch(2)
    want = list(ds.to_torch())
    got = list(ds.prefetch_to_device("cuda"))
    assert [g.is_nested for g in got] == [w.is_nested for w in want] == [True, True, True]
    for w, g in zip(want, got):
        assert [r.tolist() for r in g.unbind()] == [r.tolist() for r in w.unbind()]
    # nested tensors are not copied on the side stream but at hand-over, on the loop's
    # stream (no pinned buffer, no record_stream for their layout)
    assert made[0].copies == [] and not any(made[0].owns(g) for g in got)
    assert got[0].unbind()[1].tolist() == [0, 1, 2]
    cpu = list(ds.prefetch_to_device("cpu"))
    assert all(c.is_nested for c in cpu)


@pytest.mark.parametrize(
    "pipeline, copied",
    [  # a map after the batch makes a new image array; the labels stay where batch put them
        (lambda ds: ds.batch(8).map(lambda e: {**e, "image": e["image"] + 1}), 5),
        (lambda ds: ds.batch(8, num_parallel_calls=2), 10),  # stacked on batch's threads
    ],
    ids=["map_after_batch", "parallel_batch"],
)
def test_other_batches_are_copied_into_pinned_memory(stand_in, pipeline, copied):
    made = stand_in()
    ds = pipeline(images_dataset())
    got = list(ds.prefetch_to_device("cuda"))
    t = made[0]
    assert t.copied_into_pinned == copied and len(got) == 5
    assert all(t.is_pinned_ptr(ptr) for ptr, _ in t.copies)
    assert all(same(a, b) for a, b in zip(ds.to_torch(), got))


def test_at_most_buffer_size_elements_in_flight(stand_in):
    made = stand_in()
    ds = dp.range(60).batch(2).prefetch_to_device("cuda", buffer_size=3)
    it = iter(ds)
    lane = it.root._lane
    pending = []
    made[0].on_transform = lambda: pending.append(lane.pending)
    out = []
    for x in it:
        time.sleep(0.002)  # a consumer slower than the copies: the buffer fills
        out.append(x.tolist())
    assert out == [[2 * i, 2 * i + 1] for i in range(30)]
    assert len(pending) == 30 and max(pending) <= 3


def test_state_is_the_host_position_and_in_flight_elements_are_replayed(stand_in, tmp_path):
    made = stand_in()
    ds = dp.range(40).map(lambda x: x * 2).batch(4).prefetch_to_device("cuda", buffer_size=4)
    want = [b.tolist() for b in ds]
    it = iter(ds)
    head = [next(it).tolist() for _ in range(3)]
    assert wait_until(lambda: made[-1].transforms >= 5)  # the worker copies ahead
    state = it.get_state()
    copied_ahead = made[-1].transforms - 3
    it.close()
    assert not _tensors_in(state)  # host positions only: no device memory in a checkpoint
    path = tmp_path / "it.state"
    dp.save_state(state, path)
    it2 = iter(ds)
    it2.set_state(dp.load_state(path))
    rest = [b.tolist() for b in it2]
    assert head + rest == want
    assert made[-1].transforms == len(rest)  # the elements in flight were copied again
    assert 2 <= copied_ahead <= 4


def test_close_and_gc_free_buffered_tensors_and_wait_for_copies(stand_in, threads):
    made = stand_in(instant=False)  # copies "still running" until waited for
    it = iter(dp.range(100).batch(2).prefetch_to_device("cuda", buffer_size=4))
    first = next(it)
    t = made[0]
    assert wait_until(lambda: len(t.holding) >= 3)  # the worker fills its buffer
    assert len(t.device_tensors()) >= 3
    it.close()
    gc.collect()
    assert [x is first for x in t.device_tensors()] == [True]  # only what the consumer holds
    assert ("stream.synchronize", "side") in t.log and len(t.holding) == 0
    assert threads.settle() == []
    it = iter(dp.range(100).batch(2).prefetch_to_device("cuda", buffer_size=4))
    for _ in it:
        break
    ref = weakref.ref(it)
    del it
    gc.collect()
    assert ref() is None and threads.settle() == []
    assert len(made[1].holding) == 0


def test_finished_copies_release_their_pinned_sources(stand_in):
    made = stand_in()  # every copy completes at once
    list(dp.range(50).batch(5).prefetch_to_device("cuda", buffer_size=2))
    assert len(made[0].holding) <= 1  # released on the next copy


def test_copy_failure_is_raised_at_its_position_and_iteration_goes_on(stand_in):
    stand_in(fail_at=3)
    it = iter(dp.range(20).batch(2).prefetch_to_device("cuda", buffer_size=2))
    got = [next(it).tolist() for _ in range(3)]
    with pytest.raises(dp.PipelineError) as e:
        next(it)
    assert e.value.op == "prefetch_to_device" and e.value.index == 3
    assert "out of device memory (stand-in)" in str(e.value)
    rest = [b.tolist() for b in it]
    assert got + rest == [[2 * i, 2 * i + 1] for i in range(10) if i != 3]


def test_input_failure_keeps_its_position(stand_in):
    stand_in()

    def f(x):
        if x == 7:
            raise ValueError("bad element")
        return x

    it = iter(dp.range(12).map(f).batch(3).prefetch_to_device("cuda", buffer_size=2))
    assert [next(it).tolist() for _ in range(2)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(dp.PipelineError, match="bad element") as e:
        next(it)
    assert e.value.op == "map" and e.value.index == 7


# ---- input time: InputBoundTimer and profile() ----------------------------------------------
def test_input_bound_timer_counts_the_copy_wait_as_input(stand_in):
    made = stand_in(instant=False, delay_s=0.02)
    ds = dp.range(12).batch(2).prefetch_to_device("cuda", buffer_size=2)
    timer = InputBoundTimer()
    got = [b.tolist() for b in timer.epoch(ds)]
    assert got == [[2 * i, 2 * i + 1] for i in range(6)]
    e = timer.epochs[0]
    synced = [ev for ev in made[0].events if ev.synchronized]
    assert e.steps == 6 and len(synced) == 6  # one host wait per batch, inside the timing
    assert e.wait_s >= 6 * 0.02


def test_iterator_synchronize_is_a_no_op_without_a_device_stage():
    it = iter(dp.range(4).batch(2))
    next(it)
    it.synchronize()
    assert it._device_stages == []


def test_profile_counts_the_copy_wait_as_the_stage_s_input_time(stand_in):
    made = stand_in(instant=False, delay_s=0.01)
    ds = dp.range(16).batch(2).prefetch_to_device("cuda", buffer_size=2)
    report = ds.profile(step_fn=lambda b: None)
    assert report.elements == 8
    stage = report.stage("prefetch_to_device")
    assert stage.elements == 8 and stage.wait_s >= 8 * 0.01
    assert report.input_wait_s >= 8 * 0.01
    assert sum(ev.synchronized for ev in made[0].events) == 8


def _tensors_in(x) -> bool:
    if isinstance(x, dict):
        return any(_tensors_in(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_tensors_in(v) for v in x)
    return isinstance(x, torch.Tensor)


def test_close_lets_go_of_a_prefetch_buffer():
    # Engine.close: the results a stage had buffered are freed by close(), not only when
    # the iterator object is garbage collected (it was: the lanes kept their chunks).
    made = []

    def f(x):
        a = np.full(4, x)
        made.append(weakref.ref(a))
        return a

    it = iter(dp.range(50).map(f).prefetch(8))
    first = next(it)
    lane = it.root._lane
    assert wait_until(lambda: lane.buffered >= 2)  # a chunk of results waits in the buffer
    it.close()
    gc.collect()
    assert [r() for r in made if r() is not None] == [first]


def test_readme_device_example_runs_on_cpu():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, flags=re.S)
    code = next(b for b in blocks if ".prefetch_to_device(device)" in b)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    x, y = scope["x"], scope["y"]
    assert x.dtype == torch.float32 and tuple(x.shape) == (64, 3, 32, 32)
    assert y.dtype == torch.int64 and tuple(y.shape) == (64,)
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert x.device.type == scope["device"]


def test_profile_verdict_knows_prefetch_to_device_overlaps_the_step():
    # The verdict used to advise ".prefetch(AUTOTUNE)" for a pipeline that ends in
    # prefetch_to_device, as if nothing overlapped the input with the step.
    def slow(x):
        time.sleep(0.001)
        return x

    ds = dp.range(120).map(slow).batch(4).prefetch_to_device("cpu", buffer_size=2)
    report = ds.profile(step_fn=lambda b: time.sleep(0.002))
    assert report.elements == 30
    assert "end the pipeline with .prefetch" not in report.verdict.fix


def test_buffer_plan_autotune_and_fixed(stand_in, threads):
    stand_in()
    it = iter(dp.range(8).batch(2).prefetch_to_device("cuda"))
    st = it.root.knob
    assert (st.kind, st.value, st.max_value, st.autotuned) == ("buffer", 2, 16, True)
    assert it.root.stage.policy is policies.QUEUE and it.root.executor == "thread"
    assert next(it).tolist() == [0, 1]
    assert threads.names() == ["datapipe-prefetch_to_device-0"]  # one worker thread
    assert [b.tolist() for b in it] == [[2, 3], [4, 5], [6, 7]]
    fixed = iter(dp.range(8).batch(2).prefetch_to_device("cuda", buffer_size=5))
    assert (fixed.root.knob.value, fixed.root.knob.autotuned) == (5, False)
    off = dp.Options(autotune=dp.AutotuneOptions(enabled=False))
    untuned = iter(dp.range(8).batch(2).prefetch_to_device("cuda").with_options(off))
    assert (untuned.root.knob.value, untuned.root.knob.autotuned) == (2, False)
    fixed.close()
    untuned.close()
    assert threads.settle() == []
