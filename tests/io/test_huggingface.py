"""``from_huggingface``: map-style ``datasets.Dataset`` (random access, indices mappings,
zero-copy batches, global shuffle, auto-sharding, exact resume) and
``datasets.IterableDataset`` (a stream whose state resumes exactly). The datasets are
built in memory (``Dataset.from_dict``): nothing is downloaded."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
from harness import assert_resumes, py, values

import datapipe as dp
from datapipe.errors import NullValueError

datasets = pytest.importorskip(
    "datasets",
    reason="Hugging Face datasets is not installed (pip install datapipe-torch[huggingface])",
)

N = 23


def table() -> dict:
    return {
        "x": np.arange(N, dtype=np.int64),
        "f": (np.arange(N, dtype=np.float32) / 4),
        "text": [f"row {i} é" for i in range(N)],
        "tokens": [list(range(i % 4)) for i in range(N)],
    }


@pytest.fixture
def hf():
    return datasets.Dataset.from_dict(table())


def rows_of(hf_ds) -> list:
    """What datasets itself returns, row by row, as plain values."""
    return [{k: hf_ds[i][k] for k in hf_ds.column_names} for i in range(len(hf_ds))]


def test_rows_are_the_datasets_rows_with_numpy_types(hf):
    ds = dp.from_huggingface(hf)
    assert ds.cardinality() == N
    assert ds.element_spec == {
        "x": dp.TensorSpec((), np.int64),
        "f": dp.TensorSpec((), np.float32),
        "text": dp.TensorSpec((), np.dtype(object)),
        "tokens": dp.TensorSpec((None,), np.int64),
    }
    first = next(iter(ds))
    assert type(first["x"]) is np.int64 and type(first["f"]) is np.float32
    assert type(first["text"]) is str and first["tokens"].dtype == np.int64
    assert values(ds) == rows_of(hf)


@pytest.mark.parametrize(
    "view",
    [
        lambda d: d.shuffle(seed=3),
        lambda d: d.select([5, 2, 2, 19, 0]),
        lambda d: d.filter(lambda e: e["x"] % 3 == 1),
        lambda d: d.shuffle(seed=1).select(range(4, 15)),
    ],
    ids=["shuffle", "select", "filter", "shuffle-select"],
)
def test_an_indices_mapping_is_read_through_like_datasets_does(hf, view):
    sub = view(hf)
    assert sub._indices is not None  # the case under test: a mapping, not a copy
    ds = dp.from_huggingface(sub)
    assert ds.cardinality() == len(sub)
    assert values(ds) == rows_of(sub)
    assert [b["x"].tolist() for b in dp.from_huggingface(sub, batch_size=4)] == [
        sub["x"][i : i + 4] for i in range(0, len(sub), 4)
    ]


def test_a_dataset_of_many_chunks_reads_like_datasets(hf):
    parts = [hf.select(range(a, b)).flatten_indices() for a, b in ((0, 7), (7, 8), (8, N))]
    many = datasets.concatenate_datasets(parts).shuffle(seed=5)
    assert many.data.table.column("x").num_chunks == 3
    ds = dp.from_huggingface(many)
    assert values(ds) == rows_of(many)
    assert [py(e) for e in ds.global_shuffle(seed=1)] == [
        rows_of(many)[i] for i in dp.range(N).global_shuffle(seed=1)
    ]


def test_random_access_and_columns(hf):
    ds = dp.from_huggingface(hf, columns=["text", "x"])
    assert list(ds.element_spec) == ["text", "x"]
    assert py(ds[7]) == {"text": "row 7 é", "x": 7}
    assert py(ds[-1]) == {"text": f"row {N - 1} é", "x": N - 1}
    assert [py(e)["x"] for e in ds[3:9:2]] == [3, 5, 7]
    with pytest.raises(IndexError):
        ds[N]
    with pytest.raises(ValueError, match=r"from_huggingface: columns \['nope'\] are not in"):
        dp.from_huggingface(hf, columns=["x", "nope"])


def test_batches_are_zero_copy_views_of_the_arrow_buffers(hf):
    ds = dp.from_huggingface(hf, batch_size=8)
    assert ds.cardinality() == 3
    assert ds.element_spec["x"] == dp.TensorSpec((None,), np.int64)
    batches = list(ds)
    assert [b["x"].tolist() for b in batches] == [
        list(range(0, 8)),
        list(range(8, 16)),
        list(range(16, N)),
    ]
    assert batches[2]["text"].tolist() == [f"row {i} é" for i in range(16, N)]
    assert batches[1]["tokens"].dtype == object and batches[1]["tokens"][1].tolist() == [0]
    # The int64 column of batch 1 starts at row 8 of the table's own buffer: a view.
    arrow = hf.data.table.column("x").chunk(0)
    address = arrow.buffers()[1].address + 8 * arrow.type.bit_width // 8
    x = batches[1]["x"]
    assert x.__array_interface__["data"][0] == address
    assert not x.flags.writeable
    dropped = dp.from_huggingface(hf, batch_size=8, drop_remainder=True)
    assert dropped.cardinality() == 2 and dropped.element_spec["x"].shape == (8,)
    assert [b["x"][0] for b in dropped] == [0, 8]


def test_global_shuffle_is_a_seeded_permutation_of_the_rows(hf):
    ds = dp.from_huggingface(hf).global_shuffle(seed=4)
    first = [int(e["x"]) for e in ds]
    assert sorted(first) == list(range(N)) and first != list(range(N))
    assert [int(e["x"]) for e in dp.from_huggingface(hf).global_shuffle(seed=4)] == first
    # The order is global_shuffle's own permutation, the same as over a range.
    assert first == [int(i) for i in dp.range(N).global_shuffle(seed=4)]


def test_auto_sharding_on_two_ranks_splits_the_rows_exactly(hf):
    shares = []
    for rank in range(2):
        options = dp.Options(
            seed=0,
            distribute=dp.DistributeOptions(num_workers=2, worker_index=rank, uneven="allow"),
        )
        source = dp.from_huggingface(hf, columns=["x", "f"])
        ds = source.global_shuffle().batch(4).with_options(options)
        shares.append([int(x) for b in ds for x in b["x"]])
    assert not set(shares[0]) & set(shares[1])
    assert sorted(shares[0] + shares[1]) == list(range(N))
    assert abs(len(shares[0]) - len(shares[1])) <= 1


def test_resume_is_exact_and_the_state_is_a_few_integers(hf):
    ds = dp.from_huggingface(hf, columns=["x", "text"]).global_shuffle(seed=2).batch(5)
    assert_resumes(ds)
    shuffled = hf.shuffle(seed=9)
    assert_resumes(dp.from_huggingface(shuffled, ["x", "f"], batch_size=6).global_shuffle(seed=1))
    it = iter(dp.from_huggingface(hf).global_shuffle(seed=2))
    next(it)
    assert len(pickle.dumps(it.get_state())) < 2000  # no rows, no permutation


def test_image_columns_are_read_as_their_encoded_bytes():
    from PIL import Image

    def png(value):
        out = io.BytesIO()
        Image.new("RGB", (3, 2), (value, 0, 0)).save(out, format="PNG")
        return out.getvalue()

    hf = datasets.Dataset.from_dict(
        {"image": [{"bytes": png(v), "path": None} for v in (10, 200)], "label": [0, 1]},
        features=datasets.Features(
            {"image": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b"])}
        ),
    )
    ds = dp.from_huggingface(hf)
    assert ds.element_spec["image"] == dp.TensorSpec((), np.dtype(object))
    decoded = ds.map(lambda e: (dp.decode_image(e["image"]), e["label"]))
    got = [(img.shape, int(img[0, 0, 0]), int(label)) for img, label in decoded]
    assert got == [((2, 3, 3), 10, 0), ((2, 3, 3), 200, 1)]


def test_nulls_raise_naming_the_column_unless_read_as_nan():
    hf = datasets.Dataset.from_dict({"v": [1.0, None, 3.0], "k": [1, 2, 3]})
    with pytest.raises(NullValueError, match=r"column 'v' holds 1 null value\(s\)"):
        list(dp.from_huggingface(hf))
    got = [float(e["v"]) for e in dp.from_huggingface(hf, nulls_as_nan=True)]
    assert got[0] == 1.0 and np.isnan(got[1]) and got[2] == 3.0


def test_other_inputs_are_refused_by_name():
    with pytest.raises(TypeError, match=r"from_huggingface: expected a datasets.Dataset"):
        dp.from_huggingface({"x": [1, 2]})
    with pytest.raises(ValueError, match=r"batch_size"):
        dp.from_huggingface(datasets.Dataset.from_dict({"x": [1]}), batch_size=0)


# ---- IterableDataset ------------------------------------------------------------------------
def stream(num_shards: int = 3):
    return datasets.Dataset.from_dict(table()).to_iterable_dataset(num_shards=num_shards)


def test_a_stream_gives_the_same_rows_and_batches(hf):
    ds = dp.from_huggingface(stream(), read_rows=4)
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert ds.element_spec == dp.from_huggingface(hf).element_spec
    assert values(ds) == rows_of(hf)
    batched = dp.from_huggingface(stream(), batch_size=5, drop_remainder=True)
    assert batched.element_spec["x"] == dp.TensorSpec((5,), np.int64)
    assert [b["x"].tolist() for b in batched] == [list(range(i, i + 5)) for i in (0, 5, 10, 15)]
    picked = dp.from_huggingface(stream(), columns=["text"])
    assert [e["text"] for e in picked][:2] == ["row 0 é", "row 1 é"]


@pytest.mark.parametrize("read_rows", [1, 4, 7, 100])
def test_a_stream_resumes_exactly_at_every_position(read_rows):
    assert_resumes(dp.from_huggingface(stream(), read_rows=read_rows))


def test_a_batched_stream_resumes_exactly():
    assert_resumes(dp.from_huggingface(stream(), columns=["x", "text"], batch_size=4))
    # ... and through datapipe's own ops on top of it.
    assert_resumes(dp.from_huggingface(stream(2), read_rows=5).map(lambda e: e["x"]).batch(3))


def test_each_iteration_sets_the_epoch_of_a_shuffled_stream_on_a_copy():
    shuffled = stream().shuffle(seed=0, buffer_size=8)
    ds = dp.from_huggingface(shuffled)
    it1, it2 = iter(ds), iter(ds)  # epochs 0 and 1
    first = [int(e["x"]) for e in it1]
    second = [int(e["x"]) for e in it2]
    assert sorted(first) == sorted(second) == list(range(N))
    assert first != second
    assert shuffled.epoch == 0  # the caller's dataset is untouched


def test_a_stream_is_sharded_by_element_on_two_ranks():
    shares = []
    for rank in range(2):
        options = dp.Options(
            distribute=dp.DistributeOptions(num_workers=2, worker_index=rank, uneven="allow")
        )
        ds = dp.from_huggingface(stream(), read_rows=5).with_options(options)
        shares.append([int(e["x"]) for e in ds])
    assert shares == [list(range(0, N, 2)), list(range(1, N, 2))]


def test_a_stream_refuses_bad_arguments():
    with pytest.raises(ValueError, match=r"from_huggingface: read_rows must be at most 2\*\*24"):
        dp.from_huggingface(stream(), read_rows=2**24 + 1)
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the dataset"):
        dp.from_huggingface(stream(), columns=["nope"])


def nested_features():
    return datasets.Features({"x": datasets.Sequence(datasets.Sequence(datasets.Value("int64")))})


def test_a_sequence_of_sequences_yields_arrays_of_its_spec():
    """Issue 35 item 8: a ``Sequence(Sequence(int64))`` column is spec'd ``(None, None)``
    int64; main yielded object arrays of arrays for its rows."""
    rows = [[[1, 2], [3, 4]], [[5, 6, 7]], [], [[8]]]
    hf = datasets.Dataset.from_dict({"x": rows}, features=nested_features())
    for ds in (dp.from_huggingface(hf), dp.from_huggingface(hf.to_iterable_dataset())):
        assert ds.element_spec == {"x": dp.TensorSpec((None, None), np.int64)}
        got = [e["x"] for e in ds]
        assert [(g.dtype, g.shape) for g in got] == [
            (np.dtype(np.int64), (2, 2)), (np.dtype(np.int64), (1, 3)),
            (np.dtype(np.int64), (0, 0)), (np.dtype(np.int64), (1, 1)),
        ]  # fmt: skip
        assert [g.tolist() for g in got] == rows
        assert all(ds.element_spec["x"].is_compatible_with(g) for g in got)


def test_ragged_inner_sequences_are_refused_naming_the_column_and_row():
    rows = [[[1, 2], [3, 4]], [[5]], [[1], [2, 3]], [[9, 9]]]
    hf = datasets.Dataset.from_dict({"x": rows}, features=nested_features())
    with pytest.raises(dp.SchemaMismatchError) as info:
        list(dp.from_huggingface(hf))
    assert str(info.value).startswith(
        "<Hugging Face dataset>: row 2: column 'x': a row's inner lists differ in length "
        "([1, 2]), so it is no 2-D int64 array, the column's spec (None, None); pad the "
        "inner lists to one length"
    )
    assert [e["x"].tolist() for e in dp.from_huggingface(hf).take(2)] == rows[:2]
