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
- Z.ai: GLM-4.7 and later think unless disabled, GLM-4.6 and earlier only when
  asked here (their hybrid thinking lets the model decide; docs.z.ai "Thinking
  Mode"). Z.ai asks for reasoning to come back with tool results but does not
  refuse a request without it, so nothing is refused; tests read the request log.
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


def refusal(vendor: Vendor, body: dict[str, Any]) -> tuple[str, str] | None:
    """``(error kind, detail)`` when the vendor refuses this request, else None."""
    if vendor != "kimi":
        return None
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
