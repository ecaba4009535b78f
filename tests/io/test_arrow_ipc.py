"""Arrow IPC files: record batches are the units."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import datapipe as dp
from datapipe.io import (
    from_arrow_ipc,
)


def _table(n=10, offset=0):
    x = np.arange(offset, offset + n, dtype=np.int64)
    feats = (np.arange(n * 3, dtype=np.float32) + offset).reshape(n, 3)
    return pa.table(
        {
            "x": x,
            "f": pa.FixedSizeListArray.from_arrays(pa.array(feats.ravel()), 3),
            "s": [f"s{i}" for i in x],
        }
    )


def test_arrow_ipc_record_batches_are_units(tmp_path):
    p = str(tmp_path / "t.arrow")
    t = _table(7)
    with pa.ipc.new_file(p, t.schema) as w:
        for b in t.to_batches(max_chunksize=3):
            w.write_batch(b)
    ds = from_arrow_ipc(p, batch_size=5)
    assert ds.files == ((p, 0), (p, 1), (p, 2)) and ds.cardinality() == 2
    assert [b["x"].tolist() for b in ds] == [[0, 1, 2, 3, 4], [5, 6]]
    assert [int(r["x"]) for r in ds.with_files([(p, 1)]).unbatch()] == [3, 4, 5]
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"nope")
    with pytest.raises(dp.FileReadError, match="not an Arrow IPC file") as info:
        from_arrow_ipc(str(bad))
    assert info.value.path == str(bad)
