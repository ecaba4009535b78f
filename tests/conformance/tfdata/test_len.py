"""tf.data's ``__len__`` kernel tests (``kernel_tests/len_test.py``)."""

from __future__ import annotations

import pytest

import datapipe as dp


def test_known():
    """kernel_tests/len_test.py::LenTest.testKnown."""
    assert len(dp.range(10)) == 10


def test_infinite():
    """kernel_tests/len_test.py::LenTest.testInfinite."""
    with pytest.raises(TypeError, match="infinite"):
        len(dp.range(10).repeat())


def test_unknown():
    """kernel_tests/len_test.py::LenTest.testUnknown."""
    with pytest.raises(TypeError, match="unknown"):
        len(dp.range(10).filter(lambda x: True))
