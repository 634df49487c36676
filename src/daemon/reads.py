"""Read-only queries the faces make beside tool calls (:class:`exai.port.Reads`).

Lists and lookups that describe what the core holds, answered from the
services without a tool call: the model catalogue as ``/v1/models`` lists it,
the whole text of an artifact a result was cut to, and a prompt's tokens as
the model it would go to counts them (``/v1/messages/count_tokens``). Ownership is checked
here as the store checks it for tools: a principal reads only its own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from exai.errors import ExaiError
from exai.store.tokens import estimator_for

if TYPE_CHECKING:
    from exai.daemon.core import Core

__all__ = ["CoreReads"]


class CoreReads:
    def __init__(self, core: Core) -> None:
        self._core = core

    def models(self) -> dict[str, Any]:
        providers = self._core.services.providers
        if providers is None:
            return {"models": [], "auto": None}
        try:
            auto: str | None = providers.resolve("auto").name
        except ExaiError:
            auto = None
        return {"models": providers.describe_models(), "auto": auto}

    async def artifact_text(self, thread_id: str, artifact_id: str, principal: str) -> str | None:
        store = self._core.services.store
        if store is None:
            return None
        try:
            whole = await store.get_artifact(thread_id, artifact_id, principal)
        except ExaiError:
            return None
        return str(whole.content)

    def count_tokens(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> int:
        family = "generic"
        providers = self._core.services.providers
        if providers is not None:
            try:
                family = providers.resolve(model).model_id
            except ExaiError:
                pass  # an unknown model: the generic estimate, which fits every family
        estimator = estimator_for(family)
        counted = estimator.messages(messages)
        if tools:
            counted += estimator.text(json.dumps(tools, ensure_ascii=False))
        return counted
