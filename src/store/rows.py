"""How threads and provider messages become table rows and back, for every backend.

Both backends store the same columns in the same order, so one encoder and one
decoder serve them. JSON-valued columns hold text (``jsonb`` on Postgres, sent
and received as text), which keeps the two drivers interchangeable.

A message is stored as ``role``, ``content`` (when it is text) and ``fields``:
everything else the provider message holds (``tool_calls``, ``tool_call_id``,
``name``, list-valued ``content``...) as one JSON object, NULL for a plain
message. History assembly reads exactly these columns and nothing else.

Besides the message each row records what assembly would otherwise compute on
every call: its estimated cost under each tokenizer family (``tokens_kimi``...),
its size in characters (``chars``) and the size of the thread before its turn
began (``turn_chars_before``). A turn whose suffix of the thread cannot fit a
budget in characters is therefore found through an index, without reading the
thread.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from exai.errors import ConversationNotFoundError, ValidationError_
from exai.store.base import StoredMessage, Thread
from exai.store.tokens import FAMILIES, message_costs

__all__ = [
    "MESSAGE_COLUMNS",
    "MESSAGE_INSERT_COLUMNS",
    "ROLES",
    "THREAD_COLUMNS",
    "TOKEN_COLUMNS",
    "EncodedTurn",
    "check_thread_id",
    "context_columns",
    "context_message",
    "decode_message",
    "decode_thread",
    "dumps",
    "encode_turn",
    "expired_error",
    "loads",
    "message_row",
    "not_found_error",
    "thread_row",
]

ROLES = frozenset({"system", "user", "assistant", "tool"})

THREAD_COLUMNS = (
    "id, owner, title, created_at, updated_at, parent_id, fork_point, depth, deleted_at,"
    " turns, last_seq, total_chars, face, client, session_ref, follows"
)
MESSAGE_COLUMNS = (
    "thread_id, seq, turn, role, content, request_id, created_at, fields, reasoning, model,"
    " provider, usage, files"
)
TOKEN_COLUMNS = {family: f"tokens_{family}" for family in FAMILIES}
MESSAGE_INSERT_COLUMNS = (
    MESSAGE_COLUMNS + ", chars, turn_chars_before, " + ", ".join(TOKEN_COLUMNS.values())
)

_KNOWN_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "reasoning",
                         "reasoning_content"})  # fmt: skip
_START_NEW = "start a new conversation by omitting continuation_id"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def not_found_error(thread_id: str) -> ConversationNotFoundError:
    return ConversationNotFoundError(
        f"conversation {thread_id} does not exist or is not yours; {_START_NEW}",
        details={"continuation_id": thread_id},
    )


def expired_error(thread: Thread) -> ConversationNotFoundError:
    return ConversationNotFoundError(
        f"conversation {thread.id} expired after its time-to-live without activity; {_START_NEW}",
        details={"continuation_id": thread.id, "expired_at": thread.expires_at},
    )


def check_thread_id(thread_id: object) -> str:
    """The canonical form of a thread id; a malformed one is a conversation not found."""
    try:
        return str(uuid.UUID(str(thread_id)))
    except ValueError:
        raise ConversationNotFoundError(
            f"continuation_id {str(thread_id)[:80]!r} is not a conversation id (a UUID); "
            f"{_START_NEW}",
            details={"continuation_id": str(thread_id)[:80]},
        ) from None


def decode_thread(row: Sequence[Any], ttl_s: float) -> Thread:
    return Thread(
        id=row[0], owner=row[1], title=row[2], created_at=row[3], updated_at=row[4],
        expires_at=row[4] + ttl_s, parent_id=row[5], fork_point=row[6], depth=row[7],
        deleted_at=row[8], turns=row[9], last_seq=row[10], face=row[12], client=row[13],
        session_ref=row[14], follows=row[15],
    )  # fmt: skip


def thread_row(thread: Thread, total_chars: int) -> tuple[Any, ...]:
    return (
        thread.id, thread.owner, thread.title, thread.created_at, thread.updated_at,
        thread.parent_id, thread.fork_point, thread.depth, thread.deleted_at, thread.turns,
        thread.last_seq, total_chars, thread.face, thread.client, thread.session_ref,
        thread.follows,
    )  # fmt: skip


def decode_message(row: Sequence[Any]) -> StoredMessage:
    fields = None if row[7] is None else json.loads(row[7])
    tool_calls = tool_call_id = None
    if fields:
        tool_calls = fields.pop("tool_calls", None)
        tool_call_id = fields.pop("tool_call_id", None)
    return StoredMessage(
        thread_id=row[0], seq=row[1], turn=row[2], role=row[3], content=row[4],
        request_id=row[5], created_at=row[6], tool_calls=tool_calls, tool_call_id=tool_call_id,
        reasoning=row[8], model=row[9], provider=row[10],
        usage=None if row[11] is None else json.loads(row[11]),
        files=None if row[12] is None else json.loads(row[12]),
        extra=fields or None,
    )  # fmt: skip


def context_columns(family: str) -> str:
    """The columns :func:`context_message` reads, with the cost under ``family``."""
    return f"turn, {TOKEN_COLUMNS[family]}, role, content, fields, reasoning"


def context_message(row: Sequence[Any]) -> dict[str, Any]:
    """The provider message of a row of :func:`context_columns`: with its reasoning,
    which vendors may want back (a tool round's, or every answer's under Preserved
    Thinking; exai.providers.reasoning decides per call what is sent)."""
    message = {"role": row[2], "content": row[3]}
    if row[4] is not None:
        message.update(json.loads(row[4]))
    if row[5]:
        message["reasoning_content"] = row[5]
    return message


def message_row(message: StoredMessage, turn_chars_before: int) -> tuple[int, tuple[Any, ...]]:
    """The size in characters of ``message`` and its row for ``MESSAGE_INSERT_COLUMNS``.

    The size and token costs count what history assembly may send: a tool-call
    message's reasoning included.
    """
    provider = message.provider_message()
    fields = {k: v for k, v in provider.items() if k not in ("role", "content")}
    if not isinstance(provider["content"], str | None):
        fields["content"] = provider["content"]
    sent = provider
    if message.reasoning and message.tool_calls:
        sent = {**provider, "reasoning_content": message.reasoning}
    chars, tokens = message_costs(sent)
    row = (
        message.thread_id, message.seq, message.turn, message.role, message.content,
        message.request_id, message.created_at, dumps(fields) if fields else None,
        message.reasoning, message.model, message.provider,
        None if message.usage is None else dumps(message.usage),
        None if message.files is None else dumps(message.files),
        chars, turn_chars_before,
        *tokens,
    )  # fmt: skip
    return chars, row


class EncodedTurn:
    """One turn ready to insert: its messages, their rows and its size."""

    __slots__ = ("chars", "messages", "rows")

    def __init__(self, messages: list[StoredMessage], rows: list[tuple[Any, ...]], chars: int):
        self.messages = messages
        self.rows = rows
        self.chars = chars


def _validate(index: int, message: Any) -> Mapping[str, Any]:
    where = f"message {index}"
    if not isinstance(message, Mapping):
        raise ValidationError_(f"{where} is not an object")
    role = message.get("role")
    if role not in ROLES:
        raise ValidationError_(f"{where} has role {role!r}; expected one of {sorted(ROLES)}")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise ValidationError_(f"{where}: content must be a string, a list of parts or null")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not (
        isinstance(tool_calls, list) and all(isinstance(c, Mapping) for c in tool_calls)
    ):
        raise ValidationError_(f"{where}: tool_calls must be a list of objects")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise ValidationError_(f"{where}: a tool message needs the tool_call_id it answers")
    return message


def encode_turn(
    messages: Sequence[Mapping[str, Any]],
    *,
    thread_id: str,
    first_seq: int,
    turn: int,
    chars_before: int,
    request_id: str,
    now: float,
    model: str | None = None,
    provider: str | None = None,
    usage: Mapping[str, Any] | None = None,
    files: Sequence[str] | None = None,
) -> EncodedTurn:
    """Validate and encode the messages of one append."""
    if not messages:
        raise ValidationError_("a turn needs at least one message")
    if not isinstance(request_id, str) or not request_id:
        raise ValidationError_("a turn needs the request_id that produced it")
    if files is not None and not all(isinstance(p, str) for p in files):
        raise ValidationError_("files must be a list of paths")
    stored: list[StoredMessage] = []
    rows: list[tuple[Any, ...]] = []
    total = 0
    last = len(messages) - 1
    for index, raw in enumerate(messages):
        message = _validate(index, raw)
        content = message.get("content")
        extra = {k: v for k, v in message.items() if k not in _KNOWN_KEYS}
        if isinstance(content, list):
            extra["content"] = content
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        item = StoredMessage(
            thread_id=thread_id,
            seq=first_seq + index,
            turn=turn,
            role=message["role"],
            content=content if isinstance(content, str) else None,
            request_id=request_id,
            created_at=now,
            tool_calls=list(message["tool_calls"]) if message.get("tool_calls") else None,
            tool_call_id=message.get("tool_call_id"),
            reasoning=reasoning if isinstance(reasoning, str) else None,
            model=model,
            provider=provider,
            usage=dict(usage) if usage is not None and index == last else None,
            files=list(files) if files and index == 0 else None,
            extra=extra or None,
        )
        try:
            chars, row = message_row(item, chars_before)
        except (TypeError, ValueError) as exc:
            raise ValidationError_(f"message {index} is not JSON-serializable: {exc}") from None
        rows.append(row)
        stored.append(item)
        total += chars
    return EncodedTurn(stored, rows, total)
