"""The one test harness for values, checkpoint/resume and errors, shared by every test folder.

Test files import it as ``from harness import ...``: ``tests/`` is on ``sys.path`` because
its ``conftest.py`` lives there and the folders have no ``__init__.py`` (pytest's default
"prepend" import mode puts a package-less conftest's folder first on ``sys.path``).
"""

from __future__ import annotations

import _thread
import importlib.util
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import datapipe as dp
from datapipe.errors import DatapipeError
from datapipe.parallel import shm


def py(x: Any) -> Any:
    """An element as plain Python values, for exact comparison: arrays, numpy scalars and
    torch tensors become (nested) lists or scalars, tuples stay tuples, dicts and lists are
    converted item by item, and a ``Dataset`` element (``window``) becomes its elements.

    >>> py((np.arange(3), {"a": np.int64(2)}, [np.float32(0.5)]))
    ([0, 1, 2], {'a': 2}, [0.5])
    """
    if isinstance(x, dict):
        return {k: py(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(py(v) for v in x)
    if isinstance(x, list):
        return [py(v) for v in x]
    if isinstance(x, dp.Dataset):
        return [py(v) for v in x]
    if isinstance(x, (np.ndarray, np.generic)) or type(x).__module__.startswith("torch"):
        return x.tolist()
    return x


def spin(x: Any) -> int:
    """W6's GIL-bound function (~200 µs of pure Python): AUTOTUNE tries processes for it."""
    s = int(x)
    for i in range(2000):
        s = (s * 31 + i) % 1000003
    return s


def values(ds: Any) -> list:
    """Every element of one pass over ``ds`` (a Dataset or any iterable), as ``py`` values."""
    return [py(x) for x in ds]


def assert_resumes(ds: dp.Dataset, cuts: Any = None) -> None:
    """For each cut ``k`` (default: every position, end included): consume ``k`` elements,
    take the iterator's state through pickle (so it holds no live object), restore it in a
    fresh iterator, and get exactly what the original iterator goes on to produce (the same
    epoch, so random ops draw the same); head and rest together are one whole pass."""
    n = len(values(ds))
    for k in cuts if cuts is not None else range(n + 1):
        it = iter(ds)
        head = [py(next(it)) for _ in range(k)]
        state = pickle.loads(pickle.dumps(it.get_state()))
        rest = [py(x) for x in it]
        assert len(head) + len(rest) == n, f"cut at {k}: {len(head)} + {len(rest)} != {n}"
        fresh = iter(ds)
        fresh.set_state(state)
        assert [py(x) for x in fresh] == rest, f"resume after {k} elements"


def summation_order_bound(x: Any, terms: int) -> float:
    """How far two summation orders of one output value can lie apart, when each output is
    a sum of ``terms`` products ``w_i * x_i`` with weights summing to 1 (a convolution, a
    blur, an interpolation) computed in ``x``'s dtype: each order carries a rounding error
    of at most ``(terms - 1) * u * sum(|w_i x_i|) <= (terms - 1) * u * max|x|`` (Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 4.4), u = eps / 2; two
    orders differ by at most twice that, plus the final rounding of each (one eps).

    Two kernels that sum in different orders (oneDNN's convolutions by group count and the
    CPU's vector width, chunked vs whole batches, compiled vs eager) agree only within this
    bound: their bits are not defined across them (issue 27)."""
    import torch

    eps = torch.finfo(x.dtype).eps
    top = float(x.abs().max()) if x.numel() else 0.0
    return (terms - 1) * eps * top + eps * top


def _max_abs_diff(a: Any, b: Any) -> float:
    """max |a - b| over two arrays or tensors of one shape, in float64 (no rounding added;
    tensors of any dtype, bfloat16 included, through torch's own float64 conversion)."""
    import numpy as np

    def f64(x: Any) -> np.ndarray:
        if hasattr(x, "detach"):
            return x.detach().cpu().double().numpy()
        return np.asarray(x, dtype=np.float64)

    diff = np.abs(f64(a) - f64(b))
    return float(diff.max()) if diff.size else 0.0


def assert_within(got: Any, want: Any, bound: float) -> None:
    """Same dtype and shape, and every value within ``bound`` of ``want`` (compared in
    float64, so the check adds no rounding of its own). Numpy arrays or tensors. A bound of
    0 states that the values are copies (no arithmetic between input and output)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    diff = _max_abs_diff(got, want)
    assert diff <= bound, f"max |diff| {diff} > the stated bound {bound}"


def assert_changed(got: Any, before: Any) -> None:
    """Same shape, and some value differs from ``before`` (a layer did change its input):
    the float-safe form of ``assert not torch.equal(got, before)``."""
    assert got.shape == before.shape, (got.shape, before.shape)
    assert _max_abs_diff(got, before) > 0, "the output equals the input"


def consume_with_errors(ds: Any) -> tuple[list, list[str]]:
    """The elements (as ``py`` values) and the error messages of one pass, going on past
    each ``DatapipeError`` (``PipelineError``, or ``BatchShapeError`` from batching ops)."""
    out: list = []
    errors: list[str] = []
    it = iter(ds)
    while True:
        try:
            out.append(py(next(it)))
        except StopIteration:
            return out, errors
        except DatapipeError as e:
            errors.append(str(e))


def fail_at(bad: set[int]) -> Callable[[Any], int]:
    """A map function that raises ``ValueError("bad element i")`` on the elements in ``bad``
    and returns the others as ``int`` (after a short sleep, so parallel stages overlap)."""

    def f(x: Any) -> int:
        if int(x) in bad:
            raise ValueError(f"bad element {int(x)}")
        time.sleep(0.0002)
        return int(x)

    return f


# ---- fake clocks ------------------------------------------------------------------------------
class FakeClock:
    """A clock that only the test moves, for results derived from timing (the tuner's
    decisions, a profile's verdict, the input-bound split): it stands in for the clock
    functions the code under test reads (``monkeypatch.setattr(owner, name, clock)`` for
    each ``(owner, name)`` target) and reads ``now`` seconds, which only ``sleep(dt)``
    (the test's stand-in for work that takes ``dt`` seconds) moves. Such results are then
    exact functions of the durations the test declares, whatever the machine's load.

    ``sleep`` may be called from several threads (a parallel map's workers): each call
    adds its ``dt`` once, under a lock.

    >>> clock = FakeClock(None)
    >>> clock(), clock.sleep(0.25), clock()
    (0.0, None, 0.25)
    """

    def __init__(self, monkeypatch: Any, *targets: tuple[Any, str], start: float = 0.0):
        self.now = float(start)
        self._lock = threading.Lock()
        for owner, name in targets:
            monkeypatch.setattr(owner, name, self)

    def __call__(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        with self._lock:
            self.now += dt


# ---- scripts (examples/, benchmarks/) -------------------------------------------------------
class FakeExecutors:
    """A stage under AUTOTUNE's executor search whose output rate under each executor is
    ``rates[executor](p)`` and whose elements each cost ``cost`` seconds of work, its
    workers using ``cpu_fraction`` of a core while busy, on a fake clock
    (``tests/parallel/test_autotune.py``, ``test_remembered.py``). It starts on ``start``
    (a process stage with one worker per core of the budget, as ``Stage`` starts one),
    verifying ``resumed`` (a ``remembered.TunedChoice``) if given."""

    def __init__(self, monkeypatch: Any, cost: float, rates: dict, kind: str = "parallelism",
                 cpu_budget: int = 2, value: int = 2, cpu_fraction: float = 1.0,
                 start: str = "inline", resumed: Any = None):  # fmt: skip
        from datapipe.parallel import autotune
        from datapipe.parallel.stage import Knob, Meter

        self.window_s = autotune.WINDOW_S
        self.clock = FakeClock(monkeypatch, (autotune.time, "monotonic"))
        self.cpu_fraction = cpu_fraction
        self.tuner = autotune.Autotuner(True, cpu_budget, 1 << 40)
        cap = 1024 if kind == "buffer" else 64
        self.knob, self.meter = Knob("map", kind, value, True, cap), Meter()
        self.knob.executor = start
        if start == "process":
            self.knob.max_value = cpu_budget
        self.knob.on_executor = lambda executor, v: True
        self.tuner.add(self.knob, self.meter, ["inline", "thread", "process"], resumed=resumed)
        self.cost, self.rates = cost, rates

    def run(self, windows: int) -> None:
        k, m = self.knob, self.meter
        for _ in range(windows):
            dt = self.window_s
            self.clock.sleep(dt)
            n = int(self.rates[k.executor](k.value) * dt)
            m.produced += n
            if k.executor == "inline":
                busy = n * self.cost
            else:  # workers busy all the time (the stage is the bottleneck)
                busy = (1 if k.kind == "buffer" else k.value) * dt
            m.busy_s += busy
            m.cpu_s += busy * self.cpu_fraction
            self.tuner.maybe_step()

    def path(self) -> list:
        """The executor moves so far: [(old, new), ...]."""
        return [(old, new) for _, knob, old, new in self.knob.events if knob == "executor"]

    def phase(self) -> str:
        """The executor search's phase ("done" once it settled)."""
        (search,) = self.tuner._searches.values()
        return search.phase


def load_script(path: Path, name: str) -> ModuleType:
    """Import the script at ``path`` as module ``name``, as ``python path`` would see it: its
    folder first on ``sys.path`` (examples import their siblings, e.g. ``_digits_model``)
    and the module in ``sys.modules`` (dataclasses look their module up)."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---- worker processes and shared memory (executor="process") -----------------------------
def own_shm_segments() -> list[str]:
    """Shared-memory segments this test process's pipelines left behind."""
    mine = f"{shm.SHM_PREFIX}{os.getpid()}-"
    return sorted(f for f in os.listdir(shm.SHM_DIR) if f.startswith(mine))


def worker_processes() -> list[multiprocessing.Process]:
    """Live child processes a pipeline started (named ``datapipe-*``)."""
    return [p for p in multiprocessing.active_children() if p.name.startswith("datapipe-")]


def settle_processes(deadline_s: float = 2.0) -> list[multiprocessing.Process]:
    """The worker processes still alive after at most ``deadline_s`` (polling)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and worker_processes():
        time.sleep(0.02)
    return worker_processes()


_MEMORY_LIMITED = """
import resource, sys
{setup}
def _vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")
_limit = _vm_bytes() + {headroom}
resource.setrlimit(resource.RLIMIT_AS, (_limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
{body}
"""


def run_under_memory_limit(
    setup: str, body: str, headroom_mb: int, timeout_s: float = 120.0
) -> Any:
    """Run ``setup`` then ``body`` (Python source) in a fresh interpreter whose address space
    is capped (``RLIMIT_AS``) at what it uses after ``setup`` plus ``headroom_mb``: code that
    would allocate far more fails at once with ``MemoryError`` instead of swapping the
    machine. Returns the ``subprocess.CompletedProcess`` (text ``stdout``/``stderr``)."""
    import subprocess
    import textwrap

    root = Path(__file__).resolve().parents[1]
    code = _MEMORY_LIMITED.format(
        setup=textwrap.dedent(setup), headroom=headroom_mb << 20, body=textwrap.dedent(body)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    env.setdefault("OMP_NUM_THREADS", "1")  # each OpenMP thread reserves address space
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=str(root),
    )


def iterate_until_interrupted(it: Any, after_s: float = 0.2) -> None:
    """Iterate ``it`` until a ``KeyboardInterrupt`` arrives, as Ctrl-C's does, on the main
    thread, once the consumer waits inside the pipeline (at least ``after_s`` seconds in);
    ``AssertionError`` if ``it`` ended first or nothing was raised.

    The interrupt is sent only while the main thread is blocked in a datapipe wait: a
    timer alone sometimes landed in this loop's own bytecode between two ``next()`` calls
    (about 3% of the samples of a ``prefetch_to_device`` pipeline), where no iterator can
    see it, and the test then found the pipeline running (it is stopped once the iterator
    is dropped, as DataLoader's is)."""
    main, stop = threading.main_thread().ident, threading.Event()

    def interrupt() -> None:
        if stop.wait(after_s):
            return
        deadline = time.monotonic() + 30
        while not stop.is_set() and not _waits_in_datapipe(main):
            if time.monotonic() > deadline:
                break  # never waited: interrupt anyway, the test reads what happens
            time.sleep(0.001)
        if not stop.is_set():
            _thread.interrupt_main()

    # Python's own SIGINT handler, whatever the shell gave: started in the background
    # (``nohup ... &``) a process inherits SIGINT as ignored, and ``interrupt_main`` then
    # does nothing (issue 33: 6 Ctrl-C tests failed so). Ctrl-C in a terminal has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=interrupt, name="test-interrupt", daemon=True)
    sender.start()
    try:
        for _ in it:
            pass
    except KeyboardInterrupt:
        return
    finally:
        stop.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
    raise AssertionError("the iterator ended before a KeyboardInterrupt arrived")


def _waits_in_datapipe(ident: int | None) -> bool:
    """Thread ``ident`` is blocked in ``threading``'s wait, called from datapipe's code."""
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None or frame.f_code.co_name != "wait":
        return False
    caller = frame.f_back
    while caller is not None and caller.f_code.co_filename == frame.f_code.co_filename:
        caller = caller.f_back  # Condition.wait -> Event.wait
    return caller is not None and f"{os.sep}datapipe{os.sep}" in caller.f_code.co_filename


def built_site(tmp_path_factory: Any) -> Path:
    """The documentation site: the checkout's ``site/`` when it is newer than every source
    (mkdocs.yml, README.md, docs/, the packages' modules), else one ``mkdocs build
    --strict`` into a temporary folder (~30 s). Shared by the site's tests."""
    root = Path(__file__).resolve().parents[1]
    paths = [root / "mkdocs.yml", root / "README.md", *(root / "docs").rglob("*")]
    for folder in ("datapipe", "preprocessing"):
        paths += (root / folder).rglob("*.py")
    newest = max(p.stat().st_mtime for p in paths if p.is_file())
    built = root / "site" / "index.html"
    if built.is_file() and built.stat().st_mtime >= newest:
        return built.parent
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=root, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return out
