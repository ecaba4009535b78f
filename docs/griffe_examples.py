"""Griffe extension for the API reference: the project's docstrings head their runnable
examples with ``Example:`` (the doctests run under pytest); griffe's Google parser knows
``Examples:`` only and would render the session as prose, so the heading is read as
``Examples:`` here (the doctest code is then shown as code)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExampleSections(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self.on_object(obj=pkg)
