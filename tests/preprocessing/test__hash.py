"""preprocessing._hash: FarmHash64 and SipHash values equal TensorFlow's, without TensorFlow."""

from __future__ import annotations

import torch

import preprocessing as pp
from preprocessing import _hash


def test_hashes_known_values_without_tensorflow():
    # Keras's documented examples (hashing.py docstring).
    assert pp.Hashing(num_bins=3)(["A", "B", "C", "D", "E"]).tolist() == [1, 0, 1, 1, 2]
    masked = pp.Hashing(num_bins=3, mask_value="")(["A", "B", "", "C", "D"])
    assert masked.tolist() == [1, 1, 0, 2, 2]
    assert pp.Hashing(num_bins=3, salt=[133, 137])(["A", "B", "C", "D", "E"]).tolist() == [
        1,
        2,
        1,
        0,
        2,
    ]
    # Integers hash as their decimal strings (bytes and str are the same string).
    ints = pp.Hashing(num_bins=1000)(torch.tensor([-12, 0, 2**63 - 1]))
    assert ints.tolist() == pp.Hashing(num_bins=1000)([b"-12", "0", str(2**63 - 1)]).tolist()
    b, n = _hash.int64_to_decimal(torch.tensor([-(2**63), 7, -40]))
    assert [bytes(b[i, : n[i]].numpy()).decode() for i in range(3)] == [str(-(2**63)), "7", "-40"]
    # uint64 modulo of negative int64 bit patterns.
    h = torch.tensor([-1, -(2**63), 5])
    assert _hash.unsigned_mod(h, 1000).tolist() == [(2**64 - 1) % 1000, 2**63 % 1000, 5]
