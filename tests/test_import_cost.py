"""`import datapipe` stays light: a numpy-only pipeline never imports torch or pyarrow.

Each check runs in a fresh interpreter (this one has torch loaded by conftest). The time
bound is on the child's CPU time, which a loaded machine inflates far less than wall time,
and is loose (the import measures ~0.3 s; importing torch alone costs ~2 s of CPU); RSS
does not depend on load.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_NUMPY_PIPELINE = """
def peak_rss_mb():
    # VmHWM: this process image's peak (ru_maxrss would carry over the forking parent's,
    # which Linux keeps across exec).
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import datapipe as dp
import numpy as np
imported = time.perf_counter() - t0, time.process_time() - c0
x = np.arange(400, dtype=np.float32).reshape(100, 4)
ds = (
    dp.from_tensor_slices((x, np.arange(100)))
    .shuffle(50, seed=0)
    .map(lambda a, b: (a * 2, b), num_parallel_calls=dp.AUTOTUNE)
    .batch(8)
    .prefetch(dp.AUTOTUNE)
)
batches = list(ds)
print(json.dumps({
    "import_wall_s": imported[0],
    "import_cpu_s": imported[1],
    "total_cpu_s": time.process_time() - c0,
    "maxrss_mb": peak_rss_mb(),
    "loaded": [m for m in ("torch", "pyarrow", "ray", "tensorflow") if m in sys.modules],
    "batches": len(batches),
    "rows": sorted(int(v) for b in batches for v in b[1]),
    "dtype": str(batches[0][0].dtype),
}))
"""


def _run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="peak RSS is read from Linux's /proc"
)
def test_numpy_pipeline_imports_neither_torch_nor_pyarrow_and_stays_small() -> None:
    r = _run(_NUMPY_PIPELINE)
    assert r["loaded"] == [], f"a numpy-only pipeline imported {r['loaded']}"
    assert r["batches"] == 13 and r["rows"] == list(range(100)) and r["dtype"] == "float32"
    assert r["maxrss_mb"] <= 60, r  # ~44 MB measured; torch would add ~200 MB
    assert r["import_cpu_s"] <= 1.0, r  # ~0.3 s measured; torch would add ~2 s


def test_torch_names_load_on_first_use() -> None:
    r = _run(
        """
import json, sys
import datapipe as dp
before = "torch" in sys.modules
from datapipe import TorchIterableDataset
tds = dp.range(4).as_torch_dataset()
print(json.dumps({
    "before": before,
    "after": "torch" in sys.modules,
    "same": TorchIterableDataset is dp.distribute.TorchIterableDataset is type(tds),
    "is_iterable": isinstance(tds, sys.modules["torch"].utils.data.IterableDataset),
    "values": [int(v) for v in tds],
}))
"""
    )
    assert r == {
        "before": False,
        "after": True,
        "same": True,
        "is_iterable": True,
        "values": [0, 1, 2, 3],
    }


def test_tensors_made_after_the_import_are_recognised() -> None:
    # is_torch / is_torch_dtype look torch up when asked, not when datapipe was imported.
    r = _run(
        """
import json
import datapipe as dp
import torch
ds = dp.from_tensor_slices(torch.arange(6, dtype=torch.int16)).batch(4)
spec = ds.element_spec
b = next(iter(ds))
print(json.dumps({"spec": repr(spec), "type": type(b).__name__, "dtype": str(b.dtype),
                  "values": b.tolist()}))
"""
    )
    assert r == {
        "spec": "TensorSpec(shape=(None,), dtype=int16)",
        "type": "Tensor",
        "dtype": "torch.int16",
        "values": [0, 1, 2, 3],
    }


def test_unknown_attribute_still_raises() -> None:
    import datapipe

    with pytest.raises(AttributeError, match="module 'datapipe' has no attribute 'NoSuchName'"):
        datapipe.NoSuchName  # noqa: B018
    with pytest.raises(AttributeError, match="'datapipe.distribute' has no attribute 'Nope'"):
        datapipe.distribute.Nope  # noqa: B018


def test_subpackages_are_attributes_and_datasets_loads_on_first_use() -> None:
    # `import datapipe as dp; dp.datasets` raised AttributeError (issue 27); it is now
    # imported when first read, so `import datapipe` does not load it.
    r = _run(
        """
import json, sys, types
import datapipe as dp
before = "datapipe.datasets" in sys.modules
train, test = dp.datasets.load_digits()
print(json.dumps({
    "before": before,
    "after": "datapipe.datasets" in sys.modules,
    "same": dp.datasets is sys.modules["datapipe.datasets"],
    "modules": [isinstance(getattr(dp, n), types.ModuleType)
                for n in ("datasets", "io", "distribute", "service", "stats")],
    "listed": all(n in dir(dp) for n in ("datasets", "io", "distribute", "service")),
    "rows": [train.cardinality(), test.cardinality()],
}))
"""
    )
    assert r == {
        "before": False,
        "after": True,
        "same": True,
        "modules": [True] * 5,
        "listed": True,
        "rows": [1437, 360],
    }
