"""What a service worker does: build one split's chain of the pipeline before ``distribute``
and read it in replies of many elements (no Ray in here; ``actors.Worker`` wraps it).

A split's chain is the user's pipeline with the worker's own options on top: one worker of
one (so neither the pipeline's own ``Options.distribute`` nor a launcher's ``RANK`` /
``WORLD_SIZE`` inherited by the worker process shards it a second time), the job's
auto-shard policy, and the split's share at every shard point (``ResumePlan``: the
mechanism elastic resume uses to make a shard point read a given share). A
``parallel_epochs`` split read by consumer ``c`` of ``n`` is instead the worker context
``c`` of ``n`` (auto-sharding gives it its DATA/FILE share of the whole pipeline).

Every reply carries the chain's state after its last element: the consumer keeps the
latest, so a split resumes exactly there on another worker if this one dies, and the
consumer's checkpoint names positions inside the splits it reads.

How replies travel: numpy scalars of one dtype as one array (``pack``); on arrival, arrays
Ray handed out read-only from its object store are copied (``writable``).
"""

from __future__ import annotations

import os
import pickle
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import cloudpickle
import numpy as np

from datapipe._positions import Failed
from datapipe._structure import element_nbytes
from datapipe.errors import PipelineError

# A reply holds at most this many elements, this many bytes of arrays (estimated from the
# first element of each inner chunk), or the elements computed in this many seconds
# (whichever comes first); one element more than the byte limit when a single one is larger.
REPLY_ELEMENTS = 4096
REPLY_BYTES = 1 << 20
REPLY_SECONDS = 0.02
# ... but a reply stops for time only once it holds REPLY_MIN_ELEMENTS (or REPLY_MAX_SECONDS
# have passed): the consumer pays ~1.4-1.9 ms of CPU per reply (Ray's client side: the
# submit, the wait, the get; benchmarks/bench_service.py), which 20-ms replies of W6's
# 200-us elements (~100 elements) made ~14 us per element on the training process's core.
# Replies of >= 512 elements bring it under 5 us (issue 25).
REPLY_MIN_ELEMENTS = 512
REPLY_MAX_SECONDS = 0.5
# Pipelines (unpickled) kept per worker, by content hash: iterations of one pipeline share one.
MAX_PIPELINES = 8
# Streams closed because they ended, remembered so that requests already in flight for
# them get an empty final reply (not an error).
MAX_ENDED = 4096
# Open streams per worker (a consumer reads 2 per worker; one that died without closing
# leaves its streams open): beyond this, the least recently read one is closed.
MAX_STREAMS = 1024


class Packed:
    """Elements that are numpy scalars of one dtype, travelling as one array: pickling
    4,096 ``np.int64`` scalars one by one costs ~8 ms here, as one array ~0.02 ms.
    ``unpack()`` gives the same scalars back."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def unpack(self) -> list:
        return list(self.array)


def pack(elements: list) -> list | Packed:
    """``elements`` as a ``Packed`` array when they are all numpy scalars of one type and
    dtype (``range``'s, a column's), else unchanged."""
    if len(elements) < 2:
        return elements
    first = elements[0]
    kind = type(first)
    if not isinstance(first, np.generic) or first.dtype.hasobject:
        return elements
    dtype = first.dtype
    for x in elements:
        if type(x) is not kind or x.dtype != dtype:
            return elements
    return Packed(np.array(elements, dtype=dtype))


@dataclass
class Reply:
    """One reply: ``elements`` (a ``Failed`` entry last when the next element failed; a
    ``Packed`` array for numpy scalars), ``state`` (the chain's state after them), ``done``
    (the split has no more elements), ``compute_s`` (seconds spent producing them, for
    statistics)."""

    elements: list | Packed
    state: Any
    done: bool
    compute_s: float = 0.0


def split_options(policy: str | None, context: tuple | None, cpu_budget: int | None, merged):
    """The options a worker puts on top of the pipeline (see the module docstring)."""
    from datapipe.options import AutoShardPolicy, AutotuneOptions, DistributeOptions, Options

    index, count = context if context is not None else (0, 1)
    if policy is None:
        policy_value = AutoShardPolicy.OFF
    else:
        policy_value = AutoShardPolicy(policy)
    opts = Options(
        distribute=DistributeOptions(
            auto_shard_policy=policy_value, num_workers=count, worker_index=index
        )
    )
    if cpu_budget is not None and merged.autotune.cpu_budget is None:
        opts.autotune = AutotuneOptions(cpu_budget=int(cpu_budget))
    return opts


def build_split_chain(dataset: Any, open_args: dict, cpu_budget: int | None = None) -> tuple:
    """``(ctx, root)``: split ``open_args["spec"]``'s chain, restored to ``open_args["state"]``
    when given. ``open_args``: ``policy`` (``"FILE"``/``"DATA"``: split the pool; None: the
    whole pipeline), ``spec`` (``SplitSpec.to_state()``), ``epoch``, ``seed``, ``state``."""
    from datapipe.distribute.elastic import ResumePlan
    from datapipe.distribute.share import share_from_state

    spec = open_args["spec"]
    context = tuple(spec["context"]) if spec["context"] is not None else None
    policy = open_args["policy"] if spec["shares"] is not None else None
    if context is not None:
        policy = open_args["policy"] or "AUTO"
    opts = split_options(policy, context, cpu_budget, dataset.options)
    ds = dataset.with_options(opts)
    plan = None
    if spec["shares"] is not None:
        shares = {c: share_from_state(s) for c, s in enumerate(spec["shares"])}
        plan = ResumePlan(policy, shares)
    epoch = tuple(int(e) for e in open_args["epoch"]) + tuple(spec["epoch_extra"])
    ctx, root = ds._build_chain(epoch, int(open_args["seed"]), plan)
    try:
        if open_args.get("state") is not None:
            root.set_state(open_args["state"])
    except BaseException:
        root.close()
        raise
    finally:
        if plan is not None:
            plan.active = False
    return ctx, root


def transportable(error: BaseException) -> BaseException:
    """``error`` if it pickles (to travel to the consumer), else a ``PipelineError`` with
    its message (a user exception holding a lock, a socket, ...)."""
    try:
        cloudpickle.dumps(error)
        return error
    except Exception:  # noqa: BLE001 - anything that does not pickle
        return PipelineError("distribute", None, RuntimeError(f"{type(error).__name__}: {error}"))


class Stream:
    """One split's chain on a worker, read in replies. ``elements``: how many it has left
    when the consumer knows (a split's size): the reply that holds the last one then
    checks for the end and says ``done``, instead of a further request finding it."""

    def __init__(self, ctx: Any, root: Any, elements: int | None = None):
        self.ctx, self.root = ctx, root
        self.per_element: float | None = None  # seconds, measured (moving average)
        self.left = elements

    def _next_size(self, left: int, seconds_left: float, short: int) -> int:
        """The next inner chunk: 1 at first (a first element comes back fast), then as
        many as fit in the reply's time left -- or the ``short`` elements the reply still
        lacks of ``REPLY_MIN_ELEMENTS`` -- at most 256."""
        if self.per_element is None:
            return 1
        fit = int(seconds_left / self.per_element) if self.per_element > 0 else 256
        return max(1, min(left, 256, max(fit, short)))

    def read(
        self, limit: int, seconds: float, max_bytes: int, min_elements: int = REPLY_MIN_ELEMENTS
    ) -> Reply:
        """Up to ``limit`` elements or ``max_bytes`` (``element_nbytes`` of the first element
        of each chunk read, times its length); past ``seconds`` the reply ends once it holds
        ``min_elements``, and past ``REPLY_MAX_SECONDS`` anyway."""
        out: list = []
        size = 0
        t0 = time.perf_counter()
        done = False
        while len(out) < limit and size < max_bytes:
            now = time.perf_counter()
            short = min(limit, min_elements) - len(out)
            want = self._next_size(limit - len(out), seconds - (now - t0), short)
            try:
                got = self.root.next_chunk(want)
            except Exception as e:  # noqa: BLE001 - delivered at its position
                out.append(Failed(transportable(e)))
                break
            if not got:
                done = True
                break
            dt = (time.perf_counter() - now) / len(got)
            self.per_element = dt if self.per_element is None else 0.5 * (self.per_element + dt)
            out.extend(got)
            size += element_nbytes(got[0]) * len(got)
            spent = time.perf_counter() - t0
            if spent >= REPLY_MAX_SECONDS or (spent >= seconds and len(out) >= min_elements):
                break
        if not done and self.left is not None and len(out) >= self.left:
            done = self._ends(out)
        if self.left is not None:
            self.left -= len(out)
        compute = time.perf_counter() - t0
        state = None if done else self.root.get_state()
        return Reply(pack(out), state, done, compute)

    def _ends(self, out: list) -> bool:
        """Past its known size: whether the chain has ended (a next element, which the
        size did not count, joins the reply: nothing is lost if the size was wrong)."""
        if out and type(out[-1]) is Failed:
            return False
        try:
            got = self.root.next_chunk(1)
        except Exception as e:  # noqa: BLE001 - delivered at its position
            out.append(Failed(transportable(e)))
            return False
        out.extend(got)
        return not got

    def close(self) -> None:
        self.root.close()


def elements_of(reply: Reply) -> list:
    """A reply's elements as a list (unpacked)."""
    got = reply.elements
    return got.unpack() if isinstance(got, Packed) else got


def _copy_read_only(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.copy() if not x.flags.writeable else x
    if type(x) is tuple:
        return tuple(_copy_read_only(v) for v in x)
    if isinstance(x, dict):
        return {k: _copy_read_only(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_copy_read_only(v) for v in x]
    return x


def _has_read_only(x: Any) -> bool:
    if isinstance(x, np.ndarray):
        return not x.flags.writeable
    if isinstance(x, (tuple, list)):
        return any(_has_read_only(v) for v in x)
    if isinstance(x, dict):
        return any(_has_read_only(v) for v in x.values())
    return False


def writable(elements: list) -> list:
    """The elements with every read-only array copied. Ray hands large replies out of its
    object store as read-only views (zero copy); elements here are writable, as the same
    pipeline's are in one process (an in-place op after ``distribute`` must not fail, nor
    ``torch.from_numpy`` warn). Elements of one reply share a layout: the first one says
    whether any copy is needed."""
    if not elements or not _has_read_only(elements[0]):
        return elements
    return [_copy_read_only(x) for x in elements]


class WorkerCore:
    """The streams of one worker (see the module docstring). ``cpu_budget``: the cores the
    worker declared (its pipeline's AUTOTUNE budget, unless the pipeline sets one)."""

    def __init__(self, cpu_budget: int | None = None):
        self.cpu_budget = cpu_budget
        self.pipelines: OrderedDict = OrderedDict()
        self.streams: OrderedDict = OrderedDict()  # key -> Stream, least recently read first
        self.ended: OrderedDict = OrderedDict()
        self.stats = {"replies": 0, "elements": 0, "compute_s": 0.0, "open_s": 0.0, "opens": 0}

    def pipeline(self, blob_key: str, blob: bytes | None) -> Any:
        ds = self.pipelines.get(blob_key)
        if ds is None:
            if blob is None:
                raise RuntimeError(f"distribute: worker has no pipeline {blob_key}")
            try:
                ds = pickle.loads(blob)
            except Exception as e:  # noqa: BLE001 - a module the worker cannot import, ...
                raise RuntimeError(
                    f"distribute: a worker could not load the pipeline ({type(e).__name__}: "
                    f"{e}); functions defined in a module must be importable on the workers "
                    "(install it there, use Ray's runtime_env, or "
                    "cloudpickle.register_pickle_by_value(module) before building)"
                ) from e
            self.pipelines[blob_key] = ds
            while len(self.pipelines) > MAX_PIPELINES:
                self.pipelines.popitem(last=False)
        self.pipelines.move_to_end(blob_key)
        return ds

    def read(
        self,
        key: tuple,
        blob_key: str,
        blob: bytes | None,
        open_args: dict | None,
        limit: int = REPLY_ELEMENTS,
        seconds: float = REPLY_SECONDS,
        max_bytes: int = REPLY_BYTES,
        min_elements: int = REPLY_MIN_ELEMENTS,
    ) -> Reply:
        """The next reply of stream ``key``, opening it first when ``open_args`` is given.
        A stream that ended answers an empty final reply."""
        stream = self.streams.get(key)
        if stream is None:
            if key in self.ended:
                return Reply([], None, True)  # a request sent before the end was seen
            if open_args is None:
                raise RuntimeError(f"distribute: stream {key} was never opened on this worker")
            t0 = time.perf_counter()
            ctx, root = build_split_chain(self.pipeline(blob_key, blob), open_args, self.cpu_budget)
            stream = self.streams[key] = Stream(ctx, root, open_args.get("elements"))
            self.stats["open_s"] += time.perf_counter() - t0
            self.stats["opens"] += 1
            while len(self.streams) > MAX_STREAMS:
                _, gone = self.streams.popitem(last=False)
                gone.close()
        self.streams.move_to_end(key)
        reply = stream.read(limit, seconds, max_bytes, min_elements)
        self.stats["replies"] += 1
        self.stats["elements"] += len(elements_of(reply))
        self.stats["compute_s"] += reply.compute_s
        if reply.done:
            self.close([key])
        return reply

    def close(self, keys: list) -> None:
        for key in keys:
            stream = self.streams.pop(tuple(key), None)
            if stream is not None:
                stream.close()
            self.ended[tuple(key)] = True
            while len(self.ended) > MAX_ENDED:
                self.ended.popitem(last=False)

    def shutdown(self) -> None:
        self.close(list(self.streams))


def encode_request(
    key: tuple,
    seq: int,
    blob_key: str,
    open_args: dict | None,
    limit: int = REPLY_ELEMENTS,
    seconds: float = REPLY_SECONDS,
    max_bytes: int = REPLY_BYTES,
    min_elements: int = REPLY_MIN_ELEMENTS,
) -> bytes:
    """A read request as the one argument ``WorkerServer.read`` takes: request ``seq`` of
    stream ``key``, opening it from ``open_args`` (``build_split_chain``'s) when given,
    and the reply's bounds (``Stream.read``). A first request goes through cloudpickle (a
    split chain's state is whatever the pipeline's ops keep), the others through pickle."""
    msg = (key, seq, blob_key, open_args, limit, seconds, max_bytes, min_elements)
    if open_args is None:
        return pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return cloudpickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)


class WorkerServer:
    """What a worker actor serves (``actors.Worker`` is this class as a Ray actor): the
    replies of its streams, each stream's requests checked to come in order (``seq``: a
    synchronous actor runs one call at a time, in the order each caller submitted them).
    ``slot``: its place in the service; ``cpus``: the cores it declared."""

    def __init__(self, slot: int, cpus: int):
        self.slot = slot
        self.core = WorkerCore(cpus)
        self.seq: dict[tuple, int] = {}

    def read(self, request: bytes, blob: bytes | None = None) -> Reply:
        """The next reply of a stream. ``request``: ``encode_request``'s bytes (one
        argument: Ray's client side serializes each argument of a call on its own, and
        the consumer pays for each, ~20 us per argument here); ``blob``: the pickled
        pipeline, with a stream's first request (an ObjectRef that Ray resolves here)."""
        key, seq, blob_key, open_args, limit, seconds, max_bytes, min_elements = pickle.loads(
            request
        )
        if key in self.core.ended:  # requests queued before the consumer saw the end
            return Reply([], None, True)
        expected = self.seq.get(key, 0)
        if seq != expected:
            raise RuntimeError(f"distribute: request {seq} of stream {key} came as {expected}")
        self.seq[key] = seq + 1
        reply = self.core.read(
            key, blob_key, blob, open_args, limit, seconds, max_bytes, min_elements
        )
        if reply.done:
            self.seq.pop(key, None)
        return reply

    def close(self, keys: list) -> None:
        self.core.close(keys)
        for key in keys:
            self.seq.pop(tuple(key), None)

    def stats(self) -> dict:
        return dict(self.core.stats, slot=self.slot, pid=os.getpid())

    def pid(self) -> int:
        return os.getpid()
