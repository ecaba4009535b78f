"""Differential tests without the reference libraries: golden files, or the libraries live.

A differential test compares datapipe or a layer with its anchor (tf.data, Keras, Grain) on
the same inputs. The anchor's side is one call, ``ref(fn, *args)``: ``fn`` is a function of
the test module that imports the library (``keras()``, ``tf()``, ``grain()`` below) and
returns the anchor's result as plain values (numpy arrays, tensors, bytes, str, numbers,
None, and lists, tuples and dicts of them).

The ``ref`` fixture (tests/conftest.py) runs every such test twice:

* ``[golden]``, in the default run: ``fn`` is not called; its result is read from the
  test module's golden file, ``tests/goldens/<test file>.json``, which names the library
  versions that wrote it. The libraries need not be installed (the ``dev`` extra has none).
* ``[live]``, marked ``differential`` (``pytest -m differential``): ``fn`` runs against the
  installed libraries (the test skips, saying so, where they are missing).

``python tests/goldens/generate.py`` rewrites the golden files: it runs the ``[live]`` tests
with ``DATAPIPE_GOLDENS=write``, so the goldens are the anchors' results for exactly the
inputs the tests pass. A golden entry also keeps a fingerprint of those inputs (shapes,
dtypes, sums of the arrays; the other values as they are); when a test's inputs change
(new cases, or a layer that draws other parameters) the ``[golden]`` test fails saying
that the golden is stale, instead of comparing against an answer to another question.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

GOLDENS = Path(__file__).resolve().parent / "goldens"
WRITE = os.environ.get("DATAPIPE_GOLDENS") == "write"
# The reference libraries, by import name: the distribution pip installs and the extra
# that has it (the ``bench`` extra: the benchmarks' peers).
LIBRARIES = {
    "tensorflow": "tensorflow-cpu",
    "keras": "keras",
    "grain": "grain",
    "sklearn": "scikit-learn",
}
# Relative tolerance of the input fingerprints' sums: inputs computed in float32 by our
# own code may differ by a few ulps between CPUs (vector widths); any real change of an
# input moves a sum by far more.
FINGERPRINT_RTOL = 1e-5
# Arrays of at most this many numbers are stored as JSON numbers, longer ones compressed.
SMALL = 64

# Entries written by this session (DATAPIPE_GOLDENS=write): file -> key -> entry, and the
# versions of the libraries each file's tests imported.
_written: dict[Path, dict[str, Any]] = {}
_versions: dict[Path, dict[str, str]] = {}
_current: list[Path] = []  # the golden file of the test running now (set by ``Reference``)


def library(name: str) -> Any:
    """Import reference library ``name`` for a ``[live]`` test (skipping the test, saying
    which extra installs it, where it is missing) and note its version for the golden."""
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    module = pytest.importorskip(
        name, reason=f"{LIBRARIES[name]} (the bench extra) is not installed: live "
        "differential tests need it (the default run reads tests/goldens/)"
    )  # fmt: skip
    if _current:
        versions = _versions.setdefault(_current[-1], {})
        versions[name] = str(module.__version__)
        if name == "keras":  # Keras computes with its backend: name that one too
            backend = module.backend.backend()
            versions["keras backend"] = backend
            if backend == "tensorflow":
                versions["tensorflow"] = str(library("tensorflow").__version__)
    return module


def tf() -> Any:
    return library("tensorflow")


def keras() -> Any:
    return library("keras")


def grain() -> Any:
    return library("grain")


# ---- values <-> JSON ------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 9)).decode("ascii")


def _unb64(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text))


def encode(x: Any) -> Any:
    """``x`` as JSON values that ``decode`` turns back into equal values of the same types
    (arrays keep dtype and shape; a torch tensor comes back as a tensor)."""
    if type(x).__module__.startswith("torch") and hasattr(x, "numpy"):
        return {"tensor": encode(x.detach().cpu().numpy())}
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "O":
            return {"object_array": list(x.shape), "items": [encode(v) for v in x.ravel()]}
        if x.size <= SMALL and x.dtype.kind in "biu":  # as numbers: shorter, and readable
            return {"array": x.dtype.str, "shape": list(x.shape), "values": x.ravel().tolist()}
        # bytes grouped by their place in the item (all first bytes, then all second ...):
        # zlib then finds the runs of similar exponents and signs in numeric arrays
        flat = np.ascontiguousarray(x.reshape(-1))
        planes = flat.view(np.uint8).reshape(-1, x.dtype.itemsize).T
        return {"array": x.dtype.str, "shape": list(x.shape), "data": _b64(planes.tobytes())}
    if isinstance(x, (str, np.str_)):
        return str(x)
    if isinstance(x, np.generic):
        return {"scalar": x.dtype.str, "data": _b64(x.tobytes())}
    if isinstance(x, bytes):
        return {"bytes": _b64(x)}
    if isinstance(x, tuple):
        return {"tuple": [encode(v) for v in x]}
    if isinstance(x, list):
        if len(x) > SMALL and all(isinstance(v, str) for v in x):  # a vocabulary: compressed
            return {"strings": _b64(json.dumps([str(v) for v in x]).encode())}
        return [encode(v) for v in x]
    if isinstance(x, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in x.items()]}
    if x is None or isinstance(x, (bool, int, float)):
        return x
    raise TypeError(f"differential: cannot store a {type(x).__name__} in a golden file")


def decode(x: Any) -> Any:
    if isinstance(x, list):
        return [decode(v) for v in x]
    if not isinstance(x, dict):
        return x
    if "values" in x:
        return np.array(x["values"], dtype=np.dtype(x["array"])).reshape(x["shape"])
    if "strings" in x:
        return json.loads(_unb64(x["strings"]))
    if "array" in x:
        dtype = np.dtype(x["array"])
        planes = np.frombuffer(_unb64(x["data"]), np.uint8).reshape(dtype.itemsize, -1)
        return np.ascontiguousarray(planes.T).view(dtype).reshape(x["shape"])
    if "object_array" in x:
        out = np.empty(len(x["items"]), dtype=object)
        out[:] = [decode(v) for v in x["items"]]
        return out.reshape(x["object_array"])
    if "scalar" in x:
        return np.frombuffer(_unb64(x["data"]), dtype=np.dtype(x["scalar"]))[0]
    if "tensor" in x:
        import torch

        return torch.from_numpy(decode(x["tensor"]))
    if "bytes" in x:
        return _unb64(x["bytes"])
    if "tuple" in x:
        return tuple(decode(v) for v in x["tuple"])
    return {_hashable(decode(k)): decode(v) for k, v in x["dict"]}


def _hashable(k: Any) -> Any:
    return tuple(_hashable(v) for v in k) if isinstance(k, list) else k


# ---- input fingerprints ---------------------------------------------------------------------
def fingerprint(x: Any) -> Any:
    """A small JSON summary of a reference call's inputs: arrays by dtype, shape, and their
    plain and position-weighted sums (so a reordering shows); other values as they are."""
    if type(x).__module__.startswith("torch") and hasattr(x, "numpy"):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.generic):
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        head = {"dtype": x.dtype.str, "shape": list(x.shape)}
        if x.dtype.kind in "biuf":
            flat = x.astype(np.float64).ravel()
            weights = 1.0 + np.arange(flat.size) % 7
            return head | {"sum": float(flat.sum()), "wsum": float(flat @ weights)}
        return head | {"crc": zlib.crc32(repr(x.tolist()).encode())}
    if isinstance(x, bytes):
        return {"bytes": len(x), "crc": zlib.crc32(x)}
    if isinstance(x, (list, tuple)):
        return [fingerprint(v) for v in x]
    if isinstance(x, dict):
        return [[fingerprint(k), fingerprint(v)] for k, v in x.items()]
    if callable(x):
        return f"{getattr(x, '__module__', '?')}.{getattr(x, '__qualname__', repr(x))}"
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return repr(x)


def _same_fingerprint(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=FINGERPRINT_RTOL, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_fingerprint(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_fingerprint(u, v) for u, v in zip(a, b))
    return a == b


# ---- golden files ---------------------------------------------------------------------------
_loaded: dict[Path, dict] = {}


def golden_path(test_file: str) -> Path:
    return GOLDENS / f"{Path(test_file).stem}.json"


def _load(path: Path) -> dict:
    if path not in _loaded:
        if not path.exists():
            pytest.fail(f"no golden file {path.name}: run `python tests/goldens/generate.py`")
        _loaded[path] = json.loads(path.read_text())
    return _loaded[path]


def write_goldens() -> list[Path]:
    """Write the entries recorded in this session (``DATAPIPE_GOLDENS=write``) into their
    files: a test that ran replaces all of its entries; the other tests' entries stay
    (``generate.py`` without arguments starts from empty files). Returns the paths."""
    GOLDENS.mkdir(exist_ok=True)
    for path, entries in _written.items():
        old = json.loads(path.read_text()) if path.exists() else {"entries": {}}
        ran = {key.rsplit("#", 1)[0] for key in entries}
        kept = {k: v for k, v in old["entries"].items() if k.rsplit("#", 1)[0] not in ran}
        libraries = dict(old.get("libraries", {})) | _versions.get(path, {})
        # One line per entry (a regenerated file's diff shows which entries changed).
        lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted((kept | entries).items())]
        path.write_text(
            '{"generated_by": "tests/goldens/generate.py",\n'
            f'"libraries": {json.dumps(dict(sorted(libraries.items())))},\n'
            '"entries": {\n' + ",\n".join(lines) + "\n}}\n"
        )
    return sorted(_written)


class Reference:
    """The ``ref`` fixture's value: ``ref(fn, *args, key=None)`` is ``fn(*args)`` from the
    golden file (``[golden]``) or from the library (``[live]``); see the module docstring.

    ``key`` names the call in the golden file; by default it is the test's id (without the
    golden/live part) and the call's number in the test. Calls that several tests share
    (one reference file read by many tests) may name one key to store it once.
    """

    def __init__(self, request: pytest.FixtureRequest, live: bool):
        self.live = live
        self.path = golden_path(str(request.node.path))
        name = re.sub(r"(?<=[\[-])(golden|live)(-|(?=\]))", "", request.node.name)
        self.test = name.replace("[]", "").replace("-]", "]")
        self.calls = 0

    def __call__(self, fn: Callable[..., Any], *args: Any, key: str | None = None) -> Any:
        self.calls += 1
        key = key or f"{self.test}#{self.calls}"
        inputs = fingerprint([fn.__name__, list(args)])
        if self.live:
            _current.append(self.path)
            try:
                value = fn(*args)
            finally:
                _current.pop()
            if WRITE:
                entry = {"inputs": inputs, "value": encode(value)}
                _written.setdefault(self.path, {})[key] = entry
            return decode(encode(value))  # the types a golden gives: tests see one form
        doc = _load(self.path)
        entry = doc["entries"].get(key)
        regenerate = (
            "regenerate the goldens with `python tests/goldens/generate.py` where "
            f"{', '.join(doc['libraries']) or 'the reference libraries'} are installed"
        )
        if entry is None:
            pytest.fail(f"{self.path.name} has no entry {key!r}: {regenerate}")
        if not _same_fingerprint(entry["inputs"], inputs):
            pytest.fail(
                f"{self.path.name}: the inputs of {key!r} differ from those its golden was "
                f"computed for (the test or the code computing its inputs changed): {regenerate}"
            )
        return decode(entry["value"])


# ---- no bit-exact float comparisons in differential tests ----------------------------------
# Floats computed by two code paths (ours and the anchor's) or on two machines (the golden's
# writer and this CPU: vector widths, FMA, oneDNN's kernels) agree within a bound, not in
# their bits (issue 33 item 7: RandomErasing's golden was 1 ulp off on an AMD EPYC). While a
# test that takes ``ref`` runs, these comparisons refuse floating inputs from test code; the
# test compares within a stated bound instead (``harness.assert_within``,
# ``np.testing.assert_allclose`` with its ``atol``/``rtol`` written out).
EXACT_COMPARISONS = (
    ("numpy.testing", "assert_array_equal"),
    ("numpy.testing", "assert_equal"),
    ("numpy", "array_equal"),
    ("torch", "equal"),
)


def _is_float(x: Any) -> bool:
    if type(x).__module__.startswith("torch") and hasattr(x, "is_floating_point"):
        return bool(x.is_floating_point() or x.is_complex())
    if isinstance(x, (float, complex, np.floating, np.complexfloating)):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    if isinstance(x, (list, tuple)):
        return any(_is_float(v) for v in x)
    if isinstance(x, dict):
        return any(_is_float(v) for v in x.values())
    return False


def _from_tests(frame: Any) -> bool:
    """Whether ``frame`` runs code of this test folder (library code may compare bits)."""
    return Path(frame.f_code.co_filename).resolve().is_relative_to(GOLDENS.parent)


def forbid_exact_float_comparisons(monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch ``EXACT_COMPARISONS`` so that a call from test code with a floating array,
    tensor or scalar fails the test, naming the bounded comparison to use instead."""
    import importlib
    import sys

    for module_name, name in EXACT_COMPARISONS:
        module = importlib.import_module(module_name)
        exact = getattr(module, name)

        def guarded(*args: Any, _exact: Any = exact, _name: str = name, **kw: Any) -> Any:
            if _from_tests(sys._getframe(1)) and any(_is_float(a) for a in args):
                pytest.fail(
                    f"{_name} on floats in a differential test: floats from two code paths "
                    "or machines agree within a bound, not bit for bit; compare with "
                    "harness.assert_within or np.testing.assert_allclose and a stated "
                    "bound (tests/differential.py)"
                )
            return _exact(*args, **kw)

        monkeypatch.setattr(module, name, guarded)


REFERENCE_PARAMS = ["golden", pytest.param("live", marks=pytest.mark.differential)]


# ---- reference functions shared by the Keras tests ------------------------------------------
def keras_call(layer: str, args: tuple, kw: dict, x: Any, **call_kw: Any) -> np.ndarray:
    """``keras.layers.<layer>(*args, **kw)(x, training=True, **call_kw)`` as numpy."""
    built = getattr(keras().layers, layer)(*args, **kw)
    return np.asarray(built(x, training=True, **call_kw))


def keras_transform(layer: str, args: tuple, kw: dict, x: Any, transformation: dict) -> Any:
    """Keras's ``transform_images`` of ``layer`` for a given draw (``transformation``), as
    numpy: the draw is ours, so both sides apply the same parameters."""
    built = getattr(keras().layers, layer)(*args, **kw)
    return np.asarray(built.transform_images(x, transformation))
