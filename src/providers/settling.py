"""Settling a caller's tool rounds whose reasoning a thinking model wants back.

A stateless request (the model faces) brings tool rounds without the reasoning
the vendor wants with them (Moonshot refuses a thinking tool round without it).
:func:`settle_reasoning` puts back what exai kept (:mod:`exai.providers.tool_reasoning`)
and decides, for what it does not know, whether the request goes with thinking
turned off (noted), goes as it is (noted), or is refused naming the message.
"""

from __future__ import annotations

from collections.abc import Callable

from exai.errors import ValidationError_
from exai.providers.base import ChatRequest
from exai.providers.catalogue import ModelInfo
from exai.providers.reasoning import ReplayRule, lacking_reasoning
from exai.providers.tool_reasoning import ToolReasoning

__all__ = ["settle_reasoning"]


def settle_reasoning(
    info: ModelInfo,
    request: ChatRequest,
    asked_thinking: bool | None,
    rule_for: Callable[[ChatRequest], ReplayRule],
    cache: ToolReasoning | None,
) -> tuple[ChatRequest, list[dict[str, str]]]:
    """The caller's messages with their tool rounds' reasoning put back where it is
    known, and the request adapted (or refused) for the rounds where it is not.

    ``request`` is already fitted to ``info``; ``asked_thinking`` is the caller's
    own switch (None: the model's default); ``rule_for`` is the vendor's
    :class:`ReplayRule` for a request.
    """
    messages = request.messages
    unknown = lacking_reasoning(messages)
    if unknown and cache is not None and request.owner is not None:
        messages, unknown = cache.restore(request.owner, messages)
    request.messages = messages
    lacking = lacking_reasoning(messages)
    if not lacking:
        return request, []
    rule = rule_for(request)
    if rule.requires_tool_reasoning:
        where = ", ".join(f"messages[{i}]" for i in lacking)
        why = (
            "not known to this daemon (made elsewhere, expired, or not made by exai)"
            if unknown
            else "empty (the round was made without thinking)"
        )
        if info.thinking == "switchable" and asked_thinking is not True:
            request.thinking, request.thinks = False, False
            message = (
                f"the reasoning of the tool round in {where} is {why}, and {info.name} "
                "refuses a tool round without reasoning while it thinks; thinking was "
                "turned off for this request"
            )
            return request, [{"param": "thinking", "message": message}]
        raise ValidationError_(
            f"{where}: {info.name} refuses an assistant tool-call message without its "
            f"reasoning while it thinks, and that reasoning is {why}; send "
            "reasoning_content with it, turn thinking off, or choose a model whose thinking "
            "can be turned off",
            details={"param": f"messages[{lacking[0]}]", "messages": lacking},
        )
    if rule.tool_reasoning and unknown:
        where = ", ".join(f"messages[{i}]" for i in unknown)
        message = (
            f"the reasoning of the tool round in {where} is not known to this daemon; "
            "the round was sent without it"
        )
        return request, [{"param": f"messages[{unknown[0]}]", "message": message}]
    return request, []
