"""Conversations: the store that keeps them and the assembly that replays them.

``open_store(settings)`` gives the :class:`ConversationStore` that
``EXAI_STORE_URL`` names (SQLite by default, Postgres for several daemons);
:func:`exai.store.history.assemble_messages` builds each provider call's
message array from it.
"""

from __future__ import annotations

from exai.store.artifact_types import Artifact
from exai.store.backends import open_store
from exai.store.base import (
    ANY_OWNER,
    ConversationStore,
    Owner,
    StoredMessage,
    StoreLimits,
    Thread,
    ThreadContext,
)

__all__ = [
    "ANY_OWNER",
    "Artifact",
    "ConversationStore",
    "Owner",
    "StoreLimits",
    "StoredMessage",
    "Thread",
    "ThreadContext",
    "open_store",
]
