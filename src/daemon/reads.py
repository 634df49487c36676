"""Read-only queries the faces make beside tool calls (:class:`exai.port.Reads`).

Lists and lookups that describe what the core holds, answered from the
services without a tool call: the model catalogue as ``/v1/models`` lists it,
and the whole text of an artifact a result was cut to. Ownership is checked
here as the store checks it for tools: a principal reads only its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exai.errors import ExaiError

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
