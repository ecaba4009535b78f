"""Issue 11: every op's iterator state is writable by ``save_state`` and resumes exactly.

A property-style sweep: each pipeline (one per op, plus sources and element kinds that end
up in states: strings batched into object arrays, windows, torch tensors, failures held
back) is stopped after several prefixes; its state goes through ``save_state`` /
``load_state`` into a fresh iterator, which must deliver exactly the rest."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image

import datapipe as dp
from datapipe.distribute.state_io import load_state, save_state

SEED = dp.Options(seed=11)


def _canon(x):
    if isinstance(x, dp.Dataset):  # a window component
        return ["window", [_canon(v) for v in x]]
    if isinstance(x, dict):
        return {k: _canon(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [_canon(v) for v in x]
    if isinstance(x, torch.Tensor):
        return ["torch", str(x.dtype), x.tolist()]
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return ["obj", [_canon(v) for v in x.tolist()]]
        return [str(x.dtype), x.tolist()]
    if isinstance(x, np.generic):
        return [str(x.dtype), x.item()]
    return x


def _fail_on_3(x):
    if int(x) % 7 == 3:
        raise ValueError("three")
    return x


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    texts = []
    for i in range(3):
        texts.append(str(d / f"t{i}.txt"))
        with open(texts[-1], "w") as f:
            f.writelines(f"file{i} line{j}\n" for j in range(5))
    pq_path = str(d / "t.parquet")
    pq.write_table(
        pa.table({"x": np.arange(20.0), "s": [f"s{i}" for i in range(20)]}),
        pq_path,
        row_group_size=6,
    )
    csv_path = str(d / "t.csv")
    with open(csv_path, "w") as f:
        f.write("a,b\n" + "".join(f"{i},w{i}\n" for i in range(12)))
    saved = str(d / "saved")
    dp.from_tensor_slices({"v": np.arange(15), "s": [f"e{i}" for i in range(15)]}).save(saved)
    img_dir = d / "imgs"
    for c in ("a", "b"):
        os.makedirs(img_dir / c)
        for i in range(3):
            arr = np.full((5, 6, 3), 40 * i + (c == "b") * 7, np.uint8)
            Image.fromarray(arr).save(img_dir / c / f"{i}.png")
    return {
        "texts": texts,
        "parquet": pq_path,
        "csv": csv_path,
        "saved": saved,
        "imgs": str(img_dir),
    }


def _strings():
    return dp.from_tensor_slices(np.array([f"w{i}" for i in range(13)], dtype=object))


PIPELINES = {
    "map": lambda f: dp.range(20).map(lambda x: x * 2),
    "map_parallel": lambda f: dp.range(30).map(lambda x: x + 1, num_parallel_calls=3),
    "random_map": lambda f: dp.range(20).random_map(lambda x, r: x + r.integers(9), seed=1),
    "filter": lambda f: dp.range(30).filter(lambda x: x % 3 == 0),
    "flat_map": lambda f: dp.range(6).flat_map(lambda x: dp.range(x)),
    "interleave": lambda f: dp.range(5).interleave(lambda x: dp.range(x * 10, x * 10 + 4), 2, 2),
    "interleave_parallel": lambda f: dp.range(6).interleave(
        lambda x: dp.range(x * 10, x * 10 + 3), cycle_length=3, num_parallel_calls=2
    ),
    "batch": lambda f: dp.range(23).batch(4),
    "batch_parallel": lambda f: dp.range(23).batch(4, num_parallel_calls=2),
    "padded_batch": lambda f: dp.range(9).map(lambda x: np.arange(x)).padded_batch(3),
    "unbatch": lambda f: dp.range(20).batch(6).filter(lambda b: True).unbatch(),
    "shuffle": lambda f: dp.range(25).shuffle(7).with_options(SEED),
    "shuffle_strings": lambda f: _strings().shuffle(5).with_options(SEED),
    "batched_strings_shuffled": lambda f: _strings().batch(3).shuffle(3).with_options(SEED),
    "global_shuffle": lambda f: dp.range(25).global_shuffle().with_options(SEED),
    "repeat": lambda f: dp.range(5).filter(lambda x: True).repeat(3),
    "take_skip": lambda f: dp.range(40).filter(lambda x: True).skip(3).take(20),
    "enumerate": lambda f: dp.range(12).filter(lambda x: True).enumerate(),
    "cache_memory": lambda f: dp.range(12).filter(lambda x: True).cache().repeat(2),
    "shard": lambda f: dp.range(30).filter(lambda x: True).shard(3, 1),
    "scan": lambda f: dp.range(15).scan(np.int64(0), lambda s, x: (s + x, s)),
    "take_while": lambda f: dp.range(30).take_while(lambda x: x < 17),
    "unique": lambda f: dp.from_tensor_slices(np.arange(40) % 13).unique(),
    "window": lambda f: dp.range(11).window(3, shift=2),
    "window_dict": lambda f: dp.zip({"a": dp.range(9), "b": _strings()}).window(2, stride=2),
    "window_flat_map": lambda f: dp.range(10).window(3, shift=2).flat_map(lambda w: w.batch(3)),
    "window_of_windows": lambda f: dp.range(12).window(4).window(2),
    "concatenate": lambda f: dp.range(5).filter(lambda x: True).concatenate(dp.range(10, 14)),
    "zip": lambda f: dp.zip(dp.range(12).filter(lambda x: True), _strings()),
    "sample": lambda f: dp.sample_from_datasets([dp.range(8), dp.range(100, 110)], seed=3),
    "choose": lambda f: dp.choose_from_datasets(
        [dp.range(8), dp.range(100, 110)],
        dp.from_tensor_slices(np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1], dtype=np.int64)),
    ),
    "prefetch": lambda f: dp.range(20).map(lambda x: x * 3).prefetch(4),
    "ignore_errors": lambda f: dp.range(30).map(_fail_on_3).ignore_errors(),
    "ignore_errors_parallel": lambda f: (
        dp.range(30).map(_fail_on_3, num_parallel_calls=3).ignore_errors()
    ),
    "ignore_errors_batch": lambda f: dp.range(30).map(_fail_on_3).batch(4).ignore_errors(),
    "failures_in_zip": lambda f: dp.zip(
        dp.range(20).filter(lambda x: True).map(_fail_on_3), dp.range(20)
    ).ignore_errors(),
    "to_torch": lambda f: dp.range(10).map(lambda x: np.full(2, x, np.float32)).to_torch(),
    "torch_shuffled": lambda f: (
        dp.range(10)
        .map(lambda x: torch.full((2,), float(x), dtype=torch.bfloat16))
        .shuffle(4)
        .with_options(SEED)
    ),
    "generator": lambda f: dp.from_generator(
        lambda: ((i, f"g{i}") for i in range(9)),
        (dp.TensorSpec((), np.int64), dp.TensorSpec((), object)),
    ),
    "text_lines": lambda f: dp.TextLineDataset(f["texts"]),
    "text_lines_interleaved": lambda f: dp.TextLineDataset(f["texts"], num_parallel_reads=2),
    "parquet": lambda f: dp.ParquetDataset(f["parquet"]),
    "parquet_batches": lambda f: dp.ParquetDataset(f["parquet"], batch_size=4),
    "csv": lambda f: dp.from_csv(f["csv"]),
    "load": lambda f: dp.Dataset.load(f["saved"]),
    "images": lambda f: dp.image_dataset_from_directory(
        f["imgs"], batch_size=2, image_size=(4, 4), seed=5, data_format="channels_last"
    ),
    # issue 16: sequence ops
    "bucket_by_sequence_length": lambda f: _lengths(31).bucket_by_sequence_length(
        len, [2, 4], [2, 3, 2]
    ),
    "bucket_strings_to_boundary": lambda f: (
        _lengths(23)
        .map(lambda s: (s, f"w{len(s)}"))
        .bucket_by_sequence_length(
            lambda s, w: len(s), [3, 7], [3, 2, 4], pad_to_bucket_boundary=True
        )
        .filter(lambda s, w: True)
    ),
    "group_by_window": lambda f: dp.range(25).group_by_window(
        lambda x: x % 3, lambda k, w: w.batch(2), window_size=5
    ),
    "rejection_resample": lambda f: dp.from_tensor_slices(np.arange(60) % 3).rejection_resample(
        lambda y: y, [0.2, 0.3, 0.5], [0.5, 0.3, 0.2], seed=4
    ),
    "rejection_resample_estimated": lambda f: dp.from_tensor_slices(
        np.arange(60) % 3
    ).rejection_resample(lambda y: y, [0.2, 0.3, 0.5], seed=4),
    "ragged_batch": lambda f: _lengths(14).ragged_batch(3),
    "ragged_shuffled": lambda f: _lengths(14).ragged_batch(2).shuffle(4).with_options(SEED),
    "rebatch": lambda f: dp.range(23).batch(5).rebatch([2, 3]),
    "rebatch_ragged": lambda f: _lengths(13).ragged_batch(4).rebatch(3),
    "counter": lambda f: dp.Dataset.counter(5, 3).take(10),
    "random": lambda f: dp.Dataset.random(seed=3).take(12),
    "assert_cardinality": lambda f: dp.range(9).filter(lambda x: True).assert_cardinality(9),
    "first_fit_pack": lambda f: (
        _lengths(30)
        .map(lambda s: {"tokens": s + 1, "id": np.int64(len(s))})
        .first_fit_pack({"tokens": 6}, num_packing_bins=3, seed=2, meta_features=["id"])
    ),
}


def _lengths(n):
    """Variable-length int64 sequences (lengths 0..6)."""
    return dp.range(n).map(lambda i: np.arange((i * 5) % 7))


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_state_is_writable_and_resumes(name, files, tmp_path):
    make = PIPELINES[name]
    full = [_canon(x) for x in make(files)]
    assert full, "the pipeline must yield something"
    for k in sorted({0, 1, 2, len(full) // 2, len(full) - 1, len(full)}):
        it = iter(make(files))
        head = [_canon(next(it)) for _ in range(k)]
        path = os.path.join(tmp_path, f"state{k}")
        save_state(it.get_state(), path)
        it.close()
        fresh = iter(make(files))
        fresh.set_state(load_state(path))
        assert head + [_canon(x) for x in fresh] == full, f"{name}: resumed after {k}"
