"""How many requests a remote read costs: a whole-object ``read_file`` of s3:// is the
``info`` (its size checked against the limit) and one ranged GET -- s3fs's own
whole-object ``cat_file`` asks for the size again first (3 requests per object, the
cost that bounds a latency-bound reader: ``benchmarks/bench_s3_scale.py``)."""

from __future__ import annotations

import pytest
from _remote_helpers import loopback_only, moto_s3

import datapipe as dp


@pytest.fixture()
def s3_calls(monkeypatch):
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    with loopback_only(), moto_s3():
        import s3fs

        fs = s3fs.S3FileSystem()
        fs.mkdir("reqs")
        fs.pipe_file("reqs/a.bin", b"0123456789" * 100)
        fs.pipe_file("reqs/empty.bin", b"")
        calls: list[str] = []
        real = s3fs.S3FileSystem._call_s3

        async def counted(self, method, *args, **kwargs):
            calls.append(method if isinstance(method, str) else method.__name__)
            return await real(self, method, *args, **kwargs)

        monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
        yield calls
        monkeypatch.undo()
        fs.rm("reqs", recursive=True)


def test_a_remote_read_file_is_one_head_and_one_get(s3_calls):
    s3fs = pytest.importorskip("s3fs")
    s3fs.S3FileSystem.clear_instance_cache()  # no cached info: count every request
    assert dp.read_file("s3://reqs/a.bin") == b"0123456789" * 100
    assert s3_calls == ["head_object", "get_object"]
    s3_calls.clear()
    assert dp.read_file("s3://reqs/empty.bin") == b""  # no range for 0 bytes: plain read
    assert s3_calls.count("get_object") == 1
