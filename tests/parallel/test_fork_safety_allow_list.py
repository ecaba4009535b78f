"""AUTOTUNE proves a function safe before it moves it to worker processes (issue 35, item
2; ``datapipe/parallel/fork_safety.py``): every value the function reaches is an immutable
value, a module, a library callable, or a function, class or object that passes the same
reading. The adversary's cases each went to processes with ``process_refusal`` None and
repeated draws, ids or lines there. Each case here starts AUTOTUNE on processes (a
remembered choice, as a second ``iter()`` would): the stage must refuse them, name the
object, and compute what the sequential pipeline computes.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from harness import spin

import datapipe as dp
import preprocessing as pp
from datapipe.parallel.fork_safety import parent_state, process_safe
from datapipe.parallel.remembered import TunedChoice

pytestmark = pytest.mark.timeout(120)

N = 48
WHY = (
    "not an immutable value, a module, or a function or class that passes the reading; a "
    "worker process would use its own copy"
)
_lines = os.path.join(tempfile.mkdtemp(prefix="datapipe-allow-list-"), "lines.txt")
with open(_lines, "wb") as _out:
    _out.write(b"".join(b"%d\n" % i for i in range(N)))

# The adversary's module-level state (issue 35, item 2); reset() makes each fresh.
RNG: Any = None
RAND: Any = None
IDS: Any = None
COUNTER: Any = None
READ: Any = None
CURSOR: Any = None
COMPRESS: Any = None


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def next_id(self) -> int:
        self.n += 1
        return self.n


class Tally:
    n = 0


def reset() -> None:
    global RNG, RAND, IDS, COUNTER, READ, CURSOR, COMPRESS
    RNG = np.random.default_rng(0)
    RAND = random.Random(0)
    IDS = itertools.count()
    COUNTER = Counter()
    READ = functools.partial(read_line, open(_lines, "rb"))  # noqa: SIM115 - on purpose
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE t (k INTEGER)")
    db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(N)])
    CURSOR = db.execute("SELECT k FROM t ORDER BY k")
    COMPRESS = zlib.compressobj()
    Tally.n = 0
    history.cache_clear()


def read_line(file, i) -> int:
    return int(file.readline())


def read_next(i) -> int:  # a module function: sent to workers by reference, not pickled
    return READ(i)


def draw(i) -> float:
    return float(RNG.random())


def rand(i) -> float:
    return RAND.random()


def next_id(i) -> int:
    return next(IDS)


def counter(i) -> int:
    return COUNTER.next_id()


def row(i) -> int:
    return CURSOR.fetchone()[0]


def compressed_size(i) -> int:  # the first call's output holds the stream's 2-byte header
    return len(COMPRESS.compress(b"datapipe" * 16) + COMPRESS.flush(zlib.Z_FULL_FLUSH))


def bump(i) -> int:
    Tally.n += 1
    return Tally.n


@functools.cache
def history() -> list:
    return []


def seen_so_far(i) -> int:  # the cached list is the state: each worker fills its own
    h = history()
    h.append(int(i))
    return len(h)


CASES: dict[str, tuple[Callable[[], Callable], str]] = {
    "default_rng": (lambda: draw, f"draw uses the global 'RNG' "
                    f"(numpy.random._generator.Generator): {WHY}"),
    "random.Random": (lambda: rand, f"rand uses the global 'RAND' (random.Random): {WHY}"),
    "itertools.count": (lambda: next_id, f"next_id uses the global 'IDS' "
                        f"(itertools.count): {WHY}"),
    "a counter method": (lambda: counter, "Counter.next_id changes its object, the global "
                         "'COUNTER' (a worker process would change its own copy)"),
    "partial(read_line, file)": (lambda: read_next, f"functools.partial(read_line) uses its "
                                 f"argument 0 (_io.BufferedReader): {WHY}"),
    "sqlite3 cursor": (lambda: row, f"row uses the global 'CURSOR' (sqlite3.Cursor): {WHY}"),
    "zlib.compressobj": (lambda: compressed_size, f"compressed_size uses the global "
                         f"'COMPRESS' (zlib.Compress): {WHY}"),
    "C.n += 1": (lambda: bump, "bump assigns the attribute 'Tally.n' (a worker process "
                 "would assign its own copy)"),
    "lru_cache": (lambda: seen_so_far, f"seen_so_far uses the global 'history' "
                  f"(functools._lru_cache_wrapper): {WHY}"),
}  # fmt: skip


def _options() -> dp.Options:
    return dp.Options(autotune=dp.AutotuneOptions(cpu_budget=2))


def _values(elements) -> list:
    return [x.item() if hasattr(x, "item") else x for x in elements]


def _on_processes(fn: Callable, n: int = N) -> tuple[Any, list]:
    """``map(fn, AUTOTUNE)`` started on two worker processes, as a second ``iter()`` after
    a search that settled on them (``remembered.py``): its iterator and elements."""
    ds = dp.range(n).with_options(_options()).map(fn, num_parallel_calls=dp.AUTOTUNE)
    ds.stage_request.tuned.put(TunedChoice("process", 2, 1.0, 2))
    it = iter(ds)
    return it, it


@pytest.mark.parametrize("case", list(CASES))
def test_state_a_worker_would_copy_keeps_autotune_on_threads(case, clean):
    make, refusal = CASES[case]
    reset()
    want = _values(dp.range(N).map(make()))
    reset()
    fn = make()
    assert parent_state(fn) == refusal
    it, elements = _on_processes(fn)
    assert it.root.process_refusal == refusal
    assert it.root.executor != "process"
    got = _values(elements)
    assert it.root.worker_pids() == []
    # the same values as the sequential pipeline (threads may hand them to other elements)
    assert sorted(got) == sorted(want)
    assert len(set(got)) == len(set(want))


def test_the_sequential_references_are_what_the_cases_claim():
    reset()
    assert _values(dp.range(N).map(next_id)) == list(range(N))
    reset()
    assert _values(dp.range(N).map(READ)) == list(range(N))
    reset()
    assert _values(dp.range(N).map(row)) == list(range(N))
    reset()
    sizes = _values(dp.range(N).map(compressed_size))
    assert sizes[0] == sizes[1] + 2 and set(sizes[1:]) == {sizes[1]}  # one header


# ---- what the reading proves safe --------------------------------------------------------

STEPS = 2_000
SCALE = (0.5, 2.0)
EDGES = frozenset({1, 2, 3})
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
MEAN.flags.writeable = False


def w6_f(x):  # benchmarks/workloads/w6.py's function
    s = int(x)
    for i in range(STEPS):
        s = (s * 31 + i) % 1000003
    return s


def cheap(i):  # W4's
    return i * 2 + 1


def io_latency(i):  # W4's
    time.sleep(0.0001)
    return i


LOG = logging.getLogger(__name__)


def logs(i):
    LOG.debug("element %s", i)
    return i


def normalized(i):
    return float(np.sqrt(float(i)) * SCALE[1] - MEAN[0]) + (int(i) in EDGES)


@dataclass(frozen=True)
class Scaler:
    factor: float = 2.0

    def __call__(self, x):
        return float(x) * self.factor


def _walkthrough_augmentation():
    """docs/guides/your-own-data.md: the layers of examples/train_own_data.py in map."""
    augment = torch.nn.Sequential(
        pp.RandomFlip("horizontal", seed=0), pp.RandomRotation(0.1, seed=1)
    )
    return lambda x, y: (augment(x), y)


def _w4_functions() -> dict[str, Callable]:
    """W4's closures (benchmarks/workloads/w4.py): a list of paths and an array it holds."""
    files = [f"{i:05d}.jpg" for i in range(10)]
    table = {"a": 1}
    big = np.random.default_rng(0).random(100)

    def jpeg(i):  # reads the list: indexed, len()
        return files[int(i) % len(files)]

    def reads(i):  # `in`, iteration, reading methods, reading builtins, a comprehension
        return (
            (i in files)
            + sum(1 for _ in files)
            + len(sorted(files))
            + table.get(i, 0)
            + len([files[j] for j in range(2)])
        )

    def appends(i):
        files.append(i)
        return i

    def shuffles(i):
        random.shuffle(files)
        return files[0]

    def alias(i):
        f = files
        return f[0]

    def numpy_sort(i):
        return np.sort(big)[int(i) % 100]

    return {"jpeg": jpeg, "reads": reads, "appends": appends, "shuffles": shuffles,
            "alias": alias, "numpy_sort": numpy_sort}  # fmt: skip


PY311 = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="the read-only proof models 3.11's bytecode"
)


@PY311
def test_a_closed_over_container_that_is_only_read_is_proven():
    fns = _w4_functions()
    assert parent_state(fns["jpeg"]) is None
    assert parent_state(fns["reads"]) is None
    for name in ("appends", "shuffles", "alias"):  # a change, an argument, an alias
        assert parent_state(fns[name]) == (
            f"_w4_functions.<locals>.{name} uses the variable 'files' it closes over (list): {WHY}"
        )
    # an array handed to a function (np.sort does not change it; np.random.shuffle would)
    assert parent_state(fns["numpy_sort"]) == (
        f"_w4_functions.<locals>.numpy_sort uses the variable 'big' it closes over "
        f"(numpy.ndarray): {WHY}"
    )


def test_the_walkthroughs_w4s_and_w6s_functions_are_proven():
    assert parent_state(w6_f) is None
    assert parent_state(cheap) is None
    assert parent_state(io_latency) is None  # the time module is a library's
    assert parent_state(normalized) is None  # tuples, frozensets, a read-only array, np.sqrt
    assert parent_state(Scaler()) is None  # a callable object that changes nothing
    assert parent_state(functools.partial(normalized)) is None
    assert parent_state(logs) is None  # a module-level logger
    assert parent_state(_walkthrough_augmentation()) is None
    factor = 3
    assert parent_state(lambda x, k=4, *, j=(1, 2): cheap(x) * factor * k + j[0]) is None


@pytest.mark.parametrize(
    "fn",
    [w6_f, cheap, normalized, Scaler(), pytest.param(_w4_functions()["jpeg"], marks=PY311)],
    # a name, not repr: a function's repr holds its address, which differs between
    # pytest-xdist's workers (they must collect the same ids)
    ids=lambda fn: getattr(fn, "__name__", type(fn).__name__),
)
def test_a_proven_function_still_goes_to_processes(fn, clean):
    want = _values(dp.range(N).map(fn))
    it, elements = _on_processes(fn)
    assert it.root.process_refusal is None
    assert it.root.executor == "process"
    assert _values(elements) == want
    it.close()


def test_the_walkthroughs_augmentation_still_goes_to_processes(clean):
    images = np.random.default_rng(1).random((12, 3, 8, 8), dtype=np.float32)
    source = dp.from_tensor_slices((images, np.arange(12)))
    fn = _walkthrough_augmentation()
    want = [x.numpy() for x, _ in source.map(fn)]
    ds = source.with_options(_options()).map(fn, num_parallel_calls=dp.AUTOTUNE)
    ds.stage_request.tuned.put(TunedChoice("process", 2, 1.0, 2))
    it = iter(ds)
    assert it.root.process_refusal is None and it.root.executor == "process"
    got = [x.numpy() for x, _ in it]
    assert len(got) == 12
    for a, b in zip(got, want):  # the same draws by position; floats of one machine
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


# ---- what it refuses, and how it names it ------------------------------------------------

CACHE: dict = {}
BIG = np.zeros(4)
VIEW = BIG[:2]
VIEW.flags.writeable = False  # read-only, but its base is written to


def with_default(x, seen={}):  # noqa: B006 - the mutable default is the point
    return seen.setdefault(x, len(seen))


def with_kwdefault(x, *, rng=np.random.default_rng(0)):  # noqa: B008
    return rng.random()


def rebinds_a_global(x):
    globals()["CACHE"] = {x: x}
    return x


class Stateful:
    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return x


def decorated_with(state):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(x):
            state.append(x)  # a call log kept by the decorator
            return fn(x)

        return wrapper

    return decorator


@decorated_with(state=[1])
def decorated(x):
    return x


class Box:
    def __init__(self):
        self.n = 0

    def get(self):
        return self.n


BOX = Box()


def through_an_alias(i):
    b = BOX
    b.n = b.n + 1
    return b.n


def on_a_fresh_object(i):
    b = Box()
    b.n = int(i)
    return b.get()


def on_what_a_call_returns(i):
    shared_box().n = 1
    return i


def shared_box():
    return BOX


def test_attribute_stores_are_placed_or_refused():
    assert parent_state(on_a_fresh_object) is None  # a Box made per call
    assert parent_state(through_an_alias) == (
        "through_an_alias assigns an attribute of a local object while it reaches the shared "
        "object the global 'BOX' (it may be that object)"
    )
    assert parent_state(on_what_a_call_returns) == (
        "on_what_a_call_returns assigns the attribute 'n' of an object it cannot place"
    )


def test_each_path_to_a_value_is_read_and_named():
    assert parent_state(with_default) == f"with_default uses its default 0 (dict): {WHY}"
    assert parent_state(with_kwdefault) == (
        f"with_kwdefault uses its default 'rng' (numpy.random._generator.Generator): {WHY}"
    )
    assert parent_state(rebinds_a_global) == (
        "rebinds_a_global calls globals(), which changes state this reading cannot follow"
    )
    assert parent_state(Stateful()) == (
        "Stateful.__call__ changes its object (a worker process would change its own copy)"
    )
    assert parent_state(decorated) == (  # the wrapper, named as functools.wraps names it
        f"decorated uses the variable 'state' it closes over (list): {WHY}"
    )
    here = "test_each_path_to_a_value_is_read_and_named.<locals>.<lambda>"
    assert parent_state(lambda x: BIG[0] + x) == (
        f"{here} uses the global 'BIG' (numpy.ndarray): {WHY}"
    )
    assert parent_state(lambda x: VIEW[0] + x) == (
        f"{here} uses the global 'VIEW' (numpy.ndarray): {WHY}"
    )
    assert parent_state(lambda x: torch.zeros(2) + x) is None  # a library's function
    rng = np.random.default_rng(0)
    assert parent_state(rng.random) == (
        f"Generator.random uses its object (numpy.random._generator.Generator): {WHY}"
    )
    assert parent_state(lambda x: random.random() + x) is None  # the library's, re-seeded


def test_a_user_modules_attributes_are_read_and_a_librarys_are_not(tmp_path):
    usermod = types.ModuleType("datapipe_test_usermod")
    usermod.__file__ = str(tmp_path / "datapipe_test_usermod.py")
    usermod.RNG = np.random.default_rng(0)
    usermod.SCALE = 2
    sys.modules[usermod.__name__] = usermod
    try:
        assert parent_state(lambda x: usermod.SCALE * x + np.pi) is None
        assert parent_state(lambda x: usermod.RNG.random() + x) == (
            "test_a_user_modules_attributes_are_read_and_a_librarys_are_not.<locals>."
            "<lambda> uses the attribute 'usermod.RNG' "
            f"(numpy.random._generator.Generator): {WHY}"
        )
    finally:
        del sys.modules[usermod.__name__]


# ---- the user's word: process_safe --------------------------------------------------------

TABLE = {i: i * i for i in range(10)}


@process_safe
def reads_table(i) -> int:
    return spin(i) + TABLE[int(i) % 10]


def uses_reads_table(i) -> int:
    return reads_table(i) + 1


def test_a_marked_function_goes_to_processes_unread(clean):
    assert dp.process_safe is process_safe
    assert parent_state(reads_table) is None
    assert parent_state(uses_reads_table) is None  # a marked function it calls passes
    it, elements = _on_processes(reads_table, 12)
    assert it.root.process_refusal is None and it.root.executor == "process"
    assert _values(elements) == [spin(i) + (i % 10) ** 2 for i in range(12)]


def test_what_cannot_be_marked_is_named():
    with pytest.raises(TypeError, match="process_safe: cannot mark builtin_function_or_method"):
        process_safe(len)


def test_the_guides_example_runs_as_written(tmp_path):
    # docs/guides/autotune-profiling.md, "When AUTOTUNE may use worker processes"
    page = Path(__file__).resolve().parents[2] / "docs" / "guides" / "autotune-profiling.md"
    section = page.read_text().split("### When AUTOTUNE may use worker processes")[1]
    code = section.split("```python\n")[1].split("```")[0]
    printed = "\n".join(
        line.removeprefix("# ") for line in code.splitlines() if line.startswith("# ")
    )
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == printed.replace("\n", " ")
