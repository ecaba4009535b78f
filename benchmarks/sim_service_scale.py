"""What the service would do at 100 workers x 8 consumers: a discrete-event simulation of
``distribute("distributed_epoch")`` driven by the costs ``bench_service.py`` measured.

The model is the implementation's protocol, not a guess at it:

* every consumer runs 2 lanes per worker; a lane asks the dispatcher for a split
  (first come, first served), then keeps ``max_outstanding_requests / 2`` = 2 read requests
  in flight to its worker, one more each time it takes a reply, and asks for its next
  split as soon as it starts one (the split prefetch); once the current split's requests
  are all out, its next request is the next split's first (opened ahead), so the worker
  goes from one split to the next without waiting (``--no-prefetch``: a lane asks for
  its next split when its split ended, as before);
* a worker serves its queue of requests one at a time (one Ray actor, FIFO): a reply costs
  ``worker_reply`` + its elements x (``element`` + ``worker_element``), holds as many
  elements as fit in 20 ms (the service's ``REPLY_SECONDS``) but at least 512
  (``REPLY_MIN_ELEMENTS``: what the consumer asks for; ``--min-reply 1``: the 20-ms
  replies before issue 25) and at most what fits in 0.5 s, and the
  first reply of a split also pays ``open_split`` (building the split's chain);
* a consumer with an index runs its lanes only on its own workers (``w % consumers``)
  once each consumer has two (``consumer.reading_workers``; ``--no-partition``: on all);
* the dispatcher serves ``next_split`` calls one at a time, ``dispatcher_call`` each;
* a consumer handles one arrival at a time: a reply costs ``consumer_reply`` + its
  elements x ``consumer_element`` (deserialising, delivering, the ops after
  ``distribute``), an assignment ``consumer_submit`` per request it sends;
* every message takes ``latency`` one way (a cluster network; replies of ~100 ints are
  ~1 KB, so bandwidth does not count; set ``--latency``).

Consumers take elements as fast as they come (the trainer is not the bottleneck), so the
figure per consumer is what the service can feed each one; with ``--accelerator-rate A``
each consumer's trainer takes ``A`` elements/s, a lane's next request waiting until the
trainer has taken its reply, and the verdict says whether the service keeps up. Prints
per-consumer elements/s, each kind of server's utilisation and the dispatcher's call
rate, for a few split sizes.

Usage: ``python benchmarks/sim_service_scale.py [--costs bench.json] [--workers 100]
[--consumers 8] [--element-us 200] [--seconds 30] [--splits auto,1600,400]
[--accelerator-rate 2500] [--min-reply 1] [--no-partition] [--no-prefetch]``
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
from collections import deque
from dataclasses import dataclass, field

REPLY_SECONDS = 0.02
REPLY_MIN_ELEMENTS = 512  # datapipe/service/worker.py: a reply ends for time only past it
REPLY_MAX_SECONDS = 0.5
LANES_PER_WORKER = 2
OUTSTANDING_PER_LANE = 2

# Defaults: medians of three bench_service.py runs on the 2-core dev machine, shared with
# other jobs (load average 4-6; see benchmarks/README.md), in seconds.
DEFAULTS = {
    "worker_reply": 303e-6,  # an actor call's cost at the actor (pipelined calls)
    "worker_element": 0.13e-6,  # pickling one int of a reply (100 ints: 12.9 µs)
    "open_split": 306e-6,  # building a split's chain on a worker
    "dispatcher_call": 690e-6,  # next_split, pipelined calls from one consumer
    "consumer_reply": 1425e-6,  # the consumer's CPU per reply in a real run (all threads)
    "consumer_element": 0.4e-6,  # deserialise + deliver + batch(64), per element
}


@dataclass
class Costs:
    element: float
    worker_reply: float
    worker_element: float
    open_split: float
    dispatcher_call: float
    consumer_reply: float
    consumer_element: float
    latency: float
    min_reply: int = REPLY_MIN_ELEMENTS

    @property
    def per_reply(self) -> int:
        """Elements in a reply: as many as fit in REPLY_SECONDS, at least ``min_reply``
        (1: the replies before issue 25), at most what fits in REPLY_MAX_SECONDS."""
        return self.reply_size(0)

    def reply_size(self, split: int) -> int:
        """``per_reply`` (the same for every split size)."""
        t = self.element + self.worker_element
        fit = math.floor(REPLY_SECONDS / t) + 1
        return max(1, min(max(fit, self.min_reply), math.floor(REPLY_MAX_SECONDS / t) + 1))


def costs_from_bench(path: str | None, element: float, latency: float) -> Costs:
    c = dict(DEFAULTS)
    if path:
        with open(path) as f:
            m = json.load(f)["components"]
        c["worker_reply"] = m["actor_call_pipelined_us"] * 1e-6
        c["worker_element"] = m["pickle_reply_100_ints_us"] * 1e-6 / 100
        c["open_split"] = m["open_split_us"] * 1e-6
        c["dispatcher_call"] = m["dispatcher_next_split_pipelined_us"] * 1e-6
        c["consumer_reply"] = max(0.0, m["consumer_cpu_per_reply_us"]) * 1e-6
        c["consumer_element"] = max(0.0, m["consumer_cpu_per_element_us"]) * 1e-6
    return Costs(element=element, latency=latency, **c)


@dataclass
class Split:
    """A split a lane reads: elements left to request and to receive."""

    to_request: int
    to_receive: int = -1
    first: bool = True  # the next request is its first (the worker opens its chain)

    def __post_init__(self) -> None:
        if self.to_receive < 0:
            self.to_receive = self.to_request


@dataclass
class Lane:
    """A consumer's feed on one worker: the split it reads, the next split's size once
    assigned (prefetched), that split once its first request is out (``ahead``)."""

    consumer: int
    worker: int
    cur: Split | None = None
    next: int | None = None
    ahead: Split | None = None
    in_flight: int = 0


@dataclass
class Server:
    """One-at-a-time FIFO server (a worker actor, the dispatcher, a consumer)."""

    queue: deque = field(default_factory=deque)
    busy_until: float = 0.0
    busy: float = 0.0
    running: bool = False


def reading_workers(ci: int, consumers: int, workers: int, partition: bool) -> list[int]:
    """datapipe.service.consumer.reading_workers: a consumer with an index reads from its
    own workers once each has two; else (or without ``partition``) from all of them."""
    if not partition or workers < 2 * consumers:
        return list(range(workers))
    return list(range(ci, workers, consumers))


class Sim:
    def __init__(
        self, c: Costs, workers: int, consumers: int, split: int, total: int, partition: bool
    ):
        self.c, self.W, self.C, self.split, self.total = c, workers, consumers, split, total
        self.partition = partition
        self.prefetch = True  # a lane asks for its next split as it starts one
        self.lanes_per_worker = LANES_PER_WORKER
        self.accelerator_rate: float | None = None  # elements/s a consumer's trainer takes
        self.accelerators = [Server() for _ in range(consumers)]
        self.events: list = []
        self.seq = 0
        self.workers = [Server() for _ in range(workers)]
        self.dispatcher = Server()
        self.consumers = [Server() for _ in range(consumers)]
        self.next_split = 0
        self.splits = math.ceil(total / split)
        self.delivered = [0] * consumers
        self.dispatcher_calls = 0
        self.window: tuple[float, float] = (0.0, 0.0)
        self.at_window: list[int] = [0] * consumers

    def at(self, t: float, kind: str, *args) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, args))

    # ---- servers --------------------------------------------------------------------------
    def offer(self, server: Server, t: float, job: tuple, cost: float, done: str) -> None:
        server.queue.append((job, cost, done))
        if not server.running:
            self.start(server, t)

    def start(self, server: Server, t: float) -> None:
        job, cost, done = server.queue.popleft()
        server.running = True
        server.busy += cost
        self.at(t + cost, "served", server, job, done)

    def served(self, t: float, server: Server, job: tuple, done: str) -> None:
        server.running = False
        getattr(self, done)(t, *job)
        if server.queue:
            self.start(server, t)

    # ---- the protocol ---------------------------------------------------------------------
    def ask(self, t: float, lane: Lane) -> None:
        self.at(t + self.c.latency, "to_dispatcher", lane)

    def to_dispatcher(self, t: float, lane: Lane) -> None:
        self.dispatcher_calls += 1
        self.offer(self.dispatcher, t, (lane,), self.c.dispatcher_call, "assigned")

    def assigned(self, t: float, lane: Lane) -> None:
        if self.next_split >= self.splits:
            return  # the lane ends
        sid = self.next_split
        self.next_split += 1
        size = min(self.split, self.total - sid * self.split)
        self.at(t + self.c.latency, "to_consumer_assignment", lane, size)

    def to_consumer_assignment(self, t: float, lane: Lane, size: int) -> None:
        cost = OUTSTANDING_PER_LANE * self.c.consumer_reply / 2
        self.offer(self.consumers[lane.consumer], t, (lane, size), cost, "got_assignment")

    def got_assignment(self, t: float, lane: Lane, size: int) -> None:
        if lane.cur is not None:  # prefetched: the lane still reads its current split
            lane.next = size
            self.request(t, lane)  # its first request, if the current one's are all out
        else:
            self.open_lane(t, lane, size)

    def open_lane(self, t: float, lane: Lane, size: int) -> None:
        """Start reading a split: the one opened ahead (its first request already out),
        else ``size`` elements from scratch; ask for the next one at once (prefetch)."""
        if lane.ahead is not None:
            lane.cur, lane.ahead = lane.ahead, None
        else:
            lane.cur = Split(size)
        while lane.in_flight < OUTSTANDING_PER_LANE and lane.cur.to_request > 0:
            self.request(t, lane)
        if self.prefetch:
            self.ask(t, lane)

    def request(self, t: float, lane: Lane) -> None:
        """One request for the current split; once all of its are out, one for the next
        split (``datapipe.service.consumer``'s ``_open_ahead``)."""
        split = lane.cur
        if split is None or lane.in_flight >= OUTSTANDING_PER_LANE:
            return
        if split.to_request <= 0:
            if not self.prefetch or lane.next is None or lane.ahead is not None:
                return
            split = lane.ahead = Split(lane.next)
            lane.next = None
        k = min(self.c.reply_size(self.split), split.to_request)
        split.to_request -= k
        first, split.first = split.first, False
        cost = self.c.worker_reply + k * (self.c.element + self.c.worker_element)
        cost += self.c.open_split if first else 0.0
        lane.in_flight += 1
        self.at(t + self.c.latency, "to_worker", lane, split, k, cost)

    def to_worker(self, t: float, lane: Lane, split: Split, k: int, cost: float) -> None:
        self.offer(self.workers[lane.worker], t, (lane, split, k), cost, "replied")

    def replied(self, t: float, lane: Lane, split: Split, k: int) -> None:
        self.at(t + self.c.latency, "to_consumer_reply", lane, split, k)

    def to_consumer_reply(self, t: float, lane: Lane, split: Split, k: int) -> None:
        cost = self.c.consumer_reply + k * self.c.consumer_element
        self.offer(self.consumers[lane.consumer], t, (lane, split, k), cost, "took")

    def took(self, t: float, lane: Lane, split: Split, k: int) -> None:
        if self.accelerator_rate:  # the trainer takes the elements at its own pace first:
            cost = k / self.accelerator_rate  # the lane waits (backpressure)
            self.offer(self.accelerators[lane.consumer], t, (lane, split, k), cost, "trained")
            return
        self.trained(t, lane, split, k)

    def trained(self, t: float, lane: Lane, split: Split, k: int) -> None:
        self.delivered[lane.consumer] += k
        lane.in_flight -= 1
        split.to_receive -= k
        if split is not lane.cur or split.to_receive > 0:
            self.request(t, lane)
            return
        lane.cur = None  # the split ended
        if not self.prefetch:
            self.ask(t, lane)
        elif lane.ahead is not None or lane.next is not None:  # the next one is here
            size, lane.next = (lane.next or 0), None
            self.open_lane(t, lane, size)
        # (else its assignment is on its way: got_assignment opens it)

    # ---- running --------------------------------------------------------------------------
    def run(self, seconds: float, warmup: float) -> dict:
        for ci in range(self.C):
            for w in reading_workers(ci, self.C, self.W, self.partition):
                for _ in range(self.lanes_per_worker):
                    self.ask(0.0, Lane(ci, w))
        busy0 = None
        t = 0.0
        while self.events:
            t, _, kind, args = heapq.heappop(self.events)
            if busy0 is None and t >= warmup:
                busy0 = self._snapshot()
            if t >= seconds:
                break
            if kind == "served":
                self.served(t, *args)
            else:
                getattr(self, kind)(t, *args)
        end = min(t, seconds)
        b0 = busy0 or self._snapshot()
        span = max(1e-9, end - warmup)
        per_consumer = [(d - d0) / span for d, d0 in zip(self.delivered, b0["delivered"])]
        return {
            "per_consumer": per_consumer,
            "worker_util": (sum(w.busy for w in self.workers) - b0["workers"]) / span / self.W,
            "consumer_util": (sum(c.busy for c in self.consumers) - b0["consumers"])
            / span
            / self.C,
            "dispatcher_util": (self.dispatcher.busy - b0["dispatcher"]) / span,
            "dispatcher_calls_s": (self.dispatcher_calls - b0["calls"]) / span,
            "finished": self.next_split >= self.splits and not self.events,
        }

    def _snapshot(self) -> dict:
        return {
            "delivered": list(self.delivered),
            "workers": sum(w.busy for w in self.workers),
            "consumers": sum(c.busy for c in self.consumers),
            "dispatcher": self.dispatcher.busy,
            "calls": self.dispatcher_calls,
        }


def on_paper(c: Costs, workers: int, consumers: int, split: int) -> dict:
    """The same in closed form: the total rate is the least of what the workers, the
    dispatcher (one call per split) and the consumers can each sustain alone."""
    m = min(c.reply_size(split), split)
    per_element = c.element + c.worker_element + c.worker_reply / m + c.open_split / split
    bounds = {
        "workers": workers / per_element,
        "dispatcher": split / c.dispatcher_call,
        # per element, per reply, and per split (sending a new split's first requests)
        "consumers": consumers
        / (c.consumer_element + c.consumer_reply / m + c.consumer_reply / split),
    }
    by = min(bounds, key=bounds.get)
    return {"per_consumer": bounds[by] / consumers, "bound_by": by}


def auto_split(n: int, workers: int) -> int:
    """datapipe.service.op.auto_split_size (the default split size)."""
    size = math.ceil(n / (8 * workers))
    return max(1, min(10_000, max(size, min(REPLY_MIN_ELEMENTS, math.ceil(n / (2 * workers))))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--costs", default=None, help="bench_service.py --json output")
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--element-us", type=float, default=200.0)
    parser.add_argument("--latency-us", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--splits", default="auto,1600,400,100,25",
                        help="split sizes; auto: the default for --epoch-elements")  # fmt: skip
    parser.add_argument("--epoch-elements", type=int, default=1_281_167)
    parser.add_argument("--consumer-reply-us", type=float, default=None, help="override")
    parser.add_argument(
        "--min-reply",
        type=int,
        default=REPLY_MIN_ELEMENTS,
        help="1: replies cut at 20 ms whatever they hold (before issue 25)",
    )
    parser.add_argument(
        "--no-partition",
        action="store_true",
        help="every consumer reads from every worker (before issue 25)",
    )
    parser.add_argument(
        "--lanes-per-worker",
        type=int,
        default=LANES_PER_WORKER,
        help="1: parallel_epochs' one feed per slot (no second lane hides a split boundary)",
    )
    parser.add_argument(
        "--no-prefetch",
        action="store_true",
        help="a lane asks for its next split only when its split ended (before)",
    )
    parser.add_argument(
        "--accelerator-rate",
        type=float,
        default=None,
        help="elements/s each consumer's accelerator takes (a verdict column)",
    )
    args = parser.parse_args()
    c = costs_from_bench(args.costs, args.element_us * 1e-6, args.latency_us * 1e-6)
    c.min_reply = args.min_reply
    if args.consumer_reply_us is not None:
        c.consumer_reply = args.consumer_reply_us * 1e-6
    partition = not args.no_partition
    lanes = sum(len(reading_workers(ci, args.consumers, args.workers, partition))
                for ci in range(args.consumers)) * args.lanes_per_worker  # fmt: skip
    print(f"costs (µs): { {k: round(v * 1e6, 1) for k, v in vars(c).items()} }")
    print(
        f"elements per reply: {c.per_reply}; "
        f"{args.workers} workers x {args.consumers} "
        f"consumers, {lanes:,} lanes ({'partitioned' if partition else 'all workers'})"
    )
    print(
        "| split size | split ms | per consumer el/s (sim) | on paper (bound by) | dispatcher "
        "util | dispatcher calls/s | worker util | consumer util | consumer CPU/el µs |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.splits.split(","):
        split = auto_split(args.epoch_elements, args.workers) if name == "auto" else int(name)
        total = 10**9  # never ends within the simulated time
        sim = Sim(c, args.workers, args.consumers, split, total, partition)
        sim.accelerator_rate = args.accelerator_rate
        sim.prefetch = not args.no_prefetch
        sim.lanes_per_worker = args.lanes_per_worker
        r = sim.run(args.seconds, warmup=args.seconds / 3)
        p = on_paper(c, args.workers, args.consumers, split)
        split_ms = split * (c.element + c.worker_element) * 1e3
        per = sum(r["per_consumer"]) / len(r["per_consumer"])
        m = min(c.reply_size(split), split)
        cpu_el = (c.consumer_element + c.consumer_reply / m + c.consumer_reply / split) * 1e6
        label = f"{split} (auto)" if name == "auto" else str(split)
        verdict = ""
        if args.accelerator_rate:
            verdict = " feeds" if per >= 0.99 * args.accelerator_rate else " starves"
        print(
            f"| {label} | {split_ms:.0f} | {per:,.0f} (min {min(r['per_consumer']):,.0f})"
            f"{verdict} | {p['per_consumer']:,.0f} ({p['bound_by']}) | "
            f"{r['dispatcher_util']:.0%} | {r['dispatcher_calls_s']:,.0f} | "
            f"{r['worker_util']:.0%} | {r['consumer_util']:.0%} | {cpu_el:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
