"""``datapipe._structure``: the size of an element (``element_nbytes``), the one rule that
statistics, the parallel stages' RAM budget and the service's reply bound share."""

from __future__ import annotations

import numpy as np
import torch

from datapipe._structure import NBYTES_SAMPLE, element_nbytes
from datapipe.parallel import autotune
from datapipe.service.worker import Stream


def test_leaves_count_their_bytes():
    assert element_nbytes(np.zeros((2, 3), np.float32)) == 24
    assert element_nbytes(np.int16(3)) == 2
    assert element_nbytes(torch.zeros(4, dtype=torch.float64)) == 32
    assert element_nbytes(torch.zeros((2, 5), dtype=torch.uint8)) == 10
    assert element_nbytes(b"xyz") == 3
    assert element_nbytes(bytearray(7)) == 7
    assert element_nbytes(memoryview(np.zeros(3, np.int32))) == 12
    assert element_nbytes("héllo") == 5  # characters
    assert [element_nbytes(v) for v in (1, 2.5, 1j, True)] == [8, 8, 8, 8]
    assert element_nbytes(None) == 0
    assert element_nbytes(object()) == 8  # the reference only


def test_tensor_like_without_nbytes_and_a_non_int_nbytes():
    class OldTensor:
        def element_size(self):
            return 4

        def nelement(self):
            return 5

    class Odd:
        def nbytes(self):  # a method, not a size
            return 10**9

    assert element_nbytes(OldTensor()) == 20
    assert element_nbytes(Odd()) == 8


def test_nests_sum_their_leaves():
    assert element_nbytes({"a": np.zeros(3, np.uint8), "b": (b"xy", "abc")}) == 8
    assert element_nbytes((1, 2.0, [np.zeros(2, np.int64)])) == 32
    assert element_nbytes({"image": np.zeros((2, 3), np.float32), "label": 1, "id": b"ab"}) == 34
    assert element_nbytes(()) == element_nbytes({}) == element_nbytes([]) == 0


def test_long_containers_are_estimated_from_a_sample():
    same = [np.zeros(4, np.uint8)] * 1000
    assert element_nbytes(same) == 4000
    assert element_nbytes({i: b"abc" for i in range(300)}) == 900
    # The rest is taken to be the sampled items' average size (the documented estimate).
    mixed = [b"x"] * NBYTES_SAMPLE + [b"xyz"] * NBYTES_SAMPLE
    assert element_nbytes(mixed) == 2 * NBYTES_SAMPLE


def test_the_ram_budget_counts_by_the_same_rule():
    x = {"a": None, "b": (np.zeros(5, np.float32), "ab")}
    assert element_nbytes(x) == 22
    assert autotune.chunk_nbytes([x, x, x]) == 66


class _OneAtATime:
    """A chain root that yields one 1000-byte element per call, 100 in all."""

    def __init__(self):
        self.left = 100

    def next_chunk(self, n):
        if not self.left:
            return []
        self.left -= 1
        return [b"x" * 1000]

    def get_state(self):
        return {"left": self.left}


def test_a_service_reply_ends_at_max_bytes_for_bytes_elements():
    # Before one rule, the service counted bytes/str elements as 0 bytes: a reply of them
    # ignored max_bytes and held the whole split.
    reply = Stream(None, _OneAtATime()).read(10**6, 60.0, 5000, min_elements=1)
    assert not reply.done and reply.state == {"left": 95}
