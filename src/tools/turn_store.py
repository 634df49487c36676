"""Storing a model turn, and reading a stored turn back.

The storage half of :func:`exai.tools.turn.run_turn`: a turn is appended under
its request's key (principal, ``session_id``, ``request_id``) with the call's
fingerprint, which is what lets a retried request be answered from the turn it
stored; :func:`answer_of` and :func:`input_end` read such a turn.
"""

from __future__ import annotations

from typing import Any, Protocol

from exai.errors import ProviderError
from exai.providers import ChatResponse
from exai.store.base import StoredMessage
from exai.tools.attachments import FilesFound
from exai.tools.base import ToolContext


class AskedTurn(Protocol):
    """What storing a turn reads of the request (:class:`exai.tools.turn.TurnRequest`,
    whose module imports this one, so it is named here by what it has)."""

    prompt: str
    title: str | None
    keep_system_prompt: str | None


__all__ = [
    "THREAD_PROMPT_KEY",
    "AskedTurn",
    "answer_of",
    "input_end",
    "refuse_unusable",
    "store_turn",
]

# Audit events carry the message, but not without bound.
_AUDIT_CONTENT_CHARS = 4000
# The thread state entry holding a thread's own system prompt.
THREAD_PROMPT_KEY = "system_prompt"


async def store_turn(
    context: ToolContext,
    turn: AskedTurn,
    thread_id: str | None,
    response: ChatResponse,
    sent: list[dict[str, Any]],
    found: FilesFound,
) -> tuple[str, str]:
    """Append the turn; return the thread and the answer as stored.

    When this ``request_id`` already appended to the thread (a call re-sent after
    a daemon restart), the store keeps the first answer and returns it, so the
    caller sees the answer the conversation actually holds.
    """
    store = context.services.store
    owner = context.principal.name
    produced = response.messages or [{"role": "assistant", "content": response.text}]
    stored_as: dict[str, Any] = {
        "request_id": context.request_id,
        "session_id": context.session_id,
        "fingerprint": context.fingerprint,
        "model": response.model,
        "provider": response.provider,
        "usage": response.usage.as_dict(),
        # Only text files are read again on later turns; documents and images
        # live in the turn's own messages (``sent``).
        "files": found.text_paths or None,
    }
    if thread_id is None:
        first_line = turn.prompt.strip().splitlines()[0][:80] if turn.prompt.strip() else None
        thread, stored = await store.start_thread(
            owner, [*sent, *produced], title=turn.title or first_line, **stored_as
        )
        thread_id = thread.id
        if turn.keep_system_prompt is not None:
            await store.put_state(thread_id, THREAD_PROMPT_KEY, {"text": turn.keep_system_prompt})
    else:
        stored = await store.append(thread_id, owner, [*sent, *produced], **stored_as)
    audit = context.services.audit
    for message in stored:
        content = message.content or ""
        audit.emit("conversation_turn", thread_id=thread_id, request_id=context.request_id,
                   session_id=context.session_id, principal=owner, seq=message.seq,
                   role=message.role, model=message.model, chars=len(content),
                   message=content[:_AUDIT_CONTENT_CHARS])  # fmt: skip
    return thread_id, answer_of(stored, response.text)


def answer_of(stored: list[StoredMessage], default: str) -> str:
    """The text of a stored turn's last answer (its final assistant message)."""
    answers = [m for m in stored if m.role == "assistant" and not m.tool_calls]
    return (answers[-1].content or "") if answers else default


def input_end(stored: list[StoredMessage]) -> int:
    """Where the model's messages of a stored turn start: after the user's message
    (and the attachments stored before it)."""
    return next((i + 1 for i, m in enumerate(stored) if m.role == "user"), 1)


def refuse_unusable(response: ChatResponse) -> None:
    """An answer the vendor's content filter stopped, or an empty one, is an error, never
    a turn stored as a plain success: a person reading the thread would take it for the
    model's answer. The cost of the call stays charged."""
    if response.finish_reason == "content_filter":
        raise ProviderError(
            f"{response.model}'s content filter stopped the answer; nothing was stored. "
            "Rephrase the request, or ask another model",
            retryable=False,
            details={"kind": "content_filter", "model": response.model,
                     "provider": response.provider},
        )  # fmt: skip
    if not response.text.strip() and not response.tool_calls:
        raise ProviderError(
            f"{response.model} returned an empty answer (finish_reason "
            f"{response.finish_reason!r}); nothing was stored. Ask again",
            retryable=True,
            details={"kind": "empty_answer", "model": response.model,
                     "provider": response.provider},
        )  # fmt: skip
