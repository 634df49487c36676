"""The cache of vendor uploads, on both backends: found by (owner, provider,
content hash), never across principals, first writer kept."""

from __future__ import annotations

import time

from exai.store.artifact_types import VendorUpload
from exai.store.base import ConversationStore
from tests.store.conftest import StoreFactory


def _upload(owner: str, file_id: str, content: str = "text", provider: str = "kimi"):
    return VendorUpload(owner=owner, provider=provider, sha256="ab" * 32, file_id=file_id,
                        content=content, size=123, created_at=time.time())  # fmt: skip


async def test_an_upload_is_found_by_its_owner_provider_and_hash(store: ConversationStore):
    assert await store.get_upload("alice", "kimi", "ab" * 32) is None
    kept = await store.put_upload(_upload("alice", "file-1", "extracted text"))
    assert kept.file_id == "file-1"
    found = await store.get_upload("alice", "kimi", "ab" * 32)
    assert found is not None and (found.file_id, found.content, found.size) == (
        "file-1", "extracted text", 123)  # fmt: skip
    assert await store.get_upload("alice", "glm", "ab" * 32) is None
    assert await store.get_upload("alice", "kimi", "cd" * 32) is None


async def test_no_principal_finds_another_principals_upload(store: ConversationStore):
    await store.put_upload(_upload("alice", "file-alice", "alice's report"))
    assert await store.get_upload("bob", "kimi", "ab" * 32) is None
    await store.put_upload(_upload("bob", "file-bob", "bob's copy"))
    alice = await store.get_upload("alice", "kimi", "ab" * 32)
    bob = await store.get_upload("bob", "kimi", "ab" * 32)
    assert alice is not None and alice.file_id == "file-alice"
    assert bob is not None and bob.file_id == "file-bob"


async def test_the_first_upload_of_a_key_is_kept(store_factory: StoreFactory):
    first, second = await store_factory(), await store_factory()  # two daemons, one database
    await first.put_upload(_upload("alice", "file-1", "first"))
    kept = await second.put_upload(_upload("alice", "file-2", "second"))
    assert (kept.file_id, kept.content) == ("file-1", "first")
    again = await first.get_upload("alice", "kimi", "ab" * 32)
    assert again is not None and again.file_id == "file-1"
