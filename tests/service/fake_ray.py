"""An in-process stand-in for the slice of Ray a service consumer uses, so the consumer's
protocol (feeds, split prefetch, worker loss, checkpoints) runs in the default test run
without starting Ray: actors whose calls run in this thread, one at a time, in the order
they were submitted (a synchronous Ray actor's order); the real ``JobTable`` and
``WorkerServer`` behind them.

- A worker's calls run lazily: when the consumer waits for one (``get``/``wait``), its
  actor runs every call queued before it first -- so what a worker has computed at any
  moment is what the consumer waited for, as with requests in flight.
- The dispatcher's calls run at once (``eager``): a call is seen when it is sent, which is
  what the prefetch tests look at (``FakeDispatcher.calls``).
- ``FakeRay.kill(actor)``: its queued and later calls fail with ``RayActorError``;
  replies it had already computed are still there (as Ray's object store keeps them).
"""

from __future__ import annotations

import types
from collections import deque
from typing import Any

from datapipe.service.jobs import JobTable
from datapipe.service.worker import WorkerServer


class RayError(Exception):
    pass


class RayActorError(RayError):
    pass


class RayTaskError(RayError):
    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause

    def as_instanceof_cause(self) -> BaseException:
        return self.cause


class Ref:
    """One call's result, once its actor ran it."""

    def __init__(self, actor: Actor, fn: Any, args: tuple):
        self.actor, self.fn, self.args = actor, fn, args
        self.done, self.value, self.error = False, None, None

    def run(self) -> None:
        try:
            self.value = self.fn(*self.args)
        except Exception as e:  # noqa: BLE001 - delivered by get, as Ray does
            self.error = RayTaskError(e)
        self.done = True


class Actor:
    def __init__(self, obj: Any, eager: bool = False, clock: Any = lambda: 0):
        self.obj, self.eager, self.dead = obj, eager, False
        self.queue: deque[Ref] = deque()
        # (method, args, clock()) of every call, as sent
        self.log: list[tuple[str, tuple, int]] = []
        self.clock = clock

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.obj, name)
        actor = self

        class Method:
            @staticmethod
            def remote(*args: Any) -> Ref:
                actor.log.append((name, args, actor.clock()))
                ref = Ref(actor, fn, args)
                if actor.dead:
                    ref.done, ref.error = True, RayActorError("the actor died")
                elif actor.eager:
                    ref.run()
                else:
                    actor.queue.append(ref)
                return ref

        return Method

    def run_until(self, ref: Ref) -> None:
        while not ref.done:
            self.queue.popleft().run()

    def kill(self) -> None:
        self.dead = True
        while self.queue:
            ref = self.queue.popleft()
            ref.done, ref.error = True, RayActorError("the actor died")


class FakeRay:
    exceptions = types.SimpleNamespace(
        RayError=RayError, RayActorError=RayActorError, RayTaskError=RayTaskError
    )

    def get(self, ref: Ref, timeout: float | None = None) -> Any:
        ref.actor.run_until(ref)
        if ref.error is not None:
            raise ref.error
        return ref.value

    def wait(self, refs: list, num_returns: int = 1, timeout: float | None = None) -> tuple:
        ready = [r for r in refs if r.done]
        if len(ready) < num_returns and timeout != 0:
            for r in refs:  # the first one not done yet: its worker computes it
                if not r.done:
                    r.actor.run_until(r)
                    break
            ready = [r for r in refs if r.done]
        ready = ready[:num_returns]
        return ready, [r for r in refs if r not in ready]

    def kill(self, actor: Actor) -> None:
        actor.kill()


class FakeDispatcher:
    """``actors.Dispatcher``'s calls over a real ``JobTable`` (no object store: the
    pipeline's bytes travel as they are). ``calls``: each ``next_split`` call as
    ``(produced, delivered)`` when it came: the elements the workers had computed, and
    ``delivered()`` (the test's count of elements it took); each worker's ``log`` has
    ``delivered()`` as each call was sent."""

    def __init__(self, num_workers: int, delivered: Any = lambda: 0):
        self.table = JobTable(num_workers)
        self.delivered = delivered
        self.workers = [self._worker(slot) for slot in range(num_workers)]
        self.servers = [a.obj for a in self.workers]  # every worker ever started
        self.blobs: dict[str, bytes] = {}
        self.calls: list[tuple[int, int]] = []

    def _worker(self, slot: int) -> Actor:
        return Actor(WorkerServer(slot, 1), clock=self.delivered)

    def produced(self) -> int:
        return sum(s.core.stats["elements"] for s in self.servers)

    def handles(self) -> list:
        return list(self.workers)

    def report_dead(self, slot: int, seen: list) -> list:
        if self.workers[slot] is seen[0]:
            self.workers[slot].kill()
            self.workers[slot] = self._worker(slot)
            self.servers.append(self.workers[slot].obj)
            self.table.stats["workers_replaced"] += 1
        return list(self.workers)

    def put_pipeline(self, blob_key: str, blob: bytes) -> None:
        self.blobs[blob_key] = blob

    def join(self, key, fingerprint, layout, seed, blob_key, consumer, restore, restore_id):
        if blob_key not in self.blobs:
            return None
        info = self.table.join(
            tuple(key), fingerprint, layout, seed, blob_key, consumer, restore, restore_id
        )
        return info, [self.blobs[blob_key]]

    def next_split(self, key, token, worker, finished):
        self.calls.append((self.produced(), self.delivered()))
        return self.table.next_split(tuple(key), token, worker, finished)

    def release(self, key, token, records, finished) -> None:
        self.table.release(tuple(key), token, records, finished)


def fake_service(service: Any, dispatcher: FakeDispatcher) -> FakeRay:
    """Make ``service`` (a ``RayService``) run on ``dispatcher`` in this process."""
    fake = FakeRay()
    handle = Actor(dispatcher, eager=True)
    service._ray = lambda: fake
    service._dispatcher = lambda: handle
    return fake
