"""Small real data sets shipped inside the package, as ``Dataset`` pipelines.

- ``load_digits()``: the UCI handwritten digits (1,797 8x8 grayscale images, 10 classes).
"""

from datapipe.datasets.digits import load_digits

__all__ = ["load_digits"]
