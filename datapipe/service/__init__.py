"""A preprocessing service on Ray with tf.data service's shape.

``ds.apply(datapipe.service.distribute("distributed_epoch", RayService(num_workers=4)))``
runs the pipeline built so far on 4 Ray worker actors and streams its elements back; the
ops after it run in this process. See ``distribute`` for the semantics (processing modes,
shared jobs, round-robin consumers, checkpoints) and ``RayService`` for the cluster.

Importing this package does not import Ray (the optional extra ``datapipe[ray]``): Ray is
imported when a pipeline with ``distribute`` first runs.

Modules: ``distribute`` (the op), ``consumer`` (reading a job), ``state`` (a consumer's
checkpoint), ``layout`` (splits), ``jobs`` (the dispatcher's bookkeeping), ``worker`` (a
worker's split chains, and how replies travel), ``actors`` (the Ray actors),
``ray_service`` (joining or starting Ray).
"""

from datapipe.service.distribute import DistributeDataset, distribute
from datapipe.service.ray_service import RayService

__all__ = ["DistributeDataset", "RayService", "distribute"]
