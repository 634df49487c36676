"""Moonshot's files API, emulated: uploads for ``file-extract`` and their text.

Part of the provider emulator (a TEST FIXTURE). Endpoints, under ``/v1`` like
Moonshot's:

- ``POST /files``, multipart with ``file`` and ``purpose`` (``file-extract``;
  Moonshot also takes ``image`` and ``video``), answers the file object;
- ``GET /files/{id}/content`` answers the extracted text the way Moonshot does,
  a JSON document ``{"content", "file_type", "filename", "title", "type"}`` sent
  as the body, which clients put in a system message as it is;
- ``GET /files``, ``GET /files/{id}`` and ``DELETE /files/{id}``.

The extraction is a fixed rule, not a PDF parser: the text of a PDF is the
literal strings its ``Tj`` and ``TJ`` operators show between ``BT`` and ``ET``
in uncompressed content streams, joined by single spaces (what
:func:`minimal_pdf` writes); any other file is its bytes decoded as UTF-8 with
replacement characters. Every upload is counted and kept in :attr:`EmulatedFiles.uploads`
so tests can tell whether a file was uploaded again.

:func:`image_parts` lists the images a chat request carried (``image_url`` parts
with ``data:`` URLs), which the emulator records with each request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

__all__ = ["EmulatedFiles", "extract_text", "file_routes", "image_parts", "minimal_pdf"]

_TEXT_BLOCK = re.compile(rb"\bBT\b(.*?)\bET\b", re.S)
_SHOWN = re.compile(rb"\((?P<lit>(?:\\.|[^\\)])*)\)\s*Tj|\[(?P<arr>[^\]]*)\]\s*TJ", re.S)
_LITERAL = re.compile(rb"\(((?:\\.|[^\\)])*)\)", re.S)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"(": b"(", b")": b")", b"\\": b"\\"}
_PURPOSES = frozenset({"file-extract", "image", "video"})
_DATA_URL = re.compile(r"^data:(?P<mime>[\w/+.-]+);base64,(?P<data>.*)$", re.S)


def _unescape(literal: bytes) -> bytes:
    return re.sub(rb"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), literal)


def extract_text(data: bytes) -> str:
    """The emulator's "extraction" of a file (see the module's rule)."""
    if not data.startswith(b"%PDF-"):
        return data.decode("utf-8", errors="replace")
    pieces: list[bytes] = []
    for block in _TEXT_BLOCK.findall(data):
        for shown in _SHOWN.finditer(block):
            if shown.group("lit") is not None:
                pieces.append(_unescape(shown.group("lit")))
            else:
                pieces.extend(_unescape(lit) for lit in _LITERAL.findall(shown.group("arr")))
    return b" ".join(pieces).decode("latin-1")


def minimal_pdf(*lines: str) -> bytes:
    """A small valid one-page PDF showing ``lines`` (ASCII), for tests and benchmarks."""
    ops = []
    for index, line in enumerate(lines):
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"BT /F1 12 Tf 72 {720 - 16 * index} Td ({escaped}) Tj ET")
    stream = "\n".join(ops).encode("ascii")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def image_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The images a chat request carried: mime type, size and SHA-256 of each."""
    found = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            url = str((part.get("image_url") or {}).get("url", ""))
            match = _DATA_URL.match(url)
            if match is None:
                found.append({"role": message.get("role"), "url": url[:200]})
                continue
            data = base64.b64decode(match.group("data"))
            digest = hashlib.sha256(data).hexdigest()
            found.append({"role": message.get("role"), "mime": match.group("mime"),
                          "bytes": len(data), "sha256": digest})  # fmt: skip
    return found


class EmulatedFiles:
    """The files uploaded to the emulator, shared between the server's thread and tests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, dict[str, Any]] = {}
        self._uploads: list[dict[str, Any]] = []

    def add(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        with self._lock:
            file_id = f"emu-file-{len(self._uploads) + 1}"
            obj = {"id": file_id, "object": "file", "bytes": len(data),
                   "created_at": int(time.time()), "filename": filename, "purpose": purpose,
                   "status": "ok", "status_details": ""}  # fmt: skip
            self._files[file_id] = {"object": obj, "data": data}
            self._uploads.append({**obj, "sha256": hashlib.sha256(data).hexdigest()})
            return obj

    def get(self, file_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._files.get(file_id)

    def delete(self, file_id: str) -> bool:
        with self._lock:
            return self._files.pop(file_id, None) is not None

    def listing(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(f["object"]) for f in self._files.values()]

    @property
    def uploads(self) -> list[dict[str, Any]]:
        """Every upload ever received (deleted files included), oldest first."""
        with self._lock:
            return [dict(u) for u in self._uploads]

    def reset(self) -> None:
        with self._lock:
            self._files.clear()
            self._uploads.clear()


def _not_found(file_id: str) -> Response:
    error = {"message": f"file {file_id} not found", "type": "resource_not_found_error"}
    return JSONResponse({"error": error}, status_code=404)


def file_routes(
    files: EmulatedFiles, prefix: str, authorized: Callable[[Request], Response | None]
) -> list[Route]:
    """The routes under ``prefix``; ``authorized(request)`` is None or the error response."""

    async def upload(request: Request) -> Response:
        denied = authorized(request)
        if denied is not None:
            return denied
        form = await request.form()
        purpose, file = form.get("purpose"), form.get("file")
        if purpose not in _PURPOSES or file is None or isinstance(file, str):
            return JSONResponse({"error": {"message": "Invalid request: file and a purpose of "
                                           f"{sorted(_PURPOSES)} are required",
                                           "type": "invalid_request_error"}},
                                status_code=400)  # fmt: skip
        data = await file.read()
        return JSONResponse(files.add(data, file.filename or "upload", str(purpose)))

    async def content(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        found = files.get(file_id)
        if found is None:
            return _not_found(file_id)
        data: bytes = found["data"]
        body = {"content": extract_text(data), "file_type": _file_type(data),
                "filename": found["object"]["filename"], "title": "", "type": "file"}  # fmt: skip
        return PlainTextResponse(json.dumps(body, ensure_ascii=False),
                                 media_type="application/json")  # fmt: skip

    async def retrieve(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        found = files.get(file_id)
        if found is None:
            return _not_found(file_id)
        if request.method == "DELETE":
            files.delete(file_id)
            return JSONResponse({"id": file_id, "object": "file", "deleted": True})
        return JSONResponse(found["object"])

    async def listing(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": files.listing()})

    return [
        Route(f"{prefix}/files", upload, methods=["POST"]),
        Route(f"{prefix}/files", listing, methods=["GET"]),
        Route(f"{prefix}/files/{{file_id}}/content", content, methods=["GET"]),
        Route(f"{prefix}/files/{{file_id}}", retrieve, methods=["GET", "DELETE"]),
    ]


def _file_type(data: bytes) -> str:
    return "application/pdf" if data.startswith(b"%PDF-") else "text/plain"
