"""The operator's keys in the store, on SQLite and Postgres: kept hashed, listed,
revoked, rotated, marked used in batches, and a change marker that moves on every
change of who may sign in (and not when a key is only used)."""

from __future__ import annotations

import time

from exai.keys import KeyRecord, hash_secret, new_key, parse_key_budget, split_key


def _record(principal: str = "bob", **kw: object) -> tuple[KeyRecord, str]:
    key_id, token, digest = new_key()
    fields: dict = dict(id=key_id, secret_hash=digest, principal=principal,
                        scopes=frozenset({"chat", "completion"}),
                        budget=parse_key_budget("5 USD/day"), rate_per_min=60,
                        models=frozenset({"kimi-k2.6"}), expires_at=time.time() + 3600,
                        created_at=time.time(), name="ci")  # fmt: skip
    fields.update(kw)
    return KeyRecord(**fields), token


async def test_a_key_is_kept_without_its_secret_and_read_back_whole(store_factory) -> None:
    store = await store_factory()
    record, token = _record()
    before = await store.keys_version()
    await store.put_key(record)
    assert await store.keys_version() > before
    assert await store.key(record.id) == record
    version, keys, jtis = await store.keys_and_jtis()
    assert keys == [record] and jtis == [] and version == await store.keys_version()
    key_id, secret = split_key(token)  # type: ignore[misc]
    assert key_id == record.id and record.secret_hash == hash_secret(secret)
    assert secret not in repr(keys)


async def test_revoke_and_rotate_move_the_marker_and_keep_the_settings(store_factory) -> None:
    store = await store_factory()
    record, _ = _record()
    await store.put_key(record)
    fresh_id, _, digest = new_key()
    fresh = KeyRecord(**{**{f: getattr(record, f) for f in record.__slots__},
                         "id": fresh_id, "secret_hash": digest})  # fmt: skip
    version = await store.keys_version()
    old = await store.rotate_key(record.id, fresh, now=123.0)
    assert old is not None and old.revoked_at == 123.0
    assert await store.keys_version() > version
    kept = await store.key(fresh_id)
    assert kept is not None and kept.revoked_at is None
    assert (kept.scopes, kept.budget, kept.models) == (record.scopes, record.budget, record.models)
    assert await store.rotate_key("000000000000", fresh, now=1.0) is None

    version = await store.keys_version()
    revoked = await store.revoke_key(fresh_id, now=456.0)
    assert revoked is not None and revoked.revoked_at == 456.0
    again = await store.revoke_key(fresh_id, now=789.0)
    assert again is not None and again.revoked_at == 456.0
    assert await store.keys_version() == version + 1
    assert await store.revoke_key("000000000000", now=1.0) is None


async def test_used_keys_are_marked_without_moving_the_marker(store_factory) -> None:
    store = await store_factory()
    record, _ = _record()
    await store.put_key(record)
    version = await store.keys_version()
    await store.mark_keys_used({record.id: 1000.0})
    await store.mark_keys_used({record.id: 900.0})  # older news changes nothing
    kept = await store.key(record.id)
    assert kept is not None and kept.last_used_at == 1000.0
    assert await store.keys_version() == version


async def test_an_update_keeps_the_new_grant_and_moves_the_marker(store_factory) -> None:
    store = await store_factory()
    record, _ = _record()
    await store.put_key(record)
    version = await store.keys_version()
    changed = KeyRecord(**{**{f: getattr(record, f) for f in record.__slots__},
                           "budget": None, "rate_per_min": 120, "name": "renamed"})  # fmt: skip
    assert await store.update_key(changed)
    assert await store.key(record.id) == changed
    assert await store.keys_version() == version + 1
    await store.revoke_key(record.id, now=1.0)
    assert not await store.update_key(changed)  # a revoked key stays as it was


async def test_revoked_jtis_are_kept_once(store_factory) -> None:
    store = await store_factory()
    assert await store.revoke_jti("abc", now=1.0, note="lost laptop")
    assert not await store.revoke_jti("abc", now=2.0)
    _, _, jtis = await store.keys_and_jtis()
    assert [(j.jti, j.revoked_at, j.note) for j in jtis] == [("abc", 1.0, "lost laptop")]


async def test_a_second_store_on_the_same_data_sees_the_change(store_factory) -> None:
    one, two = await store_factory(), await store_factory()
    record, _ = _record(budget=None, models=None, scopes=None, expires_at=None)
    await one.put_key(record)
    assert await two.keys_version() == await one.keys_version()
    assert await two.key(record.id) == record
