"""What the emulated vendors refuse, and when their models think.

Part of the provider emulator (a test fixture). Kept apart from the reply and the
wire format so that each rule can be read, and checked against the vendors'
documentation, in one place:

- Moonshot: the K2.6/K2.5 models think unless ``thinking: {type: "disabled"}``,
  ``kimi-k2-thinking`` always does (platform.kimi.ai, "Using Thinking Models");
  their temperature cannot be modified (1.0 thinking, 0.6 not; "Model Parameter
  Reference"); a thinking request whose assistant tool-call message lacks
  ``reasoning_content`` is refused ("thinking is enabled but reasoning_content is
  missing in assistant tool call message at index N", the error users report);
  retired model ids are not found.
  While thinking, ``tool_choice`` may only be "auto" or "none": a forced one is
  refused with "tool_choice 'required' is incompatible with thinking enabled"
  ('specified' for a named function), the message users report. At most 5 stop
  sequences of 32 bytes each (Moonshot's chat API reference); the top_p of
  kimi-k2.6/k2.5 is fixed at 0.95 and another value is refused ("设置其他值会报错").
- Z.ai: GLM-4.7 and later think unless disabled, GLM-4.6 and earlier only when
  asked here (their hybrid thinking lets the model decide; docs.z.ai "Thinking
  Mode"). Z.ai asks for reasoning to come back with tool results but does not
  refuse a request without it; tests read the request log. Its chat API reference
  says ``tool_choice`` takes "auto" only and ``stop`` one word only; the emulator
  refuses anything else with code 1210, the code Z.ai lists for incorrect
  parameters (the exact message of those refusals was not found).
- Both: a ``tool`` message whose ``tool_call_id`` answers no earlier assistant
  tool call is refused, as OpenAI's API does; the emulator words it after
  OpenAI's message, Moonshot's and Z.ai's own wording not having been found.
"""

from __future__ import annotations

from typing import Any

from exai.emulators.vendor_wire import Vendor

__all__ = ["RETIRED_KIMI_MODELS", "refusal", "thinks"]

RETIRED_KIMI_MODELS = frozenset({
    "kimi-k2-0711-preview", "kimi-k2-0905-preview", "kimi-k2-turbo-preview",
    "kimi-k2-thinking-turbo", "kimi-latest",
})  # fmt: skip

_GLM_THINKING_BY_DEFAULT = ("glm-4.7", "glm-5")


def _switch(body: dict[str, Any]) -> str | None:
    thinking = body.get("thinking")
    return thinking.get("type") if isinstance(thinking, dict) else None


def _kimi_switchable(model: str) -> bool:
    return model.startswith("kimi-k2.")


def thinks(vendor: Vendor, body: dict[str, Any]) -> bool:
    """Whether the emulated model reasons before answering this request."""
    model = str(body.get("model", ""))
    switch = _switch(body)
    if vendor == "kimi":
        if _kimi_switchable(model):
            return switch != "disabled"
        return "thinking" in model
    if switch is not None:
        return switch == "enabled"
    return model.startswith(_GLM_THINKING_BY_DEFAULT)


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


def refusal(vendor: Vendor, body: dict[str, Any]) -> tuple[str, str] | None:
    """``(error kind, detail)`` when the vendor refuses this request, else None."""
    orphan = _orphan_tool_result(list(body.get("messages") or []))
    if orphan is not None:
        return "invalid_param", orphan
    choice = body.get("tool_choice")
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if vendor != "kimi":
        if choice is not None and choice != "auto":
            return (
                "invalid_param",
                f"tool_choice only supports auto, not {_tool_choice_name(choice)}",
            )
        if len(stops) > 1:
            return "invalid_param", "stop supports only one stop word"
        return None
    if len(stops) > 5 or any(len(str(s).encode()) > 32 for s in stops):
        return "invalid_param", "stop: at most 5 strings of at most 32 bytes each"
    model = str(body.get("model", ""))
    if model in RETIRED_KIMI_MODELS:
        return "not_found", model
    thinking = thinks(vendor, body)
    temperature = body.get("temperature")
    if _kimi_switchable(model) and temperature is not None:
        fixed = 1.0 if thinking else 0.6
        if float(temperature) != fixed:
            detail = f"invalid temperature: only {fixed:g} is allowed for this model"
            return "invalid_request", detail
    top_p = body.get("top_p")
    if _kimi_switchable(model) and top_p is not None and float(top_p) != 0.95:
        return "invalid_request", "invalid top_p: only 0.95 is allowed for this model"
    if thinking and choice is not None and choice not in ("auto", "none"):
        return "invalid_param", (
            f"tool_choice '{_tool_choice_name(choice)}' is incompatible with thinking enabled"
        )
    if thinking:
        for index, message in enumerate(body.get("messages") or []):
            if (
                message.get("role") == "assistant"
                and message.get("tool_calls")
                and not message.get("reasoning_content")
            ):
                return "invalid_request", (
                    "thinking is enabled but reasoning_content is missing in assistant tool "
                    f"call message at index {index}"
                )
    return None
