"""Calling a model for a tool: fitting the request, limits, fallback, audit.

:class:`ModelCalls` is the half of :class:`~exai.providers.registry.ProviderRegistry`
that runs calls once a model is chosen. For each model it tries, in order:

1. the request is fitted to the model (:func:`exai.providers.params.fit_request`)
   and, for a caller's own history, its tool rounds get their reasoning back
   (:mod:`exai.providers.tool_reasoning`); what had to be adapted becomes the
   response's ``notes``, what cannot be served a ``ValidationError_`` naming the
   parameter;
2. the call waits for a slot under the provider's concurrency limit;
3. the plugin answers; an answer ending in calls to the caller's tools has its
   reasoning kept for the caller's next request;
4. a ``provider_request`` audit event records it.

When the provider is down, busy or rate limiting after its retries, the next
fallback model (``EXAI_FALLBACK_MODELS``) gets the same request, tools and
parameters included; a fallback that cannot serve them (no web search, no
images, a parameter it refuses) is skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exai import tracing
from exai.errors import (
    ExaiError,
    ProviderError,
    ValidationError_,
)
from exai.limits import CapacityLimiter
from exai.logs import get_logger
from exai.providers import traced
from exai.providers.access import canonical, permits
from exai.providers.base import ChatRequest, ChatResponse, Delta, Provider
from exai.providers.catalogue import Catalogue, ModelInfo
from exai.providers.fallback import (
    attempt_of,
    failed_providers,
    fallback_note,
    falls_back,
    with_attempts,
)
from exai.providers.params import Fitted, fit_request
from exai.providers.pricing import call_cost
from exai.providers.reasoning import replay_messages
from exai.providers.routing import ModelNeeds, rank_models
from exai.providers.settling import settle_reasoning
from exai.providers.tool_reasoning import ToolReasoning

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["Emit", "LastError", "ModelCalls", "require_usable"]

Emit = Callable[..., None]

log = get_logger("exai.providers")


@dataclass
class LastError:
    code: str
    message: str
    at: float  # time.time()


def require_usable(providers: dict[str, Provider], info: ModelInfo) -> Provider:
    """The plugin serving ``info``; ``ProviderError`` when it is missing or unconfigured."""
    plugin = providers.get(info.provider)
    if plugin is None:
        raise ProviderError(
            f"model {info.name!r} needs the {info.provider!r} provider plugin, which is "
            "not installed",
            retryable=False,
        )
    if not plugin.configured():
        raise ProviderError(
            f"model {info.name!r} is served by {info.provider}, which is not configured: "
            f"{plugin.setup_hint or 'see the provider documentation'}",
            retryable=False,
        )
    return plugin


class ModelCalls:
    def __init__(
        self,
        settings: Settings,
        providers: dict[str, Provider],
        catalogue: Catalogue,
        *,
        emit: Emit | None = None,
        reasoning: ToolReasoning | None = None,
    ) -> None:
        self._settings = settings
        self._providers = providers
        self._catalogue = catalogue
        self._emit = emit
        self.reasoning = reasoning
        self.limiters = {
            name: CapacityLimiter(
                f"provider {name}",
                p.max_inflight,
                max_waiters=settings.queue_max,
                max_wait_s=settings.queue_timeout_s,
            )
            for name, p in providers.items()
        }
        self.last_errors: dict[str, LastError] = {}

    def configured(self, provider: str) -> bool:
        plugin = self._providers.get(provider)
        return plugin is not None and plugin.configured()

    def note_error(self, provider: str, exc: ExaiError) -> None:
        self.last_errors[provider] = LastError(exc.code.value, exc.message, time.time())

    def prepare(self, info: ModelInfo, request: ChatRequest) -> Fitted:
        """``request`` as ``info`` takes it, with what was adapted; raises
        ``ValidationError_`` naming a parameter the model cannot serve."""
        plugin = require_usable(self._providers, info)
        fitted = fit_request(info, request, plugin.params)
        if request.client_history:
            fitted.request, notes = settle_reasoning(
                info, fitted.request, request.thinking, plugin.replay_rule, self.reasoning
            )
            fitted.notes += notes
        return fitted

    def outgoing(self, info: ModelInfo, request: ChatRequest) -> ChatRequest:
        """``request`` as ``info``'s vendor will receive it: fitted, its tool rounds'
        reasoning put back, its history under the vendor's replay rule. What a budget
        holds is estimated from this, not from what the caller sent."""
        fitted = self.prepare(info, request).request
        rule = self._providers[info.provider].replay_rule(fitted)
        messages = replay_messages(fitted.messages, rule, client=fitted.client_history)
        return dataclasses.replace(fitted, messages=messages)

    # --- whole and streamed, with fallback ------------------------------------

    async def complete(self, request: ChatRequest, model_info: ModelInfo) -> ChatResponse:
        """One answer, from ``model_info`` or, if its provider is down or rate
        limited after retries, from the next configured fallback model."""
        first_error: ExaiError | None = None
        attempts: list[dict[str, Any]] = []
        for info in self._chain(model_info, request):
            if first_error is not None and info.provider in failed_providers(attempts):
                continue
            try:
                fitted = self.prepare(info, request)
                response = await self._complete_with(info, request, fitted)
            except ExaiError as exc:
                self._explain_unserved(info, exc)
                if first_error is None and not falls_back(exc):
                    raise
                first_error = first_error or exc
                attempts.append(attempt_of(info, exc))
                tracing.event("fallback", {"exai.model": info.name, "error.type": exc.code.value})
                continue
            if first_error is not None:
                response.fallback_from = model_info.name
                response.notes.append(fallback_note(model_info, info, first_error))
            return response
        assert first_error is not None
        raise with_attempts(first_error, attempts)

    async def stream(self, request: ChatRequest, model_info: ModelInfo) -> AsyncIterator[Delta]:
        """Deltas from ``model_info``; a fallback model takes over only if the
        chosen one fails before its first delta."""
        first_error: ExaiError | None = None
        attempts: list[dict[str, Any]] = []
        for info in self._chain(model_info, request):
            if first_error is not None and info.provider in failed_providers(attempts):
                continue
            try:
                fitted = self.prepare(info, request)
            except ValidationError_ as exc:
                if first_error is None:
                    raise
                attempts.append(attempt_of(info, exc))
                continue
            async with aclosing(self._stream_with(info, request, fitted)) as deltas:
                try:
                    first = await anext(deltas)
                except ExaiError as exc:
                    self._explain_unserved(info, exc)
                    if first_error is None and not falls_back(exc):
                        raise
                    first_error = first_error or exc
                    attempts.append(attempt_of(info, exc))
                    tracing.event("fallback", {"exai.model": info.name,
                                               "error.type": exc.code.value})  # fmt: skip
                    continue
                fallback_from = model_info.name if first_error is not None else None
                delta: Delta | None = first
                while delta is not None:
                    if delta.response is not None:
                        delta.response.fallback_from = fallback_from
                        if first_error is not None:
                            delta.response.notes.append(
                                fallback_note(model_info, info, first_error)
                            )
                    yield delta
                    delta = await anext(deltas, None)
                return
        assert first_error is not None
        raise with_attempts(first_error, attempts)

    def _explain_unserved(self, info: ModelInfo, exc: ExaiError) -> None:
        """A vendor's 404 for a model the catalogue thinks current: it has most likely
        been retired since. Say so, and which current model of the vendor to use."""
        if (exc.details or {}).get("kind") != "not_found":
            return
        others = [m for m in rank_models(self._catalogue, ModelNeeds())
                  if m.provider == info.provider and m.name != info.name]  # fmt: skip
        instead = f"; use {others[0].name}" if others else ""
        exc.message = (
            f"{exc.message}. {info.name} is in exai's catalogue, so the vendor has most "
            f"likely retired it{instead} (or set retired = true for it in EXAI_MODELS_FILE)"
        )
        exc.details = {**(exc.details or {}), "model": info.name,
                       **({"successor": others[0].name} if others else {})}  # fmt: skip

    def _chain(self, first: ModelInfo, request: ChatRequest) -> list[ModelInfo]:
        chain, seen = [first], {first.name}
        images = _carries_images(request)
        allowed = request.allowed_models
        permitted = None if allowed is None else canonical(self._catalogue, allowed)
        for name in self._settings.fallback_models:
            info = self._catalogue.get(name)
            if info is None or info.name in seen or not self.configured(info.provider):
                continue
            if not permits(permitted, info):  # never outside what the caller may use
                continue
            if (request.web_search and not info.web_search) or (images and not info.images):
                continue
            chain.append(info)
            seen.add(info.name)
        return chain

    # --- one model ----------------------------------------------------------------

    async def _complete_with(
        self, info: ModelInfo, request: ChatRequest, fitted: Fitted
    ) -> ChatResponse:
        provider = self._providers[info.provider]
        with traced.request_span(info, fitted.request, stream=False) as span:
            async with self.limiters[info.provider].slot():
                started = time.monotonic()
                try:
                    response = await provider.complete(fitted.request)
                except BaseException as exc:
                    self._record(info, request, started, error=exc)
                    raise
            self._answered(info, request, fitted, response)
            cost = self._record(info, request, started, response=response)
            traced.finish_request_span(span, response, cost)
        return response

    async def _stream_with(
        self, info: ModelInfo, request: ChatRequest, fitted: Fitted
    ) -> AsyncGenerator[Delta, None]:
        provider = self._providers[info.provider]
        with traced.request_span(info, fitted.request, stream=True) as span:
            async with self.limiters[info.provider].slot():
                started = time.monotonic()
                first = True
                try:
                    async with _closing(provider.stream(fitted.request)) as deltas:
                        async for delta in deltas:
                            if first:
                                first = False
                                traced.first_chunk(span, started)
                            if delta.response is not None:
                                self._answered(info, request, fitted, delta.response)
                                cost = self._record(info, request, started,
                                                    response=delta.response)  # fmt: skip
                                traced.finish_request_span(span, delta.response, cost)
                            yield delta
                except BaseException as exc:
                    self._record(info, request, started, error=exc)
                    raise

    def _answered(
        self, info: ModelInfo, request: ChatRequest, fitted: Fitted, response: ChatResponse
    ) -> None:
        response.model = info.name
        response.notes = [*fitted.notes, *response.notes]
        searches = response.usage.web_searches
        if searches and info.price is not None and info.price.web_search_call is None:
            response.notes.append({"param": "cost", "message": (
                f"the vendor bills each web search, and {info.name}'s catalogue entry has no "
                f"confirmed fee for it; the cost leaves out {searches} search fee(s)"
            )})  # fmt: skip
        if (
            self.reasoning is not None
            and request.client_history
            and request.owner
            and response.tool_calls
            and response.messages
        ):
            self.reasoning.remember(request.owner, request.messages, response.messages[-1])

    # --- bookkeeping ------------------------------------------------------------

    def _record(
        self,
        info: ModelInfo,
        request: ChatRequest,
        started: float,
        *,
        response: ChatResponse | None = None,
        error: BaseException | None = None,
    ) -> Any:
        """The ``provider_request`` audit event, and the provider's last error; returns
        the request's cost (None: unknown)."""
        if isinstance(error, (GeneratorExit, asyncio.CancelledError)):
            status, code, retries = "cancelled", "CANCELLED", 0
        elif error is not None:
            exai_error = error if isinstance(error, ExaiError) else None
            status = "error"
            code = exai_error.code.value if exai_error else "INTERNAL_ERROR"
            retries = int((exai_error.details or {}).get("retries", 0)) if exai_error else 0
            if exai_error is not None:
                self.note_error(info.provider, exai_error)
        else:
            status, code = "ok", None
            retries = response.retries if response else 0
        usage = response.usage if response else None
        cost = call_cost(info.price, usage) if usage is not None and info.price else None
        self._send_event(
            provider=info.provider,
            model=info.name,
            request_id=request.request_id,
            latency_ms=round((time.monotonic() - started) * 1000.0, 1),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            cached_prompt_tokens=usage.cached_prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            reasoning_tokens=usage.reasoning_tokens if usage else 0,
            currency=cost.currency if cost else None,
            cost=float(cost.total) if cost else None,
            retries=retries,
            status=status,
            error_code=code,
        )
        return cost

    def _send_event(self, **fields: Any) -> None:
        if self._emit is None:
            return
        try:
            self._emit("provider_request", **fields)
        except Exception as exc:  # the audit trail must never break a call
            log.error("audit_emit_failed", error=str(exc))


@asynccontextmanager
async def _closing(deltas: AsyncIterator[Delta]) -> AsyncIterator[AsyncIterator[Delta]]:
    """Close a plugin's stream however it ends (``aclose`` is optional for plugins)."""
    try:
        yield deltas
    finally:
        aclose = getattr(deltas, "aclose", None)
        if aclose is not None:
            await aclose()


def _carries_images(request: ChatRequest) -> bool:
    """Whether a message sends an image part: a fallback that cannot see it must not get it."""
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in request.messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )
