"""Elastic resume: a checkpoint taken by N workers, resumed on M workers.

Each new worker calls ``it.load_state_dict(states)`` (alias ``set_state``) with the list of
*all* old workers' states (``save_state``/``load_state`` round-trip them); the rest of the
epoch is then delivered exactly once across the M new workers. (Passing one state where
the layout differs raises a ``ValueError`` saying that the list is needed.)

Design
------
*Where positions live.* Auto-sharding splits a pipeline at its shard points
(``datapipe.distribute.shard_point``). Below a shard point the graph is the same on every
worker (a *pool*: the indices of a random-access input, the positions of a stream every
worker reads in the same order, or a file source's units); above it, each worker runs its
own ops on its own share. A share is a list of pool positions (``share.Split`` segments,
MosaicML Streaming's "global sample order independent of the physical layout"). So a
position in the data is a pool position, whatever the layout, and a checkpoint records, for
each shard point, the share and how many of its elements were *taken* (pulled by the ops
above) -- next to the ordinary state of the chain.

*Buffered elements.* The ops above a shard point may hold elements they pulled and have not
delivered: a shuffle buffer, a partial batch, prefetch and parallel-map buffers, the public
iterator's chunk. They are not returned to the pool: they are *carried* in the old
worker's state, which a new worker adopts whole. Nothing here reads those states -- how
``map``, ``batch``, ``interleave`` or ``prefetch`` lay out their state is their business --
so the design rests on one small protocol instead:

1. a shard point reports ``taken``, the share elements pulled so far (read *after* the
   chain's state, so it bounds every element that state holds or will re-read);
2. an op's ``set_state`` re-reads from its input, in order, whatever its state needs
   again (parallel ``map`` recomputes the chunks it had not delivered) and nothing else.

*Accounting.* The old shares of one layout are the splits ``i::N`` of one base set. The
positions taken are, per old worker ``i``, the first ``taken_i`` of its split: all of the
first ``N * min(taken)`` of the base plus a few scattered ones (workers run at slightly
different speeds). The pool not taken is therefore again a base set ``Base(P, E)`` -- the
positions from ``P`` on except the few in ``E`` -- and its size is known when the pool's is.

*Assignment.* New worker ``p`` of ``M``:

- reads the split ``p::M`` of that remainder, evened out by ``Options.distribute.uneven``
  (the old layout's dropped tail is in the remainder: nothing is lost twice), or its
  count of the balanced division (below, *Evenness*);
- if ``p < N``, adopts old worker ``p``: its state is restored unchanged into a chain whose
  shard points read *old share's first taken_i positions, then the new split*. The
  restored ops see exactly the input they expect (the same prefix), deliver what they
  carried, re-read what they must, and go on into the new split;
- for each old worker ``v >= M`` with ``v % M == p``, *drains* it first: its state is
  restored into a chain whose shard points read only the old prefix, which delivers what
  it carried and ends. (A ``batch(drop_remainder=True)`` there drops its partial batch, as
  a worker does at the end of an epoch.)

A drained or adopted prefix is marked ``accounted`` in the share, so a later resume counts
only the newest split. For a stream pool, the new split carries a seek point (the live
stream state of the old worker nearest below it), so a new worker does not re-read the
stream from its start. A shard point built only after the restore (``concatenate``'s
second input) still reads its planned share.

*Granularity.* Random-access pools (arrays, ``range``, ``global_shuffle`` with a seed)
resume at element granularity with an index-based state; streams at element positions;
file sources read under FILE at unit granularity (files, Parquet row groups) plus the
positions in the units in progress, which the adopted state carries.

*Evenness.* With one shard point over elements (``datapipe.distribute.balance``), the
division evens out the remaining shares, carried elements included: what a state's ops
hold stays with the worker that restores it, positions an op will read again after the
restore (a parallel ``map``'s undelivered chunks) go back to the rest, the finished
elements the old iterators had computed ahead move to whichever worker needs them, and
the rest goes first to workers that carry nothing -- so the shares differ by at most two
batches unless what the ops hold alone exceeds a worker's fair share (near an epoch's
end). File units and several shard points are evened out share by share, as before. A
DDP loop should still step all ranks together (``train_ddp.py``'s lockstep, or
``torch.distributed.algorithms.Join``).

Limits (each raises ``ValueError`` at ``set_state`` with the reason): a state saved without
a worker context (no shard point to split); a shard point read through random access by an
op above it (an unseeded ``global_shuffle``: set ``Options.seed``); a ``repeat`` above a
shard point (each worker repeats its own share, so the workers of a run are at different
repetitions: iterate epochs with ``iter()`` instead); a file source that cannot report its
units in progress; states of different epochs or pipelines, or a list that misses a
worker. ``random_map`` draws in the rest of a resumed epoch are keyed by the position in
the new share (reproducible from the checkpoint), not by the source index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from datapipe._context import IterContext
from datapipe._iterator import OpIterator
from datapipe.dataset_ops import raw_cardinality
from datapipe.distribute import balance
from datapipe.distribute.share import Base, Share, Split, share_from_state, worker_share


@dataclass
class ResumePlan:
    """What the auto-shard rewrite and the shard points of one restored chain read.

    Attributes:
        policy: the checkpoint's policy (``"FILE"``/``"DATA"``), ``"OFF"`` for a chain
            saved without shard points.
        shares: cut id -> the share a shard point built while the plan applies reads.
        drain: the chain is drained (later passes of its shard points read nothing).
        active: while the chain is built and restored, every build reads ``shares``;
            after that only the builds in the pass of a shard point's first build (e.g.
            ``concatenate``'s second input, both branches of ``zip(ds, ds.map(f))`` built
            lazily), not a later pass (``repeat``'s next epoch).
        built: cut id -> the epoch (pass) of its first build.
        elastic: the layout changed (file sources no longer even out rows).
    """

    policy: str | None
    shares: dict[int, Share] = field(default_factory=dict)
    drain: bool = False
    active: bool = True
    built: dict = field(default_factory=dict)
    elastic: bool = False

    def share_for(self, cut_id: int, build: bool = True, epoch: Any = None) -> Share | None:
        """The planned share of a shard point built now in pass ``epoch`` (``build=False``:
        would be built), or None for its own."""
        first = cut_id not in self.built
        same_pass = not first and epoch is not None and self.built[cut_id] == epoch
        if build and first:
            self.built[cut_id] = epoch
        if cut_id in self.shares and (self.active or first or same_pass):
            return self.shares[cut_id]
        return Share() if self.drain else None


@dataclass
class ChainSpec:
    """One chain to build and restore: global seed, root state (None: a fresh chain),
    pending elements, planned shares and whether it is drained, and how many elements the
    saved chain had produced."""

    seed: int | None
    root: Any
    pending: list
    plan: ResumePlan
    produced: int = 0


# ---- accounting --------------------------------------------------------------------------
def remainder(
    splits: Sequence[tuple[Split, int]], n: int | None, more: Sequence[int] = ()
) -> tuple[Base, int | None]:
    """The pool positions that the splits' taken prefixes (one split per old worker, all of
    one layout) and the positions ``more`` (taken from later levels of a balanced layout,
    ``datapipe.distribute.balance``) left, as a ``Base``, and how many (None: the pool
    size is unknown)."""
    base, step = splits[0][0].base, splits[0][0].step
    ordered = any(s.order is not None for s, _ in splits)
    m = 0 if ordered else min(t for _, t in splits)
    extras: list[int] = _base_indices(base, more)
    for s, t in splits:
        js = np.asarray(s.order[:t] if s.order is not None else range(m, t), dtype=np.int64)
        extras.extend((s.offset + step * js).tolist())
    start = step * m
    later = sorted(e for e in extras if e >= start)
    while later and later[0] == start:  # a run of taken positions right after the dense part
        later.pop(0)
        start += 1
    pool_start = int(base.at(np.asarray([start]))[0])
    excluded = {e for e in base.excluded if e > pool_start}
    excluded.update(int(p) for p in base.at(np.asarray(later, dtype=np.int64)))
    rest = Base(pool_start, tuple(sorted(excluded)))
    if n is None:
        return rest, None
    return rest, max(0, n - pool_start - sum(1 for e in rest.excluded if e < n))


def _base_indices(base: Base, positions: Sequence[int]) -> list[int]:
    """The indices within ``base`` of pool positions that belong to it."""
    p = np.asarray(sorted(positions), dtype=np.int64)
    below = np.searchsorted(np.asarray(base.excluded, dtype=np.int64), p)
    return (p - base.start - below).tolist()


def _current_splits(share: Share, taken: int) -> list[tuple[Split, int]]:
    """The newest (not yet accounted) splits of an old worker's share -- one, or the levels
    of a balanced layout -- each with how many of its elements were taken."""
    done, out = 0, []
    for seg in share.segments:
        if isinstance(seg, Split) and not seg.accounted:
            t = max(0, taken - done)
            out.append((seg, t if not seg.bounded else min(t, len(seg))))
        if not seg.bounded:
            break
        done += len(seg)
    return out


def adopted_prefix(share: Share, taken: int) -> Share:
    """The first ``taken`` elements of ``share``, marked accounted."""
    segments = share.prefix(taken).segments
    return Share([replace(s, accounted=True) if isinstance(s, Split) else s for s in segments])


# ---- planning ----------------------------------------------------------------------------
def _fail(msg: str) -> ValueError:
    return ValueError(f"load_state_dict: {msg}")


def check_states(states: list) -> list[dict]:
    """``states`` sorted by the worker that saved each (all of one layout and epoch).

    Raises:
        ValueError: not a list of state dicts, a worker missing or twice, mixed layouts or
            epochs (each message says which).
    """
    if not states:
        raise _fail("got an empty list of states; pass every old worker's state")
    for j, s in enumerate(states):
        if not isinstance(s, dict) or "worker" not in s or "epoch" not in s:
            raise _fail(f"states[{j}] is not an iterator state (a dict from state_dict())")
    n = len(states)
    seen: dict[int, dict] = {}
    for s in states:
        i, k = (int(v) for v in s["worker"])
        if k != n:
            raise _fail(
                f"a state was saved by worker {i} of {k}, but {n} states were given: pass the "
                f"states of all {k} workers of that run"
            )
        if i in seen:
            raise _fail(f"two states were saved by worker {i} of {k}")
        seen[i] = s
    epochs = {tuple(s["epoch"]) for s in states}
    if len(epochs) > 1:
        raise _fail(f"the states are of different epochs {sorted(epochs)}; pass one checkpoint")
    return [seen[i] for i in range(n)]


def _probe(dataset: Any, policy: str | None) -> IterContext:
    """The rewrite for this worker under the checkpoint's policy, without building (for
    the shard points' pools)."""
    from datapipe.dataset_ops import REWRITES

    ctx = IterContext.for_graph(dataset, seed=0)
    ctx.resume, ctx.dry_run = ResumePlan(policy), True
    with raw_cardinality():
        root = dataset
        for rewrite in REWRITES:
            root = rewrite(root, ctx)
    ctx.root = root
    return ctx


def plan_chains(dataset: Any, states: list[dict], own_seed: int) -> tuple[tuple, list[ChainSpec]]:
    """``(epoch, chains)`` for this worker from all old workers' ``states`` (sorted by
    worker): the chains to drain, then the primary one (see the module docstring)."""
    old = len(states)
    policy = states[0].get("policy")
    for j, s in enumerate(states):
        if not s.get("cuts"):
            raise _fail(
                f"state {j} was saved without shard points (no worker context), so its "
                "position cannot be split among workers; save under a worker context "
                "(e.g. Options.distribute num_workers=1, worker_index=0) to resume elsewhere"
            )
        if s.get("policy") != policy or len(s["cuts"]) != len(states[0]["cuts"]):
            raise _fail("the states were saved by different pipelines (shard points differ)")
    ctx = _probe(dataset, policy)
    _check_no_repeat(ctx)
    me, count = ctx.worker.index, ctx.worker.count
    if len(ctx.cut_nodes) != len(states[0]["cuts"]):
        raise _fail(
            f"the states have {len(states[0]['cuts'])} shard points but this pipeline has "
            f"{len(ctx.cut_nodes)}: restore into an iterator of the same dataset"
        )
    if balance.balances(states, [node.kind for node in ctx.cut_nodes]):
        states = _reread_points(dataset, states, policy)
    rests = [_rest(node, c, states) for c, node in enumerate(ctx.cut_nodes)]
    division = _division(dataset, ctx, states, rests)
    new_shares = _new_shares(ctx, states, rests, division)
    chains = []
    for v in range(old):
        if v % count != me:
            continue
        s = states[v]
        for j, d in enumerate(s.get("drains", [])):
            chains.append(_keep(_adopt(d, policy, None), division, me, v, j))
        if v >= count:
            chains.append(_keep(_adopt(s, policy, None), division, me, v, len(s.get("drains", []))))
    own = len(states[me].get("drains", [])) if me < old else 0
    if me < old and not _ended(states[me]):
        chains.append(_keep(_adopt(states[me], policy, new_shares), division, me, me, own))
    else:  # a fresh chain: a new worker, or one whose old chain saw its share end
        if me < old:
            chains.append(_keep(_adopt(states[me], policy, None), division, me, me, own))
        plan = ResumePlan(policy, dict(enumerate(new_shares)), elastic=True)
        chains.append(ChainSpec(own_seed, None, [], plan))
    chains[-1].pending += _moved_in(states, division, me, count)
    return tuple(int(e) for e in states[0]["epoch"]), chains


def _reread_points(dataset: Any, states: list[dict], policy: str | None) -> list[dict]:
    """``states`` (copies) whose random-access shard point counts as taken only what its
    restored chain will not read again: ops that recompute what they had not delivered
    (a parallel ``map``) re-read those positions after a restore, so no one has delivered
    them and they go back to the rest. Found by restoring each chain once and asking its
    shard point where it stands. Every new worker must find the same point (each divides
    the rest by it), so the restore computes on this thread with no worker reading ahead
    (``computing_inline``): the point is then the state's alone, however far the old
    chain's parallel map had read when it was saved or reads during the restore."""
    out = []
    for state in states:
        copy = dict(state)
        if state.get("drains"):
            copy["drains"] = [_reread(dataset, d, policy, state) for d in state["drains"]]
        out.append(_reread(dataset, copy, policy, state))
    return out


def _reread(dataset: Any, chain: dict, policy: str | None, state: dict) -> dict:
    cut = chain["cuts"][0]
    if cut.get("kind") != "index" or not cut.get("taken"):
        return chain
    from datapipe.parallel.engine import computing_inline

    with computing_inline():
        built = build_chain(
            dataset, tuple(int(e) for e in state["epoch"]), _adopt(chain, policy, None)
        )
    try:
        live = built.ctx.cuts.get(0)
        at = None if live is None else int(live.taken)
    finally:
        built.root.close()
    if at is None or not 0 <= at < int(cut["taken"]):
        return chain
    # The restored ops read from ``at`` on again, so their state predates the share's end
    # (if the reader had reached it): they read a continuation, the chain is not drained.
    cut = {k: v for k, v in cut.items() if k != "ended"}
    return {**chain, "cuts": [{**cut, "taken": at}, *chain["cuts"][1:]]}


def _keep(spec: ChainSpec, division: balance.Division | None, me: int, v: int, j: int) -> ChainSpec:
    """``spec`` (chain ``j`` of old worker ``v``'s state) with only the computed elements
    the division leaves to this worker."""
    if division is not None:
        spec.pending = [x for i, x in enumerate(spec.pending) if division.owner[(v, j, i)] == me]
    return spec


def _moved_in(states: list[dict], division: balance.Division | None, me: int, count: int) -> list:
    """The computed elements of other workers' states that the division gives this one
    (delivered first: they are finished elements)."""
    if division is None:
        return []
    items = sorted(key for key, p in division.owner.items() if p == me and key[0] % count != me)
    return [balance._chains(states[v])[j]["pending"][i] for v, j, i in items]


def _check_no_repeat(ctx: IterContext) -> None:
    from datapipe._context import walk
    from datapipe.distribute.shard_point import _Cut

    def above_a_cut(node: Any) -> bool:
        return any(isinstance(n, _Cut) or above_a_cut(n) for n in node._inputs)

    for node in walk(ctx.root):
        if node.repeats_input and above_a_cut(node):
            raise _fail(
                f"'{node._name}' sits above a shard point: each worker repeats its own share, "
                "so the workers of a run are at different repetitions and the rest cannot be "
                "split among another number of workers; resume on the same number of "
                "workers, or iterate epochs with iter() instead of repeat()"
            )


def _ended(state: dict) -> bool:
    """Whether the ops of ``state``'s chain were told that a share ended (they would not
    read a continuation of it: the chain is drained instead of continued)."""
    return any(cut.get("ended") for cut in state["cuts"])


def _taken(cut: dict, j: int, c: int) -> int:
    if cut.get("taken") is None:
        raise _fail(
            f"shard point {c} of state {j} cannot tell how much of its share was read "
            "(an op above reads it through random access, e.g. a global_shuffle without a "
            "seed -- set Options.seed -- or a file source that cannot report its units in "
            "progress); such a checkpoint resumes only on the same number of workers"
        )
    return int(cut["taken"])


def _rest(node: Any, c: int, states: list[dict]) -> tuple[Base, int | None]:
    """What no old worker took at shard point ``c``: the base set and its size."""
    splits, more = [], []
    for j, s in enumerate(states):
        cut = s["cuts"][c]
        if cut.get("kind") != node.kind:
            raise _fail(f"shard point {c} is a {cut.get('kind')!r} one in the states but a "
                        f"{node.kind!r} one in this pipeline")  # fmt: skip
        current = _current_splits(share_from_state(cut["share"]), _taken(cut, j, c))
        if not current:
            raise _fail(f"state {j}'s share at shard point {c} has no split to continue")
        splits.append(current[0])
        for split, t in current[1:]:  # a balanced layout's later levels
            more += split.positions(0, t).tolist()
    if (
        sorted(s.offset for s, _ in splits) != list(range(len(splits)))
        or len({(s.step, s.base) for s, _ in splits}) != 1
    ):
        raise _fail(f"the states' shares at shard point {c} are not one layout's")
    with raw_cardinality():
        n = _pool_size(node)
    return remainder(splits, n, more)


def _new_shares(
    ctx: Any, states: list[dict], rests: list, division: balance.Division | None
) -> list[Share]:
    """This worker's split of each shard point's rest: evened out by
    ``Options.distribute.uneven``, or the balanced division's counts."""
    me, count = ctx.worker.index, ctx.worker.count
    out = []
    for c, node in enumerate(ctx.cut_nodes):
        base, r = rests[c]
        uneven = node.uneven_after_resume(ctx.options)
        if division is None:
            share = worker_share(base, r, me, count, uneven)
        else:
            shares = balance.level_shares(base, division.counts, uneven, division.totals)
            share = shares[me]
        out.append(_with_seek(share, states, c) if node.kind == "stream" else share)
    return out


def _division(dataset: Any, ctx: Any, states: list[dict], rests: list) -> balance.Division | None:
    """The balanced division of the rest and of the computed elements among the new
    workers (``datapipe.distribute.balance``), or None where it does not apply (several
    shard points, file units, a rest of unknown size, states of an older version)."""
    kinds = [node.kind for node in ctx.cut_nodes]
    if not balance.balances(states, kinds) or rests[0][1] is None:
        return None
    node, count = ctx.cut_nodes[0], ctx.worker.count
    with raw_cardinality():
        outputs = dataset.cardinality()
        pool = _pool_size(node)
    k = balance.pool_per_element(pool, outputs if outputs >= 0 else None, states)
    held = [0.0] * count
    pending: list[list[tuple[int, int, int]]] = [[] for _ in range(count)]
    for v, state in enumerate(states):
        got = balance.carried(state, k)
        held[v % count] += got.held
        pending[v % count] += [(v, j, i) for j, i in got.pending]
    uneven = node.uneven_after_resume(ctx.options)
    return balance.divide(held, pending, int(rests[0][1]), k, uneven)


def _pool_size(node: Any) -> int | None:
    if node.kind == "units":
        return len(node.units)
    n = node._inputs[0].cardinality()
    return n if n >= 0 else None


def _with_seek(share: Share, states: list[dict], c: int) -> Share:
    """The share whose splits (one, or a balanced layout's levels) each start from the
    nearest old stream position at or before them."""
    cuts = [s["cuts"][c] for s in states if s["cuts"][c].get("at") is not None]
    segments = []
    for split in share.segments:
        if isinstance(split, Split) and not (split.bounded and len(split) == 0):
            first = int(split.positions(0, 1)[0])
            points = [(int(cut["at"]), cut["input"]) for cut in cuts if int(cut["at"]) <= first]
            if points:
                split = replace(split, seek=max(points, key=lambda p: p[0]))
        segments.append(split)
    return Share(segments)


def _adopt(state: dict, policy: str | None, new: list[Share] | None) -> ChainSpec:
    """A chain restoring ``state``: its shard points read the taken prefix of its shares,
    then (``new``: the primary chain) this worker's new split; else it is drained."""
    shares = {}
    for c, cut in enumerate(state.get("cuts", [])):
        prefix = adopted_prefix(share_from_state(cut["share"]), _taken(cut, -1, c))
        shares[c] = prefix if new is None else prefix + new[c]
    plan = ResumePlan(policy, shares, drain=new is None, elastic=True)
    pending = list(state.get("pending", []))
    return ChainSpec(state.get("seed"), state["root"], pending, plan, _produced(state))


def adopt_same_layout(state: dict, policy: str | None, drain: bool) -> ChainSpec:
    """A chain restoring ``state`` on the layout that saved it (its shares as saved)."""
    cuts = state.get("cuts") or []
    shares = {c: share_from_state(cut["share"]) for c, cut in enumerate(cuts)}
    plan = ResumePlan(policy if cuts else "OFF", shares, drain=drain)
    pending = list(state.get("pending", []))
    return ChainSpec(state.get("seed"), state["root"], pending, plan, _produced(state))


def _produced(state: dict) -> int:
    return int(state.get("produced", len(state.get("pending", []))))


# ---- running several chains ------------------------------------------------------------------
class Chain:
    """A built chain: its context, root iterator, the elements its state carried and how
    many its root has produced in the epoch (the saved chain's included)."""

    def __init__(self, ctx: IterContext, root: OpIterator, pending: list, produced: int = 0):
        self.ctx, self.root, self.pending, self.produced = ctx, root, pending, produced


class DrainFirst(OpIterator):
    """Delivers the drained chains' elements, in order, then the primary chain's."""

    op_name = "elastic_resume"

    def __init__(self, drains: list[Chain], primary: OpIterator):
        super().__init__([c.root for c in drains] + [primary])
        self.drains, self.primary = drains, primary
        self.drained_out = 0  # elements delivered from the drained chains (not produced
        # by the primary one, which the public iterator counts)

    def next_chunk(self, n: int) -> list:
        while self.drains:
            chain = self.drains[0]
            if chain.pending:
                out, chain.pending = chain.pending[:n], chain.pending[n:]
                self.drained_out += len(out)
                return out
            got = chain.root.next_chunk(n)
            if got:
                chain.produced += len(got)
                self.drained_out += len(got)
                return got
            chain.root.close()
            self.drains.pop(0)
        return self.primary.next_chunk(n)

    def get_state(self) -> dict:  # the public Iterator saves the chains one by one
        raise NotImplementedError("DrainFirst: use Iterator.get_state")

    def set_state(self, state: dict) -> None:
        raise NotImplementedError("DrainFirst: use Iterator.set_state")


def build_chain(dataset: Any, epoch: tuple, spec: ChainSpec) -> Chain:
    """Build ``spec``'s chain and restore its state (``ValueError`` when it does not fit)."""
    ctx, root = dataset._build_chain(epoch, spec.seed, spec.plan)
    try:
        if spec.root is not None:
            root.set_state(spec.root)
    except (KeyError, TypeError, IndexError) as e:
        root.close()
        raise _fail(
            "the state does not fit this pipeline (it was saved by an iterator of another "
            f"dataset: {type(e).__name__}: {e}); restore a state into an iterator of the same "
            "dataset, built the same way"
        ) from e
    finally:
        spec.plan.active = False
    return Chain(ctx, root, spec.pending, spec.produced)


def install(iterator: Any, epoch: tuple, specs: list[ChainSpec]) -> None:
    """Replace ``iterator``'s chains by the built ``specs`` (drains first, primary last)."""
    built: list[Chain] = []
    try:
        for spec in specs:
            built.append(build_chain(iterator.dataset, epoch, spec))
    except BaseException:
        for chain in built:
            chain.root.close()
        raise
    *drains, primary = built
    root = DrainFirst(drains, primary.root) if drains else primary.root
    iterator.replace_chains(
        epoch, primary.ctx, primary.root, root, primary.pending, primary.produced
    )


def drain_states(root: OpIterator) -> list[dict]:
    """The states of the chains a ``DrainFirst`` still drains (for ``Iterator.get_state``)."""
    from datapipe._checkpoint import chain_state

    if not isinstance(root, DrainFirst):
        return []
    return [chain_state(c.ctx, c.root, c.pending, c.produced) for c in root.drains]


def drained_out(root: OpIterator) -> int:
    """Elements ``root`` (a ``DrainFirst``) delivered from drained chains (``Iterator``'s
    count of its root's elements, less these, is the primary chain's)."""
    return root.drained_out if isinstance(root, DrainFirst) else 0
