"""The fingerprint of an iterator state: which pipeline, over sources of which sizes.

A state holds positions: the 57th element of a source, file 3 at byte 4096, the 2nd
chunk of a parallel map. Restored into another pipeline, or into the same pipeline over
a source that has since grown or shrunk, those positions point at other elements, and
the resumed iterator delivers the wrong data without a word. So every state carries a
fingerprint of what it was taken on, and ``set_state`` compares it before anything is
restored, for one state and for the list of all workers' states (elastic resume):

``ops``
    the pipeline's structure: each op's name with its inputs, as nested calls, e.g.
    ``"batch(map(range))"`` (the ``Dataset`` the user built, before the rewrites, so the
    same pipeline run on another number of workers has the same fingerprint;
    ``with_options`` is left out: options say how a pipeline runs, not what it delivers);
``sizes``
    per source, in the order of ``ops``: ``[name, "elements", n]`` for an in-memory or
    generated source (its cardinality: -1 infinite, -2 unknown) or ``[name, "files", n]``
    for a file source (its units: files, or Parquet row groups).

The ``ValueError`` names what differs (the two structures, or the source and its two
sizes). Functions and arguments are not part of it (a function has no identity that
survives a process), nor are file names (a checkpoint may move to a machine that mounts
the data elsewhere). A state saved before fingerprints existed has none and loads as
before, unchecked. (``datapipe.ops._graph_fingerprint`` is another thing: a digest of the
ops' arguments and functions' code that names ``snapshot``'s directories; a state must stay
loadable after a function is edited or the data moves.)
"""

from __future__ import annotations

from typing import Any

KEY = "fingerprint"
# Nodes that say how a pipeline runs, not what it delivers (a resumed run may set other
# options: the worker layout of an elastic resume is one).
_TRANSPARENT = frozenset({"with_options"})


def fingerprint(dataset: Any) -> dict:
    """``{"ops": str, "sizes": list}`` of ``dataset`` (module docstring)."""
    from datapipe.dataset_ops import raw_cardinality

    sizes: list = []
    with raw_cardinality():  # the graph's own counts, not one worker's share
        ops = _describe(dataset, sizes)
    return {"ops": ops, "sizes": sizes}


def _describe(node: Any, sizes: list) -> str:
    name = str(getattr(node, "_name", type(node).__name__))
    if name in _TRANSPARENT:
        return _describe(node._inputs[0], sizes)
    if not node._inputs:
        sizes.append(_size(node, name))
        return name
    return f"{name}({', '.join(_describe(child, sizes) for child in node._inputs)})"


def _size(node: Any, name: str) -> list:
    from datapipe.io.file_source import FileSource

    if isinstance(node, FileSource):  # its units: never opens a file to count rows
        return [name, "files", len(node.files)]
    return [name, "elements", int(node.cardinality())]


def _differs(saved: Any, mine: dict, which: str) -> str | None:
    """Why the fingerprint ``saved`` (from the state ``which``) is not ``mine``, or None."""
    if not isinstance(saved, dict) or not isinstance(saved.get("ops"), str):
        return f"{which} has a malformed fingerprint ({saved!r})"
    if saved["ops"] != mine["ops"]:
        return (
            f"{which} was saved by another pipeline: its ops are {_short(saved['ops'])}, "
            f"this one's are {_short(mine['ops'])}"
        )
    got = [list(s) for s in saved.get("sizes") or []]
    for k, (old, new) in enumerate(zip(got, mine["sizes"])):
        if old != new:
            return (
                f"{which} was saved over sources of other sizes: source {k} ({new[0]}) held "
                f"{_count(old)} when it was saved and holds {_count(new)} now"
            )
    if len(got) != len(mine["sizes"]):
        return f"{which} lists {len(got)} sources, this pipeline has {len(mine['sizes'])}"
    return None


def _count(size: list) -> str:
    n = size[2] if len(size) > 2 else "?"
    if size[1:2] == ["elements"] and n in (-1, -2):
        return "infinitely many elements" if n == -1 else "an unknown number of elements"
    return f"{n} {size[1] if len(size) > 1 else ''}".strip()


def _short(ops: str, limit: int = 300) -> str:
    return ops if len(ops) <= limit else f"{ops[:limit]}... ({len(ops)} characters)"


def check(dataset: Any, states: list) -> None:
    """Refuse states not taken on ``dataset`` (module docstring). ``states``: the one state
    or all workers' states; entries that are not dicts or carry no fingerprint (saved
    before fingerprints existed) are not checked here.

    Raises:
        ValueError: a fingerprint differs from this pipeline's (or, in a list, from the
            first state's); names the state and what differs.
    """
    found = [(j, s[KEY]) for j, s in enumerate(states) if isinstance(s, dict) and KEY in s]
    if not found:
        return
    mine = fingerprint(dataset)
    many = len(states) > 1
    for j, saved in found:
        why = _differs(saved, mine, f"states[{j}]" if many else "the state")
        if why is not None:
            mixed = many and any(s != found[0][1] for _, s in found)
            hint = " (the list mixes states of different pipelines)" if mixed else ""
            raise ValueError(
                f"load_state_dict: {why}{hint}; restore a state into an iterator of the same "
                "dataset, built the same way over the same data"
            )
