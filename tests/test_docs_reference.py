"""The reference a tf.data user reads: every ``Dataset`` method's entry on the built site
shows its runnable example, no internal link of the site points to a missing page or
anchor, each example runs exactly once as a doctest, and "Getting started" runs as written.

No browser needed (``tests/test_docs_site.py`` opens the pages in Chromium). The site is
built once for the module (``mkdocs build --strict``, about 30 s), or ``site/`` is read
when it is newer than everything it is built from (``.ci/run`` builds it just before).
"""

from __future__ import annotations

import contextlib
import html.parser
import inspect
import io
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from harness import built_site

import datapipe as dp
from datapipe import _docs
from datapipe._op_table import documented_by

pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_site(tmp_path_factory)


def _methods() -> list[str]:
    """``Dataset``'s public methods (properties and trait flags are not methods)."""
    return sorted(
        n
        for n, v in vars(dp.Dataset).items()
        if n[0] != "_" and (inspect.isfunction(v) or isinstance(v, (staticmethod, classmethod)))
    )


def _entries(page: str) -> dict[str, str]:
    """The HTML of each ``Dataset`` method's entry: from its heading to the next entry."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'id="datapipe\.Dataset\.(\w+)"', page)]
    ends = [s for s, _ in starts[1:]] + [len(page)]
    return {name: page[s:e] for (s, name), e in zip(starts, ends)}


def test_every_dataset_method_entry_shows_a_runnable_example(site: Path) -> None:
    page = (site / "reference" / "dataset" / "index.html").read_text()
    entries = _entries(page)
    methods = _methods()
    assert len(methods) >= 50 and "map" in methods and "from_tensor_slices" in methods
    missing = [m for m in methods if m not in entries]
    assert missing == [], f"methods without an entry: {missing}"
    no_example = [
        m
        for m in methods
        if 'doc-section-title">Examples' not in entries[m] or "&gt;&gt;&gt;" not in entries[m]
    ]
    assert no_example == [], f"entries without an example: {no_example}"
    # The example shown is the op's own: map's entry runs map.
    assert "dp.range(5).map(lambda x: x * 10)" in html.unescape(
        re.sub("<[^>]+>", "", entries["map"])
    )
    assert "Documented on" not in page


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key == "id" and value:
                self.ids.add(value)
            if key in ("href", "src") and value is not None:
                self.hrefs.append(value)


def _parse(path: Path) -> _Links:
    links = _Links()
    links.feed(path.read_text(errors="replace"))
    return links


def test_every_internal_link_resolves(site: Path) -> None:
    pages = {p: _parse(p) for p in site.rglob("*.html")}
    assert len(pages) >= 20
    broken, checked = [], 0
    for path, links in pages.items():
        for href in links.hrefs:
            url = urlsplit(href)
            if url.scheme or href.startswith("//"):
                continue  # another host (the site loads nothing from one: test_docs_site)
            if not url.path:
                target = path
            elif url.path.startswith("/"):  # from the site's root (404.html's links)
                target = site / unquote(url.path).lstrip("/")
            else:
                target = (path.parent / unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.is_file():
                broken.append(f"{path.relative_to(site)}: {href} (no such file)")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(url.fragment) not in ids:
                    broken.append(f"{path.relative_to(site)}: {href} (no such anchor)")
    assert checked > 1000
    assert broken == [], "\n".join(broken)


def test_each_copied_example_runs_once_on_its_op_class() -> None:
    """pytest's doctest collection over ``dataset_ops`` and the op modules: each op class's
    example is collected, its copy on the ``Dataset`` method is deselected (root
    conftest.py), and the native methods' examples are collected from ``dataset_ops``."""
    sources = documented_by()
    files = {str(ROOT / (m.replace(".", "/") + ".py")) for m, _ in sources.values()}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
         "-p", "no:randomly", str(ROOT / "datapipe" / "dataset_ops.py"), *sorted(files)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    collected = {line.split("::", 1)[1] for line in r.stdout.splitlines() if "::" in line}
    with_example = {m: s for m, s in sources.items() if ">>>" in (getattr(dp.Dataset, m).__doc__)}
    assert set(with_example) == set(sources), set(sources) - set(with_example)
    for method, (module, name) in with_example.items():
        assert f"{module}.{name}" in collected, (method, module, name)
        assert f"datapipe.dataset_ops.Dataset.{method}" not in collected, method
    assert len(_docs.ATTACHED) == len(with_example)
    m = re.search(r"(\d+) deselected", r.stdout)
    assert m is not None and int(m.group(1)) == len(_docs.ATTACHED), r.stdout[-300:]
    for native in ("cardinality", "take_all", "apply", "as_torch_dataset", "profile"):
        assert f"datapipe.dataset_ops.Dataset.{native}" in collected, native


def _blocks(markdown: str) -> list[tuple[str, str]]:
    """(python code, the ``text`` block after it) for each ``python`` block followed by
    "prints" and a ``text`` block."""
    pattern = r"```python\n(.*?)```\s*\n\s*prints\s*\n\s*```text\n(.*?)```"
    return re.findall(pattern, markdown, flags=re.S)


def test_getting_started_runs_as_written() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text()
    blocks = _blocks(page)
    assert len(blocks) == 2, "a first pipeline and a first layer, each with its output"
    for code, expected in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "getting-started.md", "exec"), {"__name__": "__gs__"})
        assert out.getvalue() == expected
    assert "pip install datapipe-torch" in (ROOT / "README.md").read_text()
    assert "<!-- readme: Install -->" in page
    assert "<!-- readme-intro -->" not in page  # the contributor's commands: contributing.md
    assert "<!-- readme-intro -->" in (ROOT / "docs" / "contributing.md").read_text()
