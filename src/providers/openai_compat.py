"""Any OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp, OpenRouter), through ``AsyncOpenAI``.

This is also the base of the Kimi plugin, since Moonshot speaks the same
protocol: the request body, the SDK error types and the model listing are
shared, and Kimi overrides only what Moonshot does differently. The SDK's own
retries are off (``max_retries=0``); :class:`~exai.providers.retry.RetryPolicy`
is the only retry mechanism.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import openai
from openai import AsyncOpenAI, AsyncStream

from exai.errors import ExaiError
from exai.providers.error_mapping import (
    ErrorKind,
    VendorFailure,
    connection_error,
    status_error,
    stream_error,
)
from exai.providers.exchange import ChatCompletionsProvider, ChunkStream, pool_shards
from exai.providers.params import vendor_fields
from exai.providers.retry import RetryPolicy

if TYPE_CHECKING:
    from exai.providers.base import ChatRequest
    from exai.settings import Settings

__all__ = ["OpenAICompatibleProvider", "create"]


class OpenAICompatibleProvider(ChatCompletionsProvider):
    name = "openai_compat"
    label = "the OpenAI-compatible endpoint"
    setup_hint = "set EXAI_OPENAI_COMPAT_BASE_URL (and EXAI_OPENAI_COMPAT_API_KEY if it needs one)"
    # Ask for usage in streamed replies; vendors that reject the option turn it off.
    stream_usage_option = True

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        models: list[str] | None = None,
        max_inflight: int = 16,
        timeout_s: float = 300.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(retry=retry or RetryPolicy())
        self.base_url = base_url.rstrip("/") if base_url else None
        self.max_inflight = max_inflight
        self.timeout_s = timeout_s
        self._models = list(models or [])
        self._has_key = bool(api_key)
        shards = pool_shards(max_inflight)[0] if self.base_url else 0
        self._clients: list[AsyncOpenAI] = [
            AsyncOpenAI(
                # Local servers need no key, but the SDK insists on one.
                api_key=api_key or "no-key",
                base_url=self.base_url,
                timeout=timeout_s,
                max_retries=0,
            )
            for _ in range(shards)
        ]
        self._next = itertools.cycle(self._clients)

    def configured(self) -> bool:
        return bool(self._clients)

    @property
    def client(self) -> AsyncOpenAI:
        if not self._clients:
            raise RuntimeError(f"{self.name} is not configured; {self.setup_hint}")
        return next(self._next)

    async def list_models(self) -> list[str]:
        """The configured models, or those the endpoint lists at ``/models``."""
        if self._models or not self._clients:
            return list(self._models)
        page = await self._guarded(lambda: self.client.models.list())
        return [model.id for model in page.data]

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()

    # --- request body ---------------------------------------------------------

    def _body(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_output_tokens is not None:
            body["max_tokens"] = request.max_output_tokens
        if tools:
            body["tools"] = tools
        body.update(vendor_fields(request, self.params, tools_sent=bool(tools)))
        extra = self._extra_body(request)
        if extra:
            body["extra_body"] = extra
        return body

    def _extra_body(self, request: ChatRequest) -> dict[str, Any]:
        """Vendor fields the SDK has no parameter for."""
        return {}

    # Requests go through the client's generic ``post`` with a body we have already
    # built as plain JSON: ``chat.completions.create`` would walk every message
    # through its type-driven transform first, which costs more CPU per request
    # than everything else exai does for a call. A whole reply comes back as the
    # plain JSON object (``cast_to=object``): building the SDK's ChatCompletion
    # model from it was the next largest cost, and exai reads a handful of fields
    # (exai.providers.wire reads models and plain objects alike).

    async def _send(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Any:
        body = _flatten(self._body(request, messages, tools))
        return await self.client.post("/chat/completions", body=body, cast_to=object)

    async def _open_stream(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ChunkStream:
        body = _flatten(self._body(request, messages, tools))
        body["stream"] = True
        if self.stream_usage_option:
            body["stream_options"] = {"include_usage": True}
        # Chunks stay the plain JSON the vendor sent, as whole answers do (cast_to=object):
        # the SDK building a ChatCompletionChunk model costs ~100x reading the dict, once per
        # chunk of every streamed answer, and exai.providers.wire reads either.
        stream: ChunkStream = await self.client.post(
            "/chat/completions",
            body=body,
            cast_to=object,
            stream=True,
            stream_cls=AsyncStream[object],
        )
        return stream

    # --- errors -----------------------------------------------------------------

    def _classify(self, failure: VendorFailure) -> ErrorKind | None:
        """What the vendor's own error codes say; None leaves it to the HTTP status."""
        return None

    def _map_error(self, exc: BaseException) -> ExaiError | None:
        if isinstance(exc, openai.APIStatusError):
            return status_error(
                provider=self.name,
                label=self.label,
                status=exc.status_code,
                headers=exc.response.headers,
                body=exc.response.text,  # the SDK reads the body before raising
                classify=self._classify,
                setup_hint=self.setup_hint,
            )
        if isinstance(exc, openai.APIConnectionError):
            timed_out = isinstance(exc, openai.APITimeoutError)
            return connection_error(
                provider=self.name,
                label=self.label,
                base_url=self.base_url or "",
                timeout_s=self.timeout_s if timed_out else None,
                cause=exc,
            )
        if isinstance(exc, openai.APIError):
            return stream_error(provider=self.name, label=self.label, body=exc.body)
        return None


def create(settings: Settings) -> OpenAICompatibleProvider:
    key = settings.openai_compat_api_key
    return OpenAICompatibleProvider(
        base_url=settings.openai_compat_base_url,
        api_key=key.get_secret_value() if key else None,
        models=settings.openai_compat_models,
        max_inflight=settings.openai_compat_max_inflight,
        timeout_s=settings.provider_timeout_s,
        retry=RetryPolicy.from_settings(settings),
    )


def _flatten(body: dict[str, Any]) -> dict[str, Any]:
    """The request body as sent: ``extra_body`` fields merged in, as the SDK does."""
    extra = body.pop("extra_body", None)
    if extra:
        body.update(extra)
    return body
