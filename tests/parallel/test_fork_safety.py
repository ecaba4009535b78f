"""AUTOTUNE keeps out of worker processes a function that would compute something else
there (``datapipe/parallel/fork_safety.py``): one that uses a module-level file or lock, or
changes state it shares with this process. breaker3 found both: a seek + read under a
module-level lock returned 48 wrong records of 3,000 once AUTOTUNE chose processes, and a
global list kept 104 of 800 appends in epoch 0 and none later.
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading

import numpy as np
import pytest
from harness import spin

import datapipe as dp
from datapipe._functions import ReturnsElement
from datapipe.parallel.fork_safety import parent_state

pytestmark = pytest.mark.timeout(120)

RECORDS = 600
_path = os.path.join(tempfile.mkdtemp(prefix="datapipe-fork-safety-"), "records.bin")
with open(_path, "wb") as _out:
    _out.write(b"".join(i.to_bytes(8, "little") for i in range(RECORDS)))
_file = open(_path, "rb", buffering=0)  # noqa: SIM115 - module-level on purpose
_lock = threading.Lock()
calls: list[int] = []
table = {i: i * i for i in range(10)}
count = 0


def read_record(i) -> int:
    spin(i)
    with _lock:
        _file.seek(8 * int(i))
        return int.from_bytes(_file.read(8), "little")


def record_call(i) -> int:
    calls.append(int(i))
    return spin(i)


def count_call(i) -> int:
    global count
    count += 1
    return spin(i)


def reads_table(i) -> int:
    return spin(i) + table[int(i) % 10]


def calls_read_record(i) -> int:
    return read_record(i) + 1


class Recorder:
    def __call__(self, i) -> int:
        calls.append(int(i))
        return int(i)


class Reader:
    """A module-level reader object holding a file and a lock (breaker4: 4 of 3,000 wrong)."""

    def __init__(self):
        self.file = open(_path, "rb", buffering=0)  # noqa: SIM115
        self.lock = threading.Lock()

    def read(self, i) -> int:
        with self.lock:
            self.file.seek(8 * int(i))
            return int.from_bytes(self.file.read(8), "little")


READER = Reader()


class Tally:
    seen: list[int] = []
    total = 0

    def count(self, i) -> int:
        self.total += int(i)  # a worker changes its copy
        return int(i)


VOCAB = {"a": 1, "b": 2}


def uses_reader(i) -> int:
    return READER.read(i)


def class_attribute(i) -> int:
    Tally.seen.append(int(i))
    return int(i)


def appends_through_a_decorator(fn):
    @functools.wraps(fn)
    def wrapper(x):
        return fn(x)

    return wrapper


@appends_through_a_decorator
def decorated(i) -> int:
    calls.append(int(i))
    return int(i)


def tokenize(text) -> list[int]:  # reads a global dict, appends to its own list
    out = []
    for word in text.split():
        out.append(VOCAB.get(word, 0))
    return out


class Unreadable:
    @property
    def __dict__(self):  # type: ignore[override]
        raise RuntimeError("no attributes here")

    def __call__(self, x):
        return x


def test_state_behind_objects_classes_and_decorators_is_named():
    # breaker4: each of these went to processes (wrong records, lost appends)
    assert parent_state(uses_reader) == (
        "uses_reader uses the module-level Reader 'READER' holding the FileIO 'file'"
    )
    assert parent_state(READER.read) == "Reader.read runs on an object holding the FileIO 'file'"
    assert parent_state(class_attribute) == (
        "class_attribute changes the module-level list 'Tally.seen'"
    )
    assert parent_state(Tally().count) == (
        "Tally.count changes its object (a worker would change its copy)"
    )
    assert parent_state(decorated) == "decorated changes the module-level list 'calls'"


def test_reading_is_precise_enough_for_a_tokenizer_and_never_fails():
    assert parent_state(tokenize) is None  # breaker4: "changes the module-level dict"
    why = parent_state(Unreadable())
    assert why == "its code could not be read (RuntimeError: no attributes here)"
    ds = dp.range(3).map(Unreadable(), dp.AUTOTUNE)  # the pipeline runs, on threads
    assert [int(x) for x in ds] == [0, 1, 2]


def test_what_a_function_shares_with_this_process_is_named():
    assert parent_state(read_record) == "read_record uses the module-level lock '_lock'"
    assert parent_state(record_call) == "record_call changes the module-level list 'calls'"
    assert parent_state(count_call) == "count_call assigns the global 'count'"
    # through what it calls, a wrapper (slots), a partial, a method, a callable object
    expected = "read_record uses the module-level lock '_lock'"
    assert parent_state(calls_read_record) == expected
    assert parent_state(ReturnsElement(lambda x: read_record(x))) == expected
    assert parent_state(functools.partial(read_record)) == expected
    assert parent_state(Recorder()) == "Recorder.__call__ changes the module-level list 'calls'"
    seen: list[int] = []
    assert parent_state(lambda x: seen.append(x) or x) == (
        "test_what_a_function_shares_with_this_process_is_named.<locals>.<lambda> changes "
        "the list 'seen' it closes over"
    )


def test_functions_that_share_nothing_may_go_to_processes():
    assert parent_state(spin) is None
    assert parent_state(reads_table) is None  # reads a global dict, changes nothing
    assert parent_state(ReturnsElement(lambda x: spin(x) * 2)) is None
    assert parent_state(np.sort) is None  # library code is not read
    scale = 3
    assert parent_state(lambda x: spin(x) * scale) is None


def _executor_path(it) -> list:
    return [e[2:] for e in it.root.autotune_events if e[1] == "executor"]


def test_autotune_keeps_a_function_with_a_module_level_file_and_lock_on_threads(clean):
    opts = dp.Options()
    opts.autotune.cpu_budget = 2  # threads do not scale a GIL-bound function: processes next
    ds = dp.range(RECORDS).map(read_record, dp.AUTOTUNE).with_options(opts)
    it = iter(ds)
    first = next(it)
    assert it.root.process_refusal == "read_record uses the module-level lock '_lock'"
    assert [first, *(int(x) for x in it)] == list(range(RECORDS))
    assert "process" not in {new for _, new in _executor_path(it)}
    # the same GIL-bound work without the shared file goes to processes as before
    clean_it = iter(dp.range(RECORDS).map(spin, dp.AUTOTUNE).with_options(opts))
    next(clean_it)
    assert clean_it.root.process_refusal is None
    clean_it.close()


def test_an_explicit_process_executor_is_the_users_choice():
    it = iter(dp.range(4).map(reads_table, 2, executor="process"))
    assert it.root.process_refusal is None
    assert [int(x) for x in it] == [spin(i) + i * i for i in range(4)]
