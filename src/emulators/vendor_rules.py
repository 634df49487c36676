"""What the emulated vendors refuse. A TEST FIXTURE, and a contract.

Part of the provider emulator. Each refusal is a rule of
:data:`exai.emulators.contract.RULES` (id in brackets), with its source there;
what each model does (thinking, effort, fixed sampling) is data in
:mod:`exai.emulators.models`. A refusal is ``(error kind, detail)``, a kind of
:func:`exai.emulators.vendor_wire.error_body`: Moonshot answers 400
``{"error": {"message", "type": "invalid_request_error"}}`` and 404
``resource_not_found_error``; Z.ai 400 ``{"error": {"code": "1210", "message"}}``,
1210 being "Incorrect API call parameters". Where the vendors' exact message was
not found the detail is the emulator's own wording, said so in the rule;
Moonshot's verified messages are bare (no "Invalid request: " prefix, as in the
raw body quoted in anomalyco/opencode#25758).

Moonshot [K-*] (applied to Moonshot ids; other ids on its path are generic
OpenAI-compatible models, see :func:`exai.emulators.models.moonshot_model`):
retired ids are not found; ``max_tokens`` is refused for
``max_completion_tokens`` (the contract's strict reading: Moonshot deprecates
the field and may still honour it, but a field that may stop bounding the reply
must not go unnoticed); the ``thinking`` switch and ``reasoning_effort``
as each model takes them; fixed temperature and top_p; tool parameter schemas
with untyped properties (:mod:`exai.emulators.tool_schemas`); forced
``tool_choice`` and ``$web_search`` while thinking; ``reasoning_content`` missing
from a tool-call message, from any assistant message under Preserved Thinking,
or from a trailing ``partial`` message. At most 5 stop sequences of 32 bytes
(any model on the path, as before).

Z.ai [G-*]: ``tool_choice`` other than "auto", more than one stop word, turning
off the thinking of a model that cannot, and ``reasoning_effort`` where the
model does not take it or with a value it does not take. Z.ai asks for
reasoning to come back with tool results ("必须显式保留 Reasoning content",
docs.bigmodel.cn thinking-mode) but is not known to refuse a request without
it, so the emulator does not either: tests read the request log.

Both [B-*]: a ``tool`` message whose ``tool_call_id`` answers no earlier
assistant tool call, worded after OpenAI's message (Moonshot's and Z.ai's own
wording not found).
"""

from __future__ import annotations

from typing import Any

from exai.emulators.models import EmulatedModel, lookup, moonshot_model, switch, thinks
from exai.emulators.tool_schemas import untyped_property
from exai.emulators.vendor_wire import Vendor

__all__ = ["RETIRED_KIMI_MODELS", "offers_kimi_search", "refusal", "thinks"]

# [K-2] Retired Moonshot ids: 404 resource_not_found_error.
RETIRED_KIMI_MODELS = frozenset({
    "kimi-k2-0711-preview", "kimi-k2-0905-preview", "kimi-k2-turbo-preview",
    "kimi-k2-thinking-turbo", "kimi-latest", "kimi-k2-thinking", "kimi-k2.5",
    "moonshot-v1-8k", "moonshot-v1-32k", "moonshot-v1-128k", "moonshot-v1-auto",
    "moonshot-v1-8k-vision-preview", "moonshot-v1-32k-vision-preview",
    "moonshot-v1-128k-vision-preview",
})  # fmt: skip

Refusal = tuple[str, str]


def offers_kimi_search(tools: list[Any]) -> bool:
    """Whether the request declares Moonshot's built-in ``$web_search``."""
    return any(
        isinstance(t, dict)
        and t.get("type") == "builtin_function"
        and (t.get("function") or {}).get("name") == "$web_search"
        for t in tools
    )


def _orphan_tool_result(messages: list[dict[str, Any]]) -> str | None:
    called: set[str] = set()
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            called.update(
                str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, dict)
            )
        elif message.get("role") == "tool" and str(message.get("tool_call_id")) not in called:
            return (
                f"messages[{index}]: a message with role 'tool' must answer a preceding "
                f"assistant tool call; tool_call_id {message.get('tool_call_id')!r} "
                "answers none"
            )
    return None


def _tool_choice_name(choice: Any) -> str:
    return "specified" if isinstance(choice, dict) else str(choice)


def _stops(body: dict[str, Any]) -> list[Any]:
    stop = body.get("stop")
    return [stop] if isinstance(stop, str) else list(stop or [])


def refusal(vendor: Vendor, body: dict[str, Any]) -> Refusal | None:
    """``(error kind, detail)`` when the vendor refuses this request, else None."""
    orphan = _orphan_tool_result(list(body.get("messages") or []))
    if orphan is not None:
        return "invalid_param", orphan
    model = lookup(vendor, str(body.get("model", "")))
    if vendor == "glm":
        return _glm_refusal(model, body)
    stops = _stops(body)
    if len(stops) > 5 or any(len(str(s).encode()) > 32 for s in stops):
        return "invalid_param", "stop: at most 5 strings of at most 32 bytes each"
    if model.id in RETIRED_KIMI_MODELS:
        return "not_found", model.id
    if not moonshot_model(model.id):  # a generic OpenAI-compatible model
        return _thinking_messages(body) if thinks(vendor, body) else None
    return _kimi_refusal(model, body)


def _effort_refusal(model: EmulatedModel, body: dict[str, Any], vendor: Vendor) -> str | None:
    if "reasoning_effort" not in body or model.efforts is None:
        return None
    effort = body["reasoning_effort"]
    if not model.efforts:
        where = "glm-5.2 and above" if vendor == "glm" else "kimi-k3"
        return f"reasoning_effort is not supported by model {model.id} (only {where} take it)"
    if effort not in model.efforts:
        return (
            f"invalid reasoning_effort {effort!r} for model {model.id}: "
            f"expected one of {', '.join(model.efforts)}"
        )
    return None


def _glm_refusal(model: EmulatedModel, body: dict[str, Any]) -> Refusal | None:
    choice = body.get("tool_choice")
    if choice is not None and choice != "auto":  # [G-3]
        return "invalid_param", f"tool_choice only supports auto, not {_tool_choice_name(choice)}"
    if len(_stops(body)) > 1:  # [G-4]
        return "invalid_param", "stop supports only one stop word"
    if model.thinking_field == "enabled_only" and switch(body) == "disabled":  # [G-2]
        return "invalid_param", f"thinking cannot be disabled for model {model.id}"
    if model.thinking == "always" and body.get("reasoning_effort") == "none":  # [G-2]
        return "invalid_param", (
            f"reasoning_effort 'none' is not supported: thinking cannot be disabled for "
            f"model {model.id}"
        )
    effort = _effort_refusal(model, body, "glm")  # [G-1]
    return ("invalid_param", effort) if effort is not None else None


def _kimi_refusal(model: EmulatedModel, body: dict[str, Any]) -> Refusal | None:
    if "max_tokens" in body:  # [K-5]
        return "invalid_param", "max_tokens is deprecated, please use max_completion_tokens"
    asked = switch(body)
    if model.thinking_field == "refused" and "thinking" in body:  # [K-1]
        return "invalid_param", (
            f"thinking is not supported by model {model.id}; use reasoning_effort"
        )
    if model.thinking_field == "enabled_only" and asked == "disabled":  # [K-1]
        return "invalid_param", f"thinking cannot be disabled for model {model.id}"
    effort = _effort_refusal(model, body, "kimi")  # [K-1]
    if effort is not None:
        return "invalid_param", effort
    thinking = thinks("kimi", body)
    temperature = body.get("temperature")
    if model.temperature is not None and temperature is not None:  # [K-3]
        fixed = model.temperature[0 if thinking else 1]
        if float(temperature) != fixed:
            detail = f"invalid temperature: only {fixed:g} is allowed for this model"
            return "invalid_request", detail
    top_p = body.get("top_p")
    if model.top_p is not None and top_p is not None and float(top_p) != model.top_p:  # [K-3]
        return "invalid_request", f"invalid top_p: only {model.top_p:g} is allowed for this model"
    tools = list(body.get("tools") or [])
    schema = untyped_property(tools)  # [K-6]
    if schema is not None:
        return "invalid_param", schema
    if not thinking:
        return None
    choice = body.get("tool_choice")  # [K-4]
    forced = choice is not None and choice not in ("auto", "none")
    if forced and not model.forced_tool_choice_while_thinking:
        return "invalid_param", (
            f"tool_choice '{_tool_choice_name(choice)}' is incompatible with thinking enabled"
        )
    if offers_kimi_search(tools):  # [K-7]
        return "invalid_param", (
            "$web_search is not supported while thinking is enabled; disable thinking to "
            "use $web_search"
        )
    return _thinking_messages(body, preserved=model.preserved_thinking)


def _thinking_messages(body: dict[str, Any], *, preserved: bool = False) -> Refusal | None:
    """[K-8] [K-9] [K-10] Reasoning a thinking request must carry back."""
    messages = list(body.get("messages") or [])
    last = len(messages) - 1
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        if index == last and message.get("partial"):
            if not isinstance(message.get("reasoning_content"), str):
                return "invalid_param", (
                    "thinking is enabled but reasoning_content is missing in partial "
                    f"assistant message at index {index}"
                )
            continue
        if preserved:  # any earlier assistant message; "" counts, as kimi-cli backfills it
            if not isinstance(message.get("reasoning_content"), str):
                kind = "tool call message" if message.get("tool_calls") else "message"
                return "invalid_param", (
                    "thinking is enabled but reasoning_content is missing in assistant "
                    f"{kind} at index {index}"
                )
        elif message.get("tool_calls") and not message.get("reasoning_content"):
            return "invalid_param", (
                "thinking is enabled but reasoning_content is missing in assistant tool "
                f"call message at index {index}"
            )
    return None
