"""``snapshot``'s fingerprint follows the code (issue 35, item 3): an edit of a function a
``map`` calls through a module, of a callable object's ``__call__``, or of the state of an
object without attributes (a compiled pattern) moves the snapshot, so the next pass
computes again; an object nothing can read is refused with ``FingerprintError`` naming
``name=``. And the snapshot's own edges (item 8): the record checked against the shards,
a full disk named, a URL's credentials redacted."""

from __future__ import annotations

import collections
import errno
import functools
import importlib
import json
import logging
import os
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pyarrow as pa
import pytest
import torch

import datapipe as dp
from datapipe.errors import FileReadError, FingerprintError
from datapipe.ops import snapshot as snap
from datapipe.ops._graph_fingerprint import fingerprint

usermod = None  # the user's module, imported by the tests below (as a script's `import`)


def via_module(x):
    return usermod.transform(x)  # type: ignore[attr-defined]


def ints(ds) -> list[int]:
    return [int(x) for x in ds]


def write_module(tmp_path, name: str, source: str):
    """Write (or rewrite) ``tmp_path/name.py`` and import (or reload) it from source."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    importlib.invalidate_caches()
    if name in sys.modules:
        return importlib.reload(sys.modules[name])
    return importlib.import_module(name)


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A directory of the user's modules on sys.path, never cached as bytecode (an edit
    of the same size within one second would otherwise reload the old .pyc)."""
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    yield code
    for name in ("usermod", "userpkg", "userpkg.sub"):
        sys.modules.pop(name, None)


def test_editing_a_module_function_recomputes_the_snapshot(tmp_path, user_dir, monkeypatch):
    root = str(tmp_path / "snap")
    mod = write_module(user_dir, "usermod", "def transform(x):\n    return x * 2\n")
    monkeypatch.setitem(globals(), "usermod", mod)
    assert ints(dp.range(5).map(via_module).snapshot(root)) == [0, 2, 4, 6, 8]
    assert ints(dp.range(5).map(via_module).snapshot(root)) == [0, 2, 4, 6, 8]  # read
    assert len(os.listdir(root)) == 1

    mod = write_module(user_dir, "usermod", "def transform(x):\n    return x * 3\n")
    monkeypatch.setitem(globals(), "usermod", mod)
    assert ints(dp.range(5).map(via_module).snapshot(root)) == [0, 3, 6, 9, 12]
    assert len(os.listdir(root)) == 2  # another fingerprint: computed and written again


def test_a_helper_two_modules_away_and_a_module_constant_are_followed(user_dir):
    (user_dir / "userpkg").mkdir()
    (user_dir / "userpkg" / "__init__.py").write_text("")
    (user_dir / "userpkg" / "sub.py").write_text(
        "SCALE = 2\n\ndef helper(x):\n    return x + 1\n\ndef f(x):\n    return helper(x) * SCALE\n"
    )
    importlib.invalidate_caches()
    sub = importlib.import_module("userpkg.sub")
    pkg = importlib.import_module("userpkg")
    scope = {"userpkg": pkg}
    exec("def g(x):\n    return userpkg.sub.f(x)\n", scope)  # a script's function
    before = fingerprint(dp.range(3).map(scope["g"]))
    assert fingerprint(dp.range(3).map(scope["g"])) == before
    sub.SCALE = 3  # a constant the called function reads
    assert fingerprint(dp.range(3).map(scope["g"])) != before
    sub.SCALE = 2
    assert fingerprint(dp.range(3).map(scope["g"])) == before
    sub.helper.__code__ = (lambda x: x + 2).__code__  # an edit two calls away
    assert fingerprint(dp.range(3).map(scope["g"])) != before


def test_editing_a_callable_class_s_call_recomputes_the_snapshot(tmp_path, user_dir):
    root = str(tmp_path / "snap")
    src = """
        class Scale:
            def __init__(self):
                self.offset = 1

            def __call__(self, x):
                return x * {k} + self.offset

            def shifted(self, x):
                return x + {k}
    """
    mod = write_module(user_dir, "usermod", src.format(k=2))
    assert ints(dp.range(4).map(mod.Scale()).snapshot(root)) == [1, 3, 5, 7]
    assert ints(dp.range(4).map(mod.Scale().shifted).snapshot(root)) == [2, 3, 4, 5]
    assert ints(dp.range(4).map(mod.Scale()).snapshot(root)) == [1, 3, 5, 7]  # read
    assert len(os.listdir(root)) == 2

    mod = write_module(user_dir, "usermod", src.format(k=3))
    assert ints(dp.range(4).map(mod.Scale()).snapshot(root)) == [1, 4, 7, 10]
    assert ints(dp.range(4).map(mod.Scale().shifted).snapshot(root)) == [3, 4, 5, 6]
    assert len(os.listdir(root)) == 4


def matches(pattern: re.Pattern) -> dp.Dataset:
    return dp.range(12).map(lambda x: int(pattern.fullmatch(str(int(x))) is not None))


def test_two_maps_over_different_compiled_patterns_get_two_snapshots(tmp_path):
    root = str(tmp_path)
    one, two = re.compile(r"\d"), re.compile(r"\d\d")
    assert ints(matches(one).snapshot(root)) == [1] * 10 + [0, 0]
    assert ints(matches(two).snapshot(root)) == [0] * 10 + [1, 1]
    assert len(os.listdir(root)) == 2
    assert ints(matches(re.compile(r"\d")).snapshot(root)) == [1] * 10 + [0, 0]  # read
    assert len(os.listdir(root)) == 2
    lower, any_case = re.compile("a"), re.compile("a", re.IGNORECASE)  # flags count too
    assert fingerprint(matches(lower)) != fingerprint(matches(any_case))


@pytest.mark.parametrize(
    "make",
    [
        lambda k: collections.deque([1, 2, k], maxlen=5),
        lambda k: pa.table({"a": [1, 2, k]}),
        lambda k: pa.array([1.5, float(k)]),
        lambda k: np.random.default_rng(k),
        lambda k: random.Random(k),
        lambda k: torch.Generator().manual_seed(k),
        lambda k: functools.partial(max, k),
        lambda k: bytearray([1, k]),
    ],
    ids=[
        "deque",
        "arrow-table",
        "arrow-array",
        "np-generator",
        "random",
        "torch-gen",
        "partial",
        "bytearray",
    ],  # fmt: skip
)
def test_objects_without_attributes_are_read_by_their_state(make):
    def build(k):
        state = make(k)
        return dp.range(3).map(lambda x: (x, state))

    assert fingerprint(build(3)) == fingerprint(build(3))
    assert fingerprint(build(3)) != fingerprint(build(4))


def test_what_it_read_before_is_still_read_never_refused(tmp_path):
    """Objects with attributes or no state: the same fingerprint for the same build."""
    with open(tmp_path / "f.txt", "w") as handle:

        def build():
            things = {
                "module": torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()),
                "lock": threading.Lock(),
                "rlock": threading.RLock(),
                "logger": logging.getLogger("datapipe.test"),
                "file": handle,
                "method": "abc".upper,
                "descriptor": str.upper,
                "set": frozenset({"a", "b"}),
            }
            torch.manual_seed(0)
            things["module"] = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
            return dp.range(3).map(lambda x: (x, things))

        assert fingerprint(build()) == fingerprint(build())


def test_an_unreadable_object_is_refused_naming_name_and_name_keys_the_snapshot(tmp_path):
    conn = sqlite3.connect(":memory:")  # no attributes, pickle cannot save it
    try:
        ds = dp.range(3).map(lambda x: x + len(conn.execute("select 1").fetchall()))
        with pytest.raises(FingerprintError) as caught:
            list(ds.snapshot(str(tmp_path)))
        assert isinstance(caught.value, TypeError)
        assert caught.value.type_name == "sqlite3.Connection"
        assert "closure 'conn'" in caught.value.where
        assert "pass name='...' to snapshot()" in str(caught.value)
        assert os.listdir(tmp_path) == []
        assert ints(ds.snapshot(str(tmp_path), name="lookup-v1")) == [1, 2, 3]
        assert os.listdir(tmp_path) == ["lookup-v1"]
        assert ints(ds.snapshot(str(tmp_path), name="lookup-v1")) == [1, 2, 3]  # read
    finally:
        conn.close()
    for bad in ("..", "a/b", "", ".hidden", "x" * 129):
        with pytest.raises(ValueError, match="snapshot: name must be one directory name"):
            dp.range(3).snapshot(str(tmp_path), name=bad)


def test_code_deeper_than_the_stack_is_refused_not_cut(tmp_path):
    """Code is followed to any depth; a call chain deeper than the interpreter's stack is
    refused (naming where) rather than hashed in part."""
    n = sys.getrecursionlimit() // 2  # a call chain that runs, hashed 3 frames per call
    source = "def f0(x):\n    return x\n"
    source += "".join(f"def f{i}(x):\n    return f{i - 1}(x)\n" for i in range(1, n))
    scope: dict = {"__name__": "deep"}
    exec(source, scope)
    ds = dp.range(3).map(scope[f"f{n - 1}"])
    with pytest.raises(FingerprintError, match="nested deeper than Python's recursion limit"):
        list(ds.snapshot(str(tmp_path)))
    assert ints(ds.snapshot(str(tmp_path), name="deep-v1")) == [0, 1, 2]
    before = fingerprint(dp.range(3).map(scope["f150"]))
    scope["f0"].__code__ = (lambda x: x + 1).__code__  # 150 calls down: followed
    assert fingerprint(dp.range(3).map(scope["f150"])) != before


def test_the_new_readings_are_the_same_in_any_process_and_hash_seed(tmp_path, user_dir):
    (user_dir / "usermod.py").write_text(
        "import collections, re\n"
        "PAT = re.compile('a+', re.I)\n"
        "class Scale:\n"
        "    def __init__(self):\n"
        "        self.seen = collections.deque(['x', 'y'])\n"
        "    def __call__(self, x):\n"
        "        return x * 2 if PAT.match('a') else x\n"
        "def transform(x):\n"
        "    return x + 1\n"
    )
    code = (
        "import datapipe as dp, usermod, datetime, numpy as np, pyarrow as pa\n"
        "from datapipe.ops._graph_fingerprint import fingerprint\n"
        "ds = dp.range(4).map(usermod.Scale()).map(lambda x: usermod.transform(x))\n"
        "state = (np.random.default_rng(0), {'b', 'a'},\n"
        "         pa.table({'a': ['x', 'y']}), datetime.date(2020, 1, 2))\n"
        "ds = ds.map(lambda x: (x, state))\n"
        "got = fingerprint(ds)\n"
    )
    scope: dict = {"__name__": "__main__"}  # as `python -c` runs it
    exec(code, scope)  # this process, its own hash seed ...
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"  # ... and another one
    path = os.pathsep.join([str(user_dir), os.environ.get("PYTHONPATH", "")])
    other = subprocess.run(
        [sys.executable, "-c", code + "print(got)\n"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": path},
    ).stdout.strip()
    assert other == scope["got"] and len(other) == 32


# ---- item 8: the record against the shards, a full disk, a URL's secrets -----------------
def two_shards(root: str) -> tuple[dp.Dataset, str]:
    ds = dp.range(40).snapshot(root, shard_func=lambda x: x % 2)
    assert ints(ds) == list(range(40))
    (fp,) = os.listdir(root)
    return dp.range(40).snapshot(root, shard_func=lambda x: x % 2), os.path.join(root, fp)


def test_a_record_whose_shards_do_not_add_up_is_refused_naming_the_snapshot(tmp_path):
    ds, directory = two_shards(str(tmp_path))
    path = os.path.join(directory, snap.METADATA)
    with open(path) as f:
        meta = json.load(f)
    assert meta["num_elements"] == 40 and sorted(meta["shards"]) == ["0", "1"]
    del meta["shards"]["1"]  # half the elements gone from the record
    with open(path, "w") as f:
        json.dump(meta, f)
    with pytest.raises(FileReadError) as caught:
        list(ds)
    assert str(caught.value) == (
        f"{path}: snapshot {directory!r} is damaged: its shards hold 20 elements, its "
        "num_elements says 40; delete that directory to compute it again"
    )


def test_a_missing_chunk_is_refused_before_any_element(tmp_path):
    ds, directory = two_shards(str(tmp_path))
    with open(os.path.join(directory, snap.METADATA)) as f:
        run = json.load(f)["run"]
    chunk = snap._chunk_path(os.path.join(directory, run), 1, 0)
    os.remove(chunk)
    with pytest.raises(FileReadError, match="shard 1 misses 1 of its 1 chunks") as caught:
        next(iter(ds))  # (shard 0's first element was read before)
    assert f"(20 of the 40 elements), first {chunk!r}" in str(caught.value)
    assert caught.value.path == os.path.join(directory, snap.METADATA)


def full_disk(monkeypatch, fail_on: int) -> list:
    """Make the ``fail_on``-th chunk write fail as a full disk does: part of the file
    written, then ``ENOSPC``."""
    real, calls = pa.ipc.new_file, []

    def new_file(sink, schema, **kwargs):
        calls.append(sink)
        if len(calls) == fail_on:
            with open(sink, "wb") as f:
                f.write(b"ARROW1\x00\x00")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(sink, schema, **kwargs)

    monkeypatch.setattr(pa.ipc, "new_file", new_file)
    return calls


def test_a_full_disk_names_the_file_and_leaves_no_snapshot_read_as_complete(tmp_path, monkeypatch):
    root = str(tmp_path)
    ds = dp.range(3000).map(lambda x: x * 2).snapshot(root, shard_func=lambda x: x % 2)
    calls = full_disk(monkeypatch, fail_on=3)  # the first flush's 2 chunks are written
    with pytest.raises(OSError) as caught:
        list(ds)
    (fp,) = os.listdir(root)
    directory = os.path.join(root, fp)
    assert caught.value.errno == errno.ENOSPC
    assert str(caught.value).startswith(f"[Errno 28] snapshot: cannot write {calls[2]!r} in ")
    assert f"in snapshot {directory!r}: No space left on device; the pass's run " in str(
        caught.value
    )
    assert os.path.dirname(calls[2]).endswith("00000000.shard")
    assert not os.path.exists(calls[2])  # the partial file is removed
    assert snap.METADATA not in os.listdir(directory)  # the run is never read as complete
    monkeypatch.undo()
    again = dp.range(3000).map(lambda x: x * 2).snapshot(root, shard_func=lambda x: x % 2)
    assert ints(again) == [2 * i for i in range(3000)]  # computed again, in a new run
    with open(os.path.join(directory, snap.METADATA)) as f:
        meta = json.load(f)
    assert meta["num_elements"] == 3000
    assert ints(again) == [2 * i for i in range(3000)]  # read back
    leftovers = [n for _, _, files in os.walk(root) for n in files if ".tmp-" in n]
    assert leftovers == []


def test_a_full_disk_while_writing_the_record_names_it(tmp_path, monkeypatch):
    root = str(tmp_path)
    ds = dp.range(10).snapshot(root)

    def no_space(obj, f):
        f.write('{"format": ')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(snap.json, "dump", no_space)
    with pytest.raises(OSError, match=r"cannot write '.*\.snapshot\.metadata\.tmp-") as caught:
        list(ds)
    assert caught.value.errno == errno.ENOSPC
    monkeypatch.undo()
    (fp,) = os.listdir(root)
    assert not [n for n in os.listdir(os.path.join(root, fp)) if "metadata" in n]
    assert ints(dp.range(10).snapshot(root)) == list(range(10))


def test_a_url_s_credentials_never_reach_the_error():
    url = "s3://AKIAKEY:s3cr3t@bucket/snap?X-Amz-Signature=abc123&part=1"
    with pytest.raises(ValueError) as caught:
        dp.range(3).snapshot(url)
    message = str(caught.value)
    assert "s3cr3t" not in message and "AKIAKEY" not in message and "abc123" not in message
    assert message == (
        "snapshot: path must be a local directory, got "
        "'s3://***@bucket/snap?X-Amz-Signature=***&part=1'"
    )
