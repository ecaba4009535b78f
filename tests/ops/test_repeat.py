"""``repeat``: an empty input repeated forever ends."""

from __future__ import annotations

import datapipe as dp


def test_repeat_of_empty_dataset_forever_terminates() -> None:
    assert list(dp.range(0).repeat()) == []
