"""MkDocs hook: the guides take their text from the README's sections, so the two never drift.

A page line ``<!-- readme: Title -->`` becomes the README's ``## Title`` section (its
heading included; a page with one such section takes its body under the page's title),
``<!-- readme-intro -->`` the README's text before its first ``##`` section. A title that
is not in the README fails the build (strict or not). ``<!-- op-traits -->`` becomes the
table of every op's traits, generated from the op classes (``datapipe._op_table``).
``<!-- include: path -->`` becomes the file at ``path`` (from the repository's root) as a
code block, so a page shows a script without copying it (a missing file fails the build).
The README links the pages from the repository's root (``docs/guides/differences.md``);
in a section taken onto a page, such a link is made relative to that page, so the site's
link resolves (``tests/test_docs_reference.py`` checks every internal link of the site).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_MARK = re.compile(r"^<!-- readme: (.+?) -->$", re.M)
_INCLUDE = re.compile(r"^<!-- include: (.+?) -->$", re.M)
_DOCS_LINK = re.compile(r"\]\(docs/([^)#\s]+\.md)(#[^)\s]*)?\)")


def _relink(text: str, page_path: str) -> str:
    """The README's ``](docs/x.md)`` links, relative to the page at ``page_path`` (a path
    under docs/)."""
    here = posixpath.dirname(page_path)
    return _DOCS_LINK.sub(
        lambda m: f"]({posixpath.relpath(m.group(1), here or '.')}{m.group(2) or ''})", text
    )


def _include(m: re.Match) -> str:
    path = ROOT / m.group(1)
    language = {".py": "python", ".sh": "bash"}.get(path.suffix, "text")
    return f"```{language}\n{path.read_text().rstrip()}\n```"


def _sections(text: str) -> tuple[str, dict[str, str]]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    intro = parts[0].split("\n", 1)[1].strip()  # without the README's "# datapipe" title
    return intro, {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts), 2)}


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    intro, sections = _sections(README.read_text())
    marks = _MARK.findall(markdown)
    missing = [m for m in marks if m not in sections]
    if missing:
        raise ValueError(f"{page.file.src_path}: no README section named {missing}")

    def section(m: re.Match) -> str:
        body = _relink(sections[m.group(1)], page.file.src_uri)
        if len(marks) == 1:  # the page is this section: its ### become the page's ##
            return re.sub(r"^### ", "## ", body, flags=re.M)
        return f"## {m.group(1)}\n\n{body}"

    markdown = _INCLUDE.sub(_include, markdown)
    markdown = markdown.replace("<!-- readme-intro -->", _relink(intro, page.file.src_uri))
    if "<!-- op-traits -->" in markdown:
        from datapipe._op_table import trait_table

        markdown = markdown.replace("<!-- op-traits -->", trait_table())
    return _MARK.sub(section, markdown)
