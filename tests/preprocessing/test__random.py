"""preprocessing._random: the counter-based draws: host (numpy) and tensor draws are
bit-identical, the stream is kept, large draws take the tensor path, draws are uniform
and independent across counters.
"""

import numpy as np
import pytest
import torch

from preprocessing import _random
from preprocessing._random import hashed_uniform

CPU = torch.device("cpu")


# ---------------------------------------------------------------------- draws
@pytest.mark.parametrize("seed", [0, 1, -1, 123, 2**63 - 1, -(2**63), 2**64 - 1])
@pytest.mark.parametrize("counter", [0, 1, 7, 2**31, 2**62 + 5])
def test_host_draws_are_bit_identical_to_tensor_draws(seed, counter):
    for shape in [(), (5,), (2, 64), (0,), (3, 0), (1000,)]:
        host = _random._hashed_uniform_host(seed, counter, shape)
        tensor = _random._hashed_uniform_torch(seed, counter, shape, CPU)
        assert host.dtype == torch.float32 and host.shape == torch.Size(shape)
        assert torch.equal(host, tensor), (seed, counter, shape)


def test_hashed_uniform_keeps_its_stream():
    # The values of the int64 tensor version before the host path existed.
    expected = {
        (0, 0): [14819496, 7239838, 443485, 16288696],
        (123, 5): [2155248, 6963786, 3051640, 10051082],
        (-1, 2**40): [13055586, 735525, 14538337, 5528060],
        (2**64 - 1, 3): [4325804, 7497415, 3284136, 16086625],
    }
    for (seed, counter), bits in expected.items():
        want = torch.tensor(bits, dtype=torch.float32) * 2.0**-24
        for c in (counter, torch.tensor(counter)):
            assert torch.equal(_random.hashed_uniform(seed, c, (4,), CPU), want)
        assert torch.equal(_random._hashed_uniform_torch(seed, counter, (4,), CPU), want)


def test_large_draws_take_the_tensor_path(monkeypatch):
    n = _random.HOST_DRAW_MAX + 1
    # Value k depends on (seed, counter, k) only: a small (host) draw is a large one's start.
    start = _random.hashed_uniform(5, 2, (10,), CPU)
    calls = []
    monkeypatch.setattr(_random, "_hashed_uniform_host", lambda *a: calls.append(a))
    u = _random.hashed_uniform(5, 2, (n,), CPU)
    assert calls == [] and u.shape == (n,)
    assert torch.equal(u, _random._hashed_uniform_torch(5, 2, (n,), CPU))
    assert torch.equal(u[:10], start)


# --------------------------------------------------------------- seeded draws
def test_hashed_draws_are_uniform_and_independent_across_counters():
    u = hashed_uniform(123, 0, (200_000,), torch.device("cpu"))
    assert u.dtype == torch.float32 and 0.0 <= float(u.min()) and float(u.max()) < 1.0
    counts = torch.histc(u, bins=20, min=0.0, max=1.0)
    assert (counts - 10_000).abs().max() < 500  # ~5 standard deviations
    v = hashed_uniform(123, 1, (200_000,), torch.device("cpu"))
    corr = np.corrcoef(u.numpy(), v.numpy())[0, 1]
    assert abs(corr) < 0.02 and not torch.equal(u, v)
    assert torch.equal(u, hashed_uniform(123, torch.tensor(0), (200_000,), torch.device("cpu")))
    assert not torch.equal(u, hashed_uniform(124, 0, (200_000,), torch.device("cpu")))
