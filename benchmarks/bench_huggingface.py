"""Hugging Face ``datasets`` as a source: datapipe's ``from_huggingface`` vs ``datasets``'
own ``with_format("torch")`` + torch ``DataLoader``, on the same table (issue 25).

The table: ``--rows`` rows (default 200,000) of an int64 ``id``, an int64 ``label``
(``ClassLabel`` of 1,000) and 32 float32 ``features`` (a fixed-length ``List``), written
once with ``save_to_disk`` under ``$TMPDIR/datapipe-bench-hf`` and opened with
``load_from_disk`` (memory-mapped Arrow, as a cached hub dataset is). Every system
delivers one epoch of batches of 64 rows as torch tensors (``id (64,)``, ``label (64,)``,
``features (64, 32)``; the last batch shorter), globally shuffled unless the row says
"in order", and the consumer sums ``id`` and counts rows (checked equal across systems).

- ``datasets`` + ``DataLoader``: ``ds.with_format("torch")`` in
  ``DataLoader(batch_size=64, shuffle=True, num_workers=0 | 2)`` (``__getitems__`` fetches
  each batch's rows, the default collate stacks them);
- ``datasets`` ``iter(batch_size=64)`` with the torch format: in order (its fastest path;
  a reference, not shuffled);
- datapipe rows: ``from_huggingface(ds).global_shuffle(seed=0).batch(64).to_torch()``;
- datapipe batches: ``from_huggingface(ds, batch_size=64).to_torch()`` (zero-copy Arrow
  slices; in order) and with ``.global_shuffle(seed=0)`` (batch order shuffled).

Rounds alternate the systems (``workloads.common.measure_rounds``); ratios are medians of
per-round ratios. The load average is printed at the start and the end::

    .venv/bin/python benchmarks/bench_huggingface.py        # --rows 200000 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from workloads.common import measure_rounds, paired_ratio, table  # noqa: E402

BATCH, FEATURES = 64, 32


def make_dataset(rows: int):
    import datasets

    path = os.path.join(tempfile.gettempdir(), "datapipe-bench-hf", f"rows-{rows}")
    if not os.path.exists(os.path.join(path, "dataset_info.json")):
        rng = np.random.default_rng(0)
        features = datasets.Features(
            {
                "id": datasets.Value("int64"),
                "label": datasets.ClassLabel(num_classes=1000),
                "features": datasets.List(datasets.Value("float32"), length=FEATURES),
            }
        )
        ds = datasets.Dataset.from_dict(
            {
                "id": np.arange(rows, dtype=np.int64),
                "label": rng.integers(0, 1000, rows),
                "features": rng.standard_normal((rows, FEATURES)).astype(np.float32),
            },
            features=features,
        )
        ds.save_to_disk(path)
    return datasets.load_from_disk(path)


def consume(batches) -> tuple[int, float]:
    count, total = 0, 0
    for b in batches:
        assert b["features"].shape[1:] == (FEATURES,)
        count += len(b["id"])
        total += int(b["id"].sum())
    return count, float(total)


def systems(ds) -> list[tuple]:
    import torch

    import datapipe as dp

    torch.set_num_threads(1)
    hf_torch = ds.with_format("torch")

    def loader(workers: int):
        def run():
            g = torch.Generator().manual_seed(0)
            dl = torch.utils.data.DataLoader(
                hf_torch, batch_size=BATCH, shuffle=True, num_workers=workers, generator=g
            )
            return consume(dl)

        return run

    return [
        (
            "datapipe rows global_shuffle.batch(64)",
            lambda: consume(dp.from_huggingface(ds).global_shuffle(seed=0).batch(BATCH).to_torch()),
        ),
        (
            "datapipe batch_size=64, in order",
            lambda: consume(dp.from_huggingface(ds, batch_size=BATCH).to_torch()),
        ),
        (
            "datapipe batch_size=64, batches shuffled",
            lambda: consume(
                dp.from_huggingface(ds, batch_size=BATCH).global_shuffle(seed=0).to_torch()
            ),
        ),
        ("datasets torch + DataLoader(shuffle, 0 workers)", loader(0)),
        ("datasets torch + DataLoader(shuffle, 2 workers)", loader(2)),
        ("datasets torch iter(64), in order", lambda: consume(hf_torch.iter(batch_size=BATCH))),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    ds = make_dataset(args.rows)
    start = os.getloadavg()
    results = measure_rounds("HF", systems(ds), args.repeats, unit="rows")
    end = os.getloadavg()
    ref = results[0]
    for r in results[1:]:
        if (r.count, r.checksum) != (ref.count, ref.checksum):
            raise AssertionError(f"{r.system}: {r.count} rows, sum {r.checksum} != {ref}")
    print(f"load average (1, 5, 15 min): start {start}, end {end} (cores: {os.cpu_count()})")
    print(f"{args.rows:,} rows, batches of {BATCH}, {args.repeats} alternating rounds")
    print(table(results))
    for r in results[1:]:
        print(f"  per-round median: {ref.system} / {r.system} = {paired_ratio(ref, r):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
