"""benchmarks/ runs from the benchmarks' install: every package a benchmark imports is
installed by ``pip install -e ".[bench]"`` (issue 17: run.py crashed at W2 for
scikit-learn, which no extra installed), and the README's ``dev`` install carries none of
the benchmark peers (issue 24: the five-minute test loop).

The imports are read from the sources (``ast``: module level and inside functions), so an
optional import added later is checked too; each is mapped to the distribution that
provides it (from the installed metadata, or ``DISTRIBUTIONS`` where the package is not
installed here) and looked up in the requirements of the extra (core + the extra, and the
extras it names, such as ``datapipe-torch[bench]``).
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[1]
# This repository's own modules (benchmarks put benchmarks/, examples/ and test helpers on
# sys.path).
LOCAL = {"datapipe", "preprocessing"} | {
    p.stem if p.suffix else p.name
    for folder in ("benchmarks", "examples", "tests")
    for p in (ROOT / folder).rglob("*")
    if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())
}
# Imports a benchmark tries and reports as unavailable when they fail (not dependencies).
# Import names of the benchmark peers whose distribution has another name, for a check in
# an environment where they are not installed (the dev install has none of them).
DISTRIBUTIONS = {
    "tensorflow": "tensorflow-cpu",
    "sklearn": "scikit-learn",
    "cv2": "opencv-python-headless",
    "PIL": "pillow",
    "google": "google-crc32c",
    "yaml": "pyyaml",
}
# The benchmark peers: the README's dev install must not pull any of them in.
PEERS = {"tensorflow-cpu", "tensorflow", "keras", "kornia", "grain", "webdataset", "scikit-learn"}
OPTIONAL = {
    "torchvision": "bench_preprocessing.py's last contender: its compiled ops do not load "
    "beside the CPU torch build, so the row says unavailable",
    "siphash24": "bench_lookup_hashing.py measures it beside siphashc (not adopted: it "
    "builds a hasher object per string) and leaves the row out without it",
    "turbojpeg": "bench_image_backends.py reports PyTurboJPEG as unavailable without it "
    "(it also needs the libturbojpeg shared library)",
}


def _imports() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in LOCAL | OPTIONAL.keys():
                    found.setdefault(top, []).append(path.relative_to(ROOT).as_posix())
    return found


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(extra: str) -> set[str]:
    """The distributions ``pip install -e ".[extra]"`` asks for (core + the extra)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names, todo, seen = set(), list(project["dependencies"]), {extra}
    todo += extras[extra]
    while todo:
        req = todo.pop()
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[([^\]]+)\])?", req)
        assert m, req
        name, wanted = _norm(m.group(1)), m.group(2)
        if name == project["name"]:  # an extra of this project: its requirements count
            for named in (wanted or "").split(","):
                if named.strip() not in seen:
                    seen.add(named.strip())
                    todo += extras[named.strip()]
            continue
        names.add(name)
    return names


def test_every_benchmark_import_is_installed_by_the_bench_extra() -> None:
    provided = md.packages_distributions()
    wanted = _requirements("bench")
    missing = {}
    for module, files in _imports().items():
        dists = {_norm(d) for d in provided.get(module, [])} or {
            _norm(DISTRIBUTIONS.get(module, module))
        }
        if not dists & wanted:
            missing[module] = (sorted(dists), sorted(set(files)))
    assert missing == {}, f"not installed by the bench extra: {missing}"


def test_the_check_sees_w2s_scikit_learn_import() -> None:
    # The import that crashed run.py at W2 is found, and bench carries it.
    assert "benchmarks/workloads/w2.py" in _imports()["sklearn"]
    assert "scikit-learn" in _requirements("bench")


def test_the_dev_extra_installs_no_benchmark_peer() -> None:
    # The README's test command installs dev: the differential tests read the peers'
    # results from tests/goldens/ instead (pytest -m differential runs them live).
    dev = _requirements("dev")
    assert dev & PEERS == set()
    assert {"pytest", "torch", "ray", "moto"} <= dev
    assert PEERS - {"tensorflow"} <= _requirements("bench")
