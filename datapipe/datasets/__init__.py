"""Small real data sets shipped inside the package, as ``Dataset`` pipelines.

- ``load_digits()``: the UCI handwritten digits (1,797 8x8 grayscale images, 10 classes).
- ``load_breast_cancer()``: the UCI breast cancer Wisconsin (diagnostic) table (569 rows,
  30 real-valued features, 2 classes).
- ``load_stdlib_docs()``: Python standard library docstrings by topic (1,051 texts, 4
  classes), for text classification.
"""

from datapipe.datasets.breast_cancer import load_breast_cancer
from datapipe.datasets.digits import load_digits
from datapipe.datasets.stdlib_docs import load_stdlib_docs

__all__ = ["load_breast_cancer", "load_digits", "load_stdlib_docs"]
