"""Kimi (Moonshot AI) through the ``openai`` SDK's ``AsyncOpenAI``.

Moonshot speaks the OpenAI protocol, so this is the OpenAI-compatible plugin
with Moonshot's differences:

- Web search is the built-in tool ``$web_search``. Moonshot runs the search
  itself; the model asks for it with a tool call and the client only has to hand
  the call's arguments back unchanged as the tool result, then ask again.
- A reply cut by the output limit is continued with Moonshot's partial mode: the
  text so far goes back as a trailing assistant message marked ``partial`` and
  the model carries on from its last character.
- Documents (PDF, Office) are read through Moonshot's file extraction: the file
  is uploaded with ``purpose="file-extract"``, its text fetched from
  ``/files/{id}/content`` and sent as a system message, as Moonshot documents.
  The upload is deleted once its text is fetched: the text is what the chat
  request carries, and an account holds at most 1,000 files.
- A thinking model wants its ``reasoning_content`` back on its own tool-call
  messages and refuses a history without it (see :mod:`exai.providers.reasoning`).
- Of the caller's parameters (:attr:`KimiProvider.params`): ``tool_choice`` may be
  "auto", "none", "required" or a named function, but only "auto" or "none"
  while the model thinks ("tool_choice 'required' is incompatible with thinking
  enabled"); at most 5 stop sequences of 32 bytes; ``response_format`` text or
  ``json_object`` (JSON Mode); no ``seed`` and no ``parallel_tool_calls`` are
  documented, so neither is sent.
- Callers' tool schemas are patched as Moonshot's own client patches them: a
  property without ``type`` (an enum-only one, common in MCP servers' schemas) is
  refused by Moonshot, so it gets one (:mod:`exai.providers.schemas`).
- The output cap is sent as ``max_completion_tokens``; Moonshot deprecates
  ``max_tokens``. Kimi K3 takes ``reasoning_effort`` (low, high, max) and no
  thinking switch; K2.7 Code always thinks and wants every earlier answer's
  reasoning back (Preserved Thinking); Moonshot's ``$web_search`` needs thinking
  off (see :mod:`exai.providers.params`).
- Errors carry a ``type`` (``exceeded_current_quota_error`` is a 429 that no
  amount of waiting fixes, for example).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exai.logs import get_logger
from exai.providers.base import ExtractedFile, ParamSupport
from exai.providers.error_mapping import ErrorKind, VendorFailure
from exai.providers.openai_compat import OpenAICompatibleProvider
from exai.providers.reasoning import ReplayRule
from exai.providers.retry import RetryPolicy
from exai.providers.schemas import moonshot_parameters

if TYPE_CHECKING:
    from exai.providers.base import ChatRequest
    from exai.settings import Settings

__all__ = ["WEB_SEARCH_TOOL", "KimiProvider", "create"]

WEB_SEARCH_TOOL: dict[str, Any] = {
    "type": "builtin_function",
    "function": {"name": "$web_search"},
}

# Moonshot's upload purpose for text extraction, which the SDK's literals do not list.
_FILE_EXTRACT: Any = "file-extract"

_KIND_BY_TYPE: dict[str, ErrorKind] = {
    "exceeded_current_quota_error": "balance",
    "invalid_authentication_error": "auth",
    "incorrect_api_key_error": "auth",
    "rate_limit_reached_error": "rate_limit",
    "engine_overloaded_error": "rate_limit",
    "resource_not_found_error": "not_found",
    "content_filter": "bad_request",
}


class KimiProvider(OpenAICompatibleProvider):
    name = "kimi"
    label = "Kimi"
    setup_hint = "set KIMI_API_KEY (or MOONSHOT_API_KEY) to a Moonshot API key"
    stream_usage_option = False  # Moonshot reports usage in the last choice anyway
    own_tools = frozenset({"$web_search"})
    params = ParamSupport(
        tool_choice_thinking=frozenset({"auto", "none"}),
        parallel_tool_calls=False,
        seed=False,
        max_stop=5,
        max_stop_bytes=32,
        response_formats=frozenset({"text", "json_object"}),
        web_search_thinking=False,  # "thinking must be disabled when $web_search is used"
    )
    max_extract_bytes = 100 * 1024 * 1024  # Moonshot's limit for one uploaded file

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str = "https://api.moonshot.ai/v1",
        max_inflight: int = 64,
        timeout_s: float = 300.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(
            base_url=base_url if api_key else None,
            api_key=api_key,
            max_inflight=max_inflight,
            timeout_s=timeout_s,
            retry=retry,
        )
        self.base_url = base_url.rstrip("/")

    async def list_models(self) -> list[str]:
        # The catalogue describes Kimi's models; Moonshot's list adds nothing usable.
        return []

    async def extract_file(self, data: bytes, filename: str) -> ExtractedFile:
        client = self.client

        async def upload() -> Any:
            return await client.files.create(file=(filename, data), purpose=_FILE_EXTRACT)

        created, _ = await self.retry.run(lambda: self._guarded(upload))
        content, _ = await self.retry.run(
            lambda: self._guarded(lambda: client.files.content(created.id))
        )
        try:
            await self._guarded(lambda: client.files.delete(created.id))
        except Exception as exc:  # the text is already here; a stray upload costs nothing
            get_logger("exai.providers").warning(
                "kimi_file_delete_failed", file_id=created.id, error=str(exc)
            )
        return ExtractedFile(file_id=created.id, content=content.text)

    def _tools(self, request: ChatRequest) -> list[dict[str, Any]]:
        tools = [_typed(tool) for tool in request.tools]
        return [WEB_SEARCH_TOOL, *tools] if request.web_search else tools

    def replay_rule(self, request: ChatRequest) -> ReplayRule:
        thinks = request.thinks if request.thinks is not None else request.thinking is True
        return ReplayRule(tool_reasoning=thinks, requires_tool_reasoning=thinks,
                          builtin_tools=True,
                          all_reasoning=thinks and request.preserved_thinking)  # fmt: skip

    def _body(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        body = super()._body(request, messages, tools)
        # Moonshot's API reference deprecates max_tokens for max_completion_tokens, and
        # its own client sends the latter: a cap the vendor may stop honouring would no
        # longer bound the reply, nor the budget's hold on it.
        if "max_tokens" in body:
            body["max_completion_tokens"] = body.pop("max_tokens")
        return body

    def _tool_result(self, call: dict[str, Any]) -> dict[str, Any]:
        return {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": "$web_search",
            "content": call["function"]["arguments"],
        }

    def _continuation(
        self, messages: list[dict[str, Any]], partial: str, reasoning: str
    ) -> list[dict[str, Any]]:
        # A thinking model's continuation carries the reasoning so far (Moonshot's
        # partial mode), or Moonshot refuses it.
        cut: dict[str, Any] = {"role": "assistant", "content": partial, "partial": True}
        if reasoning:
            cut["reasoning_content"] = reasoning
        return [*messages, cut]

    def _extra_body(self, request: ChatRequest) -> dict[str, Any]:
        if request.thinking is None:
            return {}
        return {"thinking": {"type": "enabled" if request.thinking else "disabled"}}

    def _classify(self, failure: VendorFailure) -> ErrorKind | None:
        kind = _KIND_BY_TYPE.get(failure.code or "")
        if kind == "rate_limit" and failure.status >= 500:
            return "server"
        return kind


def _typed(tool: dict[str, Any]) -> dict[str, Any]:
    """A caller's function tool with its parameter schema as Moonshot accepts it."""
    function = tool.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("parameters"), dict):
        return tool
    typed = moonshot_parameters(function["parameters"])
    return {**tool, "function": {**function, "parameters": typed}}


def create(settings: Settings) -> KimiProvider:
    key = settings.kimi_api_key
    return KimiProvider(
        api_key=key.get_secret_value() if key else None,
        base_url=settings.kimi_base_url,
        max_inflight=settings.kimi_max_inflight,
        timeout_s=settings.provider_timeout_s,
        retry=RetryPolicy.from_settings(settings),
    )
