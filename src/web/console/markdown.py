"""Untrusted text as safe HTML: Markdown rendered, then sanitized. No I/O.

Model replies, prompts, tool calls and results, job output and memories are
untrusted: a reply can carry ``<script>``, ``<img onerror=...>`` or a
``javascript:`` link, put there by the model or by whatever the model read.
Two independent layers keep them inert:

1. **markdown-it-py** renders CommonMark (plus tables and strikethrough) with
   raw HTML off, so any tag in the text becomes visible text, and its link
   validation drops ``javascript:``, ``vbscript:``, ``file:`` and ``data:``
   URLs. Images are off: a page must not fetch what a model names (a tracking
   pixel, a request to an internal address). A fenced code block that names
   its language is highlighted by **Pygments**, which escapes the code and
   wraps its tokens in ``<span class="tok-...">``.
2. **nh3** (Ammonia) then keeps only an allowlist of tags and attributes, no
   event handlers, no ``style``, only Pygments' own token classes on
   ``<span>``, and links only with ``http``, ``https`` or ``mailto``
   (relative links dropped), each with ``rel="noopener noreferrer nofollow"``.

The page's Content-Security-Policy forbids inline script as a third layer.
:func:`highlight` gives the same treatment to text that is code as a whole (a
tool call's arguments as JSON).
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight as _pygmentize
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

__all__ = ["highlight", "render_markdown"]

# Code longer than this is shown as plain text: highlighting is regular expressions
# over the whole block, and a page shows hundreds of blocks.
MAX_HIGHLIGHTED = 20_000
_PREFIX = "tok-"
_FORMATTER = HtmlFormatter(nowrap=True, classprefix=_PREFIX)
_LEXERS: dict[str, Lexer | None] = {}


def _lexer(language: str) -> Lexer | None:
    name = language.strip().lower()[:40]
    if name not in _LEXERS:
        try:
            _LEXERS[name] = get_lexer_by_name(name, stripnl=False, ensurenl=False)
        except ClassNotFound:
            _LEXERS[name] = None
    return _LEXERS[name]


def _highlighted(code: str, language: str) -> str:
    """``code`` as escaped HTML with token spans, or ``""`` (markdown-it then escapes it)."""
    if not language or len(code) > MAX_HIGHLIGHTED:
        return ""
    lexer = _lexer(language)
    return "" if lexer is None else str(_pygmentize(code, lexer, _FORMATTER))


_MD = MarkdownIt(
    "commonmark",
    {"html": False, "linkify": False, "breaks": True,
     "highlight": lambda code, language, _attrs: _highlighted(code, language)},
).enable(["table", "strikethrough"])  # fmt: skip
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
    "span",
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
    allowed_classes={"span": {_PREFIX + c for c in STANDARD_TYPES.values() if c}},
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


def highlight(code: str, language: str) -> Markup:
    """``code`` in ``language`` (a Pygments name) as sanitized HTML for a ``<pre>``:
    highlighted when Pygments knows the language and the code is not too long,
    else escaped as it is."""
    html = _highlighted(code, language)
    return Markup(_CLEANER.clean(html)) if html else Markup.escape(code)
