"""Issue 16: the sequence ops' own semantics, errors and edge cases (tf.data's outputs are
compared in test_tf_differential_sequence_ops.py; states in the correctness sweep).

Sequence packing has no tf.data counterpart: it is compared with Grain's
``FirstFitPackIterDataset`` (through ``ref``, tests/differential.py: from tests/goldens/
in the default run, Grain itself under ``-m differential``), and with outputs worked
out by hand from Grain's documented algorithm."""

from __future__ import annotations

import numpy as np
import pytest
from differential import grain

import datapipe as dp


def token_dicts(lengths, with_id=False):
    def make(i):
        n = lengths[int(i)]
        d = {"tokens": np.arange(10 * int(i) + 1, 10 * int(i) + 1 + n, dtype=np.int32)}
        if with_id:
            d["id"] = np.int64(i)
        return d

    return dp.range(len(lengths)).map(make)


def test_first_fit_pack_by_hand():
    # Lengths 3, 2, 4, 1, 5 into 2 rows of 5: 3 -> row 0; 2 -> row 0 (full); 4 -> row 1;
    # 1 -> row 1 (full); 5 fits nowhere: rows 0, 1 are delivered, 5 starts a new set.
    ds = token_dicts([3, 2, 4, 1, 5]).first_fit_pack({"tokens": 5}, 2, shuffle_bins=False)
    rows = list(ds)
    assert [r["tokens"].tolist() for r in rows] == [
        [1, 2, 3, 11, 12],
        [21, 22, 23, 24, 31],
        [41, 42, 43, 44, 45],
    ]
    assert [r["tokens_segment_ids"].tolist() for r in rows] == [
        [1, 1, 1, 2, 2],
        [1, 1, 1, 1, 2],
        [1, 1, 1, 1, 1],
    ]
    assert [r["tokens_positions"].tolist() for r in rows] == [
        [0, 1, 2, 0, 1],
        [0, 1, 2, 3, 0],
        [0, 1, 2, 3, 4],
    ]
    assert {k: v.dtype for k, v in rows[0].items()} == {
        "tokens": np.int32,
        "tokens_segment_ids": np.int32,
        "tokens_positions": np.int32,
    }
    assert ds.element_spec == {
        "tokens": dp.TensorSpec((5,), np.int32),
        "tokens_segment_ids": dp.TensorSpec((5,), np.int32),
        "tokens_positions": dp.TensorSpec((5,), np.int32),
    }


def test_first_fit_pack_options_by_hand():
    # Alignment 2: a sequence starts at an even position; padding -1; at most 2 per row;
    # "id" (not in length_struct) becomes the list of the row's ids.
    ds = token_dicts([1, 1, 1, 3], with_id=True).first_fit_pack(
        {"tokens": 6},
        2,
        shuffle_bins=False,
        meta_features=["id"],
        pack_alignment_struct={"tokens": 2},
        padding_struct={"tokens": -1},
        max_sequences_per_bin=2,
    )
    rows = list(ds)
    assert [r["tokens"].tolist() for r in rows] == [
        [1, -1, 11, -1, -1, -1],
        [21, -1, 31, 32, 33, -1],
    ]
    assert [r["tokens_segment_ids"].tolist() for r in rows] == [
        [1, 0, 2, 0, 0, 0],
        [1, 0, 2, 2, 2, 0],
    ]
    assert [r["id"] for r in rows] == [[0, 1], [2, 3]]
    assert ds.element_spec["id"] == dp.TensorSpec((None,), object)


def test_first_fit_pack_shuffles_bins_like_grain():
    ds = token_dicts([4, 4, 4, 4, 4, 4]).first_fit_pack({"tokens": 4}, 3, seed=7)
    firsts = [int(r["tokens"][0]) for r in ds]
    # Grain's draw: default_rng(seed + rows delivered before).permuted(range(rows)).
    order = [
        *np.random.default_rng(7).permuted(range(3)),
        *(3 + np.random.default_rng(10).permuted(range(3))),
    ]
    assert firsts == [10 * int(i) + 1 for i in order]
    assert sorted(firsts) == [1, 11, 21, 31, 41, 51]


GRAIN_CASES = [
    dict(length_struct={"inputs": 10, "targets": 7}, num_packing_bins=3, shuffle_bins=False),
    dict(length_struct={"inputs": 10, "targets": 7}, num_packing_bins=4, seed=5),
    dict(
        length_struct={"inputs": 12, "targets": 8},
        num_packing_bins=2,
        shuffle_bins=False,
        meta_features=("id",),
    ),
    dict(
        length_struct={"inputs": 12, "targets": 8},
        num_packing_bins=3,
        seed=1,
        pack_alignment_struct={"inputs": 4, "targets": 2},
        padding_struct={"inputs": -1, "targets": 7},
        max_sequences_per_bin=2,
    ),
    dict(length_struct={"inputs": 9, "targets": 9}, num_packing_bins=1, shuffle_bins=False),
]


def grain_first_fit_pack(els, kw):
    """Grain's FirstFitPackIterDataset(**kw) over the elements ``els``, as a list."""
    g = grain()
    return list(
        g.experimental.FirstFitPackIterDataset(g.MapDataset.source(els).to_iter_dataset(), **kw)
    )


@pytest.mark.parametrize("kw", GRAIN_CASES, ids=range(len(GRAIN_CASES)))
def test_first_fit_pack_matches_grain(ref, kw):
    rng = np.random.default_rng(0)
    els = [
        {
            "inputs": rng.integers(1, 100, int(rng.integers(1, 9))).astype(np.int32),
            "targets": rng.integers(1, 100, int(rng.integers(1, 6))).astype(np.int64),
            "id": np.int64(i),
        }
        for i in range(40)
    ]
    ours = list(dp.range(40).map(lambda i: els[int(i)]).first_fit_pack(**kw))
    theirs = ref(grain_first_fit_pack, els, kw)
    assert len(ours) == len(theirs) > 5
    for a, b in zip(ours, theirs):
        assert set(a) == set(b)
        for k in a:
            if isinstance(b[k], list):  # a meta feature: the row's values
                assert isinstance(a[k], list) and [int(v) for v in a[k]] == [int(v) for v in b[k]]
            else:
                assert a[k].dtype == b[k].dtype and a[k].tolist() == b[k].tolist(), k


def test_first_fit_pack_errors():
    too_long = token_dicts([2, 9, 1]).first_fit_pack({"tokens": 5}, 2, shuffle_bins=False)
    it = iter(too_long)
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert str(info.value).startswith("first_fit_pack at element 1: ValueError: feature 'tokens'")
    assert "has length 9, more than its row length 5" in str(info.value)
    assert [r["tokens"].tolist() for r in it] == [[1, 2, 21, 0, 0]]  # goes on past it
    with pytest.raises(
        ValueError, match=r"first_fit_pack: elements must be dicts with the features \['tokens'\]"
    ):
        dp.range(3).first_fit_pack({"tokens": 4}, 2)
    with pytest.raises(ValueError, match="padding_struct must be a dict with the keys"):
        token_dicts([1]).first_fit_pack({"tokens": 4}, 2, padding_struct={"other": 0})
    with pytest.raises(TypeError, match="length_struct must be a non-empty dict"):
        token_dicts([1]).first_fit_pack({}, 2)
    with pytest.raises(ValueError, match=r"max_sequences_per_bin must be >= 1, got 0"):
        token_dicts([1]).first_fit_pack({"tokens": 4}, 2, max_sequences_per_bin=0)
