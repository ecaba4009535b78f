"""Progress bars for long runs (``adapt``, ``cache``, ``save``, profiles, benchmarks).

tqdm draws them. A bar is shown only when it helps a person watching:

* ``enabled=False`` (a ``progress=False`` argument) turns it off;
* the environment variable ``DATAPIPE_PROGRESS=0`` turns every bar off, ``=1`` turns bars
  on even when stderr is not a terminal (e.g. to see them in a CI log);
* otherwise (``enabled=None``, the default, or ``True``) a bar is shown when stderr is a
  terminal.

Usage in a long-running function::

    from datapipe._progress import progress_bar

    def save(ds, path, progress=None):
        with progress_bar(total=n, desc="save", unit="el", enabled=progress) as bar:
            for chunk in ...:
                bar.update(len(chunk))

When off, ``progress_bar`` returns a ``NullBar`` with the same methods that does nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

ENV_VAR = "DATAPIPE_PROGRESS"


def progress_enabled(enabled: bool | None = None) -> bool:
    """Whether a bar would be shown for the argument ``enabled`` (see the module docstring)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if enabled is False or env == "0":
        return False
    if env == "1":
        return True
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # closed or replaced stderr
        return False


class NullBar:
    """The do-nothing bar returned when progress is off."""

    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_description(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> NullBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress_bar(
    total: int | float | None = None,
    desc: str | None = None,
    unit: str = "it",
    enabled: bool | None = None,
    **kwargs: Any,
) -> Any:
    """A ``tqdm`` bar on stderr, or a ``NullBar`` when progress is off.

    Example:
        >>> with progress_bar(total=3, enabled=False) as bar:
        ...     bar.update(3)
        >>> bar.n
        3
    """
    if not progress_enabled(enabled):
        return NullBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, **kwargs)


def track(
    iterable: Iterable,
    total: int | None = None,
    desc: str | None = None,
    unit: str = "it",
    enabled: bool | None = None,
) -> Iterator:
    """Iterate ``iterable`` with a bar (plain iteration when progress is off).

    Example:
        >>> list(track(range(3), enabled=False))
        [0, 1, 2]
    """
    if not progress_enabled(enabled):
        yield from iterable
        return
    with progress_bar(total=total, desc=desc, unit=unit, enabled=enabled) as bar:
        for x in iterable:
            yield x
            bar.update(1)
