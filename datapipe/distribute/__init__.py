"""Distribution: the worker context, auto-sharding, torch integration, iterator state files.

Importing this package (``import datapipe`` does) installs the auto-shard rewrite, so every
``iter()`` gives each worker — each ``torch.distributed`` rank and each ``DataLoader``
worker — its own share of the data (see ``datapipe.distribute.auto_shard``), and the layer
over the core iterator's checkpoint that records shard points and restores elastically
(``datapipe.distribute.resume_layer``).
"""

from datapipe import _checkpoint
from datapipe.distribute.auto_shard import AutoShardError, auto_shard, install, replace_inputs
from datapipe.distribute.context import (
    WorkerContext,
    WorkerContextError,
    resolve_worker_context,
)
from datapipe.distribute.resume_layer import ShardedStateLayer
from datapipe.distribute.state_io import load_state, save_state

install()
_checkpoint.install_layer(ShardedStateLayer())


def __getattr__(name: str) -> object:
    # TorchIterableDataset subclasses torch's IterableDataset: importing it imports torch
    # (~2 s), so it is loaded on first use, not with the package.
    if name == "TorchIterableDataset":
        from datapipe.distribute.torch_dataset import TorchIterableDataset

        return TorchIterableDataset
    if name == "AllRanksState":  # torch too
        from datapipe.distribute.all_ranks import AllRanksState

        return AllRanksState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AllRanksState",
    "AutoShardError",
    "TorchIterableDataset",
    "WorkerContext",
    "WorkerContextError",
    "auto_shard",
    "install",
    "load_state",
    "replace_inputs",
    "resolve_worker_context",
    "save_state",
]
