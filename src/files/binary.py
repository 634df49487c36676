"""Files a vendor can read though they are not text: documents and images.

A PDF, an Office file or an image cannot be put in a prompt as text, but some
providers read them: Moonshot extracts the text of documents uploaded for
``file-extract``, and vision models take images. This module tells such files
apart by their first bytes (not by their names, which a client chooses) and
reads their bytes under the same policy as text files (:mod:`exai.files`):
roots, symlinks resolved, system and credential paths refused, hard links
refused, opened beneath the root with ``O_NOFOLLOW``.

:func:`sniff_kind` is pure; :func:`read_file_bytes` blocks, and
:func:`aread_file_bytes` runs it on a worker thread.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from exai.errors import ValidationError_
from exai.files.policy import PathArg, _locate_named, _prepare_roots
from exai.files.read import _open_beneath, _Skip

__all__ = [
    "DOCUMENT_TYPES",
    "BinaryFile",
    "FileKind",
    "aread_file_bytes",
    "read_file_bytes",
    "sniff_kind",
]

FileKind = Literal["document", "image"]

# What Moonshot's file-extract accepts that is not text already, by extension.
DOCUMENT_TYPES = frozenset({"pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "epub", "mobi"})
_OFFICE_ZIP = frozenset({"docx", "xlsx", "pptx", "epub"})
_OLE = frozenset({"doc", "xls", "ppt"})
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True, slots=True)
class BinaryFile:
    """A document or image as read from disk."""

    path: str
    kind: FileKind
    mime: str
    data: bytes


def sniff_kind(head: bytes, name: str) -> tuple[FileKind, str] | None:
    """``(kind, mime type)`` of a file that starts with ``head``, or None for anything else.

    The bytes decide; the extension only tells apart the containers that several
    formats share (a ZIP is a .docx or an .xlsx, an OLE file a .doc or a .xls).
    """
    ext = os.path.splitext(name)[1].lower().lstrip(".")
    if head.startswith(b"%PDF-"):
        return "document", "application/pdf"
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return "image", mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image", "image/webp"
    if head.startswith(b"PK\x03\x04") and ext in _OFFICE_ZIP:
        return "document", f"application/x-{ext}"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1") and ext in _OLE:
        return "document", f"application/x-{ext}"
    if head.startswith(b"BOOKMOBI", 60) and ext == "mobi":
        return "document", "application/x-mobipocket-ebook"
    return None


def read_file_bytes(path: PathArg, roots: Iterable[str], max_bytes: int) -> BinaryFile | None:
    """The bytes of a document or image at ``path``, checked by the file policy.

    Returns None when the file is neither (it is then a text file, or a binary
    nobody reads). Raises :class:`~exai.errors.ForbiddenError` or
    :class:`~exai.errors.ValidationError_` like every other read, and
    ``ValidationError_`` with reason ``too large`` over ``max_bytes``.
    """
    roots = list(roots)
    located = _locate_named(path, _prepare_roots(roots), roots)
    shown = os.fspath(path)
    if not os.path.isfile(located.real):
        return None
    try:
        fd = _open_beneath(located.real, located.root)
    except _Skip as skip:
        raise ValidationError_(
            f"{shown!r} cannot be read: {skip.reason}",
            details={"path": shown, "reason": skip.reason},
        ) from None
    with os.fdopen(fd, "rb") as f:
        head = f.read(64)
        sniffed = sniff_kind(head, shown)
        if sniffed is None:
            return None
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise ValidationError_(
                f"{shown!r} is too large to send ({size} bytes > {max_bytes} cap)",
                details={"path": shown, "reason": f"too large ({size} bytes > {max_bytes} cap)"},
            )
        data = head + f.read(max_bytes + 1 - len(head))
    if len(data) > max_bytes:
        raise ValidationError_(
            f"{shown!r} grew past {max_bytes} bytes while being read",
            details={"path": shown, "reason": f"too large (over {max_bytes} bytes cap)"},
        )
    kind, mime = sniffed
    return BinaryFile(str(located.real), kind, mime, data)


async def aread_file_bytes(
    path: PathArg, roots: Iterable[str], max_bytes: int
) -> BinaryFile | None:
    """:func:`read_file_bytes` on a worker thread."""
    return await asyncio.to_thread(read_file_bytes, path, list(roots), max_bytes)
