"""Wire protocol v1: every frame exai sends or accepts, as pydantic models.

This package is the whole contract between clients and the daemon. The daemon,
the shim, the command-line client, the baseline collector and the tests all
import it; nothing else defines a frame. It depends on nothing of ours and knows
nothing about sockets, so frames can be built and checked without a network.

One JSON object travels per WebSocket text frame and every frame has ``op``.
``parse_client_frame`` / ``parse_server_frame`` turn raw text into a model and
raise :class:`FrameError` with a protocol error code when that is impossible.

Everyone imports ``exai.protocol``; inside, :mod:`~exai.protocol.frames` holds the
models and enums (the contract) and :mod:`~exai.protocol.codec` parsing,
serialization and the generated schemas (``docs/protocol.schema.json``), and
:mod:`~exai.protocol.results` what a result tells a face beside its text (the
declared keys of its metadata) and the model events of a stream.
"""

from __future__ import annotations

from exai.protocol.codec import (
    FrameError,
    describe_validation_error,
    dump_frame,
    dump_frame_bytes,
    encode_result,
    frame_schemas,
    parse_client_frame,
    parse_server_frame,
)
from exai.protocol.frames import (
    EFFORTS,
    PROTOCOL_VERSION,
    SESSION_ID_PATTERN,
    TRACEPARENT_PATTERN,
    UUID_PATTERN,
    CallToolAck,
    CallToolFrame,
    CallToolResult,
    CancelFrame,
    ClientFrame,
    ClientInfo,
    CloseCode,
    ErrorCode,
    ErrorFrame,
    ErrorInfo,
    HelloAck,
    HelloFrame,
    Limits,
    ListToolsFrame,
    ListToolsResult,
    PingFrame,
    PongFrame,
    ProgressFrame,
    ReasoningEffort,
    ResultMetadata,
    ServerFrame,
    ServerInfo,
    StreamChunk,
    TextOutput,
    ToolInfo,
)
from exai.protocol.results import (
    FunctionCall,
    JobAnswer,
    MemoryAnswer,
    ModelAnswer,
    ResultFields,
    ResultNote,
    StreamEvent,
    ToolCall,
)

__all__ = [
    "EFFORTS",
    "PROTOCOL_VERSION",
    "SESSION_ID_PATTERN",
    "TRACEPARENT_PATTERN",
    "UUID_PATTERN",
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
    "FunctionCall",
    "HelloAck",
    "HelloFrame",
    "JobAnswer",
    "Limits",
    "ListToolsFrame",
    "ListToolsResult",
    "MemoryAnswer",
    "ModelAnswer",
    "PingFrame",
    "PongFrame",
    "ProgressFrame",
    "ReasoningEffort",
    "ResultFields",
    "ResultMetadata",
    "ResultNote",
    "ServerFrame",
    "ServerInfo",
    "StreamChunk",
    "StreamEvent",
    "TextOutput",
    "ToolCall",
    "ToolInfo",
    "describe_validation_error",
    "dump_frame",
    "dump_frame_bytes",
    "encode_result",
    "frame_schemas",
    "parse_client_frame",
    "parse_server_frame",
]
