"""The Ray actors of a service: one dispatcher, ``num_workers`` workers (imports ray).

Only ``datapipe.service.ray_service`` imports this module, when a pipeline with
``distribute`` first runs, so ``import datapipe`` never imports ray.

- ``Dispatcher`` (named ``datapipe-service-<name>`` in namespace ``datapipe``, 0 CPUs):
  the job table (``datapipe.service.jobs``), the pipelines' pickled bytes (in the object
  store, owned by the dispatcher so they outlive the consumer that sent them), and the
  worker actors, which it creates (each declaring ``num_cpus_per_worker`` CPUs, spread over
  the cluster's nodes) and replaces when a consumer reports one dead.
- ``Worker``: the streams of split chains (``datapipe.service.worker.WorkerCore``). A
  synchronous actor runs one call at a time, in the order each caller submitted them, so a
  consumer's queued requests for one split are read in order (and checked: ``seq``).

A service lives as long as the process that created its dispatcher (the first consumer, or
``RayService.start()``): Ray ends an actor with the process that owns it.
"""

from __future__ import annotations

from typing import Any

import ray

from datapipe.service.jobs import JobTable, Record
from datapipe.service.worker import WorkerServer

NAMESPACE = "datapipe"
# Pipelines kept in the dispatcher's store beyond those of live jobs.
MAX_IDLE_PIPELINES = 8


@ray.remote(max_restarts=0)
class Worker(WorkerServer):
    """One service worker: ``datapipe.service.worker.WorkerServer`` as a Ray actor."""


@ray.remote(num_cpus=0, max_restarts=0)
class Dispatcher:
    """The service's dispatcher (see the module docstring)."""

    def __init__(self, config: dict):
        self.config = dict(config)
        self.table = JobTable(int(config["num_workers"]))
        self.workers = [self._start(slot) for slot in range(int(config["num_workers"]))]
        self.blobs: dict[str, Any] = {}

    def _start(self, slot: int):
        return Worker.options(  # type: ignore[attr-defined]  # added by @ray.remote
            num_cpus=self.config["num_cpus_per_worker"], scheduling_strategy="SPREAD"
        ).remote(slot, int(self.config["num_cpus_per_worker"]))

    # ---- service -----------------------------------------------------------------------------
    def get_config(self) -> dict:
        return dict(self.config)

    def handles(self) -> list:
        return list(self.workers)

    def report_dead(self, slot: int, seen: list) -> list:
        """A consumer saw worker ``slot`` (``seen[0]``, its handle) die: kill it for good (it
        may only look dead) and start another in its place, once however many consumers
        report it."""
        old = self.workers[slot]
        if old == seen[0]:
            try:
                ray.kill(old)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.workers[slot] = self._start(slot)
            self.table.stats["workers_replaced"] += 1
        return list(self.workers)

    def stats(self) -> dict:
        out: dict[str, Any] = dict(self.table.stats, live_jobs=len(self.table.jobs))
        refs = [w.stats.remote() for w in self.workers]
        workers = []
        for ref in refs:
            try:
                workers.append(ray.get(ref, timeout=10))
            except Exception:  # noqa: BLE001 - a dead or starting worker: no statistics
                workers.append(None)
        out["workers"] = workers
        return out

    def shutdown(self) -> None:
        for w in self.workers:
            try:
                ray.kill(w)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.workers = []

    # ---- jobs ----------------------------------------------------------------------------------
    def has_pipeline(self, blob_key: str) -> bool:
        return blob_key in self.blobs

    def put_pipeline(self, blob_key: str, blob: bytes) -> None:
        self.blobs[blob_key] = ray.put(blob)
        live = {job.blob for job in self.table.jobs.values()}
        idle = [k for k in self.blobs if k not in live and k != blob_key]
        for k in idle[: max(0, len(idle) - MAX_IDLE_PIPELINES)]:
            del self.blobs[k]

    def join(self, key, fingerprint, layout, seed, blob_key, consumer, restore, restore_id):
        if blob_key not in self.blobs:
            return None  # the consumer sends the pipeline, then joins again
        info = self.table.join(
            tuple(key), fingerprint, layout, seed, blob_key, consumer, restore, restore_id
        )
        return info, [self.blobs[blob_key]]  # in a list: the ref travels, not its bytes

    def next_split(self, key, token, worker, finished):
        return self.table.next_split(tuple(key), token, worker, finished)

    def release(self, key, token, records: list[Record], finished: list[int]) -> None:
        self.table.release(tuple(key), token, records, finished)
