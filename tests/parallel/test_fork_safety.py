"""AUTOTUNE keeps out of worker processes a function that would compute something else
there (``datapipe/parallel/fork_safety.py``): since issue 35, any function that reaches a
value the reading cannot prove immutable. breaker3's cases: a seek + read under a
module-level lock returned 48 wrong records of 3,000 once AUTOTUNE chose processes, and a
global list kept 104 of 800 appends in epoch 0 and none later. Issue 35's cases are in
test_fork_safety_allow_list.py.
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


WHY = (
    "not an immutable value, a module, or a function or class that passes the reading; a "
    "worker process would use its own copy"
)


def test_state_behind_objects_classes_and_decorators_is_named():
    # breaker4: each of these went to processes (wrong records, lost appends)
    assert parent_state(uses_reader) == (
        f"uses_reader uses the attribute 'READER.file' (_io.FileIO): {WHY}"
    )
    assert parent_state(READER.read) == (
        f"Reader.read uses the attribute 'file' of its object (_io.FileIO): {WHY}"
    )
    assert parent_state(class_attribute) == (
        f"class_attribute uses the class attribute 'Tally.seen' (list): {WHY}"
    )
    assert parent_state(Tally().count) == (
        f"Tally.count uses the class attribute 'Tally.seen' (list): {WHY}"
    )
    assert parent_state(decorated) == f"decorated uses the global 'calls' (list): {WHY}"


def test_a_global_dict_is_not_proven_and_the_reading_never_fails():
    # issue 35: the reading proves safety; a global dict may change (in the function, or
    # in this process during an epoch, unseen by the workers)
    assert parent_state(tokenize) == f"tokenize uses the global 'VOCAB' (dict): {WHY}"
    why = parent_state(Unreadable())
    assert why == "its code could not be read (RuntimeError: no attributes here)"
    ds = dp.range(3).map(Unreadable(), dp.AUTOTUNE)  # the pipeline runs, on threads
    assert [int(x) for x in ds] == [0, 1, 2]


def test_what_a_function_shares_with_this_process_is_named():
    file_why = f"read_record uses the global '_file' (_io.FileIO): {WHY}"
    assert parent_state(read_record) == file_why
    assert parent_state(record_call) == f"record_call uses the global 'calls' (list): {WHY}"
    assert parent_state(count_call) == (
        "count_call assigns the global 'count' (a worker process would assign its own copy)"
    )
    # through what it calls, a wrapper (slots), a partial, a method, a callable object
    assert parent_state(calls_read_record) == file_why
    assert parent_state(ReturnsElement(lambda x: read_record(x))) == file_why
    assert parent_state(functools.partial(read_record)) == file_why
    assert parent_state(Recorder()) == f"Recorder.__call__ uses the global 'calls' (list): {WHY}"
    seen: list[int] = []
    assert parent_state(lambda x: seen.append(x) or x) == (
        "test_what_a_function_shares_with_this_process_is_named.<locals>.<lambda> uses the "
        f"variable 'seen' it closes over (list): {WHY}"
    )


def test_functions_that_share_nothing_may_go_to_processes():
    assert parent_state(spin) is None
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
    assert it.root.process_refusal == f"read_record uses the global '_file' (_io.FileIO): {WHY}"
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
