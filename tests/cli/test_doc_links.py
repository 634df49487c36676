"""Every relative link in README.md and docs/*.md leads to a file that exists, and its
anchor, if it has one, to a heading (or an HTML id) of that file."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.cli.markdown import anchors, links

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_anchor(page: Path):
    broken = []
    for target in links(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
        elif not path.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
    assert broken == []


def test_the_docs_table_of_the_readme_lists_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in PAGES[1:] if f"](docs/{p.name})" not in readme]
    assert missing == []
