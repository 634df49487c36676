"""Read-only queries the faces make beside tool calls (:class:`exai.port.Reads`).

Lists and lookups that describe what the core holds, answered from the
services without a tool call: the model catalogue as ``/v1/models`` lists it,
the whole text of an artifact a result was cut to, a prompt's tokens as the
model it would go to counts them (``/v1/messages/count_tokens``), and what the
console shows a person of their own threads, jobs, memories and spend. Ownership
is checked here as the store checks it for tools: a principal reads only its
own, and an id of someone else's is answered exactly like an id that does not
exist. The operator's queries live in :mod:`exai.daemon.operator_reads` and are
mixed in.

Anything that changes state (continuing a thread, scheduling, forgetting) is a
tool call through the dispatcher, never a read.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

from exai.accounting.budgets import period_window
from exai.daemon.operator_reads import OperatorReads, usage_lines
from exai.daemon.usage_reads import UsageReads
from exai.errors import ConversationNotFoundError, ExaiError, ValidationError_
from exai.providers.access import canonical
from exai.providers.pricing import from_nanos
from exai.store.tokens import estimator_for
from exai.store.transcript import export_lines

if TYPE_CHECKING:
    from exai.auth import Principal
    from exai.daemon.core_view import CoreView

__all__ = ["CoreReads"]

_DAY = 86400.0
_MAX_PAGE = 500


class CoreReads(OperatorReads, UsageReads):
    def __init__(self, core: CoreView) -> None:
        self._core = core

    def models(self, principal: Principal | None = None) -> dict[str, Any]:
        providers = self._core.services.providers
        if providers is None:
            return {"models": [], "auto": None}
        allowed = None
        if principal is not None:
            limits = getattr(self._core.services.ledger, "limits", None)
            allowed = principal.models if limits is None else limits.models_for(principal)
        try:
            auto: str | None = providers.resolve("auto", allowed=allowed).name
        except ExaiError:
            auto = None
        listed = providers.describe_models()
        if allowed is not None:
            permitted = canonical(providers.catalogue, allowed)
            listed = [m for m in listed if m["name"] in permitted]
        return {"models": listed, "auto": auto}

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

    # --- threads --------------------------------------------------------------------

    async def threads(
        self, principal: Principal, *, query: str = "", limit: int = 50, offset: int = 0,
        kind: str = "", client: str = "", costs: bool = False,
    ) -> list[dict[str, Any]]:  # fmt: skip
        store = self._core.services.store
        if store is None:
            return []
        limit, offset = _page(limit, offset)
        owner, text, client = principal.name, query.strip(), client.strip()
        if kind == "chat" and client:
            return []  # a chat thread has no client
        agent = True if kind == "agent" or client else False if kind == "chat" else None
        origin = {"agent": agent, "client": client or None}
        if text:
            found = await store.search_threads(owner, text, limit=limit, offset=offset, **origin)
        else:
            found = await store.list_threads(owner, limit=limit, offset=offset, **origin)
        listed = [_thread(t) for t in found]
        if costs:
            spent = await store.thread_costs([row["id"] for row in listed], owner)
            for row in listed:
                row["cost"] = _total({0: spent.get(row["id"], {})})
        return listed

    async def thread(
        self, principal: Principal, thread_id: str, *, max_messages: int = 400,
        details: bool = True,
    ) -> dict[str, Any] | None:  # fmt: skip
        store = self._core.services.store
        if store is None:
            return None
        owner = principal.name
        try:
            thread = await store.get_thread(thread_id, owner)
            if not details:
                return {"thread": _thread(thread)}
            max_messages = max(1, max_messages)
            messages = await store.messages(thread.id, owner, limit=max_messages + 1)
        except (ConversationNotFoundError, ValidationError_):
            return None
        if len(messages) > max_messages:
            # One message more than asked says whether the page starts inside a turn:
            # that turn is left out rather than shown in part, unless it is all there is.
            whole = [m for m in messages if m.turn != messages[0].turn]
            messages = whole or messages[1:]
        costs = await store.turn_costs(thread.id, owner)
        traces = await store.turn_traces(thread.id, owner)
        return {
            "thread": _thread(thread),
            "messages": [_message(m) for m in messages],
            "complete": not messages or messages[0].seq == 1,
            "costs": {seq: {cur: str(from_nanos(n)) for cur, n in by_currency.items()}
                      for seq, by_currency in costs.items()},
            "cost": _total(costs),
            "traces": traces,
            "lineage": await self._lineage(store, thread),
        }  # fmt: skip

    async def _lineage(self, store: Any, thread: Any) -> dict[str, Any]:
        """The threads this one came from (its parent, the thread it follows) and,
        among the owner's most recently updated, those that came from it."""
        out: dict[str, Any] = {"parent": None, "follows": None, "followers": [], "forks": []}
        for key, other in (("parent", thread.parent_id), ("follows", thread.follows)):
            if other is None:
                continue
            try:
                out[key] = _thread(await store.get_thread(other, thread.owner))
            except (ConversationNotFoundError, ValidationError_):
                out[key] = {"id": other, "gone": True}
        related = await store.related_threads(thread.id, thread.owner)
        out["followers"] = [_thread(t) for t in related if t.follows == thread.id]
        out["forks"] = [_thread(t) for t in related if t.parent_id == thread.id]
        return out

    async def thread_export(self, principal: Principal, thread_id: str) -> str | None:
        store = self._core.services.store
        if store is None:
            return None
        try:
            thread = await store.get_thread(thread_id, principal.name)
            messages = await store.messages(thread.id, principal.name)
        except (ConversationNotFoundError, ValidationError_):
            return None
        return "".join(line + "\n" for line in export_lines(thread, messages))

    # --- jobs -------------------------------------------------------------------------

    async def jobs(self, principal: Principal) -> list[dict[str, Any]]:
        service = self._core.services.jobs
        if service is None:
            return []
        return [job.public() for job in await service.store.list_jobs(principal.name)]

    async def job(self, principal: Principal, job_id: str) -> dict[str, Any] | None:
        service = self._core.services.jobs
        if service is None:
            return None
        try:
            shown: dict[str, Any] = await service.show(job_id, principal.name, runs=20)
        except ValidationError_:  # JobNotFoundError: absent, or someone else's
            return None
        return shown

    # --- memories ---------------------------------------------------------------------

    async def memories(
        self, principal: Principal, *, limit: int = 50, offset: int = 0
    ) -> dict[str, Any]:
        service = self._core.services.memory
        if service is None:
            return {"memories": [], "total": 0, "enabled": False}
        limit, offset = _page(limit, offset)
        found = await service.store.list_memories(principal.name, limit=limit, offset=offset)
        total = await service.store.count(principal.name)
        return {"memories": [m.as_dict() for m in found], "total": total, "enabled": True}

    async def memory(self, principal: Principal, memory_id: str) -> dict[str, Any] | None:
        service = self._core.services.memory
        if service is None:
            return None
        try:
            found = await service.store.get(memory_id, principal.name)
        except ValidationError_:  # MemoryNotFoundError: absent, or someone else's
            return None
        return dict(found.as_dict())

    # --- spend ------------------------------------------------------------------------

    async def spend(self, principal: Principal, *, days: int = 30) -> dict[str, Any]:
        services = self._core.services
        now = time.time()
        since = _day_start(now) - (max(1, min(days, 366)) - 1) * _DAY
        out: dict[str, Any] = {"since": since, "until": now, "days": [], "models": [],
                               "tools": [], "budget": None}  # fmt: skip
        store = services.store
        if store is None:
            return out
        for group, key in (("day", "days"), ("model", "models"), ("tool", "tools")):
            lines = await store.usage_report(since, now, group, principal=principal.name)
            out[key] = usage_lines(lines, group)
        ledger = services.ledger
        budget = ledger.budget_for(principal) if ledger is not None else None
        if budget is not None:
            start, reset = period_window(budget.period, now)
            stored = await store.spent(principal.name, budget.currency, start, reset)
            # The ledger counts this daemon's calls as they finish; the store has them
            # once its background writer ran. Whichever is further along is the spend.
            counted = ledger.spent(principal.name, budget.currency, budget.period, now)
            spent = from_nanos(max(stored, counted))
            out["budget"] = {
                "amount": str(budget.amount), "currency": budget.currency,
                "period": budget.period, "spent": str(spent),
                "left": str(max(budget.amount - spent, 0)), "resets_at": reset,
                "from_token": principal.budget is not None,
            }  # fmt: skip
        return out


def _page(limit: int, offset: int) -> tuple[int, int]:
    return max(1, min(int(limit), _MAX_PAGE)), max(0, int(offset))


def _total(costs: dict[int, dict[str, int]]) -> dict[str, str]:
    """A thread's cost, ``{currency: amount}``, from its turns' ``{seq: {currency: nanos}}``."""
    sums: dict[str, int] = {}
    for by_currency in costs.values():
        for currency, nanos in by_currency.items():
            sums[currency] = sums.get(currency, 0) + nanos
    return {currency: str(from_nanos(n)) for currency, n in sorted(sums.items())}


def _day_start(now: float) -> float:
    return now - now % _DAY


def _thread(thread: Any) -> dict[str, Any]:
    return {
        "id": thread.id, "title": thread.title, "turns": thread.turns,
        "created_at": thread.created_at, "updated_at": thread.updated_at,
        "expires_at": thread.expires_at, "parent_id": thread.parent_id,
        "fork_point": thread.fork_point, "last_seq": thread.last_seq,
        "face": thread.face, "client": thread.client, "session_ref": thread.session_ref,
        "follows": thread.follows,
    }  # fmt: skip


def _message(message: Any) -> dict[str, Any]:
    out = dataclasses.asdict(message)
    out["content"] = message.provider_message().get("content")
    out.pop("extra", None)
    return out
