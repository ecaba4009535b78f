"""tf.data's ``prefetch_to_device`` kernel tests
(``experimental/kernel_tests/prefetch_to_device_test.py``). tf.data's ``"/cpu:1"`` is
torch's ``"cpu"`` here, and elements arrive as torch tensors on the device (D-TF-23)."""

from __future__ import annotations

import pytest
import torch

import datapipe as dp

CUDA = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device (as upstream: No GPU available)"
)


def _check_range(device_dataset, device, restart_after=None):
    assert device_dataset.element_spec == dp.TensorSpec((), torch.int64)  # D-TF-23
    it = iter(device_dataset)
    if restart_after is not None:
        assert [int(next(it)) for _ in range(restart_after)] == list(range(restart_after))
        it = iter(device_dataset)  # re-initialised: from the start
    out = list(it)
    assert [int(x) for x in out] == list(range(10))
    assert all(x.dtype == torch.int64 and x.shape == () and x.device.type == device for x in out)


@pytest.mark.parametrize(
    "device", ["cpu", "cpu:0"], ids=["testPrefetchToDevice", "testPrefetchToSameDevice"]
)
def test_prefetch_to_device(device):
    """experimental/kernel_tests/prefetch_to_device_test.py::PrefetchToDeviceTest.testPrefetchToDevice,
    testPrefetchToSameDevice (one case each)."""
    _check_range(dp.range(10).prefetch_to_device(device), "cpu")


def test_prefetch_dict_to_device():
    """experimental/kernel_tests/prefetch_to_device_test.py::PrefetchToDeviceTest.testPrefetchDictToDevice."""
    ds = dp.range(10).map(lambda x: {"a": x}).prefetch_to_device("cpu")
    assert ds.element_spec == {"a": dp.TensorSpec((), torch.int64)}
    out = list(ds)
    assert [{"a": int(e["a"])} for e in out] == [{"a": i} for i in range(10)]
    assert all(e["a"].dtype == torch.int64 for e in out)


def test_prefetch_to_device_with_re_init():
    """experimental/kernel_tests/prefetch_to_device_test.py::PrefetchToDeviceTest.testPrefetchToDeviceWithReInit."""
    _check_range(dp.range(10).prefetch_to_device("cpu"), "cpu", restart_after=5)


@CUDA
def test_prefetch_to_device_gpu():
    """experimental/kernel_tests/prefetch_to_device_test.py::PrefetchToDeviceTest.testPrefetchToDeviceGpu."""
    _check_range(dp.range(10).prefetch_to_device("cuda:0"), "cuda")


@CUDA
def test_prefetch_to_device_gpu_with_re_init():
    """experimental/kernel_tests/prefetch_to_device_test.py::PrefetchToDeviceTest.testPrefetchToDeviceGpuWithReInit."""
    _check_range(dp.range(10).prefetch_to_device("cuda:0"), "cuda", restart_after=5)
