"""The frames of wire protocol v1, as pydantic models: the contract itself.

Every frame exai sends or accepts is one model here, with its ``op``; the error
codes and close codes are the enums beside them. Nothing here parses or
serializes (see :mod:`exai.protocol.codec`), and nothing knows about sockets.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "PROTOCOL_VERSION",
    "REQUEST_ID_MAX",
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
]

PROTOCOL_VERSION = 1
SESSION_ID_PATTERN = r"^[A-Za-z0-9_-]{3,64}$"
# A thread's id (``continuation_id``), as every tool and face checks it.
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
# How hard a model reasons, least to most, as the OpenAI, Anthropic and Z.ai APIs name
# the levels between them; each model takes some of them (the catalogue's
# reasoning_efforts), and exai maps the others onto those.
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[str, ...] = get_args(ReasoningEffort)
# W3C Trace Context: version-traceid-parentid-flags, lower-case hex; a later
# version may add fields after the flags.
TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[^\s]*)?$"
REQUEST_ID_MAX = 128


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
    UNAVAILABLE = "UNAVAILABLE"
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


RequestId = Annotated[str, Field(min_length=1, max_length=REQUEST_ID_MAX)]


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
