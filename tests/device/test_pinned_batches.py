"""``_batching.read_with_alloc``: batches stacked on a thread into buffers it provides (what
``prefetch_to_device`` uses to assemble batches in pinned memory)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from datapipe import _batching
from datapipe._batching import read_with_alloc, stack
from datapipe.errors import BatchShapeError


class Buffers:
    """An ``alloc`` handing out numpy or torch buffers and remembering them."""

    def __init__(self, fail: bool = False):
        self.made: list = []
        self.fail = fail

    def __call__(self, shape: tuple, dtype):
        if self.fail:
            raise RuntimeError("no pinned memory (stand-in)")
        if isinstance(dtype, torch.dtype):
            out = torch.empty(shape, dtype=dtype)
        else:
            out = np.empty(shape, dtype=dtype)
        self.made.append(out)
        return out


def test_numpy_and_torch_leaves_go_into_the_buffers():
    buf = Buffers()
    elems = [(np.full((2, 3), i, np.uint8), np.int64(i), torch.full((4,), float(i)), f"n{i}")
             for i in range(5)]  # fmt: skip
    images, labels, floats, names = read_with_alloc(buf, lambda: stack(elems, "batch", 0))
    assert len(buf.made) == 3  # the text component is not numeric
    assert images is buf.made[0] and labels is buf.made[1] and floats is buf.made[2]
    assert images.dtype == np.uint8 and images.shape == (5, 2, 3)
    assert images[:, 0, 0].tolist() == [0, 1, 2, 3, 4] and labels.tolist() == [0, 1, 2, 3, 4]
    assert floats.dtype == torch.float32 and floats[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert list(names) == [f"n{i}" for i in range(5)]
    assert _batching._target.alloc is None  # reset after the read


def test_mixed_dtypes_and_failures_take_the_plain_stack():
    buf = Buffers()
    mixed = [np.array([1], np.int32), np.array([2], np.int64)]
    out = read_with_alloc(buf, lambda: stack(mixed, "batch", 0))
    assert out.dtype == np.int64 and out.tolist() == [[1], [2]] and buf.made == []
    failing = Buffers(fail=True)
    out = read_with_alloc(failing, lambda: stack([np.ones(2), np.zeros(2)], "batch", 0))
    assert out.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_shape_errors_still_name_the_elements():
    with pytest.raises(BatchShapeError, match="cannot stack element 8 of shape \\(3,\\)"):
        read_with_alloc(Buffers(), lambda: stack([np.ones(2), np.ones(3)], "batch", 7))


def test_the_buffers_are_this_thread_s_only_and_nesting_restores():
    outer, inner, seen = Buffers(), Buffers(), {}

    def other_thread():
        seen["other"] = stack([np.ones(2), np.ones(2)], "batch", 0)

    def read():
        read_with_alloc(inner, lambda: stack([np.ones(1), np.ones(1)], "batch", 0))
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        return stack([np.ones(1), np.ones(1)], "batch", 0)

    out = read_with_alloc(outer, read)
    assert len(inner.made) == 1 and outer.made == [out]  # the outer buffer again after
    assert not any(np.shares_memory(seen["other"], b) for b in outer.made + inner.made)
