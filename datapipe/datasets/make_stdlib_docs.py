"""One-off extraction of a small text classification corpus from Python's standard library:
the first paragraphs of the docstrings of public functions, classes and methods of four
groups of modules, labelled by group. Writes ``datapipe/datasets/data/stdlib_docs.npz``.

Run from the repository root with CPython 3.11 (the shipped file was made with 3.11)::

    python datapipe/datasets/make_stdlib_docs.py

The npz holds ``train_texts`` / ``test_texts`` (str), ``train_labels`` / ``test_labels``
(int64, indices into ``label_names``) and ``label_names``. Texts are whitespace-normalised
first paragraphs with at least 4 words; a text that occurs in two groups is dropped, one that
repeats within a group is kept once. The split is a fixed permutation drawn with
``numpy.random.default_rng(20240503)`` (the first 20% of the shuffled texts are the test
set), each part in extraction order. Docstrings are part of CPython, licensed under the
PSF License Version 2 (see ``data/CITATION.txt``).
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re
import sys

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent / "data" / "stdlib_docs.npz"
SPLIT_SEED = 20240503
GROUPS = {
    "files": [
        "os",
        "os.path",
        "shutil",
        "pathlib",
        "glob",
        "tempfile",
        "zipfile",
        "tarfile",
        "io",
        "filecmp",
        "fnmatch",
        "stat",
    ],
    "network": [
        "socket",
        "http.client",
        "http.server",
        "http.cookies",
        "urllib.request",
        "urllib.parse",
        "email.message",
        "email.utils",
        "smtplib",
        "ftplib",
        "ssl",
        "imaplib",
        "poplib",
        "ipaddress",
    ],
    "concurrency": [
        "threading",
        "multiprocessing",
        "multiprocessing.pool",
        "asyncio",
        "asyncio.tasks",
        "asyncio.queues",
        "asyncio.locks",
        "concurrent.futures",
        "queue",
        "subprocess",
        "selectors",
        "sched",
        "signal",
    ],
    "numbers": [
        "math",
        "cmath",
        "statistics",
        "decimal",
        "fractions",
        "random",
        "numbers",
        "operator",
        "array",
        "bisect",
        "heapq",
    ],
}


def first_paragraph(doc: str | None) -> str | None:
    if not doc:
        return None
    text = re.sub(r"\s+", " ", doc.strip().split("\n\n")[0]).strip()
    return text if len(text.split()) >= 4 else None


def docstrings(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    out = []
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) not in (
            module.__name__,
            module_name,
        ):
            continue
        if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.isclass(obj):
            out.append(first_paragraph(inspect.getdoc(obj)))
        if inspect.isclass(obj):
            for meth_name, meth in sorted(vars(obj).items()):
                if not meth_name.startswith("_") and callable(meth):
                    out.append(first_paragraph(inspect.getdoc(meth)))
    return [t for t in out if t]


def main() -> None:
    if sys.version_info[:2] != (3, 11):
        print("warning: the shipped corpus was made with Python 3.11", file=sys.stderr)
    seen: dict[str, set[int]] = {}
    ordered: list[tuple[str, int]] = []
    for label, modules in enumerate(GROUPS.values()):
        for module_name in modules:
            for text in docstrings(module_name):
                if text not in seen:
                    ordered.append((text, label))
                seen.setdefault(text, set()).add(label)
    rows = [(t, lab) for t, lab in ordered if len(seen[t]) == 1]
    texts = np.array([t for t, _ in rows])
    labels = np.array([lab for _, lab in rows], dtype=np.int64)
    perm = np.random.default_rng(SPLIT_SEED).permutation(len(rows))
    n_test = len(rows) // 5
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    np.savez_compressed(
        OUT,
        train_texts=texts[train],
        train_labels=labels[train],
        test_texts=texts[test],
        test_labels=labels[test],
        label_names=np.array(list(GROUPS)),
    )
    counts = np.bincount(labels, minlength=len(GROUPS)).tolist()
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {len(train)} train, {n_test} test, {counts}")


if __name__ == "__main__":
    main()
