"""Fixtures of the file tests."""

import pytest
from PIL import Image


@pytest.fixture
def small_bomb_limit(monkeypatch):
    """Pillow's decompression-bomb limit lowered so that a 64x64 image is over twice it."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
