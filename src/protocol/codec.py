"""Frames to and from bytes: parsing with errors a client can act on, serializing,
the daemon's fast path for a successful result, and the generated JSON Schemas.

``parse_client_frame`` / ``parse_server_frame`` turn raw text into a model of
:mod:`exai.protocol.frames` and raise :class:`FrameError` with a protocol error
code when that is impossible. Every call's result goes through
:func:`encode_result` or :func:`dump_frame_bytes`: this is the protocol's hot path.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json, to_json

from exai.protocol.frames import (
    REQUEST_ID_MAX,
    CallToolAck,
    CallToolFrame,
    CallToolResult,
    CancelFrame,
    ClientFrame,
    ErrorCode,
    ErrorFrame,
    ErrorInfo,
    HelloAck,
    HelloFrame,
    ListToolsFrame,
    ListToolsResult,
    PingFrame,
    PongFrame,
    ProgressFrame,
    ResultMetadata,
    ServerFrame,
    StreamChunk,
)

__all__ = [
    "FrameError",
    "check_finite",
    "describe_validation_error",
    "dump_frame",
    "dump_frame_bytes",
    "encode_result",
    "frame_schemas",
    "parse_client_frame",
    "parse_server_frame",
]

_client_adapter: TypeAdapter[Any] = TypeAdapter(ClientFrame)
_server_adapter: TypeAdapter[Any] = TypeAdapter(ServerFrame)
_CLIENT_OPS = frozenset({"hello", "list_tools", "call_tool", "cancel", "ping"})


class FrameError(Exception):
    """A frame that cannot be accepted; ``code`` and ``request_id`` go into the error frame."""

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode = ErrorCode.INVALID_REQUEST,
        request_id: str | None = None,
        not_json: bool = False,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.request_id = request_id
        self.not_json = not_json
        self.details = details

    def to_frame(self) -> ErrorFrame:
        return ErrorFrame(
            request_id=self.request_id,
            error=ErrorInfo(code=self.code, message=self.message, details=self.details),
        )


def _request_id_of(obj: dict[str, Any]) -> str | None:
    rid = obj.get("request_id")
    if isinstance(rid, str) and 0 < len(rid) <= REQUEST_ID_MAX:
        return rid
    return None


def describe_validation_error(
    exc: ValidationError, *, whole: str = "(frame)", listed: int = 5
) -> tuple[str, dict[str, Any]]:
    """A one-line summary and ``{"fields": [{field, problem}]}`` details for an error frame.

    ``whole`` names the field when the problem is with the object as a whole.
    """
    fields = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err["loc"]) or whole
        fields.append({"field": loc, "problem": err["msg"]})
    summary = "; ".join(f"{f['field']}: {f['problem']}" for f in fields[:listed])
    return summary, {"fields": fields}


# What may spell a number JSON cannot carry: NaN and Infinity (which pydantic-core's
# parser takes), or an exponent large enough to overflow a float (1e999999 is read as
# infinity). Only a text that could hold one is searched for it (under a microsecond
# for a frame that cannot).
_BIG_EXPONENT = re.compile(r"\d[eE]\+?\d{3}")
_BIG_EXPONENT_BYTES = re.compile(rb"\d[eE]\+?\d{3}")


def may_hold_non_finite(raw: str | bytes) -> bool:
    """Whether ``raw`` could spell a number JSON cannot carry (see :func:`check_finite`)."""
    if isinstance(raw, bytes):
        return b"NaN" in raw or b"Infinity" in raw or bool(_BIG_EXPONENT_BYTES.search(raw))
    return "NaN" in raw or "Infinity" in raw or bool(_BIG_EXPONENT.search(raw))


def check_finite(raw: str | bytes, value: Any) -> None:
    """Raise ``ValueError`` when ``value`` (parsed from ``raw``) holds a number JSON
    cannot carry: no request holding one could be sent on, and encoding it fails
    only after the call has started."""
    if not may_hold_non_finite(raw):
        return
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(
                "a number is NaN, Infinity or past the range of a float; JSON carries none of these"
            )
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


def parse_client_frame(text: str | bytes) -> Any:
    """Parse one client frame; raise :class:`FrameError` if it is not a valid one."""
    try:
        # The usual case in one pass of pydantic-core (parser and validator), which
        # bounds nesting depth; what is wrong with a frame that fails is worked out
        # below, step by step, so the error can say it and carry the request_id.
        frame = _client_adapter.validate_json(text)
    except ValidationError:
        pass
    else:
        if may_hold_non_finite(text):
            try:
                check_finite(text, frame.model_dump())
            except ValueError as exc:
                rid = getattr(frame, "request_id", None)
                raise FrameError(str(exc), request_id=rid) from None
        return frame
    try:
        # pydantic-core's parser: several times faster than json, and it bounds nesting depth.
        obj = from_json(text)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"frame is not valid JSON: {exc}", not_json=True) from None
    if not isinstance(obj, dict):
        raise FrameError("frame must be a JSON object")
    op = obj.get("op")
    rid = _request_id_of(obj)
    if not isinstance(op, str):
        raise FrameError("frame has no 'op' string", request_id=rid)
    if op not in _CLIENT_OPS:
        raise FrameError(f"unknown op {op[:64]!r}", request_id=rid)
    try:
        return _client_adapter.validate_python(obj)
    except ValidationError as exc:
        summary, details = describe_validation_error(exc)
        raise FrameError(
            f"invalid {op} frame: {summary}", request_id=rid, details=details
        ) from None


def parse_server_frame(text: str | bytes) -> Any:
    """Parse one daemon frame (used by clients); raise :class:`FrameError` on garbage."""
    try:
        return _server_adapter.validate_json(text)
    except ValidationError as exc:
        summary, details = describe_validation_error(exc)
        raise FrameError(f"invalid server frame: {summary}", details=details) from None


def dump_frame(frame: BaseModel) -> str:
    """Serialize a frame; ``None`` optionals are kept only where the contract shows them."""
    return frame.model_dump_json(exclude_none=_EXCLUDE_NONE.get(type(frame), True))


def dump_frame_bytes(frame: BaseModel) -> bytes:
    """:func:`dump_frame` as UTF-8 bytes, straight from pydantic-core (no str round trip)."""
    return frame.__pydantic_serializer__.to_json(
        frame, exclude_none=_EXCLUDE_NONE.get(type(frame), True)
    )


# call_tool_res always carries "error" (null on success); everything else drops
# absent optionals so frames stay small.
_EXCLUDE_NONE: dict[type[BaseModel], bool] = {CallToolResult: False}

# The metadata every result carries, in the model's order with its defaults.
_METADATA_DEFAULTS: dict[str, Any] = ResultMetadata.model_construct(tool="").model_dump()


def encode_result(
    request_id: str, texts: list[str], metadata: dict[str, Any], **fields: Any
) -> bytes:
    """A successful ``call_tool_res``, serialized without building its model.

    The daemon answers every successful call with one of these, and building and
    validating the three nested models cost more than the rest of a trivial call.
    The frame is laid out from :class:`ResultMetadata`'s own fields and defaults,
    so it is the same bytes :func:`dump_frame_bytes` gives for the equivalent
    :class:`CallToolResult` (a test holds the two together). ``fields`` are
    metadata that override ``metadata``'s; between them they must name ``tool``.
    Values that are not JSON raise, as serializing the model would.
    """
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"a result's text must be str, not {type(text).__name__}")
    frame = {
        "op": "call_tool_res",
        "request_id": request_id,
        "outputs": [{"type": "text", "text": text} for text in texts],
        "error": None,
        "metadata": {**_METADATA_DEFAULTS, **metadata, **fields},
    }
    return to_json(frame)


def frame_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema of every frame, keyed by op, generated from the models above."""
    models: list[type[BaseModel]] = [
        HelloFrame, ListToolsFrame, CallToolFrame, CancelFrame, PingFrame,
        HelloAck, ListToolsResult, CallToolAck, ProgressFrame, StreamChunk,
        CallToolResult, PongFrame, ErrorFrame,
    ]  # fmt: skip
    out: dict[str, dict[str, Any]] = {}
    for model in models:
        op = model.model_fields["op"].default
        out[op] = model.model_json_schema()
    return out
