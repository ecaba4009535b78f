"""A preprocessing service on Ray with tf.data service's shape.

``ds.apply(datapipe.service.distribute("distributed_epoch", RayService(num_workers=4)))``
runs the pipeline built so far on 4 Ray worker actors and streams its elements back; the
ops after it run in this process. See ``distribute`` for the semantics (processing modes,
shared jobs, round-robin consumers, checkpoints) and ``RayService`` for the cluster.

Importing this package does not import Ray (the optional extra ``datapipe-torch[ray]``): Ray is
imported when a pipeline with ``distribute`` first runs.

Modules: ``op`` (the ``distribute`` op and its node, ``ServiceDataset``), ``consumer``
(reading a job), ``state`` (a consumer's checkpoint), ``layout`` (splits), ``jobs`` (the
dispatcher's bookkeeping), ``worker`` (a worker's split chains, and how replies travel),
``actors`` (the Ray actors), ``ray_service`` (joining or starting Ray).
"""

from typing import Any

from datapipe import _deprecated
from datapipe.service.op import ServiceDataset, distribute
from datapipe.service.ray_service import RayService

__all__ = ["RayService", "ServiceDataset", "distribute"]

# Renamed in issue 24 (one name per concept: "distribute" is sharding, ``datapipe.distribute``
# and ``Options.distribute``; only the op keeps tf.data's name). The old paths still work,
# with a DeprecationWarning: the module ``datapipe.service.distribute`` (the attribute of
# that name is the op, as before) and the class ``DistributeDataset``.
_deprecated.alias_module(
    f"{__name__}.distribute",
    f"{__name__}.op",
    {"DistributeDataset": "ServiceDataset"},
    keep_attribute=True,
)


def __getattr__(name: str) -> Any:
    if name == "DistributeDataset":
        return _deprecated.moved(f"{__name__}.DistributeDataset", "ServiceDataset", ServiceDataset)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
