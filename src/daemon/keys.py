"""The operator's keys on a daemon: the ring kept current, and what the operator does.

:class:`StoreKeyAdmin` creates, lists, revokes and rotates keys in the store (for
``exai keys``, ``/admin/keys`` and the console). :class:`KeyWatcher` keeps the
daemon's ring current: poll the store's change marker, reload on a move.

Authentication reads :class:`~exai.keys.KeyRing` only, without I/O. This task
reads the store's ``key_changes`` version every :data:`POLL_S` (one primary-key
read) and, when it moved, reads every key and revoked JWT id and replaces the
ring whole: a key revoked on any daemon sharing the store is refused here within
a poll. Each :data:`FLUSH_S` it also writes when the keys presented since were
last used, in one batch. A store that does not answer leaves the ring as it was
(and says so in the log once per outage) until it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from exai.accounting.budgets import period_window
from exai.keys import (
    KeyNotFoundError,
    KeyRecord,
    KeyRing,
    new_key,
    parse_expiry,
    parse_key_budget,
    parse_models,
    parse_rate,
    parse_scopes,
)
from exai.logs import get_logger
from exai.providers.pricing import from_nanos

__all__ = ["FLUSH_S", "POLL_S", "KeyWatcher", "StoreKeyAdmin"]

POLL_S = 0.25
FLUSH_S = 5.0

log = get_logger("exai.keys")


class KeyWatcher:
    def __init__(
        self, store: Any, ring: KeyRing, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.ring = ring
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def load(self) -> None:
        """Fill the ring from the store (before any face listens)."""
        version, keys, jtis = await self.store.keys_and_jtis()
        self.ring.replace(keys, (j.jti for j in jtis), version)

    async def refresh(self) -> bool:
        """Reload when the marker moved; True when it did."""
        version = await self.store.keys_version()
        if version == self.ring.version:
            return False
        await self.load()
        log.info("keys reloaded", version=self.ring.version)
        return True

    async def flush(self) -> None:
        used = self.ring.take_used()
        if used:
            await self.store.mark_keys_used(used)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="exai-keys")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self.flush()

    async def _run(self) -> None:
        next_flush = self._clock() + FLUSH_S
        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self.refresh()
                if self._clock() >= next_flush:
                    next_flush = self._clock() + FLUSH_S
                    await self.flush()
                if self._failing:
                    log.info("keys readable again")
                self._failing = False
            except Exception as exc:
                if not self._failing:
                    log.warning("keys could not be read; the ring stays as it was",
                                error=f"{type(exc).__name__}: {exc}")  # fmt: skip
                self._failing = True


class StoreKeyAdmin:
    """:class:`~exai.keys.KeyAdmin` on a SQL store: what ``exai keys``, ``/admin/keys``
    and the console's Keys page do. Each change is an audit event naming the key's
    id and who acted, never its secret; ``spent`` is what the key's principal spent
    this period in the key's budget currency (the cost rows every daemon writes, what
    the budget is checked against), ``key_spent`` what the key's own calls spent of it
    (the daily usage sums, :mod:`exai.store.usage`). In a daemon, ``settle`` (its
    ledger's flush) writes the rows it still holds before they are read, so a call
    answered before the read is in both."""

    def __init__(
        self,
        store: Any,
        *,
        emit: Callable[..., None] | None = None,
        clock: Callable[[], float] = time.time,
        changed: Callable[[], Awaitable[object]] | None = None,
        settle: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.store = store
        self._emit = emit
        self._clock = clock
        # Called after each change: a daemon's own ring sees it before the answer goes.
        self._changed = changed
        self._settle = settle

    async def list_keys(self) -> list[dict[str, Any]]:
        _, keys, _ = await self.store.keys_and_jtis()
        now = self._clock()
        return [await self._public(k, now) for k in reversed(keys)]

    async def list_jtis(self) -> list[dict[str, Any]]:
        _, _, jtis = await self.store.keys_and_jtis()
        return [{"jti": j.jti, "revoked_at": j.revoked_at, "note": j.note} for j in reversed(jtis)]

    async def create_key(self, grant: dict[str, Any], *, by: str) -> tuple[dict[str, Any], str]:
        now = self._clock()
        unknown = set(grant) - _GRANT_FIELDS
        if unknown:
            raise ValueError(f"unknown fields: {', '.join(sorted(unknown))}")
        principal = grant.get("principal")
        if not isinstance(principal, str) or not _PRINCIPAL.match(principal):
            raise ValueError("principal: a name of 1-200 letters, digits and ._:@/+- is required")
        texts = {field: _text(field, grant.get(field)) for field in ("name", "note")}
        key_id, token, digest = new_key()
        record = KeyRecord(
            id=key_id, secret_hash=digest, principal=principal,
            scopes=parse_scopes(grant.get("scopes")), budget=parse_key_budget(grant.get("budget")),
            rate_per_min=parse_rate(grant.get("rate")), models=parse_models(grant.get("models")),
            expires_at=parse_expiry(grant.get("expires"), now), created_at=now, **texts,
        )  # fmt: skip
        await self.store.put_key(record)
        self._audit("key.created", record, by)
        await self._after_change()
        return await self._public(record, now), token

    async def update_key(self, key_id: str, changes: dict[str, Any], *, by: str) -> dict[str, Any]:
        now = self._clock()
        unknown = set(changes) - (_GRANT_FIELDS - {"principal"})
        if unknown:
            raise ValueError(f"fields that cannot be changed here: {', '.join(sorted(unknown))}")
        old = await self.store.key(key_id)
        if old is None:
            raise KeyNotFoundError(f"no key {key_id!r}")
        if old.revoked_at is not None:
            raise ValueError(f"key {key_id} was revoked; create a new one")
        fields: dict[str, Any] = {}
        parsers = {"scopes": ("scopes", parse_scopes), "budget": ("budget", parse_key_budget),
                   "rate": ("rate_per_min", parse_rate), "models": ("models", parse_models),
                   "expires": ("expires_at", lambda v: parse_expiry(v, now))}  # fmt: skip
        for name, value in changes.items():
            if name in parsers:
                field, parse = parsers[name]
                fields[field] = parse(value)
            else:
                fields[name] = _text(name, value)
        record = dataclasses.replace(old, **fields)
        if not await self.store.update_key(record):
            raise KeyNotFoundError(f"no key {key_id!r} that is not revoked")
        self._audit("key.updated", record, by, fields=sorted(changes))
        await self._after_change()
        return await self._public(record, now)

    async def revoke_key(self, key_id: str, *, by: str) -> dict[str, Any]:
        record = await self.store.revoke_key(key_id, self._clock())
        if record is None:
            raise KeyNotFoundError(f"no key {key_id!r}")
        self._audit("key.revoked", record, by)
        await self._after_change()
        return await self._public(record, self._clock())

    async def rotate_key(self, key_id: str, *, by: str) -> tuple[dict[str, Any], str]:
        now = self._clock()
        old = await self.store.key(key_id)
        if old is None:
            raise KeyNotFoundError(f"no key {key_id!r}")
        if old.revoked_at is not None:
            raise ValueError(f"key {key_id} was revoked; create a new one")
        fresh_id, token, digest = new_key()
        fresh = dataclasses.replace(old, id=fresh_id, secret_hash=digest, created_at=now,
                                    last_used_at=None, revoked_at=None)  # fmt: skip
        if await self.store.rotate_key(key_id, fresh, now) is None:
            raise KeyNotFoundError(f"no key {key_id!r}")
        self._audit("key.rotated", fresh, by, replaces=key_id)
        await self._after_change()
        return await self._public(fresh, now), token

    async def revoke_jti(self, jti: str, *, note: str = "", by: str) -> bool:
        if not isinstance(jti, str) or not 1 <= len(jti) <= 200 or not jti.isprintable():
            raise ValueError("jti: 1-200 printable characters")
        added: bool = await self.store.revoke_jti(jti, self._clock(), note[:500])
        await self._after_change()
        if self._emit is not None:
            self._emit("key.jti_revoked", principal=by, jti=jti, added=added)
        return added

    async def _after_change(self) -> None:
        if self._changed is not None:
            await self._changed()

    async def _public(self, record: KeyRecord, now: float) -> dict[str, Any]:
        out = record.public(now)
        budget = record.budget
        if budget is None:
            out["spent"] = out["key_spent"] = None
        else:
            if self._settle is not None:
                await self._settle()
            start, reset = period_window(budget.period, now)
            nanos = await self.store.spent(record.principal, budget.currency, start, reset)
            out["spent"] = format(from_nanos(nanos).normalize(), "f")
            # The period's bounds are UTC midnights: whole days of the daily usage sums.
            own = await self.store.key_spent(record.id, budget.currency, int(start // 86400),
                                             int(reset // 86400))  # fmt: skip
            out["key_spent"] = format(from_nanos(own).normalize(), "f")
        return out

    def _audit(self, kind: str, record: KeyRecord, by: str, **extra: Any) -> None:
        if self._emit is not None:
            self._emit(kind, principal=by, key_id=record.id, key_principal=record.principal,
                       **extra)  # fmt: skip


def _text(field: str, value: Any) -> str:
    value = value or ""
    if not isinstance(value, str) or len(value) > 500 or not value.isprintable():
        raise ValueError(f"{field}: at most 500 printable characters")
    return value


_GRANT_FIELDS = frozenset(
    {"principal", "scopes", "budget", "rate", "models", "expires", "name", "note"}
)
_PRINCIPAL = re.compile(r"^[A-Za-z0-9._:@/+-]{1,200}$")
