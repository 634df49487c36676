"""Wire protocol v1: every frame exai sends or accepts, as pydantic models.

This module is the whole contract between clients and the daemon. The daemon,
the shim, the command-line client, the baseline collector and the tests all
import it; nothing else defines a frame. It depends on nothing of ours and knows
nothing about sockets, so frames can be built and checked without a network.

One JSON object travels per WebSocket text frame and every frame has ``op``.
``parse_client_frame`` / ``parse_server_frame`` turn raw text into a model and
raise :class:`FrameError` with a protocol error code when that is impossible.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import from_json, to_json

__all__ = [
    "PROTOCOL_VERSION",
    "SESSION_ID_PATTERN",
    "TRACEPARENT_PATTERN",
    "CallToolAck",
    "CallToolFrame",
    "CallToolResult",
    "CancelFrame",
    "ClientFrame",
    "ClientInfo",
    "CloseCode",
    "ErrorCode",
    "ErrorFrame",
    "ErrorInfo",
    "FrameError",
    "HelloAck",
    "HelloFrame",
    "Limits",
    "ListToolsFrame",
    "ListToolsResult",
    "PingFrame",
    "PongFrame",
    "ProgressFrame",
    "ResultMetadata",
    "ServerFrame",
    "ServerInfo",
    "StreamChunk",
    "TextOutput",
    "ToolInfo",
    "describe_validation_error",
    "dump_frame",
    "dump_frame_bytes",
    "encode_result",
    "frame_schemas",
    "parse_client_frame",
    "parse_server_frame",
]

PROTOCOL_VERSION = 1
SESSION_ID_PATTERN = r"^[A-Za-z0-9_-]{3,64}$"
_REQUEST_ID_MAX = 128
# W3C Trace Context: version-traceid-parentid-flags, lower-case hex; a later
# version may add fields after the flags.
TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[^\s]*)?$"


class ErrorCode(StrEnum):
    INVALID_REQUEST = "INVALID_REQUEST"
    UNAUTHORIZED = "UNAUTHORIZED"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    OVER_CAPACITY = "OVER_CAPACITY"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    RATE_LIMITED = "RATE_LIMITED"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    CONTEXT_TOO_LONG = "CONTEXT_TOO_LONG"
    CONVERSATION_NOT_FOUND = "CONVERSATION_NOT_FOUND"
    FORBIDDEN = "FORBIDDEN"
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    INTERNAL_ERROR = "INTERNAL_ERROR"


class CloseCode(IntEnum):
    NORMAL = 1000
    GOING_AWAY = 1001
    MESSAGE_TOO_BIG = 1009
    NOT_JSON = 4000
    NOT_HELLO = 4001
    HELLO_TIMEOUT = 4002
    UNAUTHORIZED = 4003


class _Frame(BaseModel):
    # Unknown fields are ignored rather than rejected so that a newer client can
    # add optional fields without breaking an older daemon.
    model_config = ConfigDict(extra="ignore", frozen=True)


RequestId = Annotated[str, Field(min_length=1, max_length=_REQUEST_ID_MAX)]


class ErrorInfo(_Frame):
    code: ErrorCode
    message: str
    retryable: bool = False
    retry_after_s: float | None = None
    details: dict[str, Any] | None = None


# --- client to daemon -------------------------------------------------------


class ClientInfo(_Frame):
    name: str = Field(default="unknown", max_length=128)
    version: str = Field(default="", max_length=64)


class HelloFrame(_Frame):
    op: Literal["hello"] = "hello"
    token: str | None = Field(default=None, max_length=8192)
    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN)
    client: ClientInfo | None = None
    protocol: int | None = None


class ListToolsFrame(_Frame):
    op: Literal["list_tools"] = "list_tools"
    request_id: RequestId


class CallToolFrame(_Frame):
    op: Literal["call_tool"] = "call_tool"
    request_id: RequestId
    name: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, gt=0)
    stream: bool = False
    # The calling IDE's workspace roots (absolute paths), as MCP clients declare
    # them; the daemon decides how far they count (see exai.files.policy.effective_roots).
    roots: list[Annotated[str, Field(max_length=4096)]] | None = Field(default=None, max_length=64)
    # W3C trace context of the caller's span: the daemon's spans of this call become
    # its children when tracing is on (docs/observability.md).
    traceparent: str | None = Field(default=None, pattern=TRACEPARENT_PATTERN, max_length=256)
    tracestate: str | None = Field(default=None, max_length=512)


class CancelFrame(_Frame):
    op: Literal["cancel"] = "cancel"
    request_id: RequestId


class PingFrame(_Frame):
    op: Literal["ping"] = "ping"
    request_id: RequestId | None = None


ClientFrame = Annotated[
    HelloFrame | ListToolsFrame | CallToolFrame | CancelFrame | PingFrame,
    Field(discriminator="op"),
]


# --- daemon to client -------------------------------------------------------


class ServerInfo(_Frame):
    name: str = "exai"
    version: str


class Limits(_Frame):
    max_frame_bytes: int
    max_inflight_per_session: int
    default_timeout_s: float


class HelloAck(_Frame):
    op: Literal["hello_ack"] = "hello_ack"
    ok: bool
    session_id: str | None = None
    protocol: int = PROTOCOL_VERSION
    server: ServerInfo | None = None
    limits: Limits | None = None
    error: ErrorInfo | None = None


class ToolInfo(_Frame):
    name: str
    description: str
    inputSchema: dict[str, Any]


class ListToolsResult(_Frame):
    op: Literal["list_tools_res"] = "list_tools_res"
    request_id: str
    tools: list[ToolInfo]


class CallToolAck(_Frame):
    op: Literal["call_tool_ack"] = "call_tool_ack"
    request_id: str
    timeout_s: float


class ProgressFrame(_Frame):
    op: Literal["progress"] = "progress"
    request_id: str
    message: str
    progress: float | None = None
    total: float | None = None


class StreamChunk(_Frame):
    op: Literal["stream_chunk"] = "stream_chunk"
    request_id: str
    seq: int
    text: str


class TextOutput(_Frame):
    type: Literal["text"] = "text"
    text: str


class ResultMetadata(_Frame):
    # Tools add their own keys (files skipped, artifacts, untrusted output, ...),
    # so extra keys are kept and passed through untouched.
    model_config = ConfigDict(extra="allow", frozen=True)

    tool: str
    model: str | None = None
    provider: str | None = None
    continuation_id: str | None = None
    usage: dict[str, Any] | None = None
    # {currency, input, cached_input, output, total} in currency units; None when
    # no model was called or the model has no price.
    cost: dict[str, Any] | None = None
    latency_ms: float = 0.0
    replayed: bool = False


class CallToolResult(_Frame):
    op: Literal["call_tool_res"] = "call_tool_res"
    request_id: str
    outputs: list[TextOutput] = Field(default_factory=list)
    error: ErrorInfo | None = None
    metadata: ResultMetadata


class PongFrame(_Frame):
    op: Literal["pong"] = "pong"
    request_id: str | None = None


class ErrorFrame(_Frame):
    op: Literal["error"] = "error"
    request_id: str | None = None
    error: ErrorInfo


ServerFrame = Annotated[
    HelloAck
    | ListToolsResult
    | CallToolAck
    | ProgressFrame
    | StreamChunk
    | CallToolResult
    | PongFrame
    | ErrorFrame,
    Field(discriminator="op"),
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
    if isinstance(rid, str) and 0 < len(rid) <= _REQUEST_ID_MAX:
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


def parse_client_frame(text: str | bytes) -> Any:
    """Parse one client frame; raise :class:`FrameError` if it is not a valid one."""
    try:
        # The usual case in one pass of pydantic-core (parser and validator), which
        # bounds nesting depth; what is wrong with a frame that fails is worked out
        # below, step by step, so the error can say it and carry the request_id.
        return _client_adapter.validate_json(text)
    except ValidationError:
        pass
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
