"""Draws over files split among workers by auto-sharding's FILE policy (issue 35, item 1):
the elements have no identity on a worker, so a random layer's draw refuses (naming
``key=``) instead of repeating the other workers' draws; ``key=`` gives one."""

from __future__ import annotations

import pytest
from _dist_helpers import FakeFiles, worker_options

import datapipe as dp
from datapipe import _draws


def test_file_sharding_refuses_a_draw_and_key_fixes_it():
    from datapipe._identity import identity_value

    files = FakeFiles({f"f{i}": [10 * i, 10 * i + 1] for i in range(4)})
    opts = worker_options(2, 1, policy="FILE")
    plain = files.map(lambda x: int(x)).with_options(opts)
    assert sorted(plain) == [10, 11, 30, 31]  # a map that draws nothing is unaffected
    drawing = files.map(lambda x: _draws.element_draw(1)).with_options(opts)
    with pytest.raises(dp.PipelineError, match=r"no identity on this worker.*Pass key="):
        list(drawing)
    keyed = files.map(lambda x: _draws.position(), key=int).with_options(opts)
    assert sorted(keyed) == sorted(identity_value(v) for v in (10, 11, 30, 31))


def test_a_shuffling_file_list_keys_by_the_files_sorted_index(tmp_path):
    """list_files(shuffle=True) -> map -> batch on 2 ranks (the walkthrough's shape): each
    file draws by its index in the sorted list, as in one process, and each batch by its
    first file's."""
    for i in range(12):
        (tmp_path / f"f{i:02d}.txt").write_text(str(i))
    files = dp.list_files(str(tmp_path / "*.txt"), shuffle=True, seed=3)

    def pos(path):
        return int(open(path).read()), _draws.position()

    single = dict(files.map(pos))
    assert single == {i: i for i in range(12)}  # the sorted index, not the shuffled one
    seen = []
    for r in range(2):
        got = list(files.map(pos).with_options(worker_options(2, r)))
        assert all(single[i] == p for i, p in got)
        seen += [i for i, _ in got]
        batched = files.map(pos).batch(3).map(lambda i, p: (int(p[0]), _draws.position()))
        assert all(first == p for first, p in batched.with_options(worker_options(2, r)))
    assert sorted(seen) == list(range(12))
