"""Issue 16: public random access, ``ds[i]`` and ``len(ds)``, where the graph keeps it
(Grain's MapDataset, torch's map-style datasets), consistent with iteration, usable by
torch's DataLoader, and a clear error naming the op that lost it otherwise."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe import _structure as nest
from datapipe.errors import RandomAccessError


def canon(x):
    if isinstance(x, dict):
        return {k: canon(v) for k, v in sorted(x.items())}
    if isinstance(x, (tuple, list)):
        return [canon(v) for v in x]
    if isinstance(x, torch.Tensor):
        return ["torch", x.tolist()]
    if isinstance(x, np.ndarray) and x.dtype == object:
        return ["obj", [canon(v) for v in x]]
    if isinstance(x, (np.ndarray, np.generic)):
        return [x.dtype.name, x.tolist()]
    return x


def double(*xs):
    return nest.map_structure(lambda v: v * 2, xs[0] if len(xs) == 1 else xs)


def jitter(*args):
    *xs, rng = args
    r = int(rng.integers(0, 1000))
    return nest.map_structure(lambda v: v + r, xs[0] if len(xs) == 1 else tuple(xs))


# Each op keeps random access; chains of them are drawn by hypothesis.
OPS = {
    "map": lambda ds: ds.map(double),
    "random_map": lambda ds: ds.random_map(jitter, seed=3),
    "global_shuffle": lambda ds: ds.global_shuffle(seed=5),
    "batch": lambda ds: ds.batch(3),
    "batch_drop": lambda ds: ds.batch(2, drop_remainder=True),
    "shard": lambda ds: ds.shard(3, 1),
    "skip": lambda ds: ds.skip(2),
    "take": lambda ds: ds.take(7),
    "zip": lambda ds: dp.zip(ds, ds.map(double)),
    "concatenate": lambda ds: ds.concatenate(ds.map(double)),
    "repeat": lambda ds: ds.repeat(2),
    "enumerate": lambda ds: ds.enumerate(),
    "ragged_batch": lambda ds: ds.ragged_batch(2),
    # The batch ops share one random access (ops.batch.BatchAccess) with their own make.
    "padded_batch": lambda ds: ds.padded_batch(2),
    "padded_batch_drop": lambda ds: ds.padded_batch(3, drop_remainder=True),
    "ragged_batch_drop": lambda ds: ds.ragged_batch(3, drop_remainder=True),
    "assert_cardinality": lambda ds: ds.assert_cardinality(len(ds)),
}


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 30),
    st.lists(st.sampled_from(sorted(OPS)), min_size=1, max_size=4),
)
def test_indexing_agrees_with_iteration(n, ops):
    def make():
        ds = dp.range(n)
        for name in ops:
            ds = OPS[name](ds)
        return ds

    ds = make()
    assert ds._random_access_breaker() is None
    iterated = []
    try:
        for x in make():  # the first iteration of a fresh pipeline
            iterated.append(canon(x))
    except Exception as e:  # noqa: BLE001 - e.g. batch of batches of unequal sizes
        if len(iterated) < len(ds):
            with pytest.raises(type(e)):
                [ds[i] for i in range(len(ds))]
            return
        # Every output element came out first: iteration failed on input elements that a
        # drop_remainder batch then drops (tf.data reads them too); indexing never reads them.
        assert [canon(ds[i]) for i in range(len(ds))] == iterated
        return
    indexed = [canon(ds[i]) for i in range(len(ds))]
    assert indexed == iterated
    assert [canon(x) for x in ds] == indexed  # this object's own first iteration
    if len(ds):
        assert canon(ds[-1]) == indexed[-1] and canon(ds[-len(ds)]) == indexed[0]
        assert [canon(x) for x in ds[::-2]] == indexed[::-2]


def test_indexing_rules():
    ds = dp.range(10).map(lambda x: x * x)
    assert int(ds[3]) == 9 and int(ds[np.int64(-1)]) == 81
    assert [int(x) for x in ds[2:5]] == [4, 9, 16]
    assert [int(x) for x in ds[8:2:-3]] == [64, 25]
    assert ds[5:5] == [] and ds[20:] == []
    assert [int(x) for x in ds.__getitems__([9, 0, 9])] == [81, 0, 81]
    with pytest.raises(IndexError, match="dataset index 10 out of range for 10 elements"):
        ds[10]
    with pytest.raises(IndexError, match="dataset index -11 out of range for 10 elements"):
        ds[-11]
    for bad in (1.0, True, "1", None):
        with pytest.raises(TypeError, match="dataset indices must be integers or slices"):
            ds[bad]


@pytest.mark.parametrize(
    "make, op",
    [
        (lambda: dp.range(5).filter(lambda x: x > 1).map(lambda x: x), "filter"),
        (lambda: dp.range(5).shuffle(3), "shuffle"),
        (lambda: dp.range(5).repeat(), "repeat"),
        (lambda: dp.range(3).interleave(lambda x: dp.range(x)), "interleave"),
        (lambda: dp.range(9).batch(3).rebatch(2), "rebatch"),
        (
            lambda: (
                dp.range(9).map(lambda n: np.arange(n)).bucket_by_sequence_length(len, [3], [2, 2])
            ),
            "bucket_by_sequence_length",
        ),
        (lambda: dp.Dataset.counter(), "counter"),
    ],
)
def test_a_pipeline_without_random_access_names_the_op(make, op):
    with pytest.raises(RandomAccessError) as info:
        make()[0]
    assert str(info.value).startswith(
        f"dataset[index]: the pipeline lost random access at op '{op}'; iterate it instead"
    )
    assert isinstance(info.value, TypeError)


def test_unseeded_randomness_is_fixed_per_dataset_object():
    ds = dp.range(50).global_shuffle().random_map(lambda x, rng: x * 1000 + rng.integers(1000))
    first = [int(ds[i]) for i in range(50)]
    assert [int(ds[i]) for i in range(50)] == first
    assert sorted(v // 1000 for v in first) == list(range(50))


def test_under_a_worker_context_indices_cover_this_workers_share():
    opts = dp.Options(distribute=dp.DistributeOptions(num_workers=3, worker_index=2))
    ds = dp.range(11).map(lambda x: x * 10).with_options(opts)
    assert len(ds) == 3  # uneven="drop": 3 each
    assert [int(ds[i]) for i in range(len(ds))] == [int(x) for x in ds] == [20, 50, 80]


def _loader(ds, **kw):
    return [canon(b) for b in torch.utils.data.DataLoader(ds, **kw)]


def test_torch_dataloader_reads_a_dataset_as_a_map_style_dataset():
    images = np.arange(40, dtype=np.float32).reshape(10, 2, 2)
    ds = dp.from_tensor_slices((images, np.arange(10) % 3)).map(lambda x, y: (x / 10, y))
    batches = list(torch.utils.data.DataLoader(ds, batch_size=4))
    assert [tuple(x.shape) for x, _ in batches] == [(4, 2, 2), (4, 2, 2), (2, 2, 2)]
    assert batches[0][0].dtype == torch.float32 and batches[0][1].dtype == torch.int64
    assert torch.equal(torch.cat([x for x, _ in batches]), torch.from_numpy(images / 10))

    # The sampler's shuffling works: the same order as torch's own map-style dataset.
    def shuffled(dataset):
        gen = torch.Generator().manual_seed(0)
        loader = torch.utils.data.DataLoader(dataset, batch_size=3, shuffle=True, generator=gen)
        return torch.cat([b[-1] for b in loader]).tolist()

    indices = dp.from_tensor_slices(np.arange(10))
    reference = torch.utils.data.TensorDataset(torch.arange(10))
    order = shuffled(dp.zip(ds, indices))
    assert order == shuffled(reference)
    assert sorted(order) == list(range(10)) and order != list(range(10))


def test_torch_dataloader_workers_read_the_process_view():
    # Loader worker processes do not split ds[i] further: the sampler hands them indices.
    opts = dp.Options(distribute=dp.DistributeOptions(num_workers=2, worker_index=1))
    ds = dp.range(12).map(lambda x: x + 100).with_options(opts)
    got = _loader(ds, batch_size=2, num_workers=2)
    assert got == [["torch", [101, 103]], ["torch", [105, 107]], ["torch", [109, 111]]]
