"""Untrusted text as safe HTML: Markdown rendered, then sanitized. No I/O.

Model replies, prompts, job output and memories are untrusted: a reply can
carry ``<script>``, ``<img onerror=...>`` or a ``javascript:`` link, put
there by the model or by whatever the model read. Two independent layers
keep them inert:

1. **markdown-it-py** renders CommonMark (plus tables and strikethrough) with
   raw HTML off, so any tag in the text becomes visible text, and its link
   validation drops ``javascript:``, ``vbscript:``, ``file:`` and ``data:``
   URLs. Images are off: a page must not fetch what a model names (a tracking
   pixel, a request to an internal address).
2. **nh3** (Ammonia) then keeps only an allowlist of tags and attributes, no
   event handlers, no ``style``, and links only with ``http``, ``https`` or
   ``mailto`` (relative links dropped), each with
   ``rel="noopener noreferrer nofollow"``.

The page's Content-Security-Policy forbids inline script as a third layer.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

__all__ = ["render_markdown"]

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
_MD.disable("image")

_TAGS = {
    "a",
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
_CLEANER = nh3.Cleaner(
    tags=_TAGS,
    attributes={"a": {"href", "title"}, "ol": {"start"}},
    url_schemes={"http", "https", "mailto"},
    url_relative="deny",
    link_rel="noopener noreferrer nofollow",
    strip_comments=True,
)


def render_markdown(text: str | None) -> Markup:
    """``text`` as sanitized HTML, ready to place in a page."""
    if not text:
        return Markup("")
    return Markup(_CLEANER.clean(_MD.render(text)))
