"""``prefetch_to_device``: elements copied to a device ahead of the consumer
(``tf.data.experimental.prefetch_to_device``'s name and place: the last op of a pipeline)."""

from __future__ import annotations

from typing import Any

from datapipe import _structure as nest
from datapipe._validate import check_int
from datapipe.dataset_ops import AUTOTUNE, Dataset, RandomAccessUnaryDataset
from datapipe.ops.map import MapAccess
from datapipe.ops.to_torch import ToTorchDataset
from datapipe.parallel import policies
from datapipe.parallel.request import StageRequest

# prefetch_to_device(AUTOTUNE): elements in flight to the device at first (double
# buffering), and at most (each one holds a batch of device memory).
DEVICE_AUTOTUNE = (2, 16)


class PrefetchToDeviceDataset(RandomAccessUnaryDataset):
    """Elements with every numeric component a ``torch.Tensor`` on ``device``, copied ahead
    of the consumer by a background thread.

    On an accelerator (CUDA, ROCm, XPU, ... through ``torch.accelerator``), each batch is
    put in pinned host memory (a ``batch`` right below is stacked there directly), copied
    with ``non_blocking=True`` on a side stream, and handed over with the consumer's current
    stream waiting for that copy (``Stream.wait_event``) and the tensors recorded on it
    (``Tensor.record_stream``), so copies overlap the training step
    (``datapipe/parallel/transfer.py`` has the steps). ``device="cpu"`` is a plain
    ``prefetch`` whose numpy components become tensors (``to_torch``). Components that are
    not numeric (text, objects) are passed unchanged; a ragged component (``ragged_batch``)
    becomes a nested tensor, copied when it is handed over (on the loop's stream).

    Make it the last op: ops after it would run on device tensors (a worker thread's current
    stream is not the training loop's), and their checkpoints could hold device memory.

    Args:
        device: a ``torch.device`` or its string (``"cuda"``, ``"cuda:1"``, ``"cpu"``); an
            accelerator without an index is the current device at ``iter()``.
        buffer_size: elements in flight (>= 1), or ``AUTOTUNE`` (from 2, doubled up to 16
            while the consumer finds none ready; bytes count against
            ``Options.autotune.ram_budget``).

    Checkpoints hold the host-side position: elements in flight are read and copied again
    after ``set_state``. ``close()`` (``break`` + garbage collection) stops the thread and
    frees the buffered device and pinned memory.

    Raises:
        ValueError: ``device`` is not a device string, or ``buffer_size`` < 1.
        TypeError: ``buffer_size`` is not an integer.
        DeviceUnavailableError (at ``iter()``, before any element is read): the machine has
            no such device (e.g. ``"cuda"`` with a CPU build of torch).

    Example:
        >>> import numpy as np
        >>> import datapipe as dp
        >>> ds = dp.from_tensor_slices(np.arange(6, dtype=np.float32)).batch(2)
        >>> [b.tolist() for b in ds.prefetch_to_device("cpu")]
        [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    """

    _name = "prefetch_to_device"
    elementwise = True
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset, device: Any, buffer_size: int = AUTOTUNE):
        super().__init__(input_ds)
        import torch

        try:
            self._device = torch.device(device)
        except (RuntimeError, TypeError) as e:
            raise ValueError(f"prefetch_to_device: {device!r} is not a device: {e}") from e
        self._buffer_size = check_int(
            self._name, "buffer_size", buffer_size, 1, (AUTOTUNE,), ">= 1 or AUTOTUNE"
        )
        # On an accelerator each element is handed over when its copy is ready (a queue);
        # device="cpu" is a plain prefetch (a buffer that AUTOTUNE may also run inline).
        policy = policies.BUFFER if self._device.type == "cpu" else policies.QUEUE
        self._stage_request = StageRequest(
            policy, buffer_size=self._buffer_size, autotune_buffer=DEVICE_AUTOTUNE
        )

    @property
    def device(self) -> Any:
        """The target ``torch.device`` as given."""
        return self._device

    @property
    def element_spec(self) -> Any:
        return ToTorchDataset(self._inputs[0]).element_spec

    def _make_random_access(self, ctx):
        from datapipe.parallel.transfer import for_device, host_tensor

        transfer = for_device(self._device)
        device = getattr(transfer, "device", self._device)

        def move(element: Any) -> Any:  # random access reads one element: a blocking copy
            def leaf(x: Any) -> Any:
                t = host_tensor(x)
                return x if t is None else t.to(device)

            return nest.map_structure(leaf, element)

        return MapAccess(self._inputs[0]._make_random_access(ctx), move, self._name, False)

    def _make_iterator(self, ctx, epoch):
        from datapipe.parallel.device_prefetch import DevicePrefetchIterator
        from datapipe.parallel.plan import plan_stage
        from datapipe.parallel.transfer import for_device

        transfer = for_device(self._device)  # raises here, before the input starts
        inner = ctx.make(self._inputs[0], epoch)
        plan = plan_stage(self.stage_request, ctx, self._inputs[0])
        assert plan is not None  # buffer_size >= 1: always a stage
        return DevicePrefetchIterator(inner, transfer, plan, ctx)
