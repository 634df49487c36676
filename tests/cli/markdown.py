"""Reading Markdown as the tests of the docs need it: fenced blocks with the marker comment
before them, relative links, and the anchors GitHub makes of headings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "anchors", "blocks", "links"]

_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)\s*$")
_MARKER = re.compile(r"^<!--\s*(example|not run):\s*(.*?)\s*-->$")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


@dataclass
class Block:
    language: str
    text: str
    marker: tuple[str, str] | None  # ("example", name) or ("not run", why)
    line: int


def blocks(text: str) -> list[Block]:
    """Every fenced code block, with the marker comment on the line before it, if any."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        before = lines[i - 1].strip() if i else ""
        mark = _MARKER.match(before)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1)))
        found.append(Block(fence.group(2), "\n".join(lines[i + 1:end]) + "\n",
                           (mark.group(1), mark.group(2)) if mark else None, i + 1))  # fmt: skip
        i = end + 1
    return found


def _outside_fences(text: str) -> list[str]:
    out, inside = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            out.append(line)
    return out


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code, where links are not links."""
    return "\n".join(re.sub(r"`[^`]*`", "", line) for line in _outside_fences(text))


def links(text: str) -> list[str]:
    return _LINK.findall(_prose(text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors a page has: its headings' (numbered -1, -2 when repeated) and HTML ids."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    text = path.read_text(encoding="utf-8")
    for line in _outside_fences(text):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading is None:
            continue
        slug = _slug(heading.group(1))
        count = seen.get(slug, 0)
        out.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    out.update(_HTML_ID.findall(text))
    return out
