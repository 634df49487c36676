"""Documents and images in a turn, for the models that can read them.

Text files go to the model as line-numbered blocks (:mod:`exai.files`). A file
that is not text but that a vendor reads is sent the vendor's way instead:

- a **document** (PDF, Office) to a model whose provider extracts text from
  files (Moonshot's ``file-extract``): the text the vendor returns goes in a
  system message of its own, right before the user's message, as Moonshot
  documents it;
- an **image** to a model the catalogue marks ``images = true``: an
  OpenAI-style ``image_url`` part holding a base64 ``data:`` URL, in the user's
  message beside the prompt.

Any other model gets the file skipped, with the reason, like any file left out.

A document is uploaded once per principal and provider: the extracted text is
kept in the conversation store under (principal, provider, SHA-256 of the
bytes), so the same bytes named again, in this thread or another, are sent
from there without an upload, and no principal ever receives the text of
another's upload. The messages built here are stored as the turn's own
messages, so later turns replay the very same bytes (the prompt prefix stays
stable for the vendors' caches) rather than reading or uploading anything again.

The decisions (:func:`refusal`, :func:`user_message`) are pure; reading and
uploading are at the edges (:func:`read_attachments`, :func:`attach`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from exai.errors import ValidationError_
from exai.files.binary import BinaryFile, aread_file_bytes
from exai.providers import ModelInfo
from exai.providers.base import Provider
from exai.store.artifact_types import VendorUpload
from exai.store.base import ConversationStore

__all__ = [
    "Attachments",
    "FilesFound",
    "attach",
    "read_attachments",
    "refusal",
    "user_message",
]


@dataclass(slots=True)
class FilesFound:
    """A turn's files sorted: documents and images read, the rest left for the text reader."""

    binaries: list[BinaryFile] = field(default_factory=list)
    text_paths: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def has_images(self) -> bool:
        return any(b.kind == "image" for b in self.binaries)


@dataclass(slots=True)
class Attachments:
    """What one turn sends besides its prompt, and an account of it."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # before the user message
    image_parts: list[dict[str, Any]] = field(default_factory=list)  # in the user message
    attached: list[dict[str, Any]] = field(default_factory=list)  # for the result's metadata
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def new_input(self, prompt: str) -> list[dict[str, Any]]:
        return [*self.messages, user_message(prompt, self.image_parts)]


def user_message(prompt: str, image_parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The user's message: plain text, or text and images as content parts."""
    if not image_parts:
        return {"role": "user", "content": prompt}
    return {"role": "user", "content": [{"type": "text", "text": prompt}, *image_parts]}


def refusal(file: BinaryFile, info: ModelInfo, extract_limit: int, max_bytes: int) -> str | None:
    """Why ``info`` cannot be sent ``file``, or None when it can.

    ``extract_limit`` is the largest document the model's provider extracts (0:
    none); ``max_bytes`` the daemon's own cap.
    """
    if file.kind == "image":
        if not info.images:
            return f"{info.name} cannot read images (choose a model with image input)"
        limit = max_bytes
    else:
        if extract_limit <= 0:
            return (
                f"{info.name} cannot read {file.mime} files: {info.provider} has no file "
                "extraction in exai (Kimi models read documents)"
            )
        limit = min(max_bytes, extract_limit)
    if len(file.data) > limit:
        return f"too large ({len(file.data)} bytes > {limit} cap)"
    return None


async def read_attachments(
    paths: Sequence[str], roots: Sequence[str], max_bytes: int
) -> FilesFound:
    """Read the documents and images among ``paths`` (named files, not directories).

    The file policy applies as to every read: a path it refuses raises. A file
    over ``max_bytes`` is skipped with the reason.
    """
    found = FilesFound()
    for path in paths:
        try:
            binary = await aread_file_bytes(path, roots, max_bytes)
        except ValidationError_ as exc:
            reason = str((exc.details or {}).get("reason", ""))
            if not reason.startswith("too large"):
                raise
            found.skipped.append((path, reason))
            continue
        if binary is None:
            found.text_paths.append(path)
        else:
            found.binaries.append(binary)
    return found


async def attach(
    found: FilesFound,
    info: ModelInfo,
    provider: Provider | None,
    store: ConversationStore,
    owner: str,
    max_bytes: int,
) -> Attachments:
    """The messages and parts that carry ``found``'s files to ``info``, uploading
    each document its principal has not uploaded to this provider before."""
    out = Attachments(skipped=list(found.skipped))
    extract_limit = provider.max_extract_bytes if provider is not None else 0
    for file in found.binaries:
        reason = refusal(file, info, extract_limit, max_bytes)
        if reason is not None:
            out.skipped.append((file.path, reason))
            continue
        sha256 = hashlib.sha256(file.data).hexdigest()
        note: dict[str, Any] = {"path": file.path, "kind": file.kind, "sha256": sha256}
        if file.kind == "image":
            url = f"data:{file.mime};base64,{base64.b64encode(file.data).decode('ascii')}"
            out.image_parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            assert provider is not None  # refusal() let a document through
            upload = await store.get_upload(owner, info.provider, sha256)
            note["uploaded"] = upload is None
            if upload is None:
                extracted = await provider.extract_file(file.data, os.path.basename(file.path))
                upload = await store.put_upload(VendorUpload(
                    owner=owner, provider=info.provider, sha256=sha256,
                    file_id=extracted.file_id, content=extracted.content,
                    size=len(file.data), created_at=time.time(),
                ))  # fmt: skip
            note["file_id"] = upload.file_id
            out.messages.append({"role": "system", "content": upload.content})
        out.attached.append(note)
    return out
