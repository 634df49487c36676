"""What the SQL conversation store keeps beside the turns: a thread's state, its
artifacts (large results kept for paging), and the text of documents vendors
extracted (uploaded once per principal)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from exai.errors import ConversationNotFoundError, ValidationError_
from exai.sqldb.executor import Executor
from exai.store.artifact_types import Artifact, VendorUpload
from exai.store.base import Owner
from exai.store.rows import check_thread_id, dumps, loads
from exai.store.sql_base import SqlBase

__all__ = ["ArtifactRows"]

_MAX_PAGE = 2**31 - 1

_UPLOAD = (
    "SELECT owner, provider, sha256, file_id, content, size, created_at FROM {p}vendor_uploads"
    " WHERE owner = ? AND provider = ? AND sha256 = ?"
)
_PUT_UPLOAD = (
    "INSERT INTO {p}vendor_uploads (owner, provider, sha256, file_id, content, size, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


class ArtifactRows(SqlBase):
    """``thread_state``, ``artifacts`` and ``vendor_uploads``."""

    async def get_state(self, thread_id: str, key: str) -> dict[str, Any] | None:
        sql = self._q("SELECT value FROM {p}thread_state WHERE thread_id = ? AND key = ?")
        tid = check_thread_id(thread_id)
        row = await self._read(lambda db: db.fetchrow(sql, tid, key))
        return None if row is None else loads(row[0])

    async def put_state(self, thread_id: str, key: str, value: Mapping[str, Any]) -> None:
        try:
            encoded = dumps(dict(value))
        except (TypeError, ValueError) as exc:
            raise ValidationError_(f"state {key!r} is not JSON-serializable: {exc}") from None

        async def body(tx: Executor) -> None:
            tid = await self._live(tx, thread_id)
            await tx.execute(
                self._q("INSERT INTO {p}thread_state (thread_id, key, value, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (thread_id, key) DO UPDATE"
                        " SET value = excluded.value, updated_at = excluded.updated_at"),
                tid, key, encoded, self._clock(),
            )  # fmt: skip

        await self._write(body)

    async def put_artifact(
        self, thread_id: str, content: str, meta: Mapping[str, Any] | None = None
    ) -> str:
        if not isinstance(content, str):
            raise ValidationError_("an artifact's content must be text")
        artifact_id = str(uuid.uuid4())

        async def body(tx: Executor) -> None:
            tid = await self._live(tx, thread_id)
            await tx.execute(
                self._q("INSERT INTO {p}artifacts (id, thread_id, content, meta, size, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)"),
                artifact_id, tid, content, dumps(dict(meta or {})), len(content), self._clock(),
            )  # fmt: skip

        await self._write(body)
        return artifact_id

    async def get_artifact(
        self,
        thread_id: str,
        artifact_id: str,
        owner: Owner,
        *,
        offset: int = 0,
        limit: int | None = None,
    ) -> Artifact:
        if offset < 0 or (limit is not None and limit < 0):
            raise ValidationError_("offset and limit must not be negative")
        tid = check_thread_id(thread_id)

        async def body(db: Executor) -> Sequence[Any] | None:
            await self._owned(db, tid, owner)
            return await db.fetchrow(
                self._q("SELECT id, thread_id, substr(content, ?, ?), size, meta, created_at"
                        " FROM {p}artifacts WHERE id = ? AND thread_id = ?"),
                offset + 1, _MAX_PAGE if limit is None else limit, str(artifact_id), tid,
            )  # fmt: skip

        row = await self._read(body)
        if row is None:
            raise ConversationNotFoundError(
                f"artifact {artifact_id} is not part of conversation {tid}",
                details={"continuation_id": tid, "artifact_id": str(artifact_id)},
            )
        return Artifact(id=row[0], thread_id=row[1], content=row[2], offset=offset,
                        size=row[3], meta=loads(row[4]), created_at=row[5])  # fmt: skip

    # --- vendor uploads -----------------------------------------------------

    async def get_upload(self, owner: str, provider: str, sha256: str) -> VendorUpload | None:
        sql = self._q(_UPLOAD)
        row = await self._read(lambda db: db.fetchrow(sql, owner, provider, sha256))
        return None if row is None else VendorUpload(*row)

    async def put_upload(self, upload: VendorUpload) -> VendorUpload:
        async def body(tx: Executor) -> Sequence[Any] | None:
            await tx.execute(
                self._q(_PUT_UPLOAD), upload.owner, upload.provider, upload.sha256,
                upload.file_id, upload.content, upload.size, upload.created_at,
            )  # fmt: skip
            return await tx.fetchrow(self._q(_UPLOAD), upload.owner, upload.provider,
                                     upload.sha256)  # fmt: skip

        row = await self._write(body)
        return upload if row is None else VendorUpload(*row)
