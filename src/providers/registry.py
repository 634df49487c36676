"""The providers, as the tools see them: one object that names, chooses and calls models.

:class:`ProviderRegistry` owns everything that sits above a single plugin: which
plugins are installed and configured, the model catalogue and the choice behind
``model: "auto"``, here; the per-provider concurrency limit, the fallback chain,
the fitting of a request to each model, the reasoning kept for callers' tool
rounds and the ``provider_request`` audit event, in :mod:`exai.providers.calls`.
Tools resolve a model, build a :class:`~exai.providers.base.ChatRequest` and call
:meth:`complete` or :meth:`stream`; they never touch a plugin directly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from exai.errors import ExaiError, ForbiddenError, ValidationError_
from exai.logs import get_logger
from exai.providers.access import canonical, forbidden, permits
from exai.providers.base import ChatRequest, ChatResponse, Delta, Provider
from exai.providers.calls import Emit, ModelCalls, require_usable
from exai.providers.catalogue import Catalogue, CatalogueError, ModelInfo, load_catalogue
from exai.providers.params import Fitted
from exai.providers.plugins import load_plugins
from exai.providers.routing import (
    ModelNeeds,
    RoutingRule,
    no_model_error,
    parse_rules,
    rank_models,
    shortfalls,
)
from exai.providers.tool_reasoning import ToolReasoning

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["Emit", "ProviderRegistry"]

log = get_logger("exai.providers")


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
        self._plugin_failures = dict(plugin_failures or {})
        reasoning = ToolReasoning(
            max_bytes=int(settings.tool_reasoning_max_mb * 1024 * 1024),
            ttl_s=settings.tool_reasoning_ttl_s,
            principal_bytes=int(settings.tool_reasoning_principal_mb * 1024 * 1024),
        )
        self._calls = ModelCalls(
            settings, self._providers, self._catalogue, emit=emit, reasoning=reasoning
        )

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
                self._calls.note_error(provider.name, exc)
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
            limiter = self._calls.limiters[name]
            last = self._calls.last_errors.get(name)
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

    def resolve(
        self,
        model: str | None,
        needs: ModelNeeds | None = None,
        serves: Callable[[ModelInfo], object] | None = None,
        *,
        allowed: frozenset[str] | None = None,
    ) -> ModelInfo:
        """The model to call. ``None`` means the configured default; ``"auto"``
        chooses from ``needs`` and the routing rules. ``serves`` raises
        ``ValidationError_`` for a model that cannot take the request as it is
        (its parameters): ``"auto"`` passes over those, a named model is not asked.
        ``allowed``: the models the caller may use (see :mod:`exai.providers.access`);
        ``"auto"`` chooses among them, any other is ``FORBIDDEN``."""
        needs = needs or ModelNeeds()
        permitted = None if allowed is None else canonical(self._catalogue, allowed)
        name = (model or self._settings.default_model).strip()
        if name.lower() == "auto":
            return self._auto(needs, serves, permitted)
        if model is None and permitted is not None and len(permitted) >= 1:
            # No model asked for: the default, or the best allowed one in its place.
            default = self._catalogue.get(name)
            if default is None or not permits(permitted, default):
                return self._auto(needs, serves, permitted)
        info = self._catalogue.get(name)
        if info is not None and not permits(permitted, info):
            assert permitted is not None
            raise forbidden(name, info, permitted)
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

    def _auto(
        self, needs: ModelNeeds, serves: Callable[[ModelInfo], object] | None = None,
        permitted: frozenset[str] | None = None,
    ) -> ModelInfo:  # fmt: skip
        for rule in self._rules:
            if rule.matches(needs):
                try:
                    return self.resolve(rule.model, needs, allowed=permitted)
                except ExaiError as exc:
                    raise type(exc)(
                        f"{rule.describe()} chose {rule.model!r}, but {exc.message}",
                        retryable=exc.retryable,
                        retry_after_s=exc.retry_after_s,
                        details=exc.details,
                    ) from None
        usable = self._usable_models()
        if permitted is not None:
            usable = [info for info in usable if permits(permitted, info)]
            if not usable:
                raise ForbiddenError(
                    "none of the models this credential may use "
                    f"({', '.join(sorted(permitted)) or 'none'}) is configured here",
                    details={"allowed_models": sorted(permitted)},
                )
        ranked = rank_models(usable, needs)
        if ranked and serves is not None:
            return _first_that_serves(ranked, serves)
        if ranked:
            return ranked[0]
        hints = [p.setup_hint for p in self._providers.values() if p.setup_hint]
        raise no_model_error(usable, needs, hints)

    def _configured(self, provider: str) -> bool:
        return self._calls.configured(provider)

    def _usable_models(self) -> list[ModelInfo]:
        return [info for info in self._catalogue if self._configured(info.provider)]

    def _require_usable(self, info: ModelInfo) -> None:
        require_usable(self._providers, info)

    # --- calling ----------------------------------------------------------------

    @property
    def tool_reasoning(self) -> ToolReasoning | None:
        """The reasoning kept for callers' tool rounds (see exai.providers.tool_reasoning)."""
        return self._calls.reasoning

    async def recall_tool_reasoning(
        self, owner: str, messages: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``messages`` with their tool rounds' reasoning put back where this daemon's
        memory or the store knows it (see ToolReasoning.recall); once per request,
        before the request is prepared for any model."""
        if self._calls.reasoning is None:
            return messages
        return await self._calls.reasoning.recall(owner, messages)

    def prepare(self, request: ChatRequest, model_info: ModelInfo) -> Fitted:
        """``request`` as ``model_info`` would get it, with the notes of what was
        adapted; raises ``ValidationError_`` naming a parameter it cannot serve."""
        return self._calls.prepare(model_info, request)

    def outgoing(self, request: ChatRequest, model_info: ModelInfo) -> ChatRequest:
        """``request`` as ``model_info``'s vendor will receive it (see ModelCalls.outgoing)."""
        return self._calls.outgoing(model_info, request)

    async def complete(self, request: ChatRequest, model_info: ModelInfo) -> ChatResponse:
        """One answer, from ``model_info`` or, if its provider is down or rate
        limited after retries, from the next configured fallback model."""
        return await self._calls.complete(request, model_info)

    def stream(self, request: ChatRequest, model_info: ModelInfo) -> AsyncIterator[Delta]:
        """Deltas from ``model_info``; a fallback model takes over only if the
        chosen one fails before its first delta."""
        return self._calls.stream(request, model_info)

    async def aclose(self) -> None:
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception as exc:
                log.warning("provider_close_failed", provider=provider.name, error=str(exc))


def _first_that_serves(ranked: list[ModelInfo], serves: Callable[[ModelInfo], object]) -> ModelInfo:
    """The best-ranked model that can take the request; if none can, the best one's
    refusal (it names the parameter) is the answer."""
    first: ValidationError_ | None = None
    for info in ranked:
        try:
            serves(info)
        except ValidationError_ as exc:
            first = first or exc
            continue
        return info
    assert first is not None
    raise first
