"""What the store keeps beside a thread's messages: a large tool output (an artifact)
and a document a vendor extracted (an upload), as records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Artifact", "VendorUpload"]


@dataclass(frozen=True, slots=True)
class Artifact:
    """A large tool output kept with its thread and read back a page at a time."""

    id: str
    thread_id: str
    content: str  # the requested page
    offset: int
    size: int  # of the whole artifact, in characters
    meta: dict[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class VendorUpload:
    """A document a vendor extracted for one principal, found again by its content hash.

    ``content`` is the text as the vendor returned it, sent in place of the file
    whenever the principal names a file with the same bytes.
    """

    owner: str
    provider: str
    sha256: str
    file_id: str
    content: str
    size: int
    created_at: float
