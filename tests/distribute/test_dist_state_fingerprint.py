"""Issue 22: a state records the pipeline's structure and its sources' sizes
(``datapipe._fingerprint``); ``set_state`` refuses, naming what differs, a state (or a
list of all workers' states) taken on another pipeline or over sources of other sizes,
which it used to restore into positions that meant other elements. Old states without a
fingerprint still load."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from _dist_helpers import worker_options

import datapipe as dp
from datapipe.distribute import load_state, save_state
from datapipe.io.tfrecord import masked_crc32c


def states_of(ds: dp.Dataset, steps: list[int], seen: list | None = None) -> list[dict]:
    """The states of ``len(steps)`` workers of ``ds``, worker i after ``steps[i]`` elements
    (their values appended to ``seen``)."""
    out = []
    for i, k in enumerate(steps):
        it = iter(ds.with_options(worker_options(len(steps), i)))
        for _ in range(k):
            x = next(it)
            if seen is not None:
                seen.extend(int(v) for v in np.asarray(x).reshape(-1))
        out.append(it.state_dict())
        it.close()
    return out


def resume(ds: dp.Dataset, states, count: int = 1, index: int = 0) -> list:
    """What worker ``index`` of ``count`` delivers after ``set_state(states)`` (flattened;
    uneven="allow": no element dropped to even the workers out)."""
    opts = worker_options(count, index, uneven="allow")
    it = iter(ds.with_options(opts) if count > 1 else ds)
    it.set_state(states)
    return [int(v) for x in it for v in np.asarray(x).reshape(-1)]


def test_the_fingerprint_is_the_structure_and_the_source_sizes():
    it = iter(dp.zip(dp.range(7), dp.from_tensor_slices(np.arange(5))).map(lambda a, b: a).batch(2))
    next(it)
    assert it.state_dict()["fingerprint"] == {
        "ops": "batch(map(zip(range, from_tensor_slices)))",
        "sizes": [["range", "elements", 7], ["from_tensor_slices", "elements", 5]],
    }


def test_a_state_of_another_pipeline_is_refused_naming_both_structures():
    it = iter(dp.range(20).map(lambda x: x + 1).batch(4))
    next(it)
    state = it.state_dict()
    # batch(range) would restore the batch position into the wrong op chain silently
    with pytest.raises(ValueError, match=r"its ops are batch\(map\(range\)\), this one's are "):
        iter(dp.range(20).batch(4)).set_state(state)


def test_a_state_over_a_source_of_another_size_is_refused():
    it = iter(dp.from_tensor_slices(np.arange(100)).shuffle(10, seed=1))
    for _ in range(30):
        next(it)
    state = it.state_dict()
    bigger = dp.from_tensor_slices(np.arange(120)).shuffle(10, seed=1)
    with pytest.raises(
        ValueError,
        match=r"source 0 \(from_tensor_slices\) held 100 elements when it was saved and "
        r"holds 120 elements now",
    ):
        iter(bigger).set_state(state)
    # the same data still resumes exactly
    same = dp.from_tensor_slices(np.arange(100)).shuffle(10, seed=1)
    assert resume(same, state) == [int(x) for x in it]


def test_a_list_mixing_two_pipelines_is_refused():
    a = states_of(dp.range(40).batch(2), [3, 3])
    b = states_of(dp.range(40).map(lambda x: x).batch(2), [3, 3])
    # old: accepted (only epochs were compared) and delivered the wrong elements
    with pytest.raises(ValueError, match=r"states\[1\] was saved by another pipeline.*the list "
                       r"mixes states of different pipelines"):  # fmt: skip
        iter(dp.range(40).batch(2).with_options(worker_options(3, 0))).set_state([a[0], b[1]])


def test_an_elastic_resume_over_a_source_of_another_size_is_refused():
    seen: list = []
    states = states_of(dp.range(40).batch(2), [3, 3], seen)
    grown = dp.range(50).batch(2)
    with pytest.raises(ValueError, match=r"states\[0\] was saved over sources of other sizes: "
                       r"source 0 \(range\) held 40 elements"):  # fmt: skip
        resume(grown, states, count=3)
    # the same pipeline over the same data resumes on 3 workers, every element once
    got = sorted(sum((resume(dp.range(40).batch(2), states, 3, i) for i in range(3)), []))
    assert len(seen) == 12 and got == sorted(set(range(40)) - set(seen))


def test_file_sources_count_their_files(tmp_path):
    def frame(data: bytes) -> bytes:
        n = struct.pack("<Q", len(data))
        crc = struct.pack("<I", masked_crc32c(n))
        return n + crc + data + struct.pack("<I", masked_crc32c(data))

    paths = []
    for k in range(4):
        p = tmp_path / f"f{k}.tfrecord"
        p.write_bytes(b"".join(frame(b"%d-%d" % (k, i)) for i in range(3)))
        paths.append(str(p))
    it = iter(dp.TFRecordDataset(paths[:3]))
    next(it)
    state = it.state_dict()
    assert state["fingerprint"]["sizes"] == [["tfrecord", "files", 3]]
    with pytest.raises(ValueError, match=r"source 0 \(tfrecord\) held 3 files .* holds 4 files"):
        iter(dp.TFRecordDataset(paths)).set_state(state)


def test_old_states_without_a_fingerprint_and_other_options_still_load(tmp_path):
    ds = dp.range(30).shuffle(8, seed=3).batch(3)
    it = iter(ds)
    for _ in range(4):
        next(it)
    state = it.state_dict()
    ref = [b.tolist() for b in it]
    path = os.path.join(tmp_path, "it.state")
    save_state(state, path)
    loaded = load_state(path)
    assert loaded["fingerprint"] == state["fingerprint"]  # survives save_state/load_state
    del loaded["fingerprint"]  # as saved by datapipe 0.2
    again = iter(ds)
    again.set_state(loaded)
    assert [b.tolist() for b in again] == ref
    # options say how a pipeline runs, not what it delivers: not part of the fingerprint
    quiet = iter(ds.with_options(dp.Options(deterministic=True)))
    quiet.set_state(state)
    assert [b.tolist() for b in quiet] == ref
