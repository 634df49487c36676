"""What ``completion`` adds around the caller's messages: stored responses, memory.

``completion`` sends the caller's messages as they are. Three things may be
asked for around them, each by an argument the model faces set:

- **a stored conversation** (the Responses API): ``previous_response_id`` puts
  the messages of the responses it continues first (owner-checked, see
  :mod:`exai.store.responses`), and ``store_as`` keeps this request's new
  messages and the model's answer under the new response's id;
- **instructions** for this request only, a system message first that is not
  kept with the response (the Responses API does not carry them over);
- **memory** (``memory``): the principal's memories relevant to its last user
  message, as the marked block :mod:`exai.memory.block` builds (untrusted text,
  delimited, never instructions), in a system message placed right before that
  user message. Everything before it stays byte for byte what the caller sent,
  and the block is the same for every request of one user turn (the same query
  finds the same memories), so the vendors' prompt caches keep hitting through
  an agent's tool loop. A new user message (the last of the request) is queued
for memory extraction, once: the tool rounds that follow it carry it again.

A failure to build the memory block never fails the call: it is logged and the
request goes without it (the result says so in its notes).
"""

from __future__ import annotations

from typing import Any

from exai.errors import ConversationNotFoundError
from exai.store.tokens import estimator_for
from exai.tools.base import ToolContext

__all__ = ["keep_response", "last_user_text", "stored_messages", "with_memory"]


def last_user_text(messages: list[dict[str, Any]]) -> tuple[int, str] | None:
    """The index and the text of the last user message, if it has any text."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content
                                if isinstance(p, dict) and p.get("type") == "text")  # fmt: skip
        return (index, content) if isinstance(content, str) and content.strip() else None
    return None


async def stored_messages(context: ToolContext, response_id: str) -> list[dict[str, Any]]:
    """The conversation a stored response ends, for the calling principal only."""
    store = context.services.store
    if store is None:
        raise ConversationNotFoundError(
            "this daemon keeps no responses (no conversation store)",
            details={"param": "previous_response_id"},
        )
    return await store.response_messages(response_id, context.principal.name)


async def keep_response(
    context: ToolContext,
    response_id: str,
    parent_id: str | None,
    new_messages: list[dict[str, Any]],
    answer: dict[str, Any],
) -> None:
    store = context.services.store
    if store is None:
        return
    await store.put_response(response_id, context.principal.name, [*new_messages, answer],
                             parent_id=parent_id)  # fmt: skip


async def with_memory(
    context: ToolContext, messages: list[dict[str, Any]], *, extract: bool = True
) -> tuple[list[dict[str, Any]], list[str], list[dict[str, str]]]:
    """``messages`` with the memory block before the last user message: the messages,
    the memory ids used, and notes (a block that could not be built)."""
    service = context.services.memory
    found = last_user_text(messages)
    if service is None or found is None:
        return messages, [], []
    index, text = found
    owner = context.principal.name
    try:
        block = await service.block_for(owner, text, estimator_for("generic").text,
                                        projects=list(context.client_roots))  # fmt: skip
    except Exception as exc:
        context.log.warning("memory_injection_failed", error=str(exc))
        note = {"param": "memory", "message": "the memories could not be read; the request "
                                              "went without them"}  # fmt: skip
        return messages, [], [note]
    if extract and index == len(messages) - 1:  # a new user turn, not a tool round
        service.queue_extraction(owner, text, None, None, allowed=context.allowed_models)
    if block is None:
        return messages, [], []
    service.injected(owner, "", block.ids, block.tokens)
    placed = [*messages[:index], {"role": "system", "content": block.text}, *messages[index:]]
    return placed, list(block.ids), []
