"""The process executor: worker processes that run a map's function on chunks.

Each worker thread of a ``map`` / ``random_map`` stage's process executor
(``executors.Processes``) serves one worker process: the thread reads the chunk's input
(the pipeline is sharded and read in the parent; workers only run the function), sends
the elements, waits for the results and hands them to the consumer, so ordering, error
positions, checkpoints and the tuner work as with threads. What changes is where the
function runs: in a process of its own, so pure-Python functions that hold the GIL use
more than one core.

* **Elements** go through shared memory (``shm.py``): arrays and torch tensors in any
  nested structure travel as one POSIX shared-memory segment per chunk (in both
  directions); small values and the structure are pickled. The function goes once per
  stage and epoch, with cloudpickle, so lambdas and closures work.
* **Lifetime**: the processes of a stage start on its first chunk and stop when the stage
  closes — at the end of the data (the iterator closes its pipeline there, as
  DataLoader's shuts its workers down), with the pipeline's ``close()``, ``break`` +
  garbage collection, an exception or KeyboardInterrupt — removing every segment
  (``/dev/shm/datapipe-<pid>-...``). Across a ``repeat``, an epoch's stage parks them
  (``epoch_boundary``) and the next epoch's stage of the same op takes them back
  (``lease``), so they start once per iterator; the ``repeat``'s own close stops what is
  still parked. Workers ignore SIGINT (the parent
  handles Ctrl-C) and exit by themselves when the parent dies, even by SIGKILL: their pipe
  reaches end of file and their parent pid changes (checked every second).
* **Errors**: an exception in the function reaches the consumer at that element's position
  as a ``PipelineError`` naming the op and the index, with the worker's traceback (its
  ``__cause__`` chain, a note, and ``.worker_traceback``). A worker that dies (a signal, the
  OOM killer, ``os._exit``) raises ``WorkerDiedError`` naming the process, its exit signal
  and the elements it was computing, within ``POLL_S`` of its death.
* **Start methods**: ``Options.threading.process_start_method`` (``fork``, ``spawn``,
  ``forkserver``). Unset, it is ``fork`` where forking is safe and ``forkserver`` where it
  is not (``choose_start_method``): a forked child inherits the parent's OpenMP thread pool
  (torch's intra-op pool) as threads that do not exist in it, and its first parallel
  region waits for them for ever. A worker running torch on one intra-op thread (the
  default ``max_intra_op_parallelism``) never enters such a pool; with more, the workers
  start with ``forkserver`` when a pool may have started here: native threads that Python
  does not know about started since datapipe was imported, or torch was imported before
  datapipe (its pool may predate that count). AUTOTUNE tries processes only where they
  would fork (``fork_is_chosen``): forkserver imports the main module in each worker, which
  would run an unguarded script again. The stage's ``start_method`` and ``start_reason``
  say which was used and why. With fork the children start in milliseconds; the forkserver starts
  once per process (importing datapipe, and torch when the parent has it, ~1-3 s here),
  then forks each child from itself in milliseconds; with spawn each child imports
  datapipe (and torch) first, ~3 s here.
* **Elements that cannot cross** (``strict=False``, AUTOTUNE's choice): an element or a
  result that cannot be pickled is computed in the parent, and the stage is asked once
  (``on_step_back``) to go back to threads; with ``strict=True`` (``executor="process"``)
  it fails at its position, naming the op and the index.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import secrets
import signal
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator
from multiprocessing.connection import wait as wait_any
from typing import Any

import numpy as np

from datapipe import _draws
from datapipe._positions import Failed
from datapipe.errors import RemoteTraceback, WorkerDiedError, annotate
from datapipe.parallel import shm
from datapipe.parallel.pool import POLL_S
from datapipe.stats import trace

# Pools of finished stages a pipeline keeps for a later epoch's stage (repeat) to reuse.
MAX_PARKED = 4
_SERIAL = itertools.count()


class _Failure:
    """An element whose function raised in a worker: the exception (None when it cannot
    be pickled), its type name and message, and the formatted traceback. ``unsendable``:
    the function returned, but its result could not be sent back."""

    unsendable = False

    def __init__(self, e: BaseException):
        import pickle

        self.tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        self.type_name, self.message = type(e).__name__, str(e)
        try:  # a round trip: an exception class whose __init__ takes other arguments
            pickle.loads(pickle.dumps(e))  # than its args pickles, but cannot be rebuilt
            self.exc: BaseException | None = e
        except Exception:  # noqa: BLE001 - rebuilt from its name and message
            self.exc = None


# ---- the worker process ---------------------------------------------------------------
def _reseed(seed: int) -> bool:
    """Seed this worker's global generators (``random``, numpy's, torch's) from ``seed``,
    the parent's ``worker_seed`` for this worker, as DataLoader seeds each worker: a forked
    worker would otherwise repeat the parent's streams, and every worker its siblings'
    (np.random / torch.rand in a process map gave 263 distinct draws of 400). Draws that
    must not depend on which worker computes an element use a seeded layer or
    ``random_map``'s generator, keyed by the element (``datapipe._draws``). True if torch
    was seeded (imported)."""
    import random

    random.seed(seed)
    np.random.seed(seed % 2**32)
    return _reseed_torch(seed)


def _reseed_torch(seed: int) -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    torch.manual_seed(seed)
    return True


def _worker_main(conn: Any, prefix: str, intra_op: int, seed: int = 0, forked: bool = False,
                 forked_after_pool: bool = False) -> None:  # fmt: skip
    """A worker process: run functions on chunks until told to stop or the parent dies.
    ``forked``: started by fork (it inherited the parent's modules and their pools);
    ``forked_after_pool``: from a process whose OpenMP pool may have started, so torch
    must stay on ``intra_op`` threads here (``_hold_intra_op_threads``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    parent_pid = os.getppid()  # our pipeline's process (or the forkserver)
    fns: dict[int, Any] = {}
    threads_set: set = set()  # the libraries whose intra-op threads are set
    if forked and "cv2" in sys.modules:
        # OpenCV imported before the fork: cv2.setNumThreads in the child, after the
        # parent's pool ran once, waits for ever for threads that do not exist here
        # (breaker4: one GaussianBlur in the parent hung every forked worker). Its pool
        # is left as forked; OpenCV itself runs in the child without it.
        threads_set.add("cv2")
    torch_seeded = _reseed(seed)
    try:
        while True:
            if not conn.poll(1.0):
                if os.getppid() != parent_pid:  # orphaned: the parent died
                    return
                continue
            msg = conn.recv()
            if msg[0] == "stop":
                return
            if msg[0] == "fn":
                fns = {msg[1]: _load_function(conn, msg[1], msg[2])}
                continue
            if len(threads_set) < len(_INTRA_OP_SETTERS):
                _set_intra_op_threads(intra_op, threads_set, forked_after_pool)
            if not torch_seeded:  # a function that imports torch itself (forkserver)
                torch_seeded = _reseed_torch(seed)
            _run_task(conn, prefix, fns, msg)
    except (EOFError, OSError):  # the parent is gone
        return
    finally:
        shm.unlink_prefix(prefix)  # segments nobody will read now


# Each library's intra-op thread setting (process-wide), set once per worker process.
_INTRA_OP_SETTERS = {"torch": "set_num_threads", "cv2": "setNumThreads"}


def _set_intra_op_threads(intra_op: int, done: set, hold: bool = False) -> None:
    """Give torch's and OpenCV's intra-op pools ``intra_op`` threads in this worker (not
    OpenCV's when the worker was forked with it imported: ``_worker_main``)
    (``max_intra_op_parallelism``, default 1: one process per core, as DataLoader workers
    run torch) before its next task, once each library is imported (``done``: those set).
    Both settings are process-wide, and the process is the stage's. ``hold``: keep torch
    there (``_hold_intra_op_threads``)."""
    for name, setter in _INTRA_OP_SETTERS.items():
        if name not in done and name in sys.modules:
            getattr(sys.modules[name], setter, lambda n: None)(max(1, intra_op))
            if hold and name == "torch":
                _hold_intra_op_threads(sys.modules[name], max(1, intra_op))
            done.add(name)


def _hold_intra_op_threads(torch: Any, most: int) -> None:
    """In a worker forked from a process whose OpenMP pool may have started, a function's
    own ``torch.set_num_threads(n)`` above ``most`` would make torch's next parallel
    region wait for ever for the pool's inherited threads, which do not exist here (the
    adversary's case: a hang, no error). It is held at ``most``, with one warning."""
    set_num_threads = torch.set_num_threads
    warned: list[int] = []

    def held(n: int) -> None:
        if n > most:
            if not warned:
                warnings.warn(
                    f"torch.set_num_threads({n}) in a datapipe worker process holds at {most}: "
                    "the worker was forked after this program's OpenMP pool started, and "
                    "more intra-op threads would wait for that pool for ever (set "
                    "Options.threading.max_intra_op_parallelism for more: the workers then "
                    "start with forkserver)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                warned.append(n)
            n = most
        set_num_threads(n)

    torch.set_num_threads = held


def _load_function(conn: Any, key: int, blob: bytes) -> Any:
    import cloudpickle

    try:
        return cloudpickle.loads(blob)
    except BaseException as e:  # noqa: BLE001 - reported to the parent with each task
        return _Failure(e)


def _run_task(conn: Any, prefix: str, fns: dict, msg: tuple) -> None:
    _, task, key, indexed, first, payload = msg
    t0, c0 = time.perf_counter(), time.process_time()
    fn = fns.get(key)
    elems = shm.loads(*payload)
    out: list = []
    # the function carries its stage's draw key: random layers draw by element position
    scope = _draws.enter(fn, out, first)
    try:
        _run_elements(fn, elems, indexed, first, out)
    finally:
        _draws.leave(scope)
    del elems, payload
    result = _encode(out, f"{prefix}o{task}")
    t1, cpu = time.perf_counter(), time.process_time() - c0
    conn.send(("done", task, result, t0, t1, cpu))


def _run_elements(fn: Any, elems: list, indexed: bool, first: int, out: list) -> None:
    from datapipe._functions import call

    for k, x in enumerate(elems):
        if isinstance(fn, _Failure) or fn is None:
            out.append(fn if fn is not None else _Failure(RuntimeError("no function")))
            continue
        try:
            out.append(fn(first + k, x) if indexed else call(fn, x))
        except BaseException as e:  # noqa: BLE001 - delivered at the element's position
            out.append(_Failure(e))


def _encode(out: list, name: str) -> tuple:
    try:
        return shm.dumps(out, name)
    except Exception:  # noqa: BLE001 - find the results that cannot be sent
        import pickle

        for i, x in enumerate(out):
            try:
                pickle.dumps(x, protocol=5)
            except Exception as e:  # noqa: BLE001
                err = TypeError(f"the function's result cannot be sent from the worker: {e}")
                out[i] = _Failure(err)
                out[i].unsendable = True
        return shm.dumps(out, name)


# ---- the start method -------------------------------------------------------------------
def choose_start_method(requested: str | None, intra_op: int) -> tuple[str, str]:
    """(start method, why) for worker processes (module docstring, "Start methods")."""
    if requested:
        return requested, "set in Options.threading.process_start_method"
    if "fork" not in multiprocessing.get_all_start_methods():
        method = multiprocessing.get_start_method()
        return method, f"{method} is this platform's default (no fork here)"
    if intra_op <= 1:
        return "fork", (
            "the workers run torch on one intra-op thread (max_intra_op_parallelism 1), so "
            "they never enter a thread pool inherited from this process"
        )
    pool = _pool_may_have_started()
    if pool is not None:
        return "forkserver", (
            f"the workers use {intra_op} intra-op threads and {pool}: a forked worker would "
            "wait for that pool's threads, which do not exist in it, for ever"
        )
    return "fork", "no thread pool started in this process after datapipe was imported"


def _pool_may_have_started() -> str | None:
    """Why an OpenMP or intra-op thread pool may be running in this process, or None."""
    import datapipe.parallel as par

    if par.TORCH_BEFORE_IMPORT:
        return "torch was imported before datapipe (its pool may predate datapipe's count)"
    if par.IMPORT_THREADS is None:
        return None  # no /proc to count threads in (not Linux): fork is not the default
    # Sampled twice: a Python thread that is starting or ending is briefly on the list of
    # the process's threads and not on Python's.
    first = par.native_threads() or set()
    time.sleep(0.002)
    new = (first & (par.native_threads() or set())) - par.IMPORT_THREADS
    if not new:
        return None
    return (
        f"{len(new)} native thread(s) that Python does not know about started after "
        "datapipe was imported (an OpenMP or intra-op pool, e.g. torch's)"
    )


def fork_is_chosen(requested: str | None, intra_op: int) -> bool:
    """Whether workers would start by forking: the only start method AUTOTUNE may choose
    processes with when no method is set, as forkserver and spawn import the main module
    in each worker (a script without ``if __name__ == "__main__":`` would run again)."""
    return requested is not None or choose_start_method(None, intra_op)[0] == "fork"


def _context(method: str) -> Any:
    mp: Any = multiprocessing.get_context(method)
    if method == "forkserver":
        # The server imports what every worker needs once; it runs no torch op itself, so
        # the workers forked from it start without any thread pool.
        preload = ["datapipe.parallel.processes"] + (["torch"] if "torch" in sys.modules else [])
        mp.set_forkserver_preload(preload)
    return mp


_warned_forkserver = False


def _announce(op: str, method: str, why: str, requested: str | None) -> None:
    global _warned_forkserver
    if method == "forkserver" and requested is None and not _warned_forkserver:
        _warned_forkserver = True
        import logging

        logging.getLogger("datapipe").warning(
            "%s: worker processes start with forkserver, not fork: %s. The main module is "
            "imported in each worker, as with spawn: guard a script's pipeline with "
            "`if __name__ == '__main__':`.",
            op,
            why,
        )


def pool_seed(seed: int | None, ordinal: int) -> int:
    """The base seed of a pipeline's ``ordinal``-th pool of worker processes (pools are
    leased in the order the pipeline's stages start): from ``Options.seed`` when it is set,
    else from the parent's global generators as they stand (torch's initial seed, numpy's
    and ``random``'s states; read, not drawn from). So once those seeds are set, every run
    seeds its workers alike, as torch's DataLoader does from its base seed; unseeded, the
    parent's generators come from the OS's entropy, and so do the workers'."""
    if seed is not None:
        seq = np.random.SeedSequence([int(seed) % 2**64, ordinal, 0x5EED])
        return int(seq.generate_state(1, np.uint64)[0])
    import hashlib
    import random

    h = hashlib.blake2b(digest_size=8)
    torch = sys.modules.get("torch")
    if torch is not None:
        h.update(int(torch.initial_seed()).to_bytes(8, "little"))
    _, keys, pos, *_ = np.random.get_state()
    h.update(np.asarray(keys, dtype=np.uint32).tobytes() + int(pos).to_bytes(4, "little"))
    h.update(np.asarray(random.getstate()[1], dtype=np.uint32).tobytes())
    return int.from_bytes(h.digest(), "little") ^ ordinal


def worker_seed(base: int, index: int) -> int:
    """The seed of worker process ``index`` of a pool (``_reseed``): distinct per worker,
    the same in every run for the same ``base`` (DataLoader's ``base_seed + worker_id``,
    mixed so that neighbouring bases do not share workers' seeds)."""
    seq = np.random.SeedSequence([base % 2**64, index])
    return int(seq.generate_state(1, np.uint64)[0]) >> 1  # 63 bits


# ---- the parent's side ----------------------------------------------------------------
class _Proc:
    def __init__(self, process: Any, conn: Any, prefix: str):
        self.process, self.conn, self.prefix = process, conn, prefix
        self.fn_key: int | None = None
        self.task = 0
        # A task whose result was not read (the stage stopped while it was computed). It
        # must be read before anything is sent: a large result and a large message the
        # other way would fill the pipe in both directions, each side blocked in send().
        self.abandoned: int | None = None


class Workers:
    """The worker processes of one stage of one pipeline.

    ``set_function(fn)`` once per stage (epoch); ``start_process()`` starts one more;
    ``run(wid, lane, elems, first, cancelled)`` computes a chunk in process ``wid`` (called
    by the executor's worker thread ``wid`` only; ``cancelled()`` says the stage stopped
    meanwhile); what the workers measure goes to ``meter`` (``stage.Meter``), never back
    into the engine; ``release()`` when the stage closes; ``shutdown()``
    stops them all.
    """

    def __init__(self, op: str, start_method: str | None, intra_op: int):
        self.op, self.intra_op = op, intra_op
        self.requested = start_method
        self.mp: Any = None  # the multiprocessing context (its Process, Pipe): at first start
        self.start_method: str | None = None  # and why (``choose_start_method``)
        self.start_reason: str | None = None
        self.forked_after_pool = False  # (``_hold_intra_op_threads``)
        # AUTOTUNE's choice (False): an element or a result that cannot be pickled is
        # computed in the parent (``local(lane, elems, first)``) and ``on_step_back(why)``
        # asks the stage to go back to threads; True (executor="process"): it fails.
        self.strict = True
        self.local: Any = None
        self.on_step_back: Any = None
        self.prefix = f"{shm.SHM_PREFIX}{os.getpid()}-{next(_SERIAL)}-"
        self.base_seed = secrets.randbits(63)  # ``lease`` sets ``pool_seed``
        self.procs: list[_Proc] = []
        self.fn_key = 0
        self.fn_blob: bytes | None = None
        self.meter: Any = None  # the stage's meter (None: parked, or not leased yet)
        self.registry: Any = None  # weakref to the pipeline's _Registry
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _shutdown, self.procs, self.prefix)

    def set_function(self, fn: Any) -> None:
        import cloudpickle

        try:
            blob = cloudpickle.dumps(fn)
        except Exception as e:
            raise TypeError(
                f"{self.op}: the function cannot be sent to worker processes (cloudpickle: "
                f"{type(e).__name__}: {e}); use executor='thread' or make it picklable"
            ) from e
        self.fn_key += 1
        self.fn_blob = blob

    def start_process(self) -> None:
        """Start one more worker process (the first chooses the start method)."""
        with self._lock:
            if self.mp is None:
                method, why = choose_start_method(self.requested, self.intra_op)
                self.mp, self.start_method, self.start_reason = _context(method), method, why
                # a forked worker whose function raises torch's threads would hang
                self.forked_after_pool = method == "fork" and _pool_may_have_started() is not None
                _announce(self.op, method, why, self.requested)
            i = len(self.procs)
            parent, child = self.mp.Pipe()
            prefix = f"{self.prefix}{i}-"
            p = self.mp.Process(
                target=_worker_main,
                args=(
                    child,
                    prefix,
                    self.intra_op,
                    worker_seed(self.base_seed, i),
                    self.start_method == "fork",
                    self.forked_after_pool,
                ),  # fmt: skip
                name=f"datapipe-{self.op}-process-{i}",
                daemon=True,
            )
            p.start()
            child.close()
            self.procs.append(_Proc(p, parent, prefix))

    def pids(self) -> list[int]:
        return [p.process.pid for p in self.procs]

    def run(self, wid: int, lane: Any, elems: list, first: int,
            cancelled: Callable[[], bool]) -> tuple | None:  # fmt: skip
        """(results, any failed) of ``lane.transform`` over ``elems`` computed in process
        ``wid`` (``Failed`` items in place of failures); None if the stage stopped."""
        proc = self.procs[wid]
        if proc.abandoned is not None:  # its result first (see _Proc.abandoned)
            late = self._wait(proc, proc.abandoned, cancelled, first, len(elems))
            if late is None:
                return None
            proc.abandoned = None
            shm.discard(late[2][1])
        proc.task += 1
        task = proc.task
        if proc.fn_key != self.fn_key:
            proc.conn.send(("fn", self.fn_key, self.fn_blob))
            proc.fn_key = self.fn_key
        try:
            payload = shm.dumps(elems, f"{proc.prefix}i{task}")
        except OSError:
            raise  # not the elements' fault (shared memory): the stage cannot go on
        except Exception:  # noqa: BLE001 - some element cannot be pickled: fail those only
            if all(_picklable(x) for x in elems):
                raise  # the chunk as a whole: _run_sendable would come back here for ever
            return self._run_sendable(wid, lane, elems, first, cancelled)
        try:
            proc.conn.send(("run", task, self.fn_key, lane.indexed, first, payload))
        except OSError:
            shm.discard(payload[1])
            proc.process.join(0.5)
            raise self._died(proc, first, len(elems)) from None
        msg = self._wait(proc, task, cancelled, first, len(elems))
        if msg is None:
            proc.abandoned = task
            return None
        _, _, result, t0, t1, cpu = msg
        out = shm.loads(*result)
        meter = self.meter
        if meter is not None:
            meter.record(len(out), t1 - t0, cpu)
        if trace.ENABLED:  # a span per chunk on the track of the thread serving this worker
            args = {"elements": len(out), "pid": proc.process.pid}
            trace.record_span(f"{self.op} workers", "chunk", t0, t1, args)
        if not self.strict:
            self._results_here(out, lane, elems, first)
        return _located(out, lane, first, proc)

    def _results_here(self, out: list, lane: Any, elems: list, first: int) -> None:
        """Compute in the parent the elements whose results could not be sent back."""
        for k, x in enumerate(out):
            if type(x) is _Failure and x.unsendable:
                self._step_back(first + k, x.message)
                items, _ = self.local(lane, [elems[k]], first + k)
                out[k] = items[0]

    def _step_back(self, index: int, why: str) -> None:
        if self.on_step_back is not None:
            self.on_step_back(
                f"{self.op}: element {index} cannot be sent to a worker process ({why}); it "
                "was computed in this process, and AUTOTUNE moved the stage back to threads"
            )

    def _run_sendable(self, wid: int, lane: Any, elems: list, first: int,
                      cancelled: Callable[[], bool]) -> tuple | None:  # fmt: skip
        """``run`` for a chunk holding elements that cannot be pickled: each of those fails
        at its position (naming the op and index); the others are computed."""
        import pickle

        out: list = []
        k = 0
        while k < len(elems):
            try:
                pickle.dumps(elems[k], protocol=5)
            except Exception as e:  # noqa: BLE001 - reported at the element's position
                if not self.strict:  # AUTOTUNE's choice: computed here, never an error
                    self._step_back(first + k, f"{type(e).__name__}: {e}")
                    out += self.local(lane, [elems[k]], first + k)[0]
                    k += 1
                    continue
                err = TypeError(
                    f"the element cannot be sent to a worker process ({type(e).__name__}: "
                    f"{e}); use executor='thread'"
                )
                stride, offset = lane.base
                out.append(Failed(annotate(lane.op, offset + stride * (first + k), err)))
                k += 1
                continue
            j = k + 1
            while j < len(elems) and _picklable(elems[j]):
                j += 1
            got = self.run(wid, lane, elems[k:j], first + k, cancelled)
            if got is None:
                return None
            out += got[0]
            k = j
        return out, any(type(x) is Failed for x in out)

    def _wait(self, proc: _Proc, task: int, cancelled: Callable[[], bool], first: int,
              n: int) -> tuple | None:  # fmt: skip
        while True:
            ready = wait_any([proc.conn, proc.process.sentinel], POLL_S)
            if proc.conn in ready:
                try:
                    msg = proc.conn.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is not None:
                    if msg[1] == task:
                        return msg
                    shm.discard(msg[2][1])  # the result of a task abandoned before
                    continue
            if proc.conn in ready or proc.process.sentinel in ready:
                proc.process.join(0.5)
                raise self._died(proc, first, n)
            if cancelled():
                return None  # stopping: the late result is dropped by the next task

    def _died(self, proc: _Proc, first: int, n: int) -> WorkerDiedError:
        code = proc.process.exitcode
        if code is not None and code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited (code {code})"
        return WorkerDiedError(
            f"{self.op}: worker process {proc.process.name} (pid {proc.process.pid}) {how} "
            f"while computing elements {first}..{first + n - 1}; the stage cannot go on (a "
            "signal, a function that crashes the interpreter, or the out-of-memory killer "
            "ends a worker process)"
        )

    def release(self) -> None:
        """The stage using these processes closed: park them for the next epoch's stage
        (inside ``epoch_boundary``), else stop them."""
        self.meter = None
        reg = self.registry() if self.registry is not None else None
        if reg is None:
            self.shutdown()
            return
        reg.park(self)

    def shutdown(self) -> None:
        self._finalizer()


def _picklable(x: Any) -> bool:
    import pickle

    try:
        pickle.dumps(x, protocol=5)
    except Exception:  # noqa: BLE001
        return False
    return True


def _located(out: list, lane: Any, first: int, proc: _Proc) -> tuple[list, bool]:
    """Replace each worker failure with a ``Failed`` naming the op and the element."""
    stride, offset = lane.base
    failed = False
    for k, x in enumerate(out):
        if type(x) is _Failure:
            out[k] = Failed(_remote_error(x, lane.op, offset + stride * (first + k), proc))
            failed = True
    return out, failed


def _remote_error(f: _Failure, op: str, index: int, proc: _Proc) -> BaseException:
    exc = f.exc if f.exc is not None else RuntimeError(f"{f.type_name}: {f.message}")
    if not isinstance(exc, Exception):
        # sys.exit() (or a KeyboardInterrupt, GeneratorExit) raised by the function in a
        # worker ends nothing in the parent: re-raised there, SystemExit(0) ended a
        # training script with status 0 mid-epoch. An element's error, as DataLoader
        # reports a worker's exit; Ctrl-C is the parent's own (workers ignore SIGINT).
        exc = RuntimeError(
            f"the function raised {f.type_name}({f.message}) in a worker process; "
            "it ends neither the worker nor the pipeline"
        )
    exc.__cause__ = RemoteTraceback(f"\n'''\n{f.tb}'''")
    err = annotate(op, index, exc)
    where = f"in worker process {proc.process.name} (pid {proc.process.pid})"
    if hasattr(err, "add_note"):
        err.add_note(f"raised {where}:\n{f.tb}")
    try:
        err.worker_traceback = f.tb  # type: ignore[attr-defined]  # for debuggers
    except AttributeError:
        pass
    return err


def _shutdown(procs: list[_Proc], prefix: str) -> None:
    """Stop every process within ~1 s (asked to stop; SIGTERM after 0.5 s, as one busy in
    a long function does not read the request; SIGKILL after 0.3 s more), and remove every
    segment of the pool."""
    for p in procs:
        try:
            # Never block here: a worker that is not reading (busy, or stuck sending a
            # result nobody reads now) would hold close() forever; it gets SIGTERM below.
            os.set_blocking(p.conn.fileno(), False)
            p.conn.send(("stop",))
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 0.5
    for p in procs:
        p.process.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.process.is_alive():
            p.process.terminate()
    deadline = time.monotonic() + 0.3
    for p in procs:
        p.process.join(max(0.0, deadline - time.monotonic()))
        if p.process.is_alive():
            p.process.kill()
            p.process.join(0.2)
        try:
            p.conn.close()
        except OSError:
            pass
        if p.process.exitcode is not None:
            p.process.close()  # its sentinel's descriptor now, not when it is collected
    procs.clear()
    shm.unlink_prefix(prefix)


# ---- one pipeline's pools ---------------------------------------------------------------
class _Registry:
    """The process pools of one pipeline (one iteration context): in use, or parked by a
    stage that closed at a ``repeat`` epoch boundary, for the next epoch's stage to take
    back (``lease``)."""

    def __init__(self) -> None:
        self.pools: dict[Any, Workers] = {}
        self.parked: list[Any] = []
        self.lock = threading.Lock()
        self.parking = 0  # > 0 while a repeat closes an epoch (see ``epoch_boundary``)

    def park(self, w: Workers) -> None:
        with self.lock:
            key = next((k for k, v in self.pools.items() if v is w), None)
            if key is None or not self.parking:
                if key is not None:
                    del self.pools[key]
                drop = [w]
            else:
                self.parked.append(key)
                drop = []
                while len(self.parked) > MAX_PARKED:
                    drop.append(self.pools.pop(self.parked.pop(0)))
        for d in drop:
            d.shutdown()

    def close_parked(self) -> None:
        with self.lock:
            drop = [self.pools.pop(k) for k in self.parked if k in self.pools]
            self.parked = []
        for w in drop:
            w.shutdown()


def _registry(ctx: Any) -> _Registry:
    reg = ctx.__dict__.get("_datapipe_workers")
    if reg is None:
        reg = ctx._datapipe_workers = _Registry()
    return reg


def lease(ctx: Any, key: Any, op: str) -> Workers:
    """The worker processes for stage ``key`` of the pipeline of ``ctx``: the ones the
    previous epoch's stage parked, or new ones (started on first use)."""
    from datapipe.parallel import autotune

    reg = _registry(ctx)
    with reg.lock:
        w = reg.pools.get(key)
        if w is not None and key in reg.parked:
            reg.parked.remove(key)
            return w
        if w is not None:  # the same op running twice at once (e.g. zip(ds, ds))
            key = (key, next(_SERIAL))
        opts = ctx.options.threading
        w = Workers(op, opts.process_start_method, autotune.intra_op(ctx))
        w.base_seed = pool_seed(ctx.options.seed, len(reg.pools))
        reg.pools[key] = w
        w.registry = weakref.ref(reg)
    return w


@contextlib.contextmanager
def epoch_boundary(ctx: Any) -> Iterator[None]:
    """Stages closed inside this block (``repeat`` ending an epoch) park their worker
    processes for the next epoch's stage instead of stopping them."""
    reg = _registry(ctx)
    reg.parking += 1
    try:
        yield
    finally:
        reg.parking -= 1


def close_parked(ctx: Any) -> None:
    """Stop the processes parked in the pipeline of ``ctx`` (``repeat``'s close: no epoch
    will take them back)."""
    reg = ctx.__dict__.get("_datapipe_workers") if ctx is not None else None
    if reg is not None:
        reg.close_parked()
