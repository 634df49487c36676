"""The providers, as the tools see them: one object that names, chooses and calls models.

:class:`ProviderRegistry` owns everything that sits above a single plugin: which
plugins are installed and configured, the model catalogue, the choice behind
``model: "auto"``, the per-provider concurrency limit, the fallback chain, and
the ``provider_request`` audit event. Tools resolve a model, build a
:class:`~exai.providers.base.ChatRequest` and call :meth:`complete` or
:meth:`stream`; they never touch a plugin directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from exai import tracing
from exai.errors import (
    ExaiError,
    OverCapacityError,
    ProviderError,
    RateLimitedError,
    ValidationError_,
)
from exai.limits import CapacityLimiter
from exai.logs import get_logger
from exai.providers import traced
from exai.providers.base import ChatRequest, ChatResponse, Delta, Provider
from exai.providers.catalogue import Catalogue, CatalogueError, ModelInfo, load_catalogue
from exai.providers.plugins import load_plugins
from exai.providers.pricing import call_cost
from exai.providers.routing import (
    ModelNeeds,
    RoutingRule,
    no_model_error,
    parse_rules,
    rank_models,
    shortfalls,
)

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["Emit", "ProviderRegistry"]

Emit = Callable[..., None]

log = get_logger("exai.providers")


@dataclass
class _LastError:
    code: str
    message: str
    at: float  # time.time()


class ProviderRegistry:
    def __init__(
        self,
        settings: Settings,
        providers: list[Provider],
        *,
        catalogue: Catalogue | None = None,
        rules: list[RoutingRule] | None = None,
        emit: Emit | None = None,
        plugin_failures: dict[str, str] | None = None,
    ) -> None:
        self._settings = settings
        self._providers = {p.name: p for p in providers}
        self._catalogue = catalogue if catalogue is not None else load_catalogue()
        self._rules = list(rules or [])
        self._emit = emit
        self._plugin_failures = dict(plugin_failures or {})
        self._limiters = {
            p.name: CapacityLimiter(
                f"provider {p.name}",
                p.max_inflight,
                max_waiters=settings.queue_max,
                max_wait_s=settings.queue_timeout_s,
            )
            for p in providers
        }
        self._last_errors: dict[str, _LastError] = {}

    @classmethod
    def from_settings(cls, settings: Settings, emit: Emit | None = None) -> ProviderRegistry:
        """Plugins from their entry points, the catalogue and the routing rules.

        Raises :class:`~exai.settings.SettingsError` when the models file or the
        routing rules are invalid, so start-up stops with a clear message.
        """
        from exai.settings import SettingsError

        try:
            catalogue = load_catalogue(settings.models_file)
        except CatalogueError as exc:
            raise SettingsError(f"model catalogue (EXAI_MODELS_FILE): {exc}") from None
        try:
            rules = parse_rules(settings.routing_rules)
        except ValueError as exc:
            raise SettingsError(f"EXAI_ROUTING_RULES: {exc}") from None
        plugins = load_plugins(settings)
        return cls(
            settings,
            plugins.providers,
            catalogue=catalogue,
            rules=rules,
            emit=emit,
            plugin_failures=plugins.failures,
        )

    @property
    def providers(self) -> dict[str, Provider]:
        return dict(self._providers)

    @property
    def catalogue(self) -> Catalogue:
        return self._catalogue

    async def refresh_models(self) -> None:
        """Add the models configured providers report that the catalogue lacks
        (an OpenAI-compatible server's own models). Call once at start-up."""
        for provider in self._providers.values():
            if not provider.configured():
                continue
            try:
                reported = await provider.list_models()
            except ExaiError as exc:
                self._note_error(provider.name, exc)
                log.warning("provider_models_unavailable", provider=provider.name, error=str(exc))
                continue
            added = self._catalogue.add_discovered(provider.name, reported)
            if added:
                log.info("provider_models_added", provider=provider.name, models=added)

    # --- describing -------------------------------------------------------------

    def describe_models(self) -> list[dict[str, Any]]:
        return [
            {**info.describe(), "configured": self._configured(info.provider)}
            for info in self._catalogue
        ]

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, provider in self._providers.items():
            limiter = self._limiters[name]
            last = self._last_errors.get(name)
            out[name] = {
                "configured": provider.configured(),
                "in_flight": limiter.in_use,
                "waiting": limiter.waiting,
                "max_inflight": limiter.limit,
                "last_error": asdict(last) if last else None,
            }
        for entry_point, reason in self._plugin_failures.items():
            out.setdefault(entry_point, {"configured": False, "load_error": reason})
        return out

    # --- choosing ---------------------------------------------------------------

    def resolve(self, model: str | None, needs: ModelNeeds | None = None) -> ModelInfo:
        """The model to call. ``None`` means the configured default; ``"auto"``
        chooses from ``needs`` and the routing rules."""
        needs = needs or ModelNeeds()
        name = (model or self._settings.default_model).strip()
        if name.lower() == "auto":
            return self._auto(needs)
        info = self._catalogue.get(name)
        if info is None:
            gone = self._catalogue.retired(name)
            if gone is not None:
                raise ValidationError_(
                    gone.message(name),
                    details={"retired_model": gone.name, "successor": gone.successor},
                )
            known = self._catalogue.names()
            raise ValidationError_(
                f'unknown model {name!r}; known models: {", ".join(known)} (or "auto")',
                details={"known_models": known},
            )
        self._require_usable(info)
        missing = shortfalls(info, needs, context=False)
        if missing:
            usable = self._usable_models()
            able = [m.name for m in usable if not shortfalls(m, needs, context=False)]
            raise ValidationError_(
                f"model {info.name!r} has no {' or '.join(missing)}; "
                f"configured models that do: {', '.join(able) or 'none'}",
            )
        return info

    def _auto(self, needs: ModelNeeds) -> ModelInfo:
        for rule in self._rules:
            if rule.matches(needs):
                try:
                    return self.resolve(rule.model, needs)
                except ExaiError as exc:
                    raise type(exc)(
                        f"{rule.describe()} chose {rule.model!r}, but {exc.message}",
                        retryable=exc.retryable,
                        retry_after_s=exc.retry_after_s,
                        details=exc.details,
                    ) from None
        usable = self._usable_models()
        ranked = rank_models(usable, needs)
        if ranked:
            return ranked[0]
        hints = [p.setup_hint for p in self._providers.values() if p.setup_hint]
        raise no_model_error(usable, needs, hints)

    def _configured(self, provider: str) -> bool:
        plugin = self._providers.get(provider)
        return plugin is not None and plugin.configured()

    def _usable_models(self) -> list[ModelInfo]:
        return [info for info in self._catalogue if self._configured(info.provider)]

    def _require_usable(self, info: ModelInfo) -> None:
        plugin = self._providers.get(info.provider)
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

    # --- calling ----------------------------------------------------------------

    async def complete(self, request: ChatRequest, model_info: ModelInfo) -> ChatResponse:
        """One answer, from ``model_info`` or, if its provider is down or rate
        limited after retries, from the next configured fallback model."""
        first_error: ExaiError | None = None
        attempts: list[dict[str, Any]] = []
        for info in self._chain(model_info, request):
            if first_error is not None and info.provider in {a["provider"] for a in attempts}:
                continue
            try:
                response = await self._complete_with(info, request)
            except ExaiError as exc:
                if first_error is None and not _falls_back(exc):
                    raise
                first_error = first_error or exc
                attempts.append(_attempt(info, exc))
                tracing.event("fallback", {"exai.model": info.name, "error.type": exc.code.value})
                continue
            if first_error is not None:
                response.fallback_from = model_info.name
            return response
        assert first_error is not None
        raise _with_attempts(first_error, attempts)

    async def stream(self, request: ChatRequest, model_info: ModelInfo) -> AsyncIterator[Delta]:
        """Deltas from ``model_info``; a fallback model takes over only if the
        chosen one fails before its first delta."""
        first_error: ExaiError | None = None
        attempts: list[dict[str, Any]] = []
        for info in self._chain(model_info, request):
            if first_error is not None and info.provider in {a["provider"] for a in attempts}:
                continue
            async with aclosing(self._stream_with(info, request)) as deltas:
                try:
                    first = await anext(deltas)
                except ExaiError as exc:
                    if first_error is None and not _falls_back(exc):
                        raise
                    first_error = first_error or exc
                    attempts.append(_attempt(info, exc))
                    tracing.event("fallback", {"exai.model": info.name,
                                               "error.type": exc.code.value})  # fmt: skip
                    continue
                fallback_from = model_info.name if first_error is not None else None
                delta: Delta | None = first
                while delta is not None:
                    if delta.response is not None:
                        delta.response.fallback_from = fallback_from
                    yield delta
                    delta = await anext(deltas, None)
                return
        assert first_error is not None
        raise _with_attempts(first_error, attempts)

    def _chain(self, first: ModelInfo, request: ChatRequest) -> list[ModelInfo]:
        chain, seen = [first], {first.name}
        images = _carries_images(request)
        for name in self._settings.fallback_models:
            info = self._catalogue.get(name)
            if info is None or info.name in seen or not self._configured(info.provider):
                continue
            if (request.web_search and not info.web_search) or (images and not info.images):
                continue
            chain.append(info)
            seen.add(info.name)
        return chain

    async def _complete_with(self, info: ModelInfo, request: ChatRequest) -> ChatResponse:
        self._require_usable(info)
        provider = self._providers[info.provider]
        with traced.request_span(info, request, stream=False) as span:
            async with self._limiters[info.provider].slot():
                started = time.monotonic()
                try:
                    response = await provider.complete(info.fit(request))
                except BaseException as exc:
                    self._record(info, request, started, error=exc)
                    raise
            response.model = info.name
            cost = self._record(info, request, started, response=response)
            traced.finish_request_span(span, response, cost)
        return response

    async def _stream_with(
        self, info: ModelInfo, request: ChatRequest
    ) -> AsyncGenerator[Delta, None]:
        self._require_usable(info)
        provider = self._providers[info.provider]
        with traced.request_span(info, request, stream=True) as span:
            async with self._limiters[info.provider].slot():
                started = time.monotonic()
                try:
                    first = True
                    async with _closing(provider.stream(info.fit(request))) as deltas:
                        async for delta in deltas:
                            if first:
                                first = False
                                traced.first_chunk(span, started)
                            if delta.response is not None:
                                delta.response.model = info.name
                                cost = self._record(info, request, started,
                                                    response=delta.response)  # fmt: skip
                                traced.finish_request_span(span, delta.response, cost)
                            yield delta
                except BaseException as exc:
                    self._record(info, request, started, error=exc)
                    raise

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
                self._note_error(info.provider, exai_error)
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

    def _note_error(self, provider: str, exc: ExaiError) -> None:
        self._last_errors[provider] = _LastError(exc.code.value, exc.message, time.time())

    def _send_event(self, **fields: Any) -> None:
        if self._emit is None:
            return
        try:
            self._emit("provider_request", **fields)
        except Exception as exc:  # the audit trail must never break a call
            log.error("audit_emit_failed", error=str(exc))

    async def aclose(self) -> None:
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception as exc:
                log.warning("provider_close_failed", provider=provider.name, error=str(exc))


@asynccontextmanager
async def _closing(deltas: AsyncIterator[Delta]) -> AsyncIterator[AsyncIterator[Delta]]:
    """Close a plugin's stream however it ends (``aclose`` is optional for plugins)."""
    try:
        yield deltas
    finally:
        aclose = getattr(deltas, "aclose", None)
        if aclose is not None:
            await aclose()


def _falls_back(exc: ExaiError) -> bool:
    """Whether another model might answer: the provider is down, busy or limiting."""
    if isinstance(exc, (RateLimitedError, OverCapacityError)):
        return True
    return isinstance(exc, ProviderError) and exc.retryable


def _attempt(info: ModelInfo, exc: ExaiError) -> dict[str, Any]:
    return {"model": info.name, "provider": info.provider, "code": exc.code.value,
            "message": exc.message}  # fmt: skip


def _with_attempts(exc: ExaiError, attempts: list[dict[str, Any]]) -> ExaiError:
    if len(attempts) > 1:
        exc.details = {**(exc.details or {}), "attempts": attempts}
    return exc


def _carries_images(request: ChatRequest) -> bool:
    """Whether a message sends an image part: a fallback that cannot see it must not get it."""
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in request.messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )
