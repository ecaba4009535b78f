"""Rewrite the golden files in this folder from the reference libraries themselves.

Run it where the ``bench`` extra is installed (tensorflow-cpu, keras, grain, scikit-learn):

    python tests/goldens/generate.py            # every differential test, files rewritten
    python tests/goldens/generate.py -k resize  # some: their entries replaced, others kept

It runs the ``[live]`` half of the differential tests (``pytest -m differential``) with
``DATAPIPE_GOLDENS=write``: each ``ref(fn, *args)`` call computes the anchor's result with
the installed library and records it, with a fingerprint of its inputs, under the test's
id; at the end each test file's entries go to ``tests/goldens/<test file>.json`` with the
versions of the libraries that computed them. The ``[live]`` tests compare as usual, so a
failing one is reported (and the script exits non-zero) while its entries are still
written. The committed goldens were written with tensorflow-cpu 2.21.0 and keras 3.15.1
(grain 0.2.18, scikit-learn 1.9.1): each file names its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

if __name__ == "__main__":
    if len(sys.argv) == 1:  # a full run: no entry of a test that no longer exists survives
        for old in HERE.glob("*.json"):
            old.unlink()
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, DATAPIPE_GOLDENS="write", PYTHONPATH=path)
    cmd = [sys.executable, "-m", "pytest", "-m", "differential", "-q", *sys.argv[1:]]
    sys.exit(subprocess.call(cmd, cwd=ROOT, env=env))
