"""What each emulated model does, as data: when it thinks, what controls it takes,
which sampling values are fixed.

Part of the provider emulator (a TEST FIXTURE). :mod:`exai.emulators.vendor_rules`
refuses requests against this table and :func:`thinks` decides whether a reply
carries reasoning. Sources (read 2026-11; "3p" marks a third party quoting the
vendor):

- ``kimi-k3``: always reasons; the top-level ``reasoning_effort`` takes exactly
  "low", "high" or "max" (default "max"); it takes no ``thinking`` field; its
  temperature is 1 and top_p 0.95; ``tool_choice`` "required" or a named function
  is allowed while it reasons. platform.kimi.ai/docs/guide/use-reasoning-effort
  and the K3 quickstart, as quoted by 3p docs.agno.com (Moonshot reasoning-effort
  example) and 3p synaps-engine ``runtime/openai/catalog/kimi.rs`` ("verified live
  against api.moonshot.ai"). That catalogue also says Moonshot *silently ignores*
  unknown ``reasoning_effort`` values and unknown fields: the emulator refuses
  them instead, the contract's strict reading, so exai is caught sending a
  control that does nothing.
- ``kimi-k2.7-code`` and ``kimi-k2.7-code-highspeed``: always think;
  ``thinking: {"type": "enabled"}`` is accepted and "disabled" is an error; no
  effort control; Preserved Thinking always on ("you must keep the
  reasoning_content of every historical assistant message as-is");
  temperature 1, top_p 0.95. platform.kimi.ai/docs/guide/use-kimi-k2-thinking-model
  (K2.7 table); 3p synaps-engine kimi.rs.
- ``kimi-k2.6``: thinks unless ``thinking: {"type": "disabled"}``; temperature
  1.0 thinking and 0.6 not, top_p 0.95, "设置其他值会报错" (platform.kimi.ai
  "Using Thinking Models", docs/api/models-overview); no effort control.
- ``glm-5.2``: thinks by default; ``reasoning_effort`` "none", "minimal", "low",
  "medium", "high", "xhigh", "max" ("Effective for glm-5.2 and above models",
  the installed zai-sdk 0.2.3 ``chat.completions.create`` docstring); "none"
  means no reasoning.
- ``glm-5.3``: as glm-5.2 but thinking cannot be turned off (3p
  openrouter.ai/~z-ai/glm-latest, Together GLM-5.3 quickstart): ``thinking:
  disabled`` or effort "none" is refused.
- GLM-5.1, GLM-5, GLM-4.7 families: think by default, ``thinking: disabled``
  honoured (docs.bigmodel.cn thinking-mode, "GLM-5.2 GLM-5.1 GLM-5 GLM-4.7
  系列默认开启 Thinking"); GLM-4.6 and earlier: hybrid, the model decides, and
  the emulator thinks only when asked (docs.z.ai "Thinking Mode").
  ``reasoning_effort`` below 5.2 "has no effect" per the SDK; the emulator
  refuses it (the contract's strict reading).

An id not in the table is looked up by prefix (a ``kimi-k2.*`` id behaves as
K2.6, a ``glm-5*``/``glm-4.7*`` id as GLM-5.1, any other ``glm-`` id as GLM-4.6).
Any other id on the Moonshot path is a generic OpenAI-compatible model (the
emulator also stands in for local servers): Moonshot's own rules are not applied
to it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from exai.emulators.vendor_wire import Vendor

__all__ = ["CATALOGUE", "EmulatedModel", "lookup", "moonshot_model", "switch", "thinks"]

Thinking = Literal["always", "default_on", "on_request", "never"]
GLM_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class EmulatedModel:
    id: str
    vendor: Vendor
    thinking: Thinking
    # "any": enabled/disabled honoured; "enabled_only": "disabled" is refused;
    # "refused": the field itself is refused.
    thinking_field: Literal["any", "enabled_only", "refused"] = "any"
    # Accepted reasoning_effort values; () refuses the field; None: not checked.
    efforts: tuple[str, ...] | None = ()
    default_effort: str | None = None
    effort_off: str | None = None  # the effort value that turns reasoning off
    temperature: tuple[float, float] | None = None  # fixed (thinking, not thinking)
    top_p: float | None = None  # fixed
    forced_tool_choice_while_thinking: bool = False
    preserved_thinking: bool = False  # every earlier assistant message needs its reasoning


_K26 = EmulatedModel("kimi-k2.6", "kimi", "default_on", temperature=(1.0, 0.6), top_p=0.95)
_K27 = EmulatedModel(
    "kimi-k2.7-code", "kimi", "always", thinking_field="enabled_only",
    temperature=(1.0, 1.0), top_p=0.95, preserved_thinking=True,
)  # fmt: skip
_GLM51 = EmulatedModel("glm-5.1", "glm", "default_on")
_GLM46 = EmulatedModel("glm-4.6", "glm", "on_request")

CATALOGUE: dict[str, EmulatedModel] = {m.id: m for m in [
    EmulatedModel(
        "kimi-k3", "kimi", "always", thinking_field="refused",
        efforts=("low", "high", "max"), default_effort="max",
        temperature=(1.0, 1.0), top_p=0.95, forced_tool_choice_while_thinking=True,
    ),
    _K27,
    replace(_K27, id="kimi-k2.7-code-highspeed"),
    _K26,
    EmulatedModel("glm-5.3", "glm", "always", thinking_field="enabled_only",
                  efforts=GLM_EFFORTS[1:]),
    EmulatedModel("glm-5.2", "glm", "default_on", efforts=GLM_EFFORTS, effort_off="none"),
    _GLM51,
    *(replace(_GLM51, id=i) for i in ("glm-5", "glm-5-turbo", "glm-5v-turbo", "glm-4.7",
                                       "glm-4.7-flash")),
    _GLM46,
    *(replace(_GLM46, id=i) for i in ("glm-4.5", "glm-4.5-air", "glm-4.5-flash", "glm-4.5v")),
]}  # fmt: skip


def moonshot_model(model: str) -> bool:
    """Whether an id on the Moonshot path names a Moonshot model (else: a generic
    OpenAI-compatible one, to which Moonshot's rules do not apply)."""
    return model in CATALOGUE or model.startswith(("kimi-", "moonshot-"))


def lookup(vendor: Vendor, model: str) -> EmulatedModel:
    """The emulated model behind ``model`` (see the module docstring for unknown ids)."""
    known = CATALOGUE.get(model)
    if known is not None and known.vendor == vendor:
        return known
    if vendor == "glm":
        for prefix in ("glm-5.3", "glm-5.2"):
            if model.startswith(prefix):
                return replace(CATALOGUE[prefix], id=model)
        if model.startswith(("glm-5", "glm-4.7")):
            return replace(_GLM51, id=model)
        return replace(_GLM46, id=model)
    if model.startswith("kimi-k2."):
        return replace(_K26, id=model)
    thinking: Thinking = "always" if "thinking" in model else "never"
    if moonshot_model(model):
        return EmulatedModel(model, "kimi", thinking)
    return EmulatedModel(model, "kimi", thinking, efforts=None)


def switch(body: dict[str, Any]) -> str | None:
    """The request's ``thinking.type``, if it sent one."""
    thinking = body.get("thinking")
    return thinking.get("type") if isinstance(thinking, dict) else None


def thinks(vendor: Vendor, body: dict[str, Any]) -> bool:
    """Whether the emulated model reasons before answering this request."""
    model = lookup(vendor, str(body.get("model", "")))
    asked = switch(body)
    if model.thinking == "always":
        return True
    if model.thinking == "never":
        return False
    if model.thinking == "on_request":
        return asked == "enabled"
    off = model.effort_off is not None and body.get("reasoning_effort") == model.effort_off
    return asked != "disabled" and not off
