"""Memories: the principal's list, search, add, edit, forget.

The list is a read; search is the ``recall`` tool itself (the same keyword and
vector ranking an agent gets); adding is ``remember`` and forgetting
``forget``. An edit is ``remember`` with the new text, then ``forget`` of the
old memory, in that order, so a failure part-way never loses the text: if the
new text is refused the old memory stays, and if the old one cannot be
forgotten both are shown. When ``remember`` answers with the same memory (the
text did not change, or is close enough that it refreshed that memory in
place), nothing is forgotten.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from exai.protocol import MemoryAnswer
from exai.web.console.app import PREFIX, Console
from exai.web.console.views import FormError, memory_arguments

__all__ = ["routes"]

_PAGE = 50
TYPES = ("fact", "preference", "rule", "decision", "reminder", "relationship")


def routes(console: Console) -> list[BaseRoute]:
    face = _Memories(console)
    return [
        Route(f"{PREFIX}/memories", face.list, methods=["GET"]),
        Route(f"{PREFIX}/memories", face.add, methods=["POST"]),
        Route(f"{PREFIX}/memories/{{memory_id}}/edit", face.edit, methods=["POST"]),
        Route(f"{PREFIX}/memories/{{memory_id}}/forget", face.forget, methods=["POST"]),
    ]


class _Memories:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.reads = console.core.reads

    async def list(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()[:4000]
        page = max(1, _int(request.query_params.get("page"), 1))
        principal = self.console.principal(request)
        listing = await self.reads.memories(principal, limit=_PAGE, offset=(page - 1) * _PAGE)
        memories: list[dict[str, Any]] = listing["memories"]
        error = ""
        if query:
            result = await self.console.call(request, "recall", {"query": query, "limit": 50})
            if result.error is not None:
                error = self.console.explain("recall", result.error)
                memories = []
            else:
                memories = MemoryAnswer.of(result.metadata).memories or []
        return self.console.page(
            request,
            "memories.html",
            memories=memories,
            query=query,
            total=listing["total"],
            enabled=listing["enabled"],
            page=page,
            more=not query and page * _PAGE < listing["total"],
            types=TYPES,
            error=error,
        )

    async def add(self, request: Request) -> Response:
        fields = await self.console.form(request)
        if fields is None:
            return self.console.refusal(request)
        session = self.console.session(request)
        try:
            arguments = memory_arguments(fields)
        except FormError as exc:
            session.flash("error", f"Not remembered: {exc}")
            return self.console.redirect(f"{PREFIX}/memories")
        result = await self.console.call(request, "remember", arguments)
        if result.error is not None:
            session.flash(
                "error", "Not remembered: " + self.console.explain("remember", result.error)
            )
        else:
            action = (MemoryAnswer.of(result.metadata).memory or {}).get("action")
            session.flash(
                "ok",
                {
                    "duplicate": "Already remembered.",
                    "update": "Remembered (it refreshed a near-identical memory).",
                }.get(action or "", "Remembered."),
            )
        return self.console.redirect(f"{PREFIX}/memories")

    async def edit(self, request: Request) -> Response:
        fields = await self.console.form(request)
        if fields is None:
            return self.console.refusal(request)
        old = request.path_params["memory_id"]
        session = self.console.session(request)
        if await self.reads.memory(self.console.principal(request), old) is None:
            return self.console.refused(request, 404, f"There is no memory {old!r} of yours.")
        try:
            arguments = memory_arguments(fields)
        except FormError as exc:
            session.flash("error", f"Not changed: {exc}")
            return self.console.redirect(f"{PREFIX}/memories")
        result = await self.console.call(request, "remember", arguments)
        if result.error is not None:
            session.flash(
                "error",
                "Not changed (the memory is as it was): "
                + self.console.explain("remember", result.error),
            )
            return self.console.redirect(f"{PREFIX}/memories")
        new = (MemoryAnswer.of(result.metadata).memory or {}).get("id")
        if new and new != old:
            gone = await self.console.call(request, "forget", {"id": old})
            if gone.error is not None:
                session.flash(
                    "error",
                    "The new text was saved, but the old memory could not be "
                    "forgotten: " + self.console.explain("forget", gone.error),
                )
                return self.console.redirect(f"{PREFIX}/memories")
        session.flash("ok", "Changed.")
        return self.console.redirect(f"{PREFIX}/memories")

    async def forget(self, request: Request) -> Response:
        fields = await self.console.form(request)
        if fields is None:
            return self.console.refusal(request)
        session = self.console.session(request)
        result = await self.console.call(
            request, "forget", {"id": request.path_params["memory_id"]}
        )
        if result.error is not None:
            session.flash("error", self.console.explain("forget", result.error))
        else:
            session.flash("ok", "Forgotten.")
        return self.console.redirect(f"{PREFIX}/memories")


def _int(text: str | None, default: int) -> int:
    try:
        return int(text or default)
    except ValueError:
        return default
